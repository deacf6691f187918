"""tools/gpu_check.py's parts that need no GPU: reading the auto-tuner's choices from its log, and
the report of the `matmul pooled` section."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import tc_runtime as tc
from tc_torch.ops.matmul import A_VARIANTS, B_VARIANTS

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import gpu_check  # noqa: E402


def _chose_line(key: str, config: tc.Config, kernel: str = "matmul") -> str:
    """A line as tc_runtime.autotune prints it under TC_PRINT_AUTOTUNING (its `config` repr)."""
    return f"tc autotune: kernel '{kernel}' ({key}): chose {config!r} (1651.3 us)"


def test_the_choices_are_shortened_to_the_variant_the_key_and_the_tile() -> None:
    # (the matmul's own defines: values such as 'newaxis,:' and 'MB,KB' hold commas)
    variant = {"TYPE": "bf16", "ACC": "float", **A_VARIANTS[False], **B_VARIANTS[True]}
    persistent = tc.config({**variant, "MB": 128, "NB": 256, "KB": 64}, num_warps=8, num_stages=3,
                           options={"persistent": True, "tma_store": True})
    plain = tc.config({"TYPE": "float", "MB": 256, "NB": 128, "KB": 32}, num_warps=8, num_stages=4)
    other = tc.config({"TYPE": "float", "ACC": "float", "BLOCK_M": 64, "BLOCK_N": 32}, num_warps=2, num_stages=3)
    log = "\n".join([
        "tc autotune: kernel 'matmul' (M=4096, N=4096, K=4096): config(...): 1700.0 us",
        _chose_line("M=4096, N=4096, K=4096", persistent),
        "tc torch: something else",
        _chose_line("M=8192, N=8192, K=8192", plain),
        _chose_line("M=4096, N=4096", other, kernel="transpose"),
    ])
    got = gpu_check.tuned_choices(log)
    assert got == [
        "matmul bf16 a ^b M=4096, N=4096, K=4096: 128x256x64/8/3 "
        "{'persistent': True, 'tma_store': True, 'warp_specialize': True}",
        "matmul float M=8192, N=8192, K=8192: 256x128x32/8/4",
        "transpose float M=4096, N=4096: BLOCK_M=64 BLOCK_N=32/2/3",
    ]


def test_a_log_without_choices_gives_none() -> None:
    assert gpu_check.tuned_choices("") == []
    assert gpu_check.tuned_choices("tc autotune: kernel 'matmul' (M=1): using config(x)") == []


def test_cycles_are_read_against_cublas_from_ncu_cycles_table() -> None:
    out = """tutorial half 4096^3, gpc__cycles_elapsed.max over 5 launches each:
          s3: median 290,160 (min 289,055, max 291,711), 1.0000x the first's speed  [dot]
  s3 skipstore: median 284,463 (min 283,970, max 284,976), 1.0200x the first's speed  [dot]
      cuBLAS: median 284,965 (min 284,280, max 285,470), 1.0182x the first's speed  [nvjet_sm90_hsh]
