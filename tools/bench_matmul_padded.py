"""Products whose operands are copied into padded rows (leading dimensions not multiples of 8):
what the copies cost the host and the GPU, by tc's copy kernel (pad_rows.tc, as shipped) and by
torch's copy_ (how tc_torch copied before), and the whole product against torch.matmul.

    python tools/bench_matmul_padded.py [--sizes 2100,2500,4100] [--dtype float16]

Per size N (N x N operands, rows N apart): host time per call (the best of 5 rounds of 100
back-to-back calls, microseconds: bench_torch_gpu_host.host_us) of one operand's copy both ways and of tc_torch.matmul and
torch.matmul; GPU time (do_bench, median) of the copies and of both products. Every copy is
checked bit for bit and the product against torch's. Not a test: it needs a CUDA GPU. The last
line, `SUMMARY: ...`, is what tools/gpu_check.py reports.
"""

from __future__ import annotations

import argparse
import sys

import torch

import tc_torch
from bench_torch_gpu_host import host_us  # (tools/, this script's folder)
from tc_runtime.testing import do_bench
from tc_torch.ops import matmul as mm
from tc_torch.ops import pad_rows

CPU = torch.device("cpu")  # (pad_rows.padded copies with torch off the GPU path)


def run(n: int, dtype: torch.dtype) -> tuple[list[str], float, bool]:
    """The table rows for N x N x N, the host time ratio torch / tc, and whether all was right."""
    torch.manual_seed(0)
    a = torch.randn(n, n, dtype=dtype, device="cuda")
    b = torch.randn(n, n, dtype=dtype, device="cuda")
    index = a.device.index
    assert mm.pads(n, n, n, (n, n), itemsize=a.element_size()) == (True, True), n
    ok = True
    # the kernel of a's piece width exists once the general path has copied once
    kern_copy, new_ld = pad_rows.padded(a, False, n, a.device)
    torch_copy, _ = pad_rows.padded(a, False, n, CPU)
    ok &= torch.equal(kern_copy.view(torch.int16), a.view(torch.int16))
    ok &= torch.equal(torch_copy.view(torch.int16), a.view(torch.int16))
    fast = pad_rows.fast_padded(a, False, index)
    ok &= fast is not None
    if fast is not None:
        flat, _ = fast
        ok &= torch.equal(flat.view(n, new_ld)[:, :n], a)

    def by_kernel() -> object:
        return pad_rows.fast_padded(a, False, index)

    def by_torch() -> object:
        return pad_rows.padded(a, False, n, CPU)

    got = tc_torch.matmul(a, b)
    ref = torch.matmul(a, b)
    err = float((got.float() - ref.float()).abs().max())
    ok &= err <= 1e-2 * float(ref.float().abs().max()) + 0.5
    host = {name: host_us(fn, calls=100) for name, fn in (("copy kernel", by_kernel), ("copy torch", by_torch),
                                                ("tc matmul", lambda: tc_torch.matmul(a, b)),
                                                ("torch matmul", lambda: torch.matmul(a, b)))}
    gpu = {name: do_bench(fn) * 1e3 for name, fn in (("copy kernel", by_kernel), ("copy torch", by_torch),
                                                      ("tc matmul", lambda: tc_torch.matmul(a, b)),
                                                      ("torch matmul", lambda: torch.matmul(a, b)))}
    gb = 2 * n * n * a.element_size() / 1e3  # bytes read and written per copy, in GB/s at us
    rows = [f"| {n} | {name} | {host[name]:.1f} | {gpu[name]:.1f} | "
            + (f"{gb / gpu[name]:.0f} GB/s" if name.startswith("copy") else
               f"{2 * n ** 3 / gpu[name] / 1e6:.0f} TFLOPS") + " |" for name in host]
    return rows, host["torch matmul"] / host["tc matmul"], ok


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="2100,2500,4100")
    p.add_argument("--dtype", default="float16", choices=["float16", "bfloat16"])
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("bench_matmul_padded: needs a CUDA GPU", file=sys.stderr)
        return 2
    dtype = getattr(torch, args.dtype)
    print(f"# {torch.cuda.get_device_name()}, {args.dtype}; host: us per call back to back; GPU: do_bench us")
    print("| N | what | host us | GPU us | rate |")
    print("|---|---|---|---|---|")
    ratios: list[str] = []
    all_ok = True
    for n in (int(s) for s in args.sizes.split(",")):
        rows, ratio, ok = run(n, dtype)
        all_ok &= ok
        print("\n".join(rows), flush=True)
        ratios.append(f"{n}: {ratio:.2f}" + ("" if ok else " WRONG"))
    print("SUMMARY: host time torch / tc per call " + ", ".join(ratios))
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
