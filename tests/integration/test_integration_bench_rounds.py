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


def test_rounds_rotate_which_provider_goes_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """Round r starts with provider r mod n; every provider gets one time per round, in its own
    list, whatever its place in the round."""
    import tc_runtime as tc

    calls: list[str] = []
    flushes: list[bool] = []

    def bench(fn: Any, warmup: float, rep: float, clear_l2: bool) -> tuple[float, float, float]:
        name = fn()
        calls.append(name)
        flushes.append(clear_l2)
        ms = {"tc": 1.0, "torch": 2.0, "triton": 3.0}[name] + len(calls) / 100
        return ms, ms, ms

    monkeypatch.setattr(tc.testing, "do_bench", bench)
    providers = {name: (lambda name=name: name) for name in ("tc", "torch", "triton")}
    times = bench_rounds.interleaved_rounds(providers, rounds=4, rep=1.0)
    assert calls == ["tc", "torch", "triton", "torch", "triton", "tc", "triton", "tc", "torch",
                     "tc", "torch", "triton"]
    assert times == {"tc": pytest.approx([1.01, 1.06, 1.08, 1.10]),
                     "torch": pytest.approx([2.02, 2.04, 2.09, 2.11]),
                     "triton": pytest.approx([3.03, 3.05, 3.07, 3.12])}
    assert flushes == [True] * 12  # (L2 flushed before each call unless asked not to)
    bench_rounds.interleaved_rounds(providers, rounds=1, rep=1.0, clear_l2=False)
    assert flushes[12:] == [False] * 3


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
         "triton": 650.0, "tc_torch_quartiles": (0.99, 1.012, 1.03), "tc_config": "128x256x64/8/4"},
        {"shape": "64x48x80", "dtype": "tf32", "op": "dB = A^T dC", "tc": "ok"}]
    lines = backward.table(rows).splitlines()
    assert lines[0].endswith("| tc / torch per round (quartiles) | tc's configuration |")
    assert lines[2] == ("| 4096x4096x4096 | float16 | C = A B | 700.0 | 690.0 | 650.0 | 1.01 | 1.08 | "
                        "0.990 / 1.012 / 1.030 | 128x256x64/8/4 |")
    assert lines[3] == "| 64x48x80 | tf32 | dB = A^T dC | ok | - | - | - | - | - | - |"


def test_short_names_of_configurations() -> None:
    """The tuner's configurations as the tables name them: tile, warps, stages, options on."""
    from tc_runtime import config

    plain = config({"MB": 128, "NB": 256, "KB": 64}, num_warps=8, num_stages=3)
    assert backward.short_config(repr(plain)) == "128x256x64/8/3"
    grouped = config({"MB": 64, "NB": 32, "KB": 16, "GROUP_SIZE": 16, "TYPE": "half"}, num_warps=4, num_stages=4,
                     options={"persistent": True, "tma_store": True, "warp_specialize": False})
    assert backward.short_config(repr(grouped)) == "64x32x16/4/4 GROUP_SIZE=16+persistent+store+no-ws"


