"""Host time per call and GPU time of tc_torch's memory-bound ops against torch's, on a GPU.

    python tools/bench_torch_gpu_host.py [--label NAME] [--check] [--no-gpu-time]
    python tools/bench_torch_gpu_host.py --matmul 256,2048,4096
    python tools/bench_torch_gpu_host.py --autograd 256,1024,8x256

Host time: the best of 5 rounds of 200 back-to-back calls timed with time.perf_counter, without
synchronizing inside a round (the GPU runs behind), in microseconds per call. GPU time:
tc_runtime.testing.do_bench (median, ms). --check first compares each op's first call (the general
path, which chooses the kernel) with its second (the fast path) bit for bit, and both with torch,
and the autograd path's values and gradients with torch's. To compare trees, run it once per tree
with that tree's tc_torch first on PYTHONPATH. --matmul times tc_torch.matmul against torch.matmul
instead (`matmul_rows`), --autograd a training step's product (`autograd_breakdown`). Not a test:
it needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

import tc_torch
from tc_runtime.testing import do_bench

Fn = Callable[[], object]


def host_us(fn: Fn, calls: int = 200, rounds: int = 5) -> float:
    """Best over `rounds` of the host time of `calls` back-to-back calls, in us per call."""
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize()
    return best


def cases(m: int, n: int, dtype: torch.dtype) -> list[tuple[str, Fn, Fn]]:
    """(name, tc call, torch call) on m x n tensors of `dtype`."""
    torch.manual_seed(0)
    x = torch.randn(m, n, dtype=dtype, device="cuda")
    y = torch.randn(m, n, dtype=dtype, device="cuda")
    w = torch.randn(n, dtype=dtype, device="cuda")
    b = torch.randn(n, dtype=dtype, device="cuda")
    t = torch.randint(0, n, (m,), device="cuda")
    xg = x.clone().requires_grad_()

    def tc_grad() -> None:
        tc_torch.softmax(xg).backward(y)  # type: ignore[no-untyped-call]

    def torch_grad() -> None:
        torch.softmax(xg, -1).backward(y)  # type: ignore[no-untyped-call]

    return [
        ("softmax", lambda: tc_torch.softmax(x), lambda: torch.softmax(x, -1)),
        ("layer_norm w b", lambda: tc_torch.layer_norm(x, n, w, b),
         lambda: F.layer_norm(x, (n,), w, b)),
        ("cross_entropy none", lambda: tc_torch.cross_entropy(x, t, reduction="none"),
         lambda: F.cross_entropy(x, t, reduction="none")),
        ("cross_entropy mean", lambda: tc_torch.cross_entropy(x, t),
         lambda: F.cross_entropy(x, t)),
        ("add", lambda: tc_torch.add(x, y), lambda: x + y),
        ("transpose", lambda: tc_torch.transpose(x), lambda: x.t().contiguous()),
        ("softmax fwd+bwd (autograd)", tc_grad, torch_grad),
    ]


def matmul_host_us(fn: Fn, calls: int, rounds: int = 7) -> tuple[float, float]:
    """(best, median) over `rounds` of the host time of `calls` back-to-back products, in us per
    call, each result kept until the next one is made (as `c = f(a, b)` in a loop does: the
    outputs alternate between two addresses, where a discarded one would be reused at once)."""
    out = fn()
    for _ in range(5):
        out = fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            out = fn()
        times.append((time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize()
    del out
    times.sort()
    return times[0], times[len(times) // 2]


def matmul_rows(sizes: list[int]) -> None:
    """tc_torch.matmul against torch.matmul, fp16 n x n x n: host time per call and whether the
    host keeps ahead of the GPU (the GPU time of one product, do_bench); then the same for a
    forward and backward pass through autograd (three products)."""
    print(f"{'product':16s} {'tc host best/median':>20s} {'torch host best/median':>23s} "
          f"{'tc GPU':>8s} {'torch GPU':>9s}  (us per call)")
    for n in sizes:
        a = torch.randn(n, n, dtype=torch.float16, device="cuda")
        b = torch.randn(n, n, dtype=torch.float16, device="cuda")
        calls = 200 if n <= 2048 else 60
        tc_fn: Fn = lambda: tc_torch.matmul(a, b)  # noqa: E731
        torch_fn: Fn = lambda: torch.matmul(a, b)  # noqa: E731
        tc_host = matmul_host_us(tc_fn, calls)
        torch_host = matmul_host_us(torch_fn, calls)
        tc_ms = do_bench(tc_fn, warmup=10, rep=40)[0]
        torch_ms = do_bench(torch_fn, warmup=10, rep=40)[0]
        print(f"{f'{n}^3 fp16':16s} {f'{tc_host[0]:.1f} / {tc_host[1]:.1f}':>20s} "
              f"{f'{torch_host[0]:.1f} / {torch_host[1]:.1f}':>23s} {tc_ms * 1e3:8.1f} "
              f"{torch_ms * 1e3:9.1f}", flush=True)
        # forward and backward through autograd (a training step's product): both gradients
        ag, bg = a.clone().requires_grad_(), b.clone().requires_grad_()
        dc = torch.randn(n, n, dtype=torch.float16, device="cuda")

        def step(mm: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> Fn:
            def run() -> object:
                ag.grad = bg.grad = None
                mm(ag, bg).backward(dc)  # type: ignore[no-untyped-call]
                return ag.grad
            return run

        tc_step, torch_step = step(tc_torch.matmul), step(torch.matmul)
        tc_host = matmul_host_us(tc_step, max(calls // 3, 20))
        torch_host = matmul_host_us(torch_step, max(calls // 3, 20))
        tc_ms = do_bench(tc_step, warmup=10, rep=40)[0]
        torch_ms = do_bench(torch_step, warmup=10, rep=40)[0]
        print(f"{f'  fwd+bwd':16s} {f'{tc_host[0]:.1f} / {tc_host[1]:.1f}':>20s} "
              f"{f'{torch_host[0]:.1f} / {torch_host[1]:.1f}':>23s} {tc_ms * 1e3:8.1f} "
              f"{torch_ms * 1e3:9.1f}", flush=True)


def autograd_breakdown(sizes: list[str], steps: int = 200, rounds: int = 5) -> None:
    """Where a training step's product spends its host time: `c = matmul(a, b); c.backward(dc)`
    in a loop (a size "n": n x n matrices; "ZxN": a batch of Z n x n matrices times one, as
    nn.Linear's weight under a batched input), timed around the forward call and the backward() call and, for tc, inside
    tc_torch's backward function (which torch's autograd thread runs) and inside its two
    products there (`_mm`), with the calls per step that derived a launch again
    (`_fast_mm_first`) or took the general path (`matmul_out`); medians of `rounds`."""
    import threading

    from tc_torch.ops import matmul as mm

    main = threading.get_ident()
    spent = {"fn": 0.0, "mm": 0.0, "first": 0.0, "general": 0.0}
    originals: dict[str, Any] = {"backward": mm._Matmul.backward, "_mm": mm._mm,
                                 "_fast_mm_first": mm._fast_mm_first, "matmul_out": mm.matmul_out}

    def timed(ctx: Any, dc: torch.Tensor) -> Any:
        start = time.perf_counter()
        try:
            return originals["backward"](ctx, dc)
        finally:
            spent["fn"] += time.perf_counter() - start

    def timed_mm(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return originals["_mm"](*args, **kwargs)
        finally:
            if threading.get_ident() != main:
                spent["mm"] += time.perf_counter() - start

    def counted(name: str, key: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            spent[key] += 1
            return originals[name](*args, **kwargs)
        return call

    replaced: dict[str, Any] = {"_mm": timed_mm, "_fast_mm_first": counted("_fast_mm_first", "first"),
                                "matmul_out": counted("matmul_out", "general")}
    setattr(mm._Matmul, "backward", staticmethod(timed))
    for attr, value in replaced.items():
        setattr(mm, attr, value)
    try:
        print(f"{'product':16s} {'step':>7s} {'forward':>8s} {'backward()':>11s} {'tc bwd fn':>10s} "
              f"{'its _mm':>8s} {'derived':>8s} {'general':>8s}  (us or calls per step, median of "
              f"{rounds} rounds of {steps})")
        for size in sizes:
            z, _, n_text = size.rpartition("x")
            n = int(n_text)
            rows = (int(z), n) if z else (n,)
            label = f"{z}x{n}^3" if z else f"{n}^3"
            for name, mm_fn in (("tc_torch", tc_torch.matmul), ("torch", torch.matmul)):
                a = torch.randn(*rows, n, dtype=torch.float16, device="cuda", requires_grad=True)
                b = torch.randn(n, n, dtype=torch.float16, device="cuda", requires_grad=True)
                dc = torch.randn(*rows, n, dtype=torch.float16, device="cuda")
                for _ in range(20):
                    a.grad = b.grad = None
                    mm_fn(a, b).backward(dc)  # type: ignore[no-untyped-call]
                torch.cuda.synchronize()
                results = []
                for _ in range(rounds):
                    spent.update(dict.fromkeys(spent, 0.0))
                    forward = backward = 0.0
                    start = time.perf_counter()
                    for _ in range(steps):
                        a.grad = b.grad = None
                        t1 = time.perf_counter()
                        c = mm_fn(a, b)
                        t2 = time.perf_counter()
                        c.backward(dc)  # type: ignore[no-untyped-call]
                        t3 = time.perf_counter()
                        forward += t2 - t1
                        backward += t3 - t2
                    total = time.perf_counter() - start
                    torch.cuda.synchronize()
                    results.append([x / steps * 1e6 for x in (total, forward, backward, spent["fn"], spent["mm"])]
                                   + [spent["first"] / steps, spent["general"] / steps])
                row = [statistics.median(r[i] for r in results) for i in range(7)]
                if name != "tc_torch":
                    row[3:] = [float("nan")] * 4
                print(f"{f'{label} {name}':16s} {row[0]:7.1f} {row[1]:8.1f} {row[2]:11.1f} {row[3]:10.1f} "
                      f"{row[4]:8.1f} {row[5]:8.2f} {row[6]:8.2f}", flush=True)
    finally:
        setattr(mm._Matmul, "backward", staticmethod(originals["backward"]))
        for attr in replaced:
            setattr(mm, attr, originals[attr])


def check(m: int, n: int, dtype: torch.dtype) -> list[str]:
    """Mismatches between first and second calls and against torch (an empty list when none)."""
    problems: list[str] = []
    tol = {torch.float16: 2e-2, torch.float32: 1e-4}[dtype]
    for name, tc_fn, torch_fn in cases(m, n, dtype):
        if "autograd" in name:
            continue
        first, second, ref = tc_fn(), tc_fn(), torch_fn()
        assert isinstance(first, torch.Tensor) and isinstance(second, torch.Tensor)
        assert isinstance(ref, torch.Tensor)
        if not torch.equal(first, second) or first.stride() != second.stride():
            problems.append(f"{name} {dtype}: the second call differs from the first")
        if not torch.allclose(second.float(), ref.float(), rtol=tol, atol=tol):
            err = (second.float() - ref.float()).abs().max().item()
            problems.append(f"{name} {dtype}: differs from torch by {err}")
    x = torch.randn(m, n, dtype=dtype, device="cuda")
    dy = torch.randn(m, n, dtype=dtype, device="cuda")
    w = torch.randn(n, dtype=dtype, device="cuda", requires_grad=True)
    t = torch.randint(0, n, (m,), device="cuda")
    plain = (tc_torch.softmax(x), tc_torch.layer_norm(x, n, w.detach()),
             tc_torch.cross_entropy(x, t, reduction="none"))
    for i in range(2):
        xs = [x.clone().requires_grad_() for _ in range(4)]
        ws = [w.detach().clone().requires_grad_() for _ in range(2)]
        outs = [(tc_torch.softmax(xs[0]), torch.softmax(xs[1], -1)),
                (tc_torch.layer_norm(xs[2], n, ws[0]), F.layer_norm(xs[3], (n,), ws[1]))]
        for j, (got, ref) in enumerate(outs):
            if not torch.equal(got.detach(), plain[j]):
                problems.append(f"autograd {j} {dtype}: forward differs from the no-grad call")
            got.backward(dy)  # type: ignore[no-untyped-call]
            ref.backward(dy)  # type: ignore[no-untyped-call]
        pairs = [(xs[0].grad, xs[1].grad), (xs[2].grad, xs[3].grad), (ws[0].grad, ws[1].grad)]
        for j, (g, r) in enumerate(pairs):
            assert g is not None and r is not None
            if not torch.allclose(g.float(), r.float(), rtol=5 * tol, atol=5 * tol):
                err = (g.float() - r.float()).abs().max().item()
                problems.append(f"gradient {j} (call {i}) {dtype}: differs from torch by {err}")
    xc = x.clone().requires_grad_()
    xr = x.clone().requires_grad_()
    tc_torch.cross_entropy(xc, t).backward()  # type: ignore[no-untyped-call]
    F.cross_entropy(xr.float(), t).backward()  # type: ignore[no-untyped-call]
    assert xc.grad is not None and xr.grad is not None
    if not torch.allclose(xc.grad.float(), xr.grad.float(), rtol=tol, atol=tol):
        problems.append(f"cross_entropy gradient {dtype}: differs from torch")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--label", default="")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--no-gpu-time", action="store_true")
    parser.add_argument("--matmul", default="",
                        help="comma-separated n: time n^3 fp16 products instead (e.g. 256,2048,4096)")
    parser.add_argument("--autograd", default="",
                        help="comma-separated n or ZxN: where a forward and backward pass of n^3 (or a batch of "
                             "Z n x n matrices times one) spends its host time")
    opts = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA GPU")
        return 1
    print(f"[{opts.label}] tc_torch from {tc_torch.__file__}; {torch.cuda.get_device_name()}")
    if opts.matmul:
        matmul_rows([int(n) for n in opts.matmul.split(",")])
        return 0
    if opts.autograd:
        autograd_breakdown(opts.autograd.split(","))
        return 0
    if opts.check:
        problems = check(4096, 1024, torch.float16) + check(512, 1000, torch.float32)
        print("checks:", "all passed" if not problems else "\n  ".join(["FAILED"] + problems))
    shapes = [(16384, 1024, torch.float16, True), (16384, 1024, torch.float32, True),
              (64, 1024, torch.float16, False)]
    print(f"{'op':28s} {'shape':22s} {'tc host':>9s} {'torch host':>10s} {'tc GPU':>8s} "
          f"{'torch GPU':>9s}  (us per call)")
    for m, n, dtype, gpu_time in shapes:
        for name, tc_fn, torch_fn in cases(m, n, dtype):
            if name == "transpose" and dtype == torch.float32:
                continue  # (each new shape and dtype is auto-tuned: time)
            row = f"{name:28s} {f'{m}x{n} {str(dtype)[6:]}':22s} {host_us(tc_fn):9.1f} " \
                  f"{host_us(torch_fn):10.1f}"
            if gpu_time and not opts.no_gpu_time:
                tc_ms = do_bench(tc_fn, warmup=10, rep=40)[0]
                torch_ms = do_bench(torch_fn, warmup=10, rep=40)[0]
                row += f" {tc_ms * 1e3:8.1f} {torch_ms * 1e3:9.1f}"
            print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
