"""The GPU check: every GPU test and the vector-add checks and benchmarks, in one run.

    PYTHONPATH=<.site and packages/*/src> python3 tools/gpu_check.py [SECTION ...]

With arguments, only the sections whose names contain one of them run (e.g. `pytest bandwidth`).

Sections (each guarded, so one failure still prints the table):
  1. pytest -m gpu over packages/ and tests/integration
  2. vector add for every N in 1..4097 and 2**27 + 1, float and half, equal to torch's x + y
  3. bandwidth at N = 2**27 float: tc vs torch (and Triton's tutorial-style add when triton imports)
  4. host overhead of one launch; tc_runtime's launch against Triton and CuPy, cached kernels
  5. softmax (tools/bench_softmax.py) and the other memory-bound kernels (tools/bench_memory.py)
     against torch and Triton peers; compile and disk-cache times
  6. matmuls: tools/bench_matmul.py, bench_matmul_backward.py, bench_matmul_sweep.py (every square
     from 2048 to 8192 against Triton), tf32_check.py, bench_tf32_plans.py, sustained runs
     with the clock and power they get (tools/bench_power.py), and cycles per launch against
     cuBLAS under Nsight Compute (tools/ncu_cycles.py; skipped without `ncu`)
  7. the spec's sweeps with plots (tools/bench_sweeps.py), the tutorials, compute-sanitizer in four
     sections (`compute-sanitizer tutorial kernels`, `... matmul memcheck`, `synccheck`, `racecheck`)
  8. only when named: `matmul pooled` (tools/bench_matmul_pooled.py: 4096^3 tc_torch.matmul over
     torch pooled over fresh processes, each tuning anew; about 4 minutes) and `matmul ragged`
     (bench_matmul_backward.py at 4104^3, 4100^3 and 4095^3: leading dimensions not multiples of 16;
     then bench_matmul_sweep.py at RAGGED_SQUARES) and `matmul padded` (tools/bench_matmul_padded.py:
     the padding copies' host and GPU time) and `fuzz` (tools/fuzz_kernels.py: 1000 random kernels
     on the GPU against the interpreter, about a minute with 14 workers)
The markdown table is printed LAST. When $OUT is set, it gets gpu_check.md (the table),
gpu_check.log and gpu_check_logs.tar.gz (every section's logs, plots and tables). Set TC_GIT_COMMIT (or
write a COMMIT file in the repository root) to have the commit in the table.
"""

from __future__ import annotations

import datetime
import functools
import importlib.util
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: Where the device tool collects results (it brings back at most 8 files): the table, the log and
#: one archive of everything else.
RESULTS = Path(os.environ["OUT"]) if os.environ.get("OUT") else None
#: Where the sections write their logs, plots and tables (archived into RESULTS at the end).
OUT: Path | None = Path("/tmp/tc-gpu-check-logs") if RESULTS is not None else None
sys.path.insert(0, str(ROOT / "tools"))


class Report:
    """Check results (name -> PASS/FAIL + detail), measurements, and a log."""

    def __init__(self) -> None:
        self.checks: list[tuple[str, str, str]] = []
        self.numbers: list[tuple[str, str]] = []
        self.log = io.StringIO()

    def say(self, text: str) -> None:
        print(text, flush=True)
        self.log.write(text + "\n")

    def check(self, name: str, ok: bool, detail: str = "") -> None:
        self.checks.append((name, "PASS" if ok else "FAIL", detail))
        self.say(f"[{'PASS' if ok else 'FAIL'}] {name} {detail}")

    def number(self, name: str, value: str) -> None:
        self.numbers.append((name, value))
        self.say(f"  {name}: {value}")

    def section(self, name: str, fn: Callable[[Report], None]) -> None:
        self.say(f"\n## {name}")
        start = time.perf_counter()
        try:
            fn(self)
        except Exception as exc:  # a broken section must not hide the others
            self.say(traceback.format_exc())
            self.check(name, False, f"crashed: {type(exc).__name__}: {str(exc)[:200]}")
        self.say(f"({name}: {time.perf_counter() - start:.1f} s)")


def git_commit() -> str:
    if os.environ.get("TC_GIT_COMMIT"):
        return os.environ["TC_GIT_COMMIT"]
    for name in ("COMMIT", ".git-commit"):
        path = ROOT / name
        if path.is_file():
            return path.read_text().strip()
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                             text=True, timeout=10)
        if out.returncode == 0:
            return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"


# ------------------------------------------------------------------------------------ sections


