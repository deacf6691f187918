"""The GPU pass pipeline: target-independent clean-up, then layouts and shared memory."""

from __future__ import annotations

from .canonicalize import Canonicalize
from .cse import CommonSubexpressionElimination
from .dce import DeadCodeElimination
from .layout_assign import AssignLayouts, RemoveTrivialConverts
from .options import CompileOptions
from .pass_manager import PassManager
from .shared_alloc import AllocateShared
from .specialize import SpecializeArguments


def gpu_pipeline(options: CompileOptions | None = None) -> PassManager:
    o = options or CompileOptions()
    passes = [
        SpecializeArguments(o),
        Canonicalize(o),
        CommonSubexpressionElimination(o),
        DeadCodeElimination(o),
        AssignLayouts(o),
        RemoveTrivialConverts(o),
        CommonSubexpressionElimination(o),
        DeadCodeElimination(o),
        AllocateShared(o),
    ]
    return PassManager(passes, verify=o.verify, print_after_all=o.print_after_all)
