"""Issue 8's memory-bound kernels against their peers, in one run on one GPU:

- softmax backward, layer_norm forward and backward, cross_entropy forward and backward: tc_torch
  against torch (its ATen kernels) and a Triton 3.x implementation of the same algorithm
  (tools/triton_rowops.py), float32, float16 and bfloat16;
- transpose: fp16 16384x16384 and fp32 8192x8192, tc_torch.transpose against Triton 3.x
  (tools/triton_peers.py) and torch's x.t().contiguous();
- compile time: each of tc_torch's kernels from source to a loaded module with a cold disk cache,
  and the same in a new process from the disk cache.

    PYTHONPATH=<packages/*/src> python3 tools/bench_memory.py [--quick] [--json OUT.json]
        [--only rows,transpose,compile] [--ops 'layer_norm backward,...'] [--ns 1024,...]

Every provider's result is checked against a float32 torch reference before it is timed (a wrong
result is reported and not timed). GB/s counts the fewest bytes the operation must move (each
input read once, each output written once), the same count for every provider, so the ratios are
ratios of time. Prints a markdown table last.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

Fn = Callable[[], Any]
#: Where the inputs live: "cuda", or "cpu" (--device cpu) for a check of the results on the
#: interpreter at small sizes, without timings.
DEVICE = "cuda"


def _tol(dtype: Any) -> float:
    import torch

    return 2e-5 if dtype == torch.float32 else 2e-2


def _close(got: Any, ref: Any, dtype: Any) -> float:
    """Largest error relative to the reference's largest magnitude (nan if any is not finite)."""
    import torch

    got = got.float()
    ref = ref.float()
    if not bool(torch.isfinite(got).all()):
        return float("nan")
    return float((got - ref).abs().max() / ref.abs().max().clamp_min(1e-30))


def row_cases(m: int, ns: list[int], dtypes: list[str]) -> Iterator[dict[str, Any]]:
    """The row operations' cases, one (dtype, N) at a time so that only one set of inputs lives."""
    import torch

    for dname in dtypes:
        for n in ns:
            yield from _row_cases_at(m, n, dname, getattr(torch, dname))


