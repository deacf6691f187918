"""tools/bench_matmul_sweep.py's parts that need no GPU: the size syntax, the table and the
summary line gpu_check reads."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import bench_matmul_sweep as sweep  # noqa: E402


def test_a_range_of_sizes_includes_its_last_size() -> None:
    assert sweep.parse_sizes("2048:8192:256") == list(range(2048, 8193, 256))
    assert len(sweep.parse_sizes("2048:8192:256")) == 25
    assert sweep.parse_sizes("2048:2300:256") == [2048]
    assert sweep.parse_sizes(" 4096, 8192 ") == [4096, 8192]


@pytest.mark.parametrize("text", ["2048:8192", "8192:2048:256", "2048:8192:0", "0,4096", "", "a:b:c"])
def test_malformed_sizes_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        sweep.parse_sizes(text)


def test_malformed_sizes_end_the_tool_with_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        sweep.main(["--sizes", "8192:2048:256"])
    assert info.value.code == 2
    assert "first <= last" in capsys.readouterr().err


ROWS = [{"size": 2048, "cublas": 600.0, "triton": 580.0, "tc": 590.0},
        {"size": 4608, "cublas": 680.0, "triton": 660.0, "tc": 650.0},
        {"size": 8192, "cublas": 660.0, "triton": 640.0, "tc": 670.0}]


def test_the_summary_names_the_lowest_ratio_and_the_sizes_below_triton() -> None:
    line = sweep.summary(ROWS)
    assert line.startswith("SUMMARY: 3 sizes;")
    assert "min 0.985 at 4608" in line  # 650 / 660
    assert "below 1.0 at [4608]" in line
    assert "median 1.017" in line  # tc / Triton: 1.017, 0.985, 1.047
    assert "tc / cuBLAS median 0.983" in line  # 0.983, 0.956, 1.015


def test_the_summary_of_a_sweep_at_or_above_triton_says_none_below() -> None:
    assert "below 1.0 at none" in sweep.summary([ROWS[0], ROWS[2]])
    assert sweep.summary([]) == "SUMMARY: no sizes timed"


def test_the_table_has_a_row_per_size_with_both_ratios() -> None:
    lines = sweep.table(ROWS).splitlines()
    assert len(lines) == 2 + len(ROWS)
    assert lines[3] == "| 4608 | 680.0 | 660.0 | 650.0 | 0.956 | 0.985 |"
