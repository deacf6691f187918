"""The GPU pass pipeline: target-independent clean-up, then layouts and shared memory."""

from __future__ import annotations

from .accumulator_init import AccumulatorInit
from .canonicalize import Canonicalize
from .combine_dot import CombineDotAdd
from .cse import CommonSubexpressionElimination
from .dce import DeadCodeElimination
from .dot_layouts import ApplyDotPrecision
from .exchange_rounds import ExchangeInRounds
from .layout_assign import AssignLayouts, RemoveTrivialConverts
from .licm import LoopInvariantCodeMotion
from .options import CompileOptions
from .overlap_epilogue import OverlapEpilogue
from .pass_manager import PassManager
from .pipeline_loops import PipelineLoops
from .precise_math import PreciseMath
from .narrow_converts import NarrowBeforeConvert
from .rematerialize import Rematerialize
from .reroll_prefetch import RerollPrefetch
from .resources import CheckResources
from .shared_alloc import AllocateShared
from .specialize import SpecializeArguments
from .stage_dot_operands import StageDotOperands
from .tma_store import TmaStores


def gpu_pipeline(options: CompileOptions | None = None) -> PassManager:
    """The pass manager that compiles a kernel's module for the GPU target of `options`."""
    o = options or CompileOptions()
    passes = [
        SpecializeArguments(o),
        PreciseMath(o),
        Canonicalize(o),
        # hand-written prefetches back to loads of the body, which the loop pipeliners look for
        RerollPrefetch(o),
        CombineDotAdd(o),
        LoopInvariantCodeMotion(o),
        CommonSubexpressionElimination(o),
        DeadCodeElimination(o),
        ApplyDotPrecision(o),
        AssignLayouts(o),
        RemoveTrivialConverts(o),
        NarrowBeforeConvert(o),
        CommonSubexpressionElimination(o),
        DeadCodeElimination(o),
        # after the last CSE (which would merge the recomputed values back into the originals)
        Rematerialize(o),
        DeadCodeElimination(o),
        StageDotOperands(o),
        PipelineLoops(o),
        TmaStores(o),
        AccumulatorInit(o),
        DeadCodeElimination(o),
        OverlapEpilogue(o),
        DeadCodeElimination(o),
        ExchangeInRounds(o),
        AllocateShared(o),
        CheckResources(o),
    ]
    return PassManager(passes, verify=o.verify, print_after_all=o.print_after_all)