def _row_cases_at(m: int, n: int, dname: str, dtype: Any) -> list[dict[str, Any]]:
    """Each case: op, dtype, M, N, bytes, providers (name -> fn returning the result tensors) and
    the float32 reference tensors."""
    import torch
    import torch.nn.functional as F

    from tc_torch.ops.cross_entropy import cross_entropy_backward, cross_entropy_forward
    from tc_torch.ops.layer_norm import layer_norm_backward, layer_norm_forward
    from tc_torch.ops.softmax import softmax_backward

    tr = _triton_rowops()
    es = torch.tensor([], dtype=dtype).element_size()
    x = torch.randn(m, n, device=DEVICE, dtype=dtype)
    dy = torch.randn(m, n, device=DEVICE, dtype=dtype)
    w = torch.rand(n, device=DEVICE, dtype=dtype) + 0.5
    b = torch.randn(n, device=DEVICE, dtype=dtype)
    t = torch.randint(0, n, (m,), device=DEVICE, dtype=torch.int64)
    dloss = torch.rand(m, device=DEVICE, dtype=torch.float32)
    eps = 1e-5
    y = torch.softmax(x.float(), -1).to(dtype)
    _, mean, rstd = layer_norm_forward(x, n, w, b, eps)
    _, lse = cross_entropy_forward(x, t, -100)
    yref, mref, rref = torch.native_layer_norm(x.float(), [n], w.float(), b.float(), eps)
    _, tmean, trstd = torch.native_layer_norm(x, [n], w, b, eps)  # torch's own saved values
    xg = x.detach().requires_grad_()
    loss_graph = F.cross_entropy(xg, t, reduction="none")
    dl_t = dloss.to(dtype)

    def case(op: str, nbytes: int, ref: list[Any], providers: dict[str, Fn]) -> dict[str, Any]:
        return dict(op=op, dtype=dname, M=m, N=n, bytes=nbytes * es, providers=providers,
                    ref=ref)

    yf, dyf = y.float(), dy.float()
    cases = [
        case("softmax backward", 3 * m * n, [yf * (dyf - (yf * dyf).sum(-1, keepdim=True))], {
            "tc": lambda: [softmax_backward(dy, y)],
            "torch": lambda: [torch._softmax_backward_data(dy, y, -1, y.dtype)],
            "triton": lambda: [tr.softmax_backward(dy, y)]}),
        case("layer_norm forward", 2 * m * n, [yref], {
            "tc": lambda: [layer_norm_forward(x, n, w, b, eps)[0]],
            "torch": lambda: [torch.native_layer_norm(x, [n], w, b, eps)[0]],
            "triton": lambda: [tr.layer_norm_forward(x, w, b, eps)[0]]}),
        case("layer_norm backward", 3 * m * n, list(torch.ops.aten.native_layer_norm_backward(
                dyf, x.float(), [n], mref, rref, w.float(), b.float(), [True, True, True])), {
            "tc": lambda: list(layer_norm_backward(dy, x, n, w, True, mean, rstd, True, True,
                                                   True)),
            "torch": lambda: list(torch.ops.aten.native_layer_norm_backward(
                dy, x, [n], tmean, trstd, w, b, [True, True, True])),
            "triton": lambda: list(tr.layer_norm_backward(dy, x, w, mean, rstd))}),
        case("cross_entropy forward", m * n, [F.cross_entropy(x.float(), t, reduction="none")], {
            "tc": lambda: [cross_entropy_forward(x, t, -100)[0]],
            "torch": lambda: [F.cross_entropy(x, t, reduction="none")],
            "triton": lambda: [tr.cross_entropy_forward(x, t)[0]]}),
        case("cross_entropy backward", 2 * m * n,
             [(torch.softmax(x.float(), -1) - F.one_hot(t, n).float()) * dloss[:, None]], {
            "tc": lambda: [cross_entropy_backward(dloss, x, t, lse, -100)],
            "torch": lambda: list(torch.autograd.grad(loss_graph, xg, dl_t, retain_graph=True)),
            "triton": lambda: [tr.cross_entropy_backward(dloss, x, t, lse)]}),
    ]
    if tr is None:
        for c in cases:
            del c["providers"]["triton"]
    return cases


@functools.cache
def _triton_rowops() -> Any:
    if DEVICE == "cpu":
        return None
    try:
        import triton_rowops

        return triton_rowops
    except Exception as exc:  # no triton here: tc and torch only
        print(f"triton peers unavailable: {type(exc).__name__}: {exc}")
        return None


def transpose_cases(sizes: dict[str, int]) -> Iterator[dict[str, Any]]:
    import torch

    import tc_torch

    peer: Callable[[Any], Any] | None = None
    if DEVICE == "cuda":
        try:
            from triton_peers import triton_transpose

            peer = triton_transpose
        except Exception as exc:
            print(f"triton transpose unavailable: {type(exc).__name__}: {exc}")
    for dname, size in sizes.items():
        dtype = getattr(torch, dname)
        x = torch.randn(size, size, device=DEVICE, dtype=dtype)
        prov: dict[str, Fn] = {"tc": lambda: [tc_torch.transpose(x)],
                               "torch": lambda: [x.t().contiguous()]}
        if peer is not None:
            prov["triton"] = lambda: [peer(x)]
        yield dict(op="transpose", dtype=dname, M=size, N=size,
                   bytes=2 * x.numel() * x.element_size(), providers=prov, ref=[x.t()])


