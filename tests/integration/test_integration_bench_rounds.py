"""tools/bench_rounds.py's round-by-round ratios and their quartiles, and the table of
tools/bench_matmul_backward.py that reports them (no GPU needed)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import bench_matmul_backward as backward  # noqa: E402
import bench_rounds  # noqa: E402


def test_speedups_pair_the_providers_round_by_round() -> None:
    """A slow round slows both providers; the ratio of each round's pair stays (what the medians
    of separately sorted times would blur)."""
    times = {"tc": [1.0, 2.0, 1.1], "torch": [1.1, 2.1, 1.0]}
    assert bench_rounds.paired_speedups(times, "tc", "torch") == pytest.approx([1.1, 1.05, 1.0 / 1.1])


def test_speedups_of_rounds_of_different_counts_are_refused() -> None:
    with pytest.raises(ValueError):
        bench_rounds.paired_speedups({"tc": [1.0, 2.0], "torch": [1.0]}, "tc", "torch")


def test_quartiles() -> None:
    assert bench_rounds.quartiles([0.97, 1.01, 0.99, 1.03, 1.0]) == pytest.approx((0.99, 1.0, 1.01))
    assert bench_rounds.quartiles([1.02]) == (1.02, 1.02, 1.02)
    with pytest.raises(ValueError):
        bench_rounds.quartiles([])


def test_the_table_shows_each_products_spread() -> None:
    rows: list[dict[str, Any]] = [
        {"shape": "4096x4096x4096", "dtype": "float16", "op": "C = A B", "tc": 700.0, "torch": 690.0,
         "triton": 650.0, "tc_torch_quartiles": (0.99, 1.012, 1.03)},
        {"shape": "64x48x80", "dtype": "tf32", "op": "dB = A^T dC", "tc": "ok"}]
    lines = backward.table(rows).splitlines()
    assert lines[0].endswith("| tc / torch per round (quartiles) |")
    assert lines[2] == ("| 4096x4096x4096 | float16 | C = A B | 700.0 | 690.0 | 650.0 | 1.01 | 1.08 | "
                        "0.990 / 1.012 / 1.030 |")
    assert lines[3] == "| 64x48x80 | tf32 | dB = A^T dC | ok | - | - | - | - | - |"
