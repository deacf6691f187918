"""The runtime on a real GPU (marker gpu; skipped without one): both launch back ends, streams,
auto-tuning with buffer restoration, precompiled kernels, a second GPU."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import tc_runtime as tc
from tc_runtime import driver

HAS_GPU = driver.is_available()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA GPU")]

ADD_SRC = """
__global__ void add(float* z, float* x, float* y, int N) {
    int off[BLOCK] = get_program_id(0) * BLOCK + (0 ... BLOCK);
    bool check[BLOCK] = off < N;
    *?(check)(z + off) = *?(check)(x + off) + *?(check)(y + off);
}
"""

ACC_SRC = """
__global__ void acc(float* z, int N) {
    int off[BLOCK] = get_program_id(0) * BLOCK + (0 ... BLOCK);
    bool check[BLOCK] = off < N;
    *?(check)(z + off) = *?(check)(z + off) + 1;
}
"""


@pytest.mark.parametrize("backend", ["ctypes", "cuda-python"])
def test_add_with_both_launch_backends(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("TC_LAUNCH_BACKEND", backend)
    monkeypatch.setattr(driver, "_raw_launch", None)
    k = tc.kernel(ADD_SRC, device="cuda:0", defines={"BLOCK": 256})
    for n in (1, 255, 256, 1000, 4097):
        x = torch.rand(n, device="cuda")
        y = torch.rand(n, device="cuda")
        z = torch.empty_like(x)
        k(z.data_ptr(), x.data_ptr(), y.data_ptr(), n, grid=lambda opt: (tc.cdiv(n, opt.BLOCK),))
        assert torch.equal(z, x + y)
    # misaligned pointers: another specialization
    x = torch.rand(1001, device="cuda")
    z = torch.empty_like(x)
    k(z[1:].data_ptr(), x[1:].data_ptr(), x[:-1].data_ptr(), 1000, grid=(4,))
    assert torch.equal(z[1:], x[1:] + x[:-1])
    assert len(k.info["specializations"]) >= 2


def test_current_stream_and_explicit_stream() -> None:
    torch = pytest.importorskip("torch")
    k = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": 1024})
    z = torch.zeros(1 << 20, device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for _ in range(10):
            k(z.data_ptr(), z.numel(), grid=lambda opt: (tc.cdiv(z.numel(), opt.BLOCK),))
    s.synchronize()
    assert torch.equal(z, torch.full_like(z, 10))
    k(z.data_ptr(), z.numel(), grid=(1024,), stream=s)  # a torch.cuda.Stream object
    k(z.data_ptr(), z.numel(), grid=(1024,), stream=s.cuda_stream)  # its raw handle
    s.synchronize()
    assert torch.equal(z, torch.full_like(z, 12))


def _tuning_setup(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[Any, Any]:
    """torch and 2^22 zeros on the GPU, the tuner printing its timings and caching in `tmp_path`."""
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("TC_PRINT_AUTOTUNING", "1")
    monkeypatch.setenv("TC_CACHE_DIR", str(tmp_path))
    return torch, torch.zeros(1 << 22, device="cuda")


def test_autotune_on_gpu_runs_the_call_once(capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Path) -> None:
    torch, z = _tuning_setup(monkeypatch, tmp_path)
    n = z.numel()
    k = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": [128, 512, 1024]},
                  autotune_configs=[tc.config(num_warps=2), tc.config(num_warps=4),
                                    tc.config(num_warps=8)], autotune_key=["N"])
    k(z.data_ptr(), n, grid=lambda opt: (tc.cdiv(n, opt.BLOCK),))
    torch.cuda.synchronize()
    assert torch.equal(z, torch.ones_like(z))  # tuning ran each config many times on z
    err = capsys.readouterr().err
    assert err.count(" us\n") >= 9 and "chose config" in err
    print(err)


def test_autotune_on_gpu_times_only_added_configurations(capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    # a new process (a new kernel object) with one configuration more than the list tuned before
    # times that one against the remembered choice and its close calls, and computes right
    torch, z = _tuning_setup(monkeypatch, tmp_path)
    n = z.numel()
    configs = [tc.config({"BLOCK": 1024}, num_warps=4), tc.config({"BLOCK": 128}, num_warps=1)]
    added = tc.config({"BLOCK": 512}, num_warps=4)
    for listed in (configs, [*configs, added]):
        k = tc.kernel(ACC_SRC, device="cuda:0", autotune_configs=listed, autotune_key=["N"])
        k(z.data_ptr(), n, grid=lambda opt: (tc.cdiv(n, opt.BLOCK),))
    torch.cuda.synchronize()
    assert torch.equal(z, torch.full_like(z, 2))
    err = capsys.readouterr().err
    assert err.count("configurations not timed before") == 1
    second = err[err.index("configurations not timed before"):]
    timed = [line for line in second.splitlines() if line.endswith(" us")]
    assert any("'BLOCK': '512'" in line for line in timed) and "chose config" in second


def test_precompiled_kernel_runs_without_the_compiler(tmp_path: Path) -> None:
    binary = tc.build(ADD_SRC, arch=driver.get_device(0).arch, defines={"BLOCK": 128})
    path = tc.save(binary, tmp_path / "add.cubin" if binary.cubin else tmp_path / "add.ptx")
    script = textwrap.dedent("""
        import ctypes, sys
        import tc_runtime as tc
        from tc_runtime import driver
        k = tc.load(sys.argv[1], device="cuda:0", defines={"BLOCK": 128})
        dev = driver.get_device(0)
        n = 1000
        host = (ctypes.c_float * n)(*range(n))
        bufs = [driver.DeviceBuffer(dev, 4 * n) for _ in range(3)]
        bufs[1].copy_from_host(ctypes.addressof(host), 4 * n)
        bufs[2].copy_from_host(ctypes.addressof(host), 4 * n)
        k(bufs[0].ptr, bufs[1].ptr, bufs[2].ptr, n, grid=lambda opt: (tc.cdiv(n, opt.BLOCK),))
        out = (ctypes.c_float * n)()
        dev.synchronize()
        bufs[0].copy_to_host(ctypes.addressof(out), 4 * n)
        assert list(out) == [2.0 * i for i in range(n)], list(out)[:8]
        bad = [m for m in sys.modules if m.split(".")[0] in ("tc_lang", "tc_ir", "tc_opt",
                                                               "tc_nvptx", "llvmlite", "torch")]
        assert not bad, bad
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True,
                          text=True, timeout=120, env=dict(os.environ))
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_second_gpu() -> None:
    torch = pytest.importorskip("torch")
    if driver.device_count() < 2:
        pytest.skip("needs two GPUs")
    k1 = tc.kernel(ADD_SRC, device="cuda:1", defines={"BLOCK": 256})
    k0 = tc.kernel(ADD_SRC, device="cuda:0", defines={"BLOCK": 256})
    for dev, k in (("cuda:1", k1), ("cuda:0", k0), ("cuda:1", k1), ("cuda:1", k1)):
        x = torch.rand(3000, device=dev)
        z = torch.empty_like(x)
        k(z.data_ptr(), x.data_ptr(), x.data_ptr(), 3000, grid=(12,))
        assert torch.equal(z, x + x)
        assert torch.cuda.current_device() == 0  # launching on cuda:1 left torch's device alone
    with torch.cuda.device(1):  # the caller on cuda:1 launches a kernel of cuda:0
        x = torch.rand(3000, device="cuda:0")
        z = torch.empty_like(x)
        k0(z.data_ptr(), x.data_ptr(), x.data_ptr(), 3000, grid=(12,))
        assert torch.cuda.current_device() == 1 and torch.equal(z, x + x)
    x0 = torch.rand(3000, device="cuda:0")
    for n in (3000, 3008):  # a specialization launched before (the fast path), and a new one
        with pytest.raises(ValueError, match="points to memory on cuda:0, but this kernel runs "
                                             "on cuda:1"):
            k1(x0.data_ptr(), x0.data_ptr(), x0.data_ptr(), n, grid=(12,))
    x = torch.rand(3000, device="cuda:1")  # ... and cuda:1 still works
    z = torch.empty_like(x)
    k1(z.data_ptr(), x.data_ptr(), x.data_ptr(), 3000, grid=(12,))
    assert torch.equal(z, x + x)