"""
    got = gpu_check.cycles_vs_cublas(out)
    assert [(n, c) for n, c, _ in got] == [("s3", 290160), ("s3 skipstore", 284463)]
    assert abs(got[0][2] - 284965 / 290160) < 1e-12 and got[1][2] > 1.0
    assert gpu_check.cycles_vs_cublas(out.replace("cuBLAS", "other")) == []
    assert gpu_check.cycles_vs_cublas("ncu did not finish in 300 s") == []


def test_the_pooled_section_reports_each_products_pooled_ratio(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`matmul pooled` runs tools/bench_matmul_pooled.py (faked here: it writes the pooled JSON)
    and reports every timed product's pooled median, quartiles, runs at least 1.0 and the
    tuner's choices."""
    import json
    import subprocess
    from typing import Any

    monkeypatch.setattr(gpu_check, "OUT", tmp_path)
    seen: list[list[str]] = []

    def fake_run(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        seen.append(cmd)
        pooled = [{"shape": "4096x4096x4096", "dtype": "bfloat16", "op": "C = A B", "runs": 3, "rounds": 27,
                   "quartiles": [0.985, 1.004, 1.02], "run_medians": [0.99, 1.01, 1.02], "runs_at_least_1": 2,
                   "choices": ["128x256x64/8/4", "256x128x64/8/3", "128x256x64/8/4"]},
                  {"shape": "4096x4096x4096", "dtype": "tf32", "op": "C = A B", "runs": 0, "rounds": 0}]
        Path(cmd[cmd.index("--json") + 1]).write_text(json.dumps({"runs": [], "pooled": pooled}))
        return subprocess.CompletedProcess(cmd, 0, "table\n", "")

    monkeypatch.setattr(subprocess, "run", fake_run)
    report = gpu_check.Report()
    gpu_check.matmul_pooled(report)
    assert seen[0][1].endswith("bench_matmul_pooled.py") and seen[0][seen[0].index("--runs") + 1] == "3"
    assert report.checks == [("matmul pooled runs: tc_torch.matmul equals torch in every run", "PASS", "exit 0")]
    assert report.numbers == [("matmul bfloat16 4096x4096x4096 C = A B, pooled",
                               "tc / torch 1.004 (0.985-1.020) over 27 rounds; 2 of 3 runs at least 1.0; "
                               "tuner chose 128x256x64/8/4 (2x); 256x128x64/8/3 (1x)")]
    # only when named: not among the sections a bare `gpu_check.py` runs
    assert [name for name, _ in gpu_check.EXPLICIT_SECTIONS] == ["fuzz", "matmul pooled", "matmul ragged",
                                                                 "matmul padded"]


@pytest.mark.parametrize("code, result, summary", [
    (0, "PASS", "1000 ok, 0 declined, 0 crashed, 0 mismatched"),
    (1, "FAIL", "997 ok, 1 declined, 0 crashed, 2 mismatched")])
def test_the_fuzz_section_reports_the_outcomes_of_the_random_kernels(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, code: int, result: str, summary: str) -> None:
    import subprocess
    from typing import Any

    seen: list[list[str]] = []
    counts = [int(w) for w in summary.replace(",", "").split() if w.isdigit()]

    def fake_run(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        seen.append(cmd)
        table = "feature  ok  refused  crash  mismatch\nall " + " ".join(map(str, counts)) + "\n"
        return subprocess.CompletedProcess(cmd, code, table, "")

    monkeypatch.setattr(subprocess, "run", fake_run)
    monkeypatch.setattr(gpu_check, "OUT", tmp_path)
    report = gpu_check.Report()
    gpu_check.fuzz(report)
    (cmd,) = seen
    assert cmd[1].endswith("fuzz_kernels.py") and cmd[2] == "300:1300"
    assert cmd[cmd.index("--keep") + 1] == str(tmp_path / "fuzz")
    assert report.checks == [("fuzz: random kernels vs interpreter", result, summary)]


def test_the_ragged_section_times_leading_dimensions_not_multiples_of_16(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import json
    import subprocess
    from typing import Any

    seen: list[list[str]] = []

    def fake_run(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        seen.append(cmd)
        if cmd[1].endswith("bench_matmul_sweep.py"):
            return subprocess.CompletedProcess(cmd, 0, "table\nSUMMARY: 9 sizes; tc / Triton min 4.081 at 2100\n", "")
        rows = [{"shape": "4104x4104x4104", "dtype": "float16", "op": "C = A B", "tc": 600.0, "torch": 580.0,
                 "triton": 500.0, "tc_torch_quartiles": [1.01, 1.03, 1.05]},
                {"shape": "4095x4095x4095", "dtype": "tf32", "op": "dA = dC B^T", "tc": 150.0, "torch": 300.0,
                 "tc unpadded": 100.0}]
        Path(cmd[cmd.index("--json") + 1]).write_text(json.dumps({"device": "cuda", "rows": rows}))
        return subprocess.CompletedProcess(cmd, 0, "table\n", "")

    monkeypatch.setattr(subprocess, "run", fake_run)
    monkeypatch.setattr(gpu_check, "OUT", tmp_path)
    report = gpu_check.Report()
    gpu_check.matmul_ragged(report)
    cmd, sweep = seen
    assert cmd[1].endswith("bench_matmul_backward.py")
    assert cmd[cmd.index("--shapes") + 1] == "4104x4104x4104,4100x4100x4100,4095x4095x4095"
    assert "--unpadded" in cmd and cmd[cmd.index("--dtypes") + 1] == "float16,tf32"
    # then the ragged squares against cuBLAS and Triton, in 3 rounds
    assert sweep[1].endswith("bench_matmul_sweep.py")
    assert sweep[sweep.index("--sizes") + 1] == "2056,2100,2500,3000,3001,4104,4100,5000,7000"
    assert sweep[sweep.index("--rounds") + 1] == "3"
    assert [c[1] for c in report.checks] == ["PASS", "PASS"]
    assert report.numbers == [
        ("matmul float16 4104x4104x4104 C = A B", "tc 600.0 TFLOPS, x torch 1.03, x triton 1.20 (per round 1.010-1.050)"),
        ("matmul tf32 4095x4095x4095 dA = dC B^T", "tc 150.0 TFLOPS, x torch 0.50, x tc unpadded 1.50"),
        ("matmul fp16 sweep 2056,2100,2500,3000,3001,4104,4100,5000,7000, interleaved",
         "9 sizes; tc / Triton min 4.081 at 2100")]


@pytest.mark.parametrize("code, result", [(0, "PASS"), (1, "FAIL")])
def test_the_padded_section_reports_the_host_time_ratios(monkeypatch: pytest.MonkeyPatch, code: int,
                                                         result: str) -> None:
    import subprocess
    from typing import Any

    seen: list[list[str]] = []

    def fake_run(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        seen.append(cmd)
        out = "| N | what |\nSUMMARY: host time torch / tc per call 2100: 0.29, 2500: 0.30" + (" WRONG" if code else "")
        return subprocess.CompletedProcess(cmd, code, out + "\n", "")

    monkeypatch.setattr(subprocess, "run", fake_run)
    report = gpu_check.Report()
    gpu_check.matmul_padded(report)
    (cmd,) = seen
    assert cmd[1].endswith("bench_matmul_padded.py")
    assert report.checks == [("matmul padded: copies bit for bit, products equal torch's", result, f"exit {code}")]
    assert report.numbers == [("matmul padded", "host time torch / tc per call 2100: 0.29, 2500: 0.30"
                               + (" WRONG" if code else ""))]


def test_the_sanitizer_runs_in_four_sections_that_compile_the_matmuls_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each compute-sanitizer section runs its own tools (faked here); the matmul sections share one
    unsanitized compile of the cases, and a failing run is a FAIL that names the tool."""
    import os
    import shutil
    import subprocess
    from typing import Any

    monkeypatch.setattr(gpu_check, "OUT", tmp_path)
    monkeypatch.setattr(gpu_check, "_sanitizer_cache", [])
    monkeypatch.setattr(shutil, "which", lambda name: f"/bin/{name}")
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    compiled: list[list[str]] = []
    sanitized: list[list[str]] = []

    class FakeShard:
        returncode = 0

        def __init__(self, cmd: list[str], **_: Any) -> None:
            compiled.append(cmd)

        def communicate(self, timeout: float) -> tuple[str, None]:
            return "ok case 1\nok case 2", None

    def fake_run(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        sanitized.append(cmd)
        failing = cmd[2] == "synccheck"
        summary = "========= ERROR SUMMARY: 1 error" if failing else "========= ERROR SUMMARY: 0 errors"
        return subprocess.CompletedProcess(cmd, 3 if failing else 0, summary, "")

    monkeypatch.setattr(subprocess, "Popen", FakeShard)
    monkeypatch.setattr(subprocess, "run", fake_run)
    assert list(gpu_check.SANITIZER_RUNS) == ["tutorial kernels", "matmul memcheck", "matmul synccheck",
                                              "matmul racecheck"]
    r = gpu_check.Report()
    gpu_check.sanitize(r, "matmul racecheck")
    assert [c[-2:] for c in compiled] == [["--shard", "0/2"], ["--shard", "1/2"]]
    assert len(sanitized) == 1 and sanitized[0][1:3] == ["--tool", "racecheck"]
    assert sanitized[0][-2:] == ["--matmul", "--persistent"]
    gpu_check.sanitize(r, "matmul synccheck")
    gpu_check.sanitize(r, "tutorial kernels")
    assert len(compiled) == 2  # (compiled once for both matmul sections; the tutorials compile under the tool)
    assert [c[2] for c in sanitized] == ["racecheck", "synccheck", "memcheck", "memcheck", "racecheck"]
    assert "--matmul" not in sanitized[-1]
    verdicts = {name: status for name, status, _ in r.checks}
    assert verdicts == {"tc_torch.matmul configurations (unsanitized)": "PASS",
                        "compute-sanitizer racecheck (matmul, persistent)": "PASS",
                        "compute-sanitizer synccheck (matmul)": "FAIL",
                        "compute-sanitizer memcheck (tutorial kernels)": "PASS",
                        "compute-sanitizer racecheck (tutorial kernels)": "PASS"}
    assert (tmp_path / "sanitizer-matmul-synccheck.log").read_text().endswith("1 error")
