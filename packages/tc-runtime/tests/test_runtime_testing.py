"""do_bench on the CPU and perf_report writing its PNG and CSV."""

from __future__ import annotations

import csv
import math
import time
from pathlib import Path
from typing import Any

import pytest

import tc_runtime as tc


def test_do_bench_cpu_times_in_ms() -> None:
    med, lo, hi = tc.testing.do_bench(lambda: time.sleep(0.002), warmup=5, rep=20, device="cpu")
    assert lo <= med <= hi
    assert 1.5 < med < 50


def test_do_bench_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="rep > 0"):
        tc.testing.do_bench(lambda: None, rep=0, device="cpu")
    # (before: NaN and infinity failed converting to a count, a bad device string timed on the
    # CPU silently, a non-str device raised AttributeError)
    for warmup, rep in ((1.0, math.nan), (1.0, math.inf), (math.nan, 1.0)):
        with pytest.raises(ValueError, match="warmup must be >= 0 and rep > 0"):
            tc.testing.do_bench(lambda: None, warmup=warmup, rep=rep, device="cpu")
    with pytest.raises(TypeError, match="rep must be a number of milliseconds"):
        tc.testing.do_bench(lambda: None, rep="2", device="cpu")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="fn must be a callable"):
        tc.testing.do_bench(5, device="cpu")  # type: ignore[arg-type]
    for device in ("gpu", 0):
        with pytest.raises(ValueError, match="device must be 'cuda', 'cuda:N', 'cpu' or None"):
            tc.testing.do_bench(lambda: None, device=device)  # type: ignore[arg-type]


def test_perf_report_writes_png_and_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    calls = []

    @tc.testing.perf_report(tc.testing.Benchmark(
        x_names=["N"], x_vals=[2**i for i in range(4, 7)], y_name="provider",
        y_vals=["a", "b"], y_lines=["A", "B"], ylabel="GB/s", plot_name="demo-performance",
        args={"scale": 2}, x_log=True))
    def bench(N: int, provider: str, scale: int) -> tuple[float, float, float]:
        calls.append((N, provider, scale))
        v = N * scale * (1 if provider == "a" else 2)
        return float(v), float(v - 1), float(v + 1)

    tables = bench.run(print_data=True, save_path=str(tmp_path))
    assert len(calls) == 6 and calls[0] == (16, "a", 2)
    png = tmp_path / "demo-performance.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = list(csv.reader((tmp_path / "demo-performance.csv").open()))
    assert rows[0][:3] == ["N", "A", "B"]
    assert rows[1][:3] == ["16", "32", "64"]
    out = capsys.readouterr().out
    assert "demo-performance" in out and "64.000" in out
    assert tables[0].rows[2][1][1] == (256.0, 255.0, 257.0)


def test_benchmark_validation() -> None:
    with pytest.raises(ValueError, match="y_lines for"):
        tc.testing.Benchmark(x_names=["N"], x_vals=[1], y_name="p", y_vals=["a", "b"],
                             y_lines=["A"])
    b = tc.testing.Benchmark(x_names="N", x_vals=[1], line_arg="p", line_vals=["a"],
                             line_names=["A"])
    assert b.y_name == "p" and b.y_lines == ["A"]


def test_perf_report_shows_progress(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "tqdm", None)  # the built-in counter (tqdm is optional)

    @tc.testing.perf_report(tc.testing.Benchmark(
        x_names=["N"], x_vals=[1, 2, 3], y_name="p", y_vals=["a"], plot_name="sweep"))
    def bench(N: int, p: str) -> float:
        return float(N)

    bench.run(save_path=str(tmp_path))
    err = capsys.readouterr().err
    assert "sweep: 0/3" in err and "sweep: 2/3" in err and "sweep: 3/3\n" in err


def test_do_bench_serves_both_tutorials_ways_of_reading_it() -> None:
    import numpy as np

    t = tc.testing.do_bench(lambda: sum(range(1000)), warmup=1, rep=5)
    # the matrix-multiplication tutorial: three numbers
    ms, min_ms, max_ms = t
    assert min_ms <= ms <= max_ms and t.median == ms and len(t) == 3
    # the fused-softmax tutorial: `gbps(do_bench(...))`, the median where a number is expected
    x = np.zeros((64, 256), dtype=np.float32)
    def gbps(ms: Any) -> float:  # (the tutorial's lambda)
        return float(x.size * x.itemsize * 1e-9 / (ms * 1e-3))

    assert gbps(t) == pytest.approx(gbps(ms))
    assert float(t) == ms and t * 2 == 2 * t == ms * 2 and 1 / t == 1 / ms and t / 2 == ms / 2
    assert t + 1 == 1 + t == ms + 1 and t - 1 == ms - 1 and 1 - t == 1 - ms
    assert t < ms + 1 and t > ms - 1 and t <= ms and t >= ms and f"{t:.6f}" == f"{ms:.6f}"
    # other tuples still compare as tuples; True is not a number here
    assert tc.testing.Timing(1, 0, 2) < tc.testing.Timing(1, 0, 3)
    with pytest.raises(TypeError):
        t * True
    assert str(tc.testing.Timing(1, 0.5, 2)) == "(1.0, 0.5, 2.0)"
    import pickle

    assert pickle.loads(pickle.dumps(t)) == t and type(pickle.loads(pickle.dumps(t))) is tc.testing.Timing
