"""tools/bench_power.py's parts that need no GPU: reading nvidia-smi's samples, the statistics of
a provider's window, the tile syntax of its cases and the order of its rounds."""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import bench_power as bp  # noqa: E402
from tf32_check import parse_config  # noqa: E402  (bench_power's tiles: the other tools' notation)


def test_a_sample_line_is_read_with_its_fraction_of_a_second() -> None:
    s = bp.parse_sample("2026/11/25 09:39:12.250, 1515, 690.70, 57, 0x0000000000000004\n")
    assert s is not None
    assert s.clock_mhz == 1515 and s.power_w == pytest.approx(690.7) and s.temp_c == 57
    assert s.throttle == "0x0000000000000004"
    whole = time.mktime(time.strptime("2026/11/25 09:39:12", "%Y/%m/%d %H:%M:%S"))
    assert s.time == pytest.approx(whole + 0.25)


@pytest.mark.parametrize("line", ["", "timestamp, clocks.sm [MHz], power.draw [W]",
                                  "2026/11/25 09:39:12.250, [N/A], 690.70, 57, 0x4",
                                  "2026/11/25 09:39:12.250, 1515, 690.70"])
def test_lines_that_are_not_samples_are_skipped(line: str) -> None:
    assert bp.parse_sample(line) is None


def test_a_window_takes_the_medians_of_its_own_samples() -> None:
    S = bp.Sample
    samples = [S(0.0, 1980, 100, 40, "0x0"),  # before the window: not counted
               S(1.0, 1500, 690, 60, "0x4"), S(1.1, 1400, 700, 61, "0x4"), S(1.2, 1450, 695, 62, "0x1"),
               S(5.0, 1980, 100, 40, "0x0")]  # after it
    w = bp.summarize("tc", 350.0, samples, 0.5, 2.0)
    assert (w.clock_mhz, w.power_w, w.temp_c, w.throttle, w.samples) == (1450, 695, 61, "0x4", 3)
    empty = bp.summarize("tc", 350.0, samples, 2.0, 3.0)
    assert empty.samples == 0 and math.isnan(empty.clock_mhz)


def test_tiles_name_their_schedule_with_letters() -> None:
    def config(defines: dict[str, int], **kw: object) -> tuple[dict[str, int], dict[str, object]]:
        return defines, kw

    assert parse_config("128,256,64,8,3", config) == (
        {"MB": 128, "NB": 256, "KB": 64}, {"num_warps": 8, "num_stages": 3, "options": None})
    assert parse_config("256,128,32,8,4,p,s,k,g4", config) == (
        {"MB": 256, "NB": 128, "KB": 32, "GROUP_SIZE": 4},
        {"num_warps": 8, "num_stages": 4, "options": {"persistent": True, "tma_store": True, "stream_k": True}})
    assert parse_config("128,256,64,8,4,n", config)[1]["options"] == {"warp_specialize": False}
    assert parse_config("192,192,64,12,3,p,m,q,g2", config)[1]["options"] == {
        "persistent": True, "cluster_multicast": True, "cluster_2x2": True}
    with pytest.raises(ValueError, match="unknown option letter 'x'"):
        parse_config("128,256,64,8,3,x", config)
    with pytest.raises(ValueError, match="unknown option letter 'gx'"):
        parse_config("128,256,64,8,3,gx", config)
    with pytest.raises(ValueError, match="MB,NB,KB,warps,stages"):
        parse_config("128,256,64", config)


def test_rounds_alternate_the_order_of_the_providers() -> None:
    # the GPU warms during each window: over two rounds every provider runs first once and last once
    runs = ["torch", "tc a", "tc b"]
    assert bp.in_turns(runs, 0) == runs
    assert bp.in_turns(runs, 1) == ["tc b", "tc a", "torch"]
    places = {name: [bp.in_turns(runs, r).index(name) for r in range(2)] for name in runs}
    assert all(sum(p) == len(runs) - 1 for p in places.values())


def test_a_wrong_result_is_timed_only_when_asked_and_then_under_a_name_that_says_so() -> None:
    assert bp.judged("tc", 1e-3, False) == "tc" == bp.judged("tc", 1e-3, True)
    assert bp.judged("tc", 0.5, False) is None
    assert bp.judged("tc", float("nan"), False) is None
    assert bp.judged("tc", 0.5, True) == "tc (WRONG)"
