"""tools/bench_launch_gaps.py's parts that need no GPU: the kernels of a profiler trace and the
summary of their durations and gaps."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import bench_launch_gaps as gaps  # noqa: E402


def test_only_kernels_are_read_from_a_trace_in_the_order_they_started() -> None:
    trace = {"traceEvents": [
        {"cat": "kernel", "name": "matmul", "ts": 250.0, "dur": 100.0},
        {"cat": "cuda_runtime", "name": "cuLaunchKernel", "ts": 10.0, "dur": 5.0},
        {"cat": "kernel", "name": "matmul", "ts": 100.0, "dur": 100.0},
        {"ph": "M", "name": "process_name"},
    ]}
    assert gaps.kernel_events(trace) == [gaps.KernelEvent("matmul", 100.0, 100.0),
                                         gaps.KernelEvent("matmul", 250.0, 100.0)]
    assert gaps.kernel_events({}) == []


def test_the_gaps_run_from_one_kernels_end_to_the_next_ones_start() -> None:
    E = gaps.KernelEvent
    events = [E("k", 0.0, 10.0), E("k", 11.0, 10.0), E("k", 25.0, 12.0), E("k", 38.5, 10.0)]
    g = gaps.summarize(events)
    assert g.kernels == 4 and g.names == ("k",)
    assert g.median_dur_us == 10.0
    assert g.median_gap_us == 1.5  # gaps 1, 4 and 1.5
    assert g.min_gap_us == 1.0
    assert g.span_per_launch_us == pytest.approx(48.5 / 4)


def test_one_kernel_has_no_gap_and_none_is_an_error() -> None:
    g = gaps.summarize([gaps.KernelEvent("k", 5.0, 7.0)])
    assert math.isnan(g.median_gap_us) and math.isnan(g.min_gap_us) and g.span_per_launch_us == 7.0
    with pytest.raises(ValueError, match="no kernels were recorded"):
        gaps.summarize([])


def test_fewer_than_two_launches_are_refused() -> None:
    with pytest.raises(SystemExit):
        gaps.main(["--launches", "1"])
