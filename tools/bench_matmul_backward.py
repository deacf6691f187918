"""Issue 9's matmul ratios beyond the forward fp16 squares: the products of a backward pass
(dA = dC B^T and dB = A^T dC, which tc_torch.matmul runs through its transposed variants) in
fp16 and bf16, and float32 products on tf32 tensor cores against torch with allow_tf32, in
TFLOPS of tc_torch.matmul, torch.matmul and Triton's tutorial matmul (fp16 only), one run: the
providers of each product take turns in interleaved rounds (medians; the table's last column is
the quartiles of tc's speed over torch's round by round: how far one run's ratio can be read).

    PYTHONPATH=<packages/*/src> python3 tools/bench_matmul_backward.py
        [--shapes 4096x4096x4096,8192x8192x1024] [--json OUT] [--device cpu]

Every result is checked against a float32 product first (a wrong one is reported, not timed).
--device cpu checks the products on the interpreter at small shapes, without timings.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import os
import re
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from bench_matmul import parse_shapes  # noqa: E402  (MxNxK lists, as bench_matmul reads them)
from bench_rounds import interleaved_rounds, paired_speedups, quartiles  # noqa: E402

DEFAULT_SHAPES = "4096x4096x4096,8192x8192x8192,8192x8192x1024,4096x14336x4096,1024x4096x14336"
CPU_SHAPES = "64x48x80,33x70x45"


def products(m: int, n: int, k: int, dtype: Any, device: str) -> dict[str, tuple[Any, Any]]:
    """name -> (left, right) operands of the product, each a view as a backward pass sees it."""
    import torch

    a = torch.randn(m, k, device=device, dtype=dtype)
    b = torch.randn(k, n, device=device, dtype=dtype)
    dc = torch.randn(m, n, device=device, dtype=dtype)
    return {"C = A B": (a, b), "dA = dC B^T": (dc, b.t()), "dB = A^T dC": (a.t(), dc)}


def close(got: Any, ref: Any, tf32: bool) -> bool:
    err = (got.float() - ref).abs().max().item()
    scale = ref.abs().max().item()
    return bool(err <= (1e-2 * scale if tf32 else 0.5 + 2e-2 * scale))


#: A configuration as tc_runtime prints it: config(defines={...}, num_warps=.., ...) (no parentheses inside).
_CONFIG = re.compile(r"config\([^()]*\)")
#: Short names of the schedule options that the tuner's lines spell out.
_OPTION_NAMES = {"persistent": "persistent", "tma_store": "store", "overlap_epilogue": "overlap",
                 "warp_specialize": "ws"}


def short_config(text: str) -> str:
    """`config(defines={'MB': '128', ...}, num_warps=8, num_stages=4, options={...})` as
    `128x256x64/8/4 persistent+store` (tiles, warps, stages, a GROUP_SIZE, then the options
    that are on; a warp_specialize that is off reads `no-ws`). The tuner's line also lists the
    kernel's own defines (TYPE, the operand variants): left out."""
    defines = dict(re.findall(r"'(\w+)': '([^']*)'", text.split("options=")[0]))
    warps = re.search(r"num_warps=(\d+)", text)
    stages = re.search(r"num_stages=(\d+)", text)
    name = "x".join(defines.get(d, "?") for d in ("MB", "NB", "KB"))
    name += f"/{warps.group(1) if warps else '?'}/{stages.group(1) if stages else '?'}"
    extra = [f"{k}={v}" for k, v in defines.items() if k == "GROUP_SIZE"]  # (not the kernel's own)
    if "options=" in text:
        for key, value in re.findall(r"'(\w+)': (True|False)", text.split("options=", 1)[1]):
            short = _OPTION_NAMES.get(key, key)
            extra.append(short if value == "True" else f"no-{short}")
    return name + (" " + "+".join(extra) if extra else "")


def matmul_out_with(x: Any, y: Any, precision: str, pad: str = "auto", stream_k: str = "off") -> Any:
    """x @ y by tc_torch's matmul_out with its `pad` and `stream_k` options."""
    import torch

    from tc_torch.ops.matmul import matmul_out

    c = torch.empty((1, x.shape[0], y.shape[1]), dtype=x.dtype, device=x.device)
    return matmul_out(c, x.unsqueeze(0), y.unsqueeze(0), precision=precision, pad=pad, stream_k=stream_k)[0]