def run_pytest(r: Report) -> None:
    targets = [str(p) for p in sorted((ROOT / "packages").glob("*/tests"))]
    targets.append(str(ROOT / "tests" / "integration"))
    cmd = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-rfEs", "-p", "no:cacheprovider",
           "--timeout=300", "--timeout-method=thread", "--durations=12", *targets]
    # a kernel that hangs blocks inside the driver, where no signal reaches it: the thread method
    # ends the worker process (xdist reports the test as failed and starts a new worker). 300 s, as
    # a test that tunes tc_torch.matmul's 26 configurations for three products compiles them one by
    # one on a cold cache while the other workers share the cores (test_matmul_batched_autograd
    # exceeded the 120 s limit on an H100 host, 2026-11-27: its worker was ended mid-test)
    # the interpreter side of the GPU-vs-interpreter tests is CPU-bound: spread it out
    env = dict(os.environ)
    if importlib.util.find_spec("xdist") is not None:
        cmd[3:3] = ["-n", os.environ.get("TC_GPU_CHECK_WORKERS", "8")]
        # (the test processes already share the cores: no compile workers of their own each)
        env.setdefault("TC_COMPILE_WORKERS", "0")
    r.say(" ".join(cmd))
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800, env=env)
    text = proc.stdout + proc.stderr
    if OUT is not None:
        (OUT / "pytest-gpu.log").write_text(text)
    # the summary ("N passed, M skipped in T s"), not a warning that pytest printed after it
    summaries = [line for line in text.splitlines() if re.search(r"\d+ (passed|failed|error)", line)]
    tail = summaries[-1].strip("= ") if summaries else "(no summary line)"
    r.say("\n".join(text.strip().splitlines()[-40:]))
    # exit code 5: no test selected (acceptable only if nothing is marked gpu yet)
    r.check("pytest -m gpu", proc.returncode in (0, 5), tail)


def vector_add_exact(r: Report) -> None:
    import torch

    import tc_torch
    from tc_torch.ops.add import add_out

    torch.manual_seed(0)
    for dtype in (torch.float32, torch.float16):
        name = str(dtype).replace("torch.", "")
        nmax = 4097
        x = torch.rand(nmax + 16, device="cuda", dtype=dtype)
        y = torch.rand(nmax + 16, device="cuda", dtype=dtype)
        bad = torch.zeros((), dtype=torch.int64, device="cuda")
        bad_ns: list[int] = []
        start = time.perf_counter()
        for n in range(1, nmax + 1):
            z = torch.empty(n, device="cuda", dtype=dtype)
            add_out(z, x[:n], y[:n])
            bad += (z != x[:n] + y[:n]).sum()
            if n % 512 == 0 or n == nmax:
                if int(bad.item()):
                    bad_ns.append(n)
                    bad.zero_()
        # misaligned pointers (offset by one element) for a few sizes
        for n in (1, 15, 16, 17, 1000, 1024, 4096):
            z = torch.empty(n + 1, device="cuda", dtype=dtype)[1:]
            add_out(z, x[1:n + 1], y[2:n + 2])
            if not torch.equal(z, x[1:n + 1] + y[2:n + 2]):
                bad_ns.append(-n)
        torch.cuda.synchronize()
        took = time.perf_counter() - start
        r.check(f"vector add N=1..4097 {name}", not bad_ns,
                f"({took:.1f} s)" + (f" mismatches near N={bad_ns[:10]}" if bad_ns else ""))
        n = 2**27 + 1
        xb = torch.rand(n, device="cuda", dtype=dtype)
        yb = torch.rand(n, device="cuda", dtype=dtype)
        zb = tc_torch.add(xb, yb)
        r.check(f"vector add N=2^27+1 {name}", bool(torch.equal(zb, xb + yb)))
        del xb, yb, zb


def bandwidth(r: Report) -> None:
    import torch

    import tc_runtime as tc
    import tc_torch

    n = 2**27
    x = torch.rand(n, device="cuda")
    y = torch.rand(n, device="cuda")

    def gbps(ms: float) -> float:
        return 12 * n / ms * 1e-6

    results: dict[str, float] = {}
    providers: dict[str, Callable[[], Any]] = {"torch": lambda: x + y,
                                               "tc": lambda: tc_torch.add(x, y)}
    try:
        from triton_add import triton_add

        assert torch.equal(triton_add(x, y), x + y)
        providers["triton"] = lambda: triton_add(x, y)
    except Exception as exc:
        r.say(f"triton peer unavailable: {type(exc).__name__}: {exc}")
    for name, fn in providers.items():
        ms, lo, hi = tc.testing.do_bench(fn, warmup=25, rep=100)
        results[name] = gbps(ms)
        r.number(f"add 2^27 f32 {name}", f"{gbps(ms):.0f} GB/s (median {ms * 1000:.1f} us, "
                                         f"min {lo * 1000:.1f}, max {hi * 1000:.1f})")
    ratio = results["tc"] / results["torch"]
    r.number("tc / torch", f"{ratio:.3f}")
    if "triton" in results:
        r.number("tc / triton", f"{results['tc'] / results['triton']:.3f}")
    r.check("add bandwidth >= 90% of torch", ratio >= 0.9, f"ratio {ratio:.3f}")


def launch_overhead(r: Report) -> None:
    import torch

    import tc_torch

    x = torch.rand(1024, device="cuda")
    y = torch.rand(1024, device="cuda")

    def host_us(fn: Callable[[], Any]) -> float:
        total, n = 0.0, 200
        for b in range(11):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            if b:
                total += time.perf_counter() - t0
        return total / (10 * n) * 1e6

    r.number("host us per call: torch x + y", f"{host_us(lambda: x + y):.2f}")
    r.number("host us per call: tc_torch.add", f"{host_us(lambda: tc_torch.add(x, y)):.2f}")
    from tc_torch.ops.add import kernel_for

    from tc_runtime import driver

    k = kernel_for(x.device, x.dtype)
    fn_stream = driver.stream_object(0)
    z = torch.empty_like(x)
    zp, xp, yp = z.data_ptr(), x.data_ptr(), y.data_ptr()
    us = host_us(lambda: k(zp, xp, yp, 1024, grid=(1,)))
    r.number("host us per call: raw tc kernel launch", f"{us:.2f}")
    # the driver's own cost on this machine, for the same kernel and arguments
    v = next(iter(k._fast.values()))
    fn, addr = v.function, v.packer.address
    v.packer.pack((zp, xp, yp, 1024))
    cu_us = host_us(lambda: fn._launch(fn.handle, 1, 1, 1, fn.block_x, 1, 1, fn.shared_bytes,
                                       fn_stream, addr, 0))  # cuda-python's own call
    r.number("host us per call: bare cuLaunchKernel (cuda-python)", f"{cu_us:.2f}")
    r.check("tc launch overhead above cuLaunchKernel < 4 us", us - cu_us < 4,
            f"{us:.2f} us vs {cu_us:.2f} us; target < 8 us in total")


