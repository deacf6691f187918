"""tc-opt: the pass manager, analyses and the GPU passes (layouts, shared memory)."""

from __future__ import annotations

from .axis_info import AxisAnalysis, AxisInfo
from .canonicalize import Canonicalize
from .cse import CommonSubexpressionElimination
from .dce import DeadCodeElimination
from .layout_assign import AssignLayouts, RemoveTrivialConverts, coalesced_layout
from .layout_utils import blocked_for
from .options import CompileOptions
from .pass_manager import Pass, PassManager, module_text
from .pipeline import gpu_pipeline
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
    "CommonSubexpressionElimination",
    "CompileOptions",
    "DeadCodeElimination",
    "Pass",
    "PassManager",
    "RemoveTrivialConverts",
    "SpecializeArguments",
    "allocate",
    "blocked_for",
    "coalesced_layout",
    "gpu_pipeline",
    "module_text",
]
