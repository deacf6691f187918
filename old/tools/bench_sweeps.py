"""The spec's benchmark sweeps on a GPU: tc against torch and Triton 3.x in the same run.

    python tools/bench_sweeps.py [--quick] [add softmax matmul transpose ...]

Sweeps: vector add, N = 2^12 .. 2^27 (float32, GB/s); softmax, M = 4096, N = 512 .. 12544 step
256 (float32, GB/s); matmul, M = N = K = 512 .. 8192 step 256 (float16, TFLOPS); transpose,
square float32 matrices 512 .. 8192 (GB/s). Every provider is checked against torch on the first
point before it is timed. Plots (PNG) and tables (CSV) go to $OUT (or build/bench); a short table
of each sweep (median, min, max over the points of each provider's ratio to torch) is printed at
the end. --quick keeps every fourth point. Triton columns appear when triton imports.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

import tc_runtime as tc
import tc_torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

Fn = Callable[[], Any]


def _peers() -> dict[str, Any]:
    try:
        import triton_add
        import triton_peers
    except Exception as exc:  # no triton on this machine: tc and torch only
        print(f"triton peers unavailable: {type(exc).__name__}: {exc}")
        return {}
    return {"add": triton_add.triton_add, "softmax": triton_peers.triton_softmax,
            "matmul": triton_peers.triton_matmul, "transpose": triton_peers.triton_transpose}


def naive_softmax(x: torch.Tensor) -> torch.Tensor:
    z = x - x.max(dim=1)[0][:, None]
    num = torch.exp(z)
    return num / num.sum(dim=1)[:, None]


class Sweep:
    """One benchmark: x values, providers (name -> maker of fn for an x), a metric from ms."""

    def __init__(self, name: str, xlabel: str, ylabel: str, xs: list[int], x_log: bool,
                 providers: dict[str, Callable[[int], tuple[Fn, Fn]]],
                 metric: Callable[[int, float], float]) -> None:
        self.name, self.xlabel, self.ylabel, self.xs, self.x_log = name, xlabel, ylabel, xs, x_log
        self.providers, self.metric = providers, metric

    def run(self, out: Path) -> dict[str, list[float]]:
        checked: set[str] = set()

        @tc.testing.perf_report(tc.testing.Benchmark(
            x_names=["x"], x_vals=self.xs, y_name="provider", y_vals=list(self.providers),
            y_lines=list(self.providers), ylabel=self.ylabel, xlabel=self.xlabel,
            x_log=self.x_log, plot_name=self.name, args={}))
        def bench(x: int, provider: str) -> tuple[float, float, float]:
            fn, check = self.providers[provider](x)
            if provider not in checked:
                check()
                checked.add(provider)
            ms, lo, hi = tc.testing.do_bench(fn, warmup=25, rep=100)
            torch.cuda.empty_cache()
            return self.metric(x, ms), self.metric(x, hi), self.metric(x, lo)

        tables = bench.run(show_plots=False, print_data=True, save_path=str(out))
        del tables
        return _read_csv(out / f"{self.name}.csv")


def _read_csv(path: Path) -> dict[str, list[float]]:
    import csv

    if not path.exists():
        return {}
    with path.open() as f:
        rows = list(csv.reader(f))
    head, body = rows[0], rows[1:]
    return {h: [float(r[i]) for r in body if r[i] not in ("", "nan")] for i, h in enumerate(head)}


def _same(got: torch.Tensor, ref: torch.Tensor, rtol: float, atol: float, what: str) -> None:
    if not torch.allclose(got.float(), ref.float(), rtol=rtol, atol=atol):
        err = (got.float() - ref.float()).abs().max().item()
        raise AssertionError(f"{what}: wrong result (max abs error {err:.3g})")


def sweeps(quick: bool, peers: dict[str, Any]) -> dict[str, Sweep]:
    def pick(xs: list[int]) -> list[int]:
        return xs[::4] + ([xs[-1]] if quick and xs[::4][-1] != xs[-1] else []) if quick else xs

    def add_providers() -> dict[str, Callable[[int], tuple[Fn, Fn]]]:
        def make(impl: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
                 ) -> Callable[[int], tuple[Fn, Fn]]:
            def at(n: int) -> tuple[Fn, Fn]:
                x = torch.rand(n, device="cuda")
                y = torch.rand(n, device="cuda")
                return (lambda: impl(x, y)), (lambda: _same(impl(x, y), x + y, 0, 0, "add"))
            return at
        p = {"tc": make(tc_torch.add), "torch": make(torch.add)}
        if "add" in peers:
            p["triton"] = make(peers["add"])
        return p

    def softmax_providers() -> dict[str, Callable[[int], tuple[Fn, Fn]]]:
        def make(impl: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[int], tuple[Fn, Fn]]:
            def at(n: int) -> tuple[Fn, Fn]:
                x = torch.randn(4096, n, device="cuda")
                return (lambda: impl(x)), (lambda: _same(impl(x), torch.softmax(x, 1), 1e-4, 1e-6,
                                                         "softmax"))
            return at
        p = {"tc": make(tc_torch.softmax), "torch": make(lambda x: torch.softmax(x, 1)),
             "naive": make(naive_softmax)}
        if "softmax" in peers:
            p["triton"] = make(peers["softmax"])
        return p

    def matmul_providers() -> dict[str, Callable[[int], tuple[Fn, Fn]]]:
        def make(impl: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
                 ) -> Callable[[int], tuple[Fn, Fn]]:
            def at(n: int) -> tuple[Fn, Fn]:
                a = torch.randn(n, n, device="cuda", dtype=torch.float16)
                b = torch.randn(n, n, device="cuda", dtype=torch.float16)
                return (lambda: impl(a, b)), (lambda: _same(impl(a, b), a @ b, 1e-2,
                                                            1e-2 * n ** 0.5, "matmul"))
            return at
        p = {"tc": make(tc_torch.matmul), "torch": make(torch.matmul)}
        if "matmul" in peers:
            p["triton"] = make(peers["matmul"])
        return p

    def transpose_providers() -> dict[str, Callable[[int], tuple[Fn, Fn]]]:
        def make(impl: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[int], tuple[Fn, Fn]]:
            def at(n: int) -> tuple[Fn, Fn]:
                x = torch.randn(n, n, device="cuda")
                return (lambda: impl(x)), (lambda: _same(impl(x), x.t(), 0, 0, "transpose"))
            return at
        p = {"tc": make(tc_torch.transpose), "torch": make(lambda x: x.t().contiguous())}
        if "transpose" in peers:
            p["triton"] = make(peers["transpose"])
        return p

    return {
        "add": Sweep("vector-add", "N", "GB/s", pick([2**i for i in range(12, 28)]), True,
                     add_providers(), lambda n, ms: 12 * n / ms * 1e-6),
        "softmax": Sweep("softmax", "N (M = 4096)", "GB/s",
                         pick([256 * i for i in range(2, 50)]), False, softmax_providers(),
                         lambda n, ms: 2 * 4096 * n * 4 / ms * 1e-6),
        "matmul": Sweep("matmul-fp16", "M = N = K", "TFLOPS",
                        pick([256 * i for i in range(2, 33)]), False, matmul_providers(),
                        lambda n, ms: 2 * n**3 / ms * 1e-9),
        "transpose": Sweep("transpose", "M = N", "GB/s", pick([512 * i for i in range(1, 17)]),
                           False, transpose_providers(), lambda n, ms: 2 * n * n * 4 / ms * 1e-6),
    }


def summary(name: str, data: dict[str, list[float]]) -> list[str]:
    """Markdown rows: provider, median/min/max of its metric, median ratio to torch."""
    rows = []
    torch_vals = data.get("torch", [])
    for provider, vals in data.items():
        if provider in ("x", "") or not vals:
            continue
        ratios = [v / t for v, t in zip(vals, torch_vals) if t > 0]
        ratio = sorted(ratios)[len(ratios) // 2] if ratios else float("nan")
        s = sorted(vals)
        rows.append(f"| {name} | {provider} | {s[len(s) // 2]:.1f} | {s[0]:.1f} | {s[-1]:.1f} | "
                    f"{ratio:.2f} |")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="every fourth point only")
    parser.add_argument("names", nargs="*", help="sweeps to run (default: all)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_sweeps needs a CUDA GPU", file=sys.stderr)
        return 2
    out = Path(os.environ.get("OUT") or ROOT / "build" / "bench")
    out.mkdir(parents=True, exist_ok=True)
    all_sweeps = sweeps(args.quick, _peers())
    names = args.names or list(all_sweeps)
    unknown = [n for n in names if n not in all_sweeps]
    if unknown:
        print(f"unknown sweeps {unknown}; choose from {list(all_sweeps)}", file=sys.stderr)
        return 2
    lines = ["| sweep | provider | median | min | max | median ratio to torch |",
             "|---|---|---|---|---|---|"]
    failed = []
    for name in names:
        print(f"\n=== {name}", flush=True)
        try:
            lines += summary(name, all_sweeps[name].run(out))
        except Exception:
            traceback.print_exc()
            failed.append(name)
            lines.append(f"| {name} | FAILED | | | | |")
    text = "\n".join(lines)
    (out / "summary.md").write_text(text + "\n")
    print(f"\n{torch.cuda.get_device_name()}; plots and CSV in {out}\n{text}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