def tutorials(r: Report) -> None:
    out = OUT if OUT is not None else ROOT / "build" / "tutorials"
    cmd = [sys.executable, str(ROOT / "tools" / "run_tutorials.py"), "--out", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1200)
    text = proc.stdout + proc.stderr
    r.say("\n".join(text.strip().splitlines()[-40:]))
    summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else "(no output)"
    r.check("tutorials", proc.returncode == 0, summary)


# ---------------------------------------------------------------------------------------- main


#: compute-sanitizer's runs, one section each (the whole took more than one device call's ten
#: minutes with three matmul shapes): (label, tool, --report-api-errors, what it runs). memcheck
#: and synccheck see every matmul case; racecheck (seconds a case: 315 s for a quarter of them on
#: an H100) the persistent configurations, whose programs share buffers across tiles.
SANITIZER_RUNS = {
    "tutorial kernels": [("memcheck-api", "memcheck", "all", "tutorial kernels"),
                         ("memcheck", "memcheck", "no", "tutorial kernels"),
                         ("racecheck", "racecheck", "no", "tutorial kernels")],
    "matmul memcheck": [("matmul-memcheck", "memcheck", "no", "matmul")],
    "matmul synccheck": [("matmul-synccheck", "synccheck", "no", "matmul")],
    "matmul racecheck": [("matmul-racecheck", "racecheck", "no", "matmul, persistent")],
}

#: The disk cache the matmul configurations were compiled into, once per process.
_sanitizer_cache: list[dict[str, str]] = []


def _matmul_cases_compiled(r: Report) -> dict[str, str]:
    """The environment whose TC_CACHE_DIR holds every matmul case of tools/sanitize_kernels.py,
    compiled (and run unsanitized) first in parallel shards, each a process of its own: under the
    sanitizer they then only run. Done once per process."""
    if _sanitizer_cache:
        return _sanitizer_cache[0]
    script = str(ROOT / "tools" / "sanitize_kernels.py")
    shards = max(1, min(16, os.cpu_count() or 1))
    cache = Path(os.environ.get("TC_CACHE_DIR") or (ROOT / "build" / "sanitizer-cache"))
    env = dict(os.environ, TC_CACHE_DIR=str(cache))
    procs = [subprocess.Popen([sys.executable, script, "--matmul", "--shard", f"{i}/{shards}"], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
             for i in range(shards)]
    outs = [p.communicate(timeout=1200)[0] for p in procs]
    lines = [ln for out in outs for ln in out.splitlines()]
    bad = [ln for ln in lines if not ln.startswith("ok ")]
    if OUT is not None:
        (OUT / "sanitizer-matmul-plain.log").write_text("\n".join(lines))
    r.check("tc_torch.matmul configurations (unsanitized)", all(p.returncode == 0 for p in procs),
            f"{len(lines) - len(bad)} cases ok" + (f"; {len(bad)} lines not ok, first: {bad[0][:200]}" if bad else ""))
    _sanitizer_cache.append(env)
    return env


def sanitize(r: Report, part: str) -> None:
    """compute-sanitizer's runs of SANITIZER_RUNS[part] over tools/sanitize_kernels.py: the
    tutorial kernels (memcheck and racecheck must report 0 errors) or every configuration of
    tc_torch.matmul (memcheck, synccheck; racecheck over the persistent ones). A FAIL with a note
    when compute-sanitizer is not on the PATH."""
    exe = shutil.which("compute-sanitizer")
    if exe is None:
        r.check(f"compute-sanitizer {part}", False, "compute-sanitizer not on the PATH")
        return
    script = str(ROOT / "tools" / "sanitize_kernels.py")
    # --report-api-errors no for the verdicts: cuda-bindings probes driver entry points at cuInit
    # (a probe of a symbol the driver lacks counts as an "API error"), and tc's driver layer checks
    # every CUresult it gets itself; the kernels' memory accesses are the sanitizer's to judge. One
    # informational run with API errors on names what they are.
    for label, tool, api, what in SANITIZER_RUNS[part]:
        cmd = [exe, "--tool", tool, "--report-api-errors", api, "--error-exitcode", "3", sys.executable, script]
        if what.startswith("matmul"):
            cmd += ["--matmul", *(["--persistent"] if "persistent" in what else [])]
            run_env = _matmul_cases_compiled(r)  # (the matmuls come from the cache)
        else:  # (the tutorial kernels compile under the sanitizer)
            run_env = dict(os.environ, TC_ALWAYS_COMPILE="1")
        r.say(" ".join(cmd))
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1200, env=run_env)
        text = proc.stdout + proc.stderr
        if OUT is not None:
            (OUT / f"sanitizer-{label}.log").write_text(text)
        summary = [ln for ln in text.splitlines() if "ERROR SUMMARY" in ln or "RACECHECK SUMMARY" in ln]
        if label == "memcheck-api":
            hits = sorted({ln.strip("= ").strip() for ln in text.splitlines() if "Program hit" in ln})
            r.number("memcheck API errors (informational)",
                     (summary[-1].strip("= ").strip() if summary else f"exit {proc.returncode}")
                     + ("; " + " / ".join(hits[:4]) if hits else ""))
            continue
        r.say("\n".join(text.strip().splitlines()[-30:]))
        r.check(f"compute-sanitizer {tool} ({what})", proc.returncode == 0,
                (summary[-1].strip("= ").strip() if summary else f"exit code {proc.returncode}")
                + f" ({time.perf_counter() - start:.0f} s)")


