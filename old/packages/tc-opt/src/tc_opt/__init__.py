"""tc-opt: the pass manager, analyses and the GPU passes (layouts, shared memory)."""

from __future__ import annotations

from .axis_info import AxisAnalysis, AxisInfo
from .canonicalize import Canonicalize, fold_select_of_load
from .combine_dot import CombineDotAdd
from .cse import CommonSubexpressionElimination
from .dce import DeadCodeElimination
from .layout_assign import AssignLayouts, RemoveTrivialConverts, coalesced_layout
from .layout_utils import blocked_for
from .licm import LoopInvariantCodeMotion
from .options import CompileOptions
from .pass_manager import Pass, PassManager, PassVerificationError, format_timings, module_text
from .rematerialize import Rematerialize
from .reroll_prefetch import RerollPrefetch, reroll_prefetches
from .resources import CheckResources, ResourceLimitError, max_shared_bytes
from .pipeline import gpu_pipeline
from .precise_math import PreciseMath
from .shared_alloc import AllocateShared, Allocation, allocate
from .specialize import SpecializeArguments

__version__ = "0.1.0"

__all__ = [
    "AllocateShared",
    "Allocation",
    "AssignLayouts",
    "AxisAnalysis",
    "AxisInfo",
    "Canonicalize",
    "CheckResources",
    "CombineDotAdd",
    "CommonSubexpressionElimination",
    "CompileOptions",
    "DeadCodeElimination",
    "LoopInvariantCodeMotion",
    "Pass",
    "PassManager",
    "PassVerificationError",
    "PreciseMath",
    "Rematerialize",
    "RerollPrefetch",
    "RemoveTrivialConverts",
    "ResourceLimitError",
    "SpecializeArguments",
    "allocate",
    "blocked_for",
    "coalesced_layout",
    "fold_select_of_load",
    "format_timings",
    "gpu_pipeline",
    "max_shared_bytes",
    "module_text",
    "reroll_prefetches",
]