def tuned_call(fn: Callable[[], Any]) -> tuple[Any, str | None]:
    """`fn()`'s result and the configuration tc's auto-tuner chose (or found remembered) for the
    kernel `matmul` in that call (not the copies a tf32 A^T B makes first: kernel `transpose`),
    short_config; None where it did not tune (one configuration, the CPU). Whatever else
    the call writes to stderr still goes there, and the tuner's lines too where
    TC_PRINT_AUTOTUNING asked for them."""
    captured = io.StringIO()
    before = os.environ.get("TC_PRINT_AUTOTUNING")
    os.environ["TC_PRINT_AUTOTUNING"] = "1"
    try:
        with contextlib.redirect_stderr(captured):
            result = fn()
    finally:
        if before is None:
            del os.environ["TC_PRINT_AUTOTUNING"]
        else:
            os.environ["TC_PRINT_AUTOTUNING"] = before
        asked = before is not None and before.strip().lower() in ("1", "true", "yes", "on")
        sys.stderr.writelines(line for line in captured.getvalue().splitlines(keepends=True)
                              if asked or not line.startswith("tc autotune:"))
    choice = None
    for line in captured.getvalue().splitlines():
        if line.startswith("tc autotune: kernel 'matmul'") and (": chose " in line or "(remembered on disk)" in line):
            found = _CONFIG.search(line)
            choice = short_config(found.group(0)) if found else choice
    return result, choice


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a markdown table: TFLOPS (medians of the rounds), the ratios of the medians,
    the quartiles of tc's speed over torch's round by round (how much one run's ratio moves) and
    the configuration tc's tuner chose."""
    lines = ["| shape | dtype | product | tc | torch | triton | tc / torch | tc / triton "
             "| tc / torch per round (quartiles) | tc's configuration |", "|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        tc_, to, tr = row.get("tc"), row.get("torch"), row.get("triton")
        cells = [v if isinstance(v, str) else f"{v:.1f}" if v else "-" for v in (tc_, to, tr)]
        measured = isinstance(tc_, float)
        r1 = f"{tc_ / to:.2f}" if measured and to else "-"
        r2 = f"{tc_ / tr:.2f}" if measured and tr else "-"
        q = row.get("tc_torch_quartiles")
        spread = f"{q[0]:.3f} / {q[1]:.3f} / {q[2]:.3f}" if q else "-"
        lines.append(f"| {row['shape']} | {row['dtype']} | {row['op']} | " + " | ".join(cells)
                     + f" | {r1} | {r2} | {spread} | {row.get('tc_config', '-')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import torch

    import tc_torch
    from tc_runtime.testing import do_bench

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=None, help="MxNxK,... (default: the issue's shapes)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds of the providers' timings")
    ap.add_argument("--warm-l2", action="store_true",
                    help="time calls without flushing L2 before each (do_bench clear_l2=False)")
    ap.add_argument("--dtypes", default="float16,bfloat16,tf32", help="a subset of float16,bfloat16,tf32")
    ap.add_argument("--unpadded", action="store_true",
                    help="time tc_torch's matmul_out with pad='off' too (provider 'tc unpadded': what "
                         "copying operands whose leading dimensions are not multiples of 8 gains)")
    ap.add_argument("--stream-k", action="store_true",
                    help="time tc_torch's matmul_out with stream_k='on' too, fp16 and bf16 (provider "
                         "'tc stream-K': for shapes whose tiles leave the last wave part empty)")
    args = ap.parse_args(argv)
    dtypes = {"float16": torch.float16, "bfloat16": torch.bfloat16, "tf32": torch.float32}
    chosen = args.dtypes.split(",")
    if not set(chosen) <= set(dtypes):
        ap.error(f"--dtypes: choose from {', '.join(dtypes)}")
    device = args.device
    shapes = parse_shapes("", args.shapes or (CPU_SHAPES if device == "cpu" else DEFAULT_SHAPES))
    triton_mm: Callable[[Any, Any], Any] | None = None
    if device == "cuda":
        try:
            from triton_matmul import triton_matmul as triton_mm
        except Exception as exc:  # no triton on this machine
            print(f"(triton unavailable: {exc})")
    rows: list[dict[str, Any]] = []
    ok = True
    torch.manual_seed(0)
    for m, n, k in shapes:
        for dname, dtype in ((d, dtypes[d]) for d in chosen):
            tf32 = dname == "tf32"
            for op, (x, y) in products(m, n, k, dtype, device).items():
                ref = x.float() @ y.float()
                precision = "tf32" if tf32 else "ieee"
                providers: dict[str, Callable[[], Any]] = {
                    "tc": functools.partial(tc_torch.matmul, x, y, precision=precision)}
                if args.unpadded:
                    providers["tc unpadded"] = functools.partial(matmul_out_with, x, y, precision, pad="off")
                if args.stream_k and not tf32:
                    providers["tc stream-K"] = functools.partial(matmul_out_with, x, y, precision, stream_k="on")
                if device == "cuda":
                    providers["torch"] = functools.partial(torch.matmul, x, y)
                    if triton_mm is not None and dtype == torch.float16:
                        providers["triton"] = functools.partial(triton_mm, x, y)
                row: dict[str, Any] = {"shape": f"{m}x{n}x{k}", "dtype": dname, "op": op}
                timed: dict[str, Callable[[], Any]] = {}
                for name, fn in providers.items():
                    torch.backends.cuda.matmul.allow_tf32 = tf32
                    try:
                        if name == "tc":  # (its first call tunes: the choice goes in the row)
                            got, choice = tuned_call(fn)
                            if choice is not None:
                                row["tc_config"] = choice
                        else:
                            got = fn()
                        good = close(got, ref, tf32)
                    finally:
                        torch.backends.cuda.matmul.allow_tf32 = False
                    if not good:
                        print(f"{row['shape']} {dname} {op} {name}: WRONG", flush=True)
                        ok = ok and name != "tc"
                        continue
                    if device == "cuda":
                        do_bench(fn)  # (tunes tc's configurations before the rounds)
                        timed[name] = fn
                    else:
                        row[name] = "ok"  # (checked on the interpreter, not timed)
                if timed:  # the providers take turns, round after round (tools/bench_rounds.py)
                    torch.backends.cuda.matmul.allow_tf32 = tf32
                    try:
                        times = interleaved_rounds(timed, rounds=args.rounds, clear_l2=not args.warm_l2)
                    finally:
                        torch.backends.cuda.matmul.allow_tf32 = False
                    row.update({name: 2.0 * m * n * k / (statistics.median(t) * 1e-3) / 1e12
                                for name, t in times.items()})
                    if "tc" in times and "torch" in times:
                        speedups = paired_speedups(times, "tc", "torch")
                        row["tc_torch_rounds"] = speedups  # (tools/bench_matmul_pooled.py pools them)
                        row["tc_torch_quartiles"] = quartiles(speedups)
                rows.append(row)
                print(json.dumps(row), flush=True)
    print("\n" + table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps({"device": device, "rows": rows}, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