def runtime_launch(r: Report) -> None:
    """tc_runtime (issue 6): launch host time vs Triton 3.x and CuPy in one run, and a new process
    finding a cached kernel."""
    import json as _json

    out = (OUT if OUT is not None else ROOT / "build") / "bench_launch.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "bench_launch.py"), "--json",
                           str(out)], cwd=ROOT, capture_output=True, text=True, timeout=900)
    r.say((proc.stdout + proc.stderr)[-6000:])
    if proc.returncode != 0 or not out.is_file():
        r.check("bench_launch", False, f"exit {proc.returncode}")
        return
    res = _json.loads(out.read_text())["results"]
    # the verdict from the interleaved rounds (bench_launch.py), where tc and the peers share the
    # host's slow stretches
    tc_us = next((v for k, v in res.items() if k.startswith("interleaved: tc kernel")), None)
    peers = {"Triton": res.get("interleaved: Triton 3.x @triton.jit kernel[(1,)](x, y, z, n, BLOCK=1024)"),
             "CuPy": res.get("interleaved: CuPy RawKernel((1,), (1024,), (z, x, y, n))")}
    for name, value in res.items():
        if isinstance(value, float):
            r.number(f"launch host us: {name}", f"{value:.2f}")
    if isinstance(tc_us, float):
        r.check("tc launch under 8 us", tc_us < 8, f"{tc_us:.2f} us")
        for peer, us in peers.items():
            if isinstance(us, float):
                r.check(f"tc launch <= {peer}", tc_us <= us, f"{tc_us:.2f} vs {us:.2f} us")
    # a new process: kernel object + first launch of a kernel that is in the disk cache
    script = (
        "import time, torch; t0 = time.perf_counter(); import tc_runtime as tc\n"
        "x = torch.rand(1024, device='cuda'); torch.cuda.synchronize(); t1 = time.perf_counter()\n"
        "k = tc.kernel(open('tools/bench_launch.py').read().split('ADD_SRC = \"\"\"')[1]"
        ".split('\"\"\"')[0], device='cuda', defines={'BLOCK': 1024})\n"
        "p = x.data_ptr(); k(p, p, p, 1024, grid=(1,)); torch.cuda.synchronize()\n"
        "import sys; print((time.perf_counter() - t1) * 1000, 'tc_nvptx' in sys.modules)\n")
    for attempt in range(2):  # the first run fills the cache
        proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                              text=True, timeout=300)
    if proc.returncode != 0:
        r.check("cached kernel in a new process", False, proc.stderr[-300:])
        return
    ms_text, compiled = proc.stdout.split()[-2:]
    r.number("new process: cached kernel ready and launched (ms)", f"{float(ms_text):.1f}")
    r.check("cached kernel in a new process under 50 ms (issue 8), compiler not loaded",
            float(ms_text) < 50 and compiled == "False", f"{float(ms_text):.1f} ms")


def softmax_bench(r: Report) -> None:
    """Issue 8's softmax points (tools/bench_softmax.py): tc against torch and Triton, three dtypes."""
    out = (OUT if OUT is not None else ROOT / "build") / "bench_softmax.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "bench_softmax.py"), "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    r.say((proc.stdout + proc.stderr)[-5000:])
    r.check("softmax results equal torch's (all dtypes and N)", proc.returncode == 0, f"exit {proc.returncode}")
    if not out.is_file():
        return
    import json as _json

    for row in _json.loads(out.read_text())["rows"]:
        _ratio_row(r, f"softmax {row['dtype']} {row['M']}x{row['N']}", row)


def _ratio_row(r: Report, name: str, row: dict[str, Any]) -> None:
    """One benchmark row (GB/s per provider) as tc's figure and its ratios to torch and Triton."""
    tc_, torch_, triton_ = row.get("tc"), row.get("torch"), row.get("triton")
    if tc_ and torch_:
        extra = f", {tc_ / triton_:.2f}x Triton" if triton_ else ""
        r.number(name, f"{tc_:.0f} GB/s = {tc_ / torch_:.2f}x torch{extra}")


