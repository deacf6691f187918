"""Diagnose pointer ownership and context handling on a machine with two GPUs.

Prints, for tensors torch allocates on cuda:0 and cuda:1, what the driver says about their device
(cuPointerGetAttribute DEVICE_ORDINAL and CONTEXT) with each primary context current, then runs
the same add kernel on both devices in turn, checking results after each launch.
"""

from __future__ import annotations

import torch

import tc_runtime as tc
from tc_runtime import driver

SRC = """
__global__ void add(float* z, float* x, float* y, int N) {
    int off[BLOCK] = get_program_id(0) * BLOCK + (0 ... BLOCK);
    bool check[BLOCK] = off < N;
    *?(check)(z + off) = *?(check)(x + off) + *?(check)(y + off);
}
"""


def describe(ptr: int) -> str:
    cu = driver.init()
    attrs = cu.CUpointer_attribute
    out = []
    for name in ("DEVICE_ORDINAL", "CONTEXT", "MEMORY_TYPE", "IS_MANAGED"):
        try:
            res = cu.cuPointerGetAttribute(getattr(attrs, f"CU_POINTER_ATTRIBUTE_{name}"), ptr)
            out.append(f"{name}={res[1]!r} (err {int(res[0])})")
        except Exception as exc:  # report, keep going
            out.append(f"{name}: {type(exc).__name__} {exc}")
    return "; ".join(out)


def main() -> None:
    print("driver devices:", driver.device_count(), "torch devices:", torch.cuda.device_count())
    a = torch.rand(3000, device="cuda:0")
    b = torch.rand(3000, device="cuda:1")
    for cur in (0, 1):
        driver.get_device(cur).make_current()
        print(f"current=cuda:{cur} ctx={driver.get_device(cur).context!r}")
        print("  a(cuda:0):", hex(a.data_ptr()), describe(a.data_ptr()))
        print("  b(cuda:1):", hex(b.data_ptr()), describe(b.data_ptr()))
        print("  pointer_device:", driver.pointer_device(a.data_ptr()),
              driver.pointer_device(b.data_ptr()))
    k1 = tc.kernel(SRC, device="cuda:1", defines={"BLOCK": 256})
    k0 = tc.kernel(SRC, device="cuda:0", defines={"BLOCK": 256})
    for dev, k in (("cuda:1", k1), ("cuda:0", k0), ("cuda:1", k1), ("cuda:0", k0)):
        x = torch.rand(3000, device=dev)
        z = torch.empty_like(x)
        try:
            k(z.data_ptr(), x.data_ptr(), x.data_ptr(), 3000, grid=(12,))
            torch.cuda.synchronize(dev)
            print(dev, "ok" if torch.equal(z, x + x) else "WRONG RESULT")
        except Exception as exc:  # report, keep going
            print(dev, "raised", type(exc).__name__, exc)
    print("several:", driver.several_contexts())


if __name__ == "__main__":
    main()