@pytest.mark.parametrize("backend", ["torch", "driver"])
def test_do_bench_times_a_kernel(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    from tc_runtime import testing

    monkeypatch.setattr(testing, "_gpu_backend", lambda: backend)
    n = 1 << 24
    z = torch.zeros(n, device="cuda")
    k = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": 1024})
    med, lo, hi = testing.do_bench(
        lambda: k(z.data_ptr(), n, grid=lambda opt: (tc.cdiv(n, opt.BLOCK),)), warmup=5, rep=20)
    assert 0 < lo <= med <= hi < 50  # 128 MB read + written: well under a millisecond or two
    assert k.info["registers"] > 0 and k.info["spills"] == 0 and k.info["shared_bytes"] >= 0
    assert ".entry acc" in k.asm("ptx") and bytes.fromhex(k.asm("cubin"))[:4] == b"\x7fELF"


TUTORIAL = (Path(__file__).resolve().parents[2] / "tc-lang" / "tests" / "kernels" / "matmul_tutorial.tc").read_text()


@pytest.mark.parametrize("m,n,k", [(384, 512, 256), (300, 200, 128), (130, 1000, 64)])
def test_matmul_with_tma_store_through_the_runtime(m: int, n: int, k: int) -> None:
    """tma_store=True through tc.kernel: the runtime encodes the destination's tensor map next to
    the operands'; at sizes that are not multiples of the tile the map's extents (the store's mask)
    keep the bulk stores inside C, which lies in a larger matrix that must keep its sentinel. Odd
    leading dimensions take the variant without TMA, which must agree too."""
    torch = pytest.importorskip("torch")
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("TMA needs a Hopper GPU")
    kern = tc.kernel(TUTORIAL, defines={"TYPE": "half", "MB": 128, "NB": 128, "KB": 64}, num_warps=4,
                     num_stages=3, tma_store=True)
    a = torch.randn(m + 128, k, device="cuda", dtype=torch.float16)  # (the loads are unmasked)
    b = torch.randn(k, n + 128, device="cuda", dtype=torch.float16)
    for pad in (64, 65):  # ldc multiple of 16 bytes (TMA), then not (the plain variant)
        outside = torch.full((m + 64, n + pad), -7.0, device="cuda", dtype=torch.float16)
        c = outside[:m, :n]
        kern(a.data_ptr(), b.data_ptr(), c.data_ptr(), m, n, k, a.stride(0), b.stride(0), c.stride(0),
             grid=lambda opt: (tc.cdiv(m, 128) * tc.cdiv(n, 128),))
        torch.cuda.synchronize()
        ref = a[:m].float() @ b[:, :n].float()
        torch.testing.assert_close(c.float(), ref, atol=0.5, rtol=2e-2)
        assert (outside[m:] == -7.0).all() and (outside[:m, n:] == -7.0).all(), f"wrote outside C (pad {pad})"


@pytest.mark.parametrize("m,n,k", [(4096, 4096, 256), (300, 200, 128), (1000, 2000, 0)])
def test_persistent_matmul_through_the_runtime(m: int, n: int, k: int) -> None:
    """A persistent configuration (options={"persistent": True, "tma_store": True}) among the
    auto-tuner's: every configuration is timed on the GPU and each one's result must match torch,
    with more programs than SMs (4096^2: 512 programs, run by one CTA per SM), at sizes that are
    not multiples of the tile, and with K = 0 (C must be zeros)."""
    torch = pytest.importorskip("torch")
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("persistent matmuls need a Hopper GPU (TMA, wgmma)")
    tile = {"MB": 128, "NB": 256, "KB": 64}
    configs = [tc.config(tile, num_warps=8, num_stages=3, options={"persistent": True, "tma_store": True}),
               tc.config(tile, num_warps=8, num_stages=3, options={"persistent": True}),
               tc.config(tile, num_warps=8, num_stages=3)]
    a = torch.randn(m + 128, k + 64, device="cuda", dtype=torch.float16)  # (the loads are unmasked)
    # (leading dimensions multiples of 16 elements: the specialization TMA, and so the persistent
    # schedule, needs; the plain variants of other ones are tested above)
    b = torch.randn(k + 64, -(-n // 16) * 16 + 256, device="cuda", dtype=torch.float16)
    ref = a[:m, :k].float() @ b[:k, :n].float()
    for i, cfg in enumerate(configs):
        kern = tc.kernel(TUTORIAL, defines={"TYPE": "half"}, autotune_configs=[cfg])
        c = torch.full((m, n), -1.0, device="cuda", dtype=torch.float16)
        for _ in range(2):  # (the second launch: the general path again, not the launch entry)
            kern(a.data_ptr(), b.data_ptr(), c.data_ptr(), m, n, k, a.stride(0), b.stride(0), c.stride(0),
                 grid=lambda opt: (tc.cdiv(m, opt.MB) * tc.cdiv(n, opt.NB),))
        torch.cuda.synchronize()
        torch.testing.assert_close(c.float(), ref, atol=0.5, rtol=2e-2, msg=lambda s: f"{cfg}: {s}")
        assert kern.info.get("persistent", False) is (i < 2)
    tuned = tc.kernel(TUTORIAL, defines={"TYPE": "half"}, autotune_configs=configs)
    c = torch.empty(m, n, device="cuda", dtype=torch.float16)
    tuned(a.data_ptr(), b.data_ptr(), c.data_ptr(), m, n, k, a.stride(0), b.stride(0), c.stride(0),
          grid=lambda opt: (tc.cdiv(m, opt.MB) * tc.cdiv(n, opt.NB),))
    torch.cuda.synchronize()
    torch.testing.assert_close(c.float(), ref, atol=0.5, rtol=2e-2)


def _persistent_bulk_store_matmul() -> tuple[Any, tc.Kernel]:
    """(torch, the fp16 128x256x64 persistent matmul with bulk stores: three tensor maps), or a
    skip without a Hopper GPU."""
    torch = pytest.importorskip("torch")
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("persistent matmuls need a Hopper GPU (TMA, wgmma)")
    cfg = tc.config({"MB": 128, "NB": 256, "KB": 64}, num_warps=8, num_stages=3,
                    options={"persistent": True, "tma_store": True})
    return torch, tc.kernel(TUTORIAL, defines={"TYPE": "half"}, autotune_configs=[cfg])


def test_tensor_maps_follow_the_arguments_launch_by_launch() -> None:
    """A persistent kernel with three tensor maps (A, B, and C's bulk stores) launched through the
    launch entry with the operands and outputs changing between launches, as tc_torch.matmul's
    new output per call does: the packer points each map parameter at its copy for the launch's
    arguments (TmaArgPacker keeps them by value); every result must be its own product, and no
    launch may write into another launch's output."""
    torch, kern = _persistent_bulk_store_matmul()
    m, n, k = 512, 768, 128
    a = [torch.randn(m, k, device="cuda", dtype=torch.float16) for _ in range(2)]
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    outputs = [torch.full((m, n), -1.0, device="cuda", dtype=torch.float16) for _ in range(3)]
    order = [(0, 0), (1, 1), (0, 2), (1, 0), (0, 1), (1, 2), (1, 1), (0, 0)]
    for ai, ci in order:  # (each output written by each A once at least, the last one stays)
        kern(a[ai].data_ptr(), b.data_ptr(), outputs[ci].data_ptr(), m, n, k, k, n, n,
             grid=lambda opt: (tc.cdiv(m, opt.MB) * tc.cdiv(n, opt.NB),))
    torch.cuda.synchronize()
    assert kern.info["persistent"] is True and len(kern._records) == 1  # (the entry launched them)
    last = {ci: ai for ai, ci in order}
    for ci, ai in last.items():
        ref = a[ai].float() @ b.float()
        torch.testing.assert_close(outputs[ci].float(), ref, atol=0.5, rtol=2e-2, msg=lambda s: f"C{ci}: {s}")


def test_tma_kernels_launch_from_threads_without_a_context() -> None:
    """A thread that never used CUDA has no current context, in which the driver refuses to encode
    a tensor map: a TMA kernel built in this thread and launched first from such threads, with
    arguments new to them (their records' maps are their own), must set the context and compute
    the right products."""
    import threading

    torch, kern = _persistent_bulk_store_matmul()
    m, n, k = 256, 512, 128
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    outputs = [torch.full((m, n), -1.0, device="cuda", dtype=torch.float16) for _ in range(3)]

    def launch(c: Any) -> None:
        kern(a.data_ptr(), b.data_ptr(), c.data_ptr(), m, n, k, k, n, n,
             grid=lambda opt: (tc.cdiv(m, opt.MB) * tc.cdiv(n, opt.NB),))

    launch(outputs[0])  # (built here)
    errors: list[BaseException] = []

    def other(c: Any) -> None:
        try:
            launch(c)
            launch(c)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    for c in outputs[1:]:
        t = threading.Thread(target=other, args=(c,))
        t.start()
        t.join()
    torch.cuda.synchronize()
    assert errors == []
    ref = a.float() @ b.float()
    for c in outputs:
        torch.testing.assert_close(c.float(), ref, atol=0.5, rtol=2e-2)


SIGNS_SRC = """__global__ void k(int* o, int n, unsigned u, long l) {
  *o = n; *(o + 1) = u; *(o + 2) = l;
}"""


def test_integer_parameters_take_the_range_of_their_c_type_on_the_gpu() -> None:
    """The launch's fast path (struct packing) and its slow path agree with the CPU's checks: an
    unsigned value above 2**31 reaches `unsigned u` as its bits; 2**31 for `int n` is refused."""
    torch = pytest.importorskip("torch")
    k = tc.kernel(SIGNS_SRC, device="cuda:0")
    o = torch.zeros(3, dtype=torch.int32, device="cuda")
    for _ in range(2):  # the second call takes the fast path
        k(o, -(2**31), 2**32 - 1, 2**40 + 7, grid=(1,))
        torch.cuda.synchronize()
        assert o.tolist() == [-(2**31), -1, 7]
    with pytest.raises(TypeError, match=r"2147483648 does not fit in int \(32 bits\)"):
        k(o, 2**31, 0, 0, grid=(1,))
    with pytest.raises(TypeError, match="does not fit in unsigned int"):
        k(o, 0, 2**32, 0, grid=(1,))


DIVIDE_SRC = """__global__ void k(int* X, int* Q, int* R, unsigned* UQ, unsigned* UR, int n, int d, unsigned u) {
  for (int i = 0; i < n; i++) {
    int x = *(X + i);
    *(Q + i) = x / d;
    *(R + i) = x % d;
    unsigned ux = (unsigned)x;
    *(UQ + i) = ux / u;
    *(UR + i) = ux % u;
  }
}"""


def test_integer_division_by_a_loop_invariant_divisor_on_the_gpu() -> None:
    """Integer division inside a loop by a divisor the loop does not change, on the GPU: C's
    quotient and remainder of int and unsigned dividends across the 32-bit range, for divisors at
    the edges (1, -1, powers of two, the largest and smallest), as Python's integers give them
    (the interpreter's semantics; a reciprocal-multiply rewrite of such divisions was tried, see
    NOTES.md, twenty-third session)."""
    torch = pytest.importorskip("torch")
    k = tc.kernel(DIVIDE_SRC, device="cuda:0")
    values = [0, 1, -1, 2, -2, 7, -7, 641, 65535, 65536, 2**30, 2**31 - 1, -(2**31) + 1, -(2**31)]
    values += torch.randint(-(2**31), 2**31, (200,), generator=torch.Generator().manual_seed(3)).tolist()
    x = torch.tensor(values, dtype=torch.int32, device="cuda")
    n = len(values)
    q, r = torch.empty_like(x), torch.empty_like(x)
    uq, ur = torch.empty_like(x), torch.empty_like(x)

    def trunc_div(a: int, b: int) -> int:
        return abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)

    for d, u in ((1, 1), (-1, 2), (3, 3), (-7, 10), (641, 641), (65536, 65536), (2**31 - 1, 2**31 - 1),
                 (-(2**31), 2**31), (1_000_003, 2**32 - 1), (-2, 2**31 + 1)):
        k(x, q, r, uq.data_ptr(), ur.data_ptr(), n, d, u, grid=(1,))
        torch.cuda.synchronize()
        got_q, got_r = q.tolist(), r.tolist()
        keep = [i for i, a in enumerate(values) if not (d == -1 and a == -(2**31))]  # (overflows)
        want_q = [trunc_div(values[i], d) for i in keep]
        assert [got_q[i] for i in keep] == want_q
        assert [got_r[i] for i in keep] == [values[i] - w * d for i, w in zip(keep, want_q)]
        ux = [a % 2**32 for a in values]
        assert [v % 2**32 for v in uq.tolist()] == [a // u for a in ux]
        assert [v % 2**32 for v in ur.tolist()] == [a % u for a in ux]


def test_tensors_of_other_elements_are_refused_on_the_gpu() -> None:
    """A float64 or int32 tensor given to `float*` would be read as garbage floats: refused on the
    first (general) launch and on later ones through the launch entry; float32 launches."""
    torch = pytest.importorskip("torch")
    k = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": 128})
    z = torch.zeros(256, device="cuda")
    for dtype in (torch.float64, torch.int32):
        with pytest.raises(TypeError, match=rf"argument 1 \('z'\) .* holds {str(dtype)[6:]} "
                                            r"elements, but the kernel reads it as float\*"):
            k(z.to(dtype), 256, grid=(2,))
    for _ in range(3):  # the last two through the entry
        k(z, 256, grid=(2,))
    for dtype in (torch.float64, torch.float16, torch.bfloat16):
        with pytest.raises(TypeError, match=rf"holds {str(dtype)[6:]} elements"):
            k(z.to(dtype), 256, grid=(2,))
    torch.cuda.synchronize()
    assert z.tolist() == [3.0] * 256


def test_tensors_in_host_memory_are_refused_unless_pinned() -> None:
    """A CPU tensor's pageable memory would fault the kernel (ending the CUDA context): refused on
    both launch paths. Pinned memory is mapped for the GPU: the kernel writes it in place."""
    torch = pytest.importorskip("torch")
    k = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": 128})
    z = torch.zeros(256, device="cuda")
    k(z, 256, grid=(2,))
    k(z, 256, grid=(2,))  # the entry has seen float32 tensors in GPU memory
    for _ in range(2):
        with pytest.raises(ValueError, match=r"argument 1 \('z'\) .* is a tensor in CPU memory, "
                                             r"but this kernel runs on cuda:0"):
            k(torch.zeros(256), 256, grid=(2,))
    pinned = torch.zeros(256).pin_memory()
    for _ in range(3):
        k(pinned, 256, grid=(2,))
    torch.cuda.synchronize()
    assert pinned.tolist() == [3.0] * 256 and z.tolist() == [2.0] * 256


def test_kernels_under_cuda_graph_capture() -> None:
    """A kernel that would auto-tune inside capture is refused before any work (the capture ends
    cleanly); one configuration compiles, loads and is recorded inside it; a tuned kernel records
    after a warm-up. Replays run the recorded launches."""
    torch = pytest.importorskip("torch")
    single = tc.kernel(ACC_SRC, device="cuda:0", defines={"BLOCK": 128})
    tuned = tc.kernel(ACC_SRC, device="cuda:0", autotune_key=["N"],
                      autotune_configs=[tc.config(defines={"BLOCK": 64}),
                                        tc.config(defines={"BLOCK": 128})])
    z = torch.zeros(256, device="cuda")

    def grid(opt: tc.Options) -> tuple[int]:
        return (tc.cdiv(256, opt.BLOCK),)

    with pytest.raises(tc.TcLaunchError, match=r"kernel 'acc' would auto-tune inside CUDA graph "
                                              r"capture \(for N = 256\)"):
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            tuned(z, 256, grid=grid)
    first = torch.cuda.CUDAGraph()
    with torch.cuda.graph(first):
        single(z, 256, grid=(2,))
    tuned(z, 256, grid=grid)  # the warm-up: tunes (restoring z) and adds 1
    second = torch.cuda.CUDAGraph()
    with torch.cuda.graph(second):
        tuned(z, 256, grid=grid)
    torch.cuda.synchronize()
    assert z.tolist() == [1.0] * 256  # nothing ran while capturing
    first.replay()
    second.replay()
    second.replay()
    torch.cuda.synchronize()
    assert z.tolist() == [4.0] * 256


def test_a_dumped_kernel_edited_by_hand_runs_in_place_of_the_compilers(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """TC_KERNEL_DUMP_DIR writes the PTX; an edited copy in TC_KERNEL_OVERRIDE_DIR is what the
    driver loads and runs (here the sum turned into a difference)."""
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("TC_CACHE_DIR", str(tmp_path / "cache"))
    dump, override = tmp_path / "dump", tmp_path / "override"
    monkeypatch.setenv("TC_KERNEL_DUMP_DIR", str(dump))
    n = 1000
    x, y = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
    z = torch.empty_like(x)
    tc.kernel(ADD_SRC, device="cuda:0", defines={"BLOCK": 256})(z.data_ptr(), x.data_ptr(), y.data_ptr(), n, grid=(4,))
    assert torch.equal(z, x + y)
    (file,) = dump.iterdir()
    ptx = file.read_text()
    assert "add.rn.f32" in ptx
    override.mkdir()
    (override / file.name).write_text(ptx.replace("add.rn.f32", "sub.rn.f32"))
    monkeypatch.delenv("TC_KERNEL_DUMP_DIR")
    monkeypatch.setenv("TC_KERNEL_OVERRIDE_DIR", str(override))
    k = tc.kernel(ADD_SRC, device="cuda:0", defines={"BLOCK": 256})
    k(z.data_ptr(), x.data_ptr(), y.data_ptr(), n, grid=(4,))
    assert torch.equal(z, x - y)
    assert "sub.rn.f32" in k.asm("ptx")