def memory_bench(r: Report) -> None:
    """Issue 8's other memory-bound kernels (tools/bench_memory.py): softmax backward, layer_norm,
    cross_entropy, transpose against torch and Triton peers; compile and cache times."""
    out = (OUT if OUT is not None else ROOT / "build") / "bench_memory.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "bench_memory.py"), "--json",
                           str(out)], cwd=ROOT, capture_output=True, text=True, timeout=900)
    r.say((proc.stdout + proc.stderr)[-7000:])
    r.check("memory-bound kernels: results equal torch's, compile < 1 s, cache < 50 ms",
            proc.returncode == 0, f"exit {proc.returncode}")
    if not out.is_file():
        return
    import json as _json

    for row in _json.loads(out.read_text())["rows"]:
        if "cold ms" in row:
            r.number(row["op"], f"cold {row['cold ms']:.0f} ms, cached {row['cached ms']:.1f} ms")
            continue
        _ratio_row(r, f"{row['op']} {row['dtype']} {row['M']}x{row['N']}", row)


def tuned_choices(stderr: str) -> list[str]:
    """The auto-tuner's "chose" lines (TC_PRINT_AUTOTUNING) shortened to the kernel, its element
    type and operand variants, the key and the tile (MBxNBxKB, else the other defines):
    `matmul half a ^b M=4096, N=4096, K=4096: 128x256x64/8/3 {'persistent': True, ...}`."""
    out = []
    for line in stderr.splitlines():
        m = re.match(r"tc autotune: kernel '(\w+)' \((.*)\): chose config\(defines=\{(.*?)\}, "
                     r"num_warps=(\d+), num_stages=(\d+)(?:, options=(\{.*?\}))?\)", line)
        if m is None:
            continue
        name, key, defines, warps, stages, options = m.groups()
        values = dict(re.findall(r"'(\w+)': '?([^',]*)'?", defines))
        which = [values.pop(d) for d in ("TYPE", "USE_A", "USE_B") if d in values]
        if all(d in values for d in ("MB", "NB", "KB")):
            tile = "x".join(values[d] for d in ("MB", "NB", "KB"))
        else:
            tile = " ".join(f"{k}={v}" for k, v in values.items() if k != "ACC")
        out.append(f"{' '.join([name, *which])} {key}: {tile}/{warps}/{stages}" + (f" {options}" if options else ""))
    return out


def matmul_bench(r: Report) -> None:
    """Issue 9: the spec's tutorial matmul against cuBLAS and Triton (tools/bench_matmul.py:
    squares from 2048 and the issue's other shapes), and tc_torch.matmul's backward products and
    tf32 (tools/bench_matmul_backward.py)."""
    tools = ROOT / "tools"
    shapes = "8192x8192x1024,4096x14336x4096,1024x4096x14336"
    proc = subprocess.run([sys.executable, str(tools / "bench_matmul.py"), "--sizes", "2048,4096,8192",
                           "--shapes", shapes, "--rounds", "5"], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)
    r.say((proc.stdout + proc.stderr)[-5000:])
    r.check("tutorial matmul: every configuration's result equals torch's", proc.returncode == 0
            and "WRONG" not in proc.stdout, f"exit {proc.returncode}")
    rounds = False  # (past the line before bench_matmul's table of interleaved rounds: its INTERLEAVED)
    for line in proc.stdout.splitlines():
        rounds = rounds or line.startswith("interleaved rounds")
        cells = [c.strip() for c in line.strip("|").split("|")]
        if not (line.startswith("| ") and len(cells) > 4 and cells[0][:1].isdigit()):
            continue
        if rounds:
            r.number(f"matmul fp16 {cells[0]}, interleaved", f"tc {cells[4]} TFLOPS ({cells[3]}), cuBLAS "
                     f"{cells[1]}, Triton {cells[2]}: tc / cuBLAS {cells[5]}, tc / Triton {cells[6]}")
        else:
            r.number(f"matmul fp16 {cells[0]}, single shots", f"tc best {cells[-2]} TFLOPS, cuBLAS {cells[1]}, "
                                                              f"Triton {cells[2]}, tc / cuBLAS {cells[-1]}")
    backward_products(r, "4096x4096x4096,8192x8192x8192", "bench_matmul_backward", 5)


def backward_products(r: Report, shapes: str, label: str, rounds: int, extra: tuple[str, ...] = ()) -> None:
    """tools/bench_matmul_backward.py at `shapes` (and `extra` arguments): every product's check
    and its TFLOPS and ratios in the table (the JSON rows kept in OUT as `label`.json)."""
    out = (OUT if OUT is not None else ROOT / "build") / f"{label}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "bench_matmul_backward.py"), "--shapes", shapes,
                           "--rounds", str(rounds), "--json", str(out), *extra], cwd=ROOT,
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, "TC_PRINT_AUTOTUNING": "1"})
    # the auto-tuner's choices go to the log (a reading far from the others is then explained)
    r.say("\n".join(tuned_choices(proc.stderr)))
    r.say((proc.stdout + "\n".join(ln for ln in proc.stderr.splitlines()
                                    if not ln.startswith("tc autotune:")))[-5000:])
    r.check(f"tc_torch.matmul products at {shapes} equal torch's", proc.returncode == 0,
            f"exit {proc.returncode}")
    if out.is_file():
        import json as _json

        for row in _json.loads(out.read_text())["rows"]:
            ratios = ", ".join(f"x {p} {row['tc'] / row[p]:.2f}" for p in ("torch", "triton", "tc unpadded", "tc stream-K")
                               if isinstance(row.get(p), float) and isinstance(row.get("tc"), float))
            q = row.get("tc_torch_quartiles")
            if q:  # (tc over torch round by round: lower quartile - upper quartile)
                ratios += f" (per round {q[0]:.3f}-{q[2]:.3f})"
            r.number(f"matmul {row['dtype']} {row['shape']} {row['op']}",
                     f"tc {row.get('tc', 0):.1f} TFLOPS, {ratios}")