def run_cases(cases: Iterable[dict[str, Any]], rows: list[dict[str, Any]]) -> bool:
    import torch

    from bench_rounds import interleaved

    ok = True
    for case in cases:
        dtype = getattr(torch, case["dtype"])
        row: dict[str, Any] = {k: case[k] for k in ("op", "dtype", "M", "N")}
        timed: dict[str, Fn] = {}
        for name, fn in case["providers"].items():
            got = fn()
            errs = [_close(g, r, dtype) for g, r in zip(got, case["ref"], strict=True)]
            if not all(e <= _tol(dtype) for e in errs):
                print(f"{name} {case['op']} {case['dtype']} N={case['N']}: WRONG "
                      f"(relative errors {[f'{e:.3g}' for e in errs]})", flush=True)
                row[name] = None
                ok = ok and name != "tc"
                continue
            if DEVICE == "cpu":
                row[name] = 0.0
                continue
            timed[name] = fn
        for name, ms in (interleaved(timed) if timed else {}).items():
            row[name] = case["bytes"] / (ms * 1e-3) / 1e9
        rows.append(row)
        print(row, flush=True)
        case["providers"].clear()
        if DEVICE == "cuda":
            torch.cuda.empty_cache()
    return ok


#: tc_torch's kernels for the compile-time figures: (file, kernel, defines, num_warps).
COMPILE_KERNELS: list[tuple[str, str, dict[str, object], int]] = [
    ("softmax", "softmax", {"TYPE": "float", "ACC": "float", "BLOCK": 4096}, 16),
    ("softmax", "softmax_looped", {"TYPE": "half", "ACC": "float", "BLOCK": 4096}, 16),
    ("softmax_backward", "softmax_backward", {"TYPE": "float", "ACC": "float", "BLOCK": 4096}, 16),
    ("layer_norm", "layer_norm_forward", {"TYPE": "half", "ACC": "float", "BLOCK": 4096,
                                          "HAS_W": 1, "HAS_B": 1, "BLOCK_M": 32, "BLOCK_N": 32},
     16),
    ("layer_norm", "layer_norm_backward_dx", {"TYPE": "half", "ACC": "float", "BLOCK": 4096,
                                              "HAS_W": 1, "HAS_B": 1, "ROWS": 64, "NEED_DX": 1,
                                              "NEED_DW": 1, "NEED_DB": 1}, 16),
    ("layer_norm", "layer_norm_backward_reduce", {"TYPE": "half", "ACC": "float", "BLOCK": 4096,
                                                  "HAS_W": 1, "HAS_B": 1, "BLOCK_M": 64,
                                                  "BLOCK_N": 32, "NEED_DW": 1, "NEED_DB": 1}, 4),
    ("cross_entropy", "cross_entropy_forward", {"TYPE": "bf16", "ACC": "float", "BLOCK": 4096,
                                                "IGNORE": "(-100)"}, 16),
    ("cross_entropy", "cross_entropy_backward", {"TYPE": "bf16", "ACC": "float", "BLOCK": 4096,
                                                 "IGNORE": "(-100)"}, 16),
    ("transpose", "transpose", {"TYPE": "half", "TM": 64, "TN": 64}, 4),
]

_COMPILE_SCRIPT = """
import json, sys, time
t0 = time.perf_counter()
import tc_runtime as tc
from tc_torch.library import source
import torch
torch.cuda.init()
kernels = json.loads(sys.argv[1])
out = {}
# warm the process (the driver, and in the cold phase the compiler: imports, PLY tables, LLVM)
# on an unrelated kernel, so that each figure is the kernel's own
k = tc.kernel("__global__ void warm(float* x) { *x = 1; }", device="cuda", defines={})
k.info
for file, name, defines, warps in kernels:
    t = time.perf_counter()
    k = tc.kernel(source(file), device="cuda", defines=defines, num_warps=warps, name=name)
    k.info  # compiled (or read from the disk cache) and loaded
    out[name] = (time.perf_counter() - t) * 1000
out["compiler loaded"] = "tc_nvptx" in sys.modules
print(json.dumps(out))
"""