def test_the_tuners_choice_is_read_from_its_own_lines(capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """tuned_call reads the configuration from the tuner's own line (tc_runtime.autotune._say),
    keeps the call's other stderr output, and shows the tuner's lines only where asked."""
    from tc_runtime import autotune, config

    chosen = config({"MB": 128, "NB": 128, "KB": 32}, num_warps=4, num_stages=4)
    remembered = config({"MB": 64, "NB": 64, "KB": 32}, num_warps=4, num_stages=3)

    def tunes() -> int:
        autotune._say(f"kernel 'matmul' (M=4096): skipped {remembered}: ResourceLimitError: too big")
        autotune._say(f"kernel 'matmul' (M=4096): chose {chosen} (380.1 us)")
        autotune._say(f"kernel 'transpose' (M=4096): chose {remembered} (20.0 us)")  # (not the matmul)
        sys.stderr.write("a warning of the call\n")
        return 7

    def remembers() -> int:
        autotune._say(f"kernel 'matmul' (M=4096): {remembered} (remembered on disk)")
        return 8

    monkeypatch.delenv("TC_PRINT_AUTOTUNING", raising=False)
    assert backward.tuned_call(tunes) == (7, "128x128x32/4/4")
    assert capsys.readouterr().err == "a warning of the call\n"
    assert backward.tuned_call(lambda: 9) == (9, None)
    monkeypatch.setenv("TC_PRINT_AUTOTUNING", "1")
    assert backward.tuned_call(remembers) == (8, "64x64x32/4/3")
    assert "remembered on disk" in capsys.readouterr().err


def test_pooled_rounds_of_several_runs() -> None:
    """tools/bench_matmul_pooled.py: every round of every run pooled per product, each run's
    median, how many are at least 1.0; a product one run did not time adds no rounds."""
    import bench_matmul_pooled as pooled

    c, da = ("4096x4096x4096", "float16", "C = A B"), ("4096x4096x4096", "float16", "dA = dC B^T")

    def row(key: tuple[str, str, str], rounds: list[float] | None, choice: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"shape": key[0], "dtype": key[1], "op": key[2]}
        if rounds is not None:
            out["tc_torch_rounds"] = rounds
        if choice is not None:
            out["tc_config"] = choice
        return out

    runs = [[row(c, [0.98, 0.99, 1.00], "b"), row(da, [1.05, 1.06, 1.07], "a")],
            [row(c, [1.02, 1.04], "a"), row(da, None, "b")], [row(c, None, "a")]]
    first, second = pooled.pool(runs)
    assert (first["op"], first["runs"], first["rounds"]) == ("C = A B", 2, 5)
    assert first["quartiles"] == pytest.approx((0.99, 1.00, 1.02))
    assert first["run_medians"] == pytest.approx([0.99, 1.03]) and first["runs_at_least_1"] == 1
    assert first["choices"] == ["b", "a"] and second["choices"] == ["a"]  # (timed runs only)
    assert (second["runs"], second["rounds"], second["runs_at_least_1"]) == (1, 3, 1)
    lines = pooled.table([first, second, *pooled.pool([[row(c, None)]])]).splitlines()
    assert lines[2] == ("| 4096x4096x4096 | float16 | C = A B | 2 | 5 | 0.990 / 1.000 / 1.020 | "
                        "0.990-1.030 | 1 of 2 | b (1x); a (1x) |")
    assert lines[3].endswith("| 1 | 3 | 1.055 / 1.060 / 1.065 | 1.060-1.060 | 1 of 1 | a (1x) |")
    assert lines[4] == "| 4096x4096x4096 | float16 | C = A B | 0 | 0 | - | - | - | - |"


def test_backward_rows_of_the_cpu_pool_to_no_rounds(tmp_path: Path) -> None:
    """bench_matmul_backward on the CPU (the interpreter checks the products, nothing is timed)
    writes rows without rounds; pooled, they say so instead of failing."""
    import json

    import bench_matmul_pooled as pooled

    out = tmp_path / "rows.json"
    assert backward.main(["--device", "cpu", "--shapes", "33x70x45", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 9 and all(r["tc"] == "ok" and "tc_torch_rounds" not in r for r in rows)
    table = pooled.pool([rows, rows])
    assert len(table) == 9 and all((r["runs"], r["rounds"]) == (0, 0) and "quartiles" not in r for r in table)


def test_backward_checks_the_other_tc_schedules_it_is_asked_for(tmp_path: Path) -> None:
    """--unpadded and --stream-k add providers running tc_torch's matmul_out with pad="off" and
    stream_k="on" (stream-K for 16-bit products only); each is checked like the others."""
    import json

    out = tmp_path / "rows.json"
    assert backward.main(["--device", "cpu", "--shapes", "33x70x45", "--dtypes", "float16,tf32", "--unpadded",
                          "--stream-k", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["dtype"] for r in rows] == ["float16"] * 3 + ["tf32"] * 3
    assert all(r["tc unpadded"] == "ok" for r in rows)
    assert [r.get("tc stream-K") for r in rows] == ["ok"] * 3 + [None] * 3


def test_backward_refuses_an_unknown_dtype(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        backward.main(["--device", "cpu", "--dtypes", "float8"])
    assert "--dtypes: choose from float16, bfloat16, tf32" in capsys.readouterr().err