#: Squares that are not multiples of 16: rows 8 modulo 16 elements apart (L2 sectors split),
#: 4 modulo 8 (copied into padded rows) and odd, a wave past a multiple of the tiles and not.
RAGGED_SQUARES = "2056,2100,2500,3000,3001,4104,4100,5000,7000"


def fuzz(r: Report) -> None:
    """Random kernels on the GPU against the interpreter (tools/fuzz_kernels.py), seeds beyond
    the 300 of the pytest section."""
    workers = os.environ.get("TC_GPU_CHECK_WORKERS", "8")
    cmd = [sys.executable, str(ROOT / "tools" / "fuzz_kernels.py"), "300:1300", "--workers", workers]
    if OUT is not None:
        cmd += ["--keep", str(OUT / "fuzz")]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1200)
    text = proc.stdout + proc.stderr
    r.say(text[-6000:])
    total = re.search(r"^all\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)", text, re.M)
    detail = (f"{total[1]} ok, {total[2]} declined, {total[3]} crashed, {total[4]} mismatched" if total
              else "(no summary)")
    r.check("fuzz: random kernels vs interpreter", proc.returncode == 0, detail)


def matmul_ragged(r: Report) -> None:
    """tc_torch.matmul at squares whose leading dimensions are 8 mod 16 (4104: 16-byte rows, the
    divisible_by_8 specialization), 4 mod 8 (4100) and odd (4095), float16 and tf32, against torch
    and against itself without padding the rows that are not 16-byte aligned ('tc unpadded');
    then fp16 C = A B at RAGGED_SQUARES against cuBLAS and Triton: what shapes that are not
    multiples of 16 cost (about 6 minutes: every product tunes anew)."""
    backward_products(r, "4104x4104x4104,4100x4100x4100,4095x4095x4095", "bench_matmul_ragged", 3,
                      ("--unpadded", "--dtypes", "float16,tf32"))
    matmul_sweep(r, RAGGED_SQUARES, 3)


def matmul_padded(r: Report) -> None:
    """Products whose operands are copied into padded rows first (2100^3, 2500^3, 4100^3): host
    and GPU time of the copies by tc's pad_rows kernel and by torch's copy_, and of the whole
    product against torch.matmul (tools/bench_matmul_padded.py; each size tunes anew)."""
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "bench_matmul_padded.py")], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    r.say((proc.stdout + proc.stderr)[-6000:])
    r.check("matmul padded: copies bit for bit, products equal torch's", proc.returncode == 0,
            f"exit {proc.returncode}")
    for line in proc.stdout.splitlines():
        if line.startswith("SUMMARY: "):
            r.number("matmul padded", line.split(": ", 1)[1])


def matmul_sweep(r: Report, sizes: str = "2048:8192:256", rounds: int = 5) -> None:
    """Issue 9's "at least Triton at every square from 2048 up": tc_torch.matmul against Triton's
    tutorial matmul and cuBLAS at `sizes` (2048..8192 step 256) in interleaved rounds
    (tools/bench_matmul_sweep.py)."""
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "bench_matmul_sweep.py"), "--sizes", sizes,
                           "--rounds", str(rounds)], cwd=ROOT, capture_output=True, text=True, timeout=900)
    r.say((proc.stdout + proc.stderr)[-6000:])
    r.check(f"matmul sweep {sizes}: tc_torch.matmul and Triton equal torch's", proc.returncode == 0,
            f"exit {proc.returncode}")
    for line in proc.stdout.splitlines():
        if line.startswith("SUMMARY: "):
            r.number(f"matmul fp16 sweep {sizes}, interleaved", line.split(": ", 1)[1])


def matmul_pooled(r: Report) -> None:
    """Issue 9's 4096^3 products, where one run's ratio moves 2-3% between processes with the same
    kernels: tc_torch.matmul over torch in every round of several fresh processes, each tuning
    anew (tools/bench_matmul_pooled.py; TC_POOLED_RUNS and TC_POOLED_SHAPES set its runs and
    shapes). Runs only when named: 3 runs took 3.7 minutes on an H100 (2026-11-26, the kernels
    compiled in the first)."""
    runs = os.environ.get("TC_POOLED_RUNS", "3")
    shapes = os.environ.get("TC_POOLED_SHAPES", "4096x4096x4096")
    out = (OUT if OUT is not None else ROOT / "build") / "bench_matmul_pooled.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "bench_matmul_pooled.py"), "--runs", runs,
                           "--rounds", "9", "--shapes", shapes, "--timeout", "300", "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=1800)
    r.say((proc.stdout + proc.stderr)[-5000:])
    r.check("matmul pooled runs: tc_torch.matmul equals torch in every run", proc.returncode == 0
            and "left out" not in proc.stderr, f"exit {proc.returncode}")
    if out.is_file():
        import json as _json

        import bench_matmul_pooled as pooled_tool  # (tools/ is on sys.path)

        for row in _json.loads(out.read_text())["pooled"]:
            q = row.get("quartiles")
            if q:
                r.number(f"matmul {row['dtype']} {row['shape']} {row['op']}, pooled",
                         f"tc / torch {q[1]:.3f} ({q[0]:.3f}-{q[2]:.3f}) over {row['rounds']} rounds; "
                         f"{row['runs_at_least_1']} of {row['runs']} runs at least 1.0; tuner chose "
                         f"{pooled_tool.choice_counts(row.get('choices') or [])}")