def compile_times(rows: list[dict[str, Any]]) -> bool:
    """Cold (empty cache dir, warm compiler) and cached (new process) times per kernel, in ms."""
    ok = True
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TC_CACHE_DIR=cache)
        env.pop("TC_ALWAYS_COMPILE", None)
        results = {}
        for phase in ("cold", "cached"):
            proc = subprocess.run([sys.executable, "-c", _COMPILE_SCRIPT,
                                   json.dumps(COMPILE_KERNELS), phase], env=env,
                                  capture_output=True, text=True, timeout=600)
            if proc.returncode != 0:
                print(proc.stdout + proc.stderr)
                return False
            results[phase] = json.loads(proc.stdout.strip().splitlines()[-1])
        for _, name, _, _ in COMPILE_KERNELS:
            cold, cached = results["cold"][name], results["cached"][name]
            rows.append({"op": f"compile {name}", "cold ms": cold, "cached ms": cached})
            ok = ok and cold < 1000 and cached < 50
            print(f"compile {name}: cold {cold:.0f} ms, from the disk cache {cached:.1f} ms",
                  flush=True)
        if results["cached"]["compiler loaded"]:
            print("the cached process loaded the compiler (tc_nvptx)")
    return ok


def table(rows: list[dict[str, Any]]) -> str:
    names = ["tc", "torch", "triton"]
    lines = ["| op | dtype | M x N | tc GB/s | torch GB/s | triton GB/s | tc/torch | tc/triton |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "cold ms" in r:
            continue
        cells = [f"{r[p]:.0f}" if r.get(p) else "-" for p in names]
        t = r.get("tc")
        rt = f"{t / r['torch']:.2f}" if t and r.get("torch") else "-"
        rr = f"{t / r['triton']:.2f}" if t and r.get("triton") else "-"
        lines.append(f"| {r['op']} | {r['dtype']} | {r['M']}x{r['N']} | " + " | ".join(cells)
                     + f" | {rt} | {rr} |")
    comp = [r for r in rows if "cold ms" in r]
    if comp:
        lines += ["", "| kernel | cold compile + load (ms) | from the disk cache, new process (ms) |",
                  "|---|---|---|"]
        lines += [f"| {r['op'][8:]} | {r['cold ms']:.0f} | {r['cached ms']:.1f} |" for r in comp]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one size, float32 and bfloat16 only")
    ap.add_argument("--m", type=int, default=16384)
    ap.add_argument("--only", default="rows,transpose,compile")
    ap.add_argument("--json", default=None)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--ops", default="", help="only the row operations whose names contain one of "
                    "these (comma-separated, e.g. 'layer_norm backward')")
    ap.add_argument("--ns", default="", help="row lengths N (comma-separated; default 1024,4096,8192)")
    args = ap.parse_args(argv)
    global DEVICE
    DEVICE = args.device
    only = set(args.only.split(","))
    ns = [4096] if args.quick else [1024, 4096, 8192]
    if args.ns:
        ns = [int(v) for v in args.ns.split(",") if v]
    wanted = [w for w in args.ops.split(",") if w]
    dtypes = ["float32", "bfloat16"] if args.quick else ["float32", "float16", "bfloat16"]
    rows: list[dict[str, Any]] = []
    ok = True
    torch.manual_seed(0)
    if "rows" in only:
        cases = (c for c in row_cases(args.m, ns, dtypes) if not wanted or any(w in c["op"] for w in wanted))
        ok = run_cases(cases, rows) and ok
    if "transpose" in only:
        sizes = {"float16": 16384, "float32": 8192} if DEVICE == "cuda" else {"float16": 96,
                                                                              "float32": 80}
        ok = run_cases(transpose_cases(sizes), rows) and ok
    if "compile" in only:
        ok = compile_times(rows) and ok
    text = table(rows)
    print("\n" + text)
    if args.json:
        Path(args.json).write_text(json.dumps({"device": DEVICE if DEVICE == "cpu" else
                                               torch.cuda.get_device_name(0),
                                               "rows": rows}, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