def tf32_bench(r: Report) -> None:
    """Issue 9's float32 products on tf32 tensor cores (tools/tf32_check.py): every configuration
    checked in the four operand layouts at odd sizes, then 4096^3 in the three products of training
    (A B, A^T B, A B^T) in interleaved rounds with cuBLAS (allow_tf32); then tc_torch.matmul's
    plans for A^T B (tools/bench_tf32_plans.py; TC_TF32_PLAN_SHAPES sets its shapes)."""
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "tf32_check.py"), "--sizes", "4096",
                           "--rounds", "5", "--timed", "nn,tn,nt"], cwd=ROOT, capture_output=True,
                          text=True, timeout=900)
    r.say((proc.stdout + proc.stderr)[-5000:])
    r.check("tf32 products equal a float64 product in every layout and configuration", proc.returncode == 0,
            f"exit {proc.returncode}")
    for line in proc.stdout.splitlines():
        if "interleaved rounds:" in line:
            head, _, rest = line.partition(": medians of")
            r.number(f"tf32 {head}", rest.split("rounds: ", 1)[-1])
    shapes = os.environ.get("TC_TF32_PLAN_SHAPES", "1024x1024x1024,2048x2048x2048,4096x4096x4096,"
                                                     "8192x8192x8192")
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "bench_tf32_plans.py"), "--shapes",
                           shapes], cwd=ROOT, capture_output=True, text=True, timeout=900)
    r.say((proc.stdout + proc.stderr)[-5000:])
    r.check("tf32 A^T B equals a float64 product with and without an operand copied first",
            proc.returncode == 0, f"exit {proc.returncode}")
    table = proc.stdout.split("\nplans (", 1)[-1]  # (the summary: each shape's line once)
    for line in table.splitlines():
        if " A^T B: torch " in line and line[:1].isdigit():
            head, _, rest = line.partition(": ")
            r.number(f"tf32 plans {head}", rest)


#: tools/bench_power.py's cases in gpu_check: the issue's squares where the ratios sit near 1.0x.
POWER_CASES = ("fp16:4096:128,256,64,8,3,p,s;bf16:4096:128,256,64,8,3,p,s;tf32:8192:256,128,32,8,4/256,128,32,8,4,p;"
               "tf32dA:8192:128,256,32,8,3,p")


def power_bench(r: Report) -> None:
    """Sustained matmuls (tools/bench_power.py): each provider alone for seconds, with the SM clock
    and board power nvidia-smi reads meanwhile (at the 700 W cap a kernel's energy per FLOP sets
    its clock). TC_POWER_CASES replaces the cases."""
    cases = os.environ.get("TC_POWER_CASES", POWER_CASES)
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "bench_power.py"), cases, "--rounds", "1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    r.say((proc.stdout + proc.stderr)[-5000:])
    r.check("sustained matmuls ran and were checked against a float64 product",
            proc.returncode == 0 and "WRONG" not in proc.stdout, f"exit {proc.returncode}")
    for line in proc.stdout.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 7 and cells[1][:1].isdigit():
            r.number(f"sustained {cells[0]}", f"{cells[1]} TFLOPS at {cells[2]} MHz, {cells[3]} W")


#: tools/ncu_cycles.py's cases for the `matmul cycles` section (TC_CYCLES_CASES replaces them,
#: separated by ';').
CYCLES_CASES = ("--size 4096 --stages 3,4 --overlap;--size 8192 --stages 3,4 --overlap;"
                "--dtype bf16 --size 4096 --stages 4 --overlap;"
                "--kernel tf32nt --size 4096 --stages 3,4;--kernel torchnn --size 4096 --stages 3,4 --overlap")
#: One kernel's line of ncu_cycles' table: its name and median cycles.
CYCLES_LINE = re.compile(r"^\s*(.+?): median ([\d,]+) \(")


def cycles_vs_cublas(output: str) -> list[tuple[str, int, float]]:
    """(kernel, median cycles, cuBLAS's median / the kernel's: its speed per cycle against
    cuBLAS's) for every kernel of an ncu_cycles table but cuBLAS; [] without a cuBLAS line."""
    medians = {m.group(1): int(m.group(2).replace(",", "")) for line in output.splitlines()
               if (m := CYCLES_LINE.match(line))}
    cublas = medians.pop("cuBLAS", None)
    if not cublas:
        return []
    return [(name, cycles, cublas / cycles) for name, cycles in medians.items()]


def cycles_bench(r: Report) -> None:
    """Cycles per launch under Nsight Compute (tools/ncu_cycles.py) against cuBLAS in the same
    process: what a kernel does per cycle, which the clock under the 700 W cap does not move (it
    moves interleaved wall time 1-3%). Skipped where `ncu` is not on the PATH."""
    if shutil.which("ncu") is None:
        r.say("ncu is not on the PATH: skipped")
        return
    for case in os.environ.get("TC_CYCLES_CASES", CYCLES_CASES).split(";"):
        proc = subprocess.run([sys.executable, str(ROOT / "tools" / "ncu_cycles.py"), *case.split(), "--launches", "5"],
                              cwd=ROOT, capture_output=True, text=True, timeout=600)
        r.say(f"ncu_cycles {case}\n" + (proc.stdout + proc.stderr)[-3000:])
        rows = cycles_vs_cublas(proc.stdout)
        r.check(f"cycles {case}", proc.returncode == 0 and bool(rows), f"exit {proc.returncode}")
        label = " ".join(w for w in case.split() if not w.startswith("--"))
        for name, cycles, speed in rows:
            r.number(f"cycles {label} {name}", f"{cycles:,} ({speed:.3f}x cuBLAS's speed per cycle)")


def sweeps(r: Report) -> None:
    """The spec's sweeps (tools/bench_sweeps.py): tc against torch and Triton, plots and tables
    into the logs archive. TC_SWEEPS_ARGS passes arguments (default: all four sweeps, --quick)."""
    target = (OUT if OUT is not None else ROOT / "build") / "sweeps"
    target.mkdir(parents=True, exist_ok=True)
    extra = os.environ.get("TC_SWEEPS_ARGS", "--quick").split()
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "bench_sweeps.py"), *extra],
                          cwd=ROOT, capture_output=True, text=True, timeout=1500,
                          env=dict(os.environ, OUT=str(target)))
    r.say((proc.stdout + proc.stderr)[-4000:])
    r.check("benchmark sweeps (add, softmax, matmul, transpose)", proc.returncode == 0,
            f"exit {proc.returncode}")
    summary = target / "summary.md"
    if summary.is_file():
        for line in summary.read_text().splitlines()[2:]:
            cells = [c.strip() for c in line.strip("|").split("|")]
            if len(cells) >= 6:
                r.number(f"sweep {cells[0]} {cells[1]}", f"median {cells[2]}, ratio to torch "
                                                          f"{cells[5]}")


def gpu_name() -> str:
    try:
        import torch

        return str(torch.cuda.get_device_name(0))
    except Exception:
        try:
            from tc_runtime import driver

            return driver.get_device(0).name
        except Exception as exc:
            return f"none ({exc})"


def table(r: Report) -> str:
    lines = [
        f"### tc GPU check, {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}",
        "",
        f"GPU: {gpu_name()}; commit: {git_commit()}; python {sys.version.split()[0]}",
        "",
        "| check | result | detail |",
        "|---|---|---|",
    ]
    lines += [f"| {n} | {s} | {d.replace('|', '/')} |" for n, s, d in r.checks]
    if r.numbers:
        lines += ["", "| measurement | value |", "|---|---|"]
        lines += [f"| {n} | {v} |" for n, v in r.numbers]
    return "\n".join(lines)


#: Sections that run only when named on the command line (gpu_check.py "matmul pooled").
EXPLICIT_SECTIONS: list[tuple[str, Callable[[Report], None]]] = [("fuzz", fuzz),
                                                                   ("matmul pooled", matmul_pooled),
                                                                   ("matmul ragged", matmul_ragged),
                                                                   ("matmul padded", matmul_padded)]


def main() -> int:
    if RESULTS is not None and OUT is not None:
        RESULTS.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(OUT, ignore_errors=True)
        OUT.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TC_CACHE_DIR", str(Path("/tmp") / "tc-gpu-check-cache"))
    r = Report()
    try:
        import torch

        has_gpu = bool(torch.cuda.is_available())
    except Exception as exc:
        r.say(f"torch unavailable: {exc}")
        has_gpu = False
    r.check("CUDA GPU visible to torch", has_gpu, gpu_name())
    sections: list[tuple[str, Callable[[Report], None]]] = [("pytest -m gpu", run_pytest)]
    if has_gpu:
        sections += [
            ("vector add exactness", vector_add_exact),
            ("vector add bandwidth", bandwidth),
            ("launch overhead", launch_overhead),
            ("runtime: launch vs Triton and CuPy, cached kernels", runtime_launch),
            ("softmax benchmark", softmax_bench),
            ("memory-bound kernels benchmark", memory_bench),
            ("matmul benchmark", matmul_bench),
            ("matmul sweep", matmul_sweep),
            ("tf32 benchmark", tf32_bench),
            ("power: sustained matmuls", power_bench),
            ("matmul cycles (ncu)", cycles_bench),
            ("benchmark sweeps", sweeps),
            ("tutorials", tutorials),
        ]
        # (`gpu_check.py compute-sanitizer` runs the four; one device call may not hold them all)
        sections += [(f"compute-sanitizer {part}", functools.partial(sanitize, part=part)) for part in SANITIZER_RUNS]
    wanted = [a.lower() for a in sys.argv[1:]]
    if has_gpu:  # (only when named: longer than the device tool's calls allow beside the rest)
        sections += [(name, fn) for name, fn in EXPLICIT_SECTIONS if any(w in name.lower() for w in wanted)]
    for name, fn in sections:
        if not wanted or any(w in name.lower() for w in wanted):
            r.section(name, fn)
    text = table(r)
    r.say("\n" + text)
    if RESULTS is not None and OUT is not None:
        (OUT / "gpu_check.log").write_text(r.log.getvalue())
        (RESULTS / "gpu_check.log").write_text(r.log.getvalue())
        (RESULTS / "gpu_check.md").write_text(text + "\n")
        with tarfile.open(RESULTS / "gpu_check_logs.tar.gz", "w:gz") as tar:
            tar.add(OUT, arcname="gpu_check_logs")
    return 0 if all(s == "PASS" for _, s, _ in r.checks) else 1


if __name__ == "__main__":
    sys.exit(main())
