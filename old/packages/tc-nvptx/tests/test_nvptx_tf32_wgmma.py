"""tf32 dots on Hopper's wgmma, checked on the PTX and the IR (no GPU): m64nNk8 tf32 instructions
read their shared-memory operands K-major (tf32 has no transpose bits). A B with A K-contiguous
and B N-contiguous (the spec's kernel) runs transposed, C^T = B^T A^T, with B^T in registers read
from B's own N-major tile; other M- or N-contiguous operands of a pipelined loop are copied 16
bytes at a time into slots in their own order and restaged K-major in the loop (two buffers,
alternating), copied transposed element by element without pipelining; no spills for the tf32
tiles the matmul op tunes over."""

from __future__ import annotations

import re

import pytest
from tc_nvptx import compile
from tc_nvptx.compiler import CompiledKernel
from tc_nvptx.ptxas import find_ptxas
from tc_opt import CompileOptions
from tc_torch.library import source
from tc_torch.ops.matmul import A_VARIANTS, B_VARIANTS

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not on the PATH")

#: the runtime's specialization of the op's arguments at 4096^3 (every one divisible by 16)
SPEC = ("divisible_by_16",) * 12


def build(ta: bool, tb: bool, mb: int = 128, nb: int = 128, kb: int = 32, warps: int = 8, stages: int = 4,
          arch: str = "sm_90", tma: bool = False, persistent: bool = False) -> CompiledKernel:
    """The op's kernel in tf32, its loads pipelined with cp.async (the copies stay visible in the
    PTX) or TMA (`persistent`: with a producer warp and a persistent grid where that applies)."""
    defines = {"TYPE": "float", "ACC": "float", **A_VARIANTS[ta], **B_VARIANTS[tb], "MB": mb, "NB": nb, "KB": kb}
    opts = CompileOptions(arch=arch, num_warps=warps, num_stages=stages, specialization=SPEC, fp32_dot="tf32",
                          tma=tma or persistent, warp_specialize=persistent, persistent=persistent)
    return compile(source("matmul"), defines=defines, options=opts, filename="matmul.tc")


def copy_sizes(ptx: str) -> list[str]:
    """The byte count of every cp.async, in program order."""
    return re.findall(r"cp\.async\.\w+\.shared\.global \[%r\d+\], \[%rd\d+\], (\d+)", ptx)


def buffers(ir: str, leading: int) -> list[str]:
    """The shared buffers of the IR whose first dimension is `leading` (the pipeline's stages, or
    2 for the restaging pairs): rows x cols with their shared layout."""
    return re.findall(rf"tc\.local_alloc : tile<{leading}x(\d+x\d+xf32, #shared<[^>]*>)>", ir)


@needs_ptxas
@pytest.mark.parametrize("tma", [False, True])
def test_a_times_n_contiguous_b_runs_transposed_with_b_in_registers(tma: bool) -> None:
    k = build(False, False, tma=tma)  # 128x128x32 tiles, 8 warps, 4 stages
    ir = k.asm["ir-gpu"]
    # the accumulator is the transposed product's: rows along N (8 warps x 16), M = 128 per
    # instruction; both slots keep their load order (A K-major, B N-major); nothing restaged
    assert "#mma<v=3, wpc=[8, 1], instr=[64, 128, 8], trans=1>" in ir
    assert "local_store" not in ir and not buffers(ir, 2)
    assert [b.endswith("order=[2, 1, 0]>") for b in buffers(ir, 4)] == [True, True]
    # per K step of 8: B^T's 4 registers per thread read from B's tile (two 8-byte loads: the
    # accumulator's rows are paired, N = 2 r and 2 r + 1 in D's rows r and r + 8), a
    # wgmma.fence, one m64n128k8 with A in registers and A^T (K-major) by descriptor, its own
    # commit group and a wait leaving 3 groups in flight; the loop's wait for the previous dot
    # leaves this dot's 4; no store or proxy fence in the loop, no serialization by ptxas
    body = k.ptx[: k.ptx.index("wgmma.wait_group.sync.aligned 0")]
    instrs = re.findall(r"wgmma\.mma_async\.sync\.aligned\.(\S+) \{[^}]*\}, \{(%r\d+, %r\d+, %r\d+, %r\d+)\}, "
                        r"(%rd\d+), p, 1, 1;", body)
    assert [i[0] for i in instrs] == ["m64n128k8.f32.tf32.tf32"] * 4
    assert body.count("ld.shared.v2.b32") == 2 * 4 and "ld.shared.b32" not in body
    assert body.count("wgmma.fence.sync.aligned") == 4 and body.count("wgmma.commit_group") == 4
    assert body.count("wgmma.wait_group.sync.aligned 3") == 4 and "wgmma.wait_group.sync.aligned 4" in body
    assert not re.search(r"\bst\.shared", body)
    assert ("fence.proxy.async" in body) != tma  # (only cp.async-written slots need the proxy fence)
    assert "C75" not in k.asm["ptxas"]


@needs_ptxas
@pytest.mark.parametrize("ta,tb", [(True, False), (False, True), (True, True)])
def test_tf32_operands_in_shared_memory_are_k_major(ta: bool, tb: bool) -> None:
    k = build(ta, tb)  # 128x128x32 tiles, 8 warps, 4 stages, cp.async
    assert k.arch == "sm_90a"
    # m64n128k8, no transpose operands (the instruction has none for tf32), fp32 bits read as
    # tf32 by the hardware: no mma.sync, no cvt.rna; A (^a: M-contiguous) from registers, else
    # by descriptor
    a_regs = r"\{%r\d+, %r\d+, %r\d+, %r\d+\}" if ta else r"%rd\d+"
    instrs = re.findall(rf"wgmma\.mma_async\.sync\.aligned\.(\S+) \{{[^}}]*\}}, ({a_regs}), (%rd\d+), p, 1, 1;", k.ptx)
    assert [i[0] for i in instrs] == ["m64n128k8.f32.tf32.tf32"] * (32 // 8)  # K = 32 in steps of 8
    assert "mma.sync" not in k.ptx and "cvt.rna.tf32" not in k.ptx
    # the pipeline's slots keep each source tile's own order (its global-contiguous dimension
    # first: 16-byte copies); B N-contiguous (b's [K, N]) is restaged into two K-major buffers,
    # order [1, 2, 0]; 128-byte rows, 128-byte swizzle everywhere
    slots, pairs = buffers(k.asm["ir-gpu"], 4), buffers(k.asm["ir-gpu"], 2)
    assert len(slots) == 2 and all(b.endswith("order=[2, 1, 0]>") for b in slots)
    assert len(pairs) == int(not tb)
    assert all(b.startswith("32x128xf32") and b.endswith("order=[1, 2, 0]>") for b in pairs)
    assert all("max_phase=8" in b for b in slots + pairs)


@needs_ptxas
@pytest.mark.parametrize("ta,tb", [(True, False), (False, True), (True, True)])
def test_mn_contiguous_operands_are_read_into_registers_or_restaged(ta: bool, tb: bool) -> None:
    # every operand is copied 16 bytes at a time; an M-contiguous A is read from its slot into
    # the instruction's registers (4 per K step of 8, one commit group per step); an
    # N-contiguous B is read one element per lane (a conflict-free 128-byte row per warp) and
    # stored K-major 16 bytes at a time: 4 consecutive K per thread
    k = build(ta, tb)  # 128x128x32 tiles, 8 warps, 4 stages: 3 prologue copies + the loop's
    body = k.ptx[: k.ptx.index("wgmma.wait_group.sync.aligned 0")]
    assert "ld.global" not in body
    restaged = int(not tb)
    sizes = copy_sizes(k.ptx)
    assert sizes == ["16"] * (2 * 4 * (128 * 32 * 4 // 16 // 256))  # 2 tiles of 128x32 fp32, 4 copies each
    per_thread = 32 * 128 // 256  # elements of a 32x128 tile per thread
    assert body.count("ld.shared.b32") == restaged * per_thread + int(ta) * 4 * (32 // 8)
    assert body.count("st.shared.v4.b32") == restaged * per_thread // 4
    assert body.count("wgmma.commit_group") == (32 // 8 if ta else 1)
    # the stores are published to wgmma (the async proxy) and to every warp before the dot
    if restaged:
        store = body.index("st.shared.v4.b32")
        fence = body.index("fence.proxy.async.shared::cta", store)
        assert body.index("bar.sync", fence) < body.index("wgmma.mma_async", fence)
    assert "C75" not in k.asm["ptxas"]


@needs_ptxas
def test_mn_contiguous_operand_without_pipelining_is_copied_transposed() -> None:
    # one stage (no pipeline to hide a second pass): B is loaded element by element in the
    # transposing copy layout and stored straight into its K-major buffer
    k = build(False, False, stages=1)
    assert not buffers(k.asm["ir-gpu"], 2) and "local_store" not in k.asm["ir-gpu"]
    assert re.search(r"tc\.local_alloc %\w+ : tile<32x128xf32, #shared<[^>]*order=\[0, 1\]>>", k.asm["ir-gpu"])
    assert "m64n128k8.f32.tf32.tf32" in k.ptx


@needs_ptxas
@pytest.mark.parametrize("cfg", [(128, 256, 32, 8, 3), (128, 128, 32, 8, 4), (256, 128, 32, 8, 3),
                                 (128, 256, 16, 8, 4)], ids=lambda c: "x".join(map(str, c)))
def test_tf32_tiles_do_not_spill(cfg: tuple[int, int, int, int, int]) -> None:
    mb, nb, kb, warps, stages = cfg
    for ta, tb in ((False, False), (True, False), (False, True)):
        k = build(ta, tb, mb, nb, kb, warps, stages)
        # (A B with B N-contiguous runs transposed: the instruction's N is the tile's M)
        assert f"m64n{nb if ta or tb else mb}k8.f32.tf32.tf32" in k.ptx
        assert k.spills == 0, f"{k.spills} bytes of spills with {k.registers} registers ({ta}, {tb})"


@needs_ptxas
def test_tf32_before_hopper_stays_on_mma_sync() -> None:
    k = build(False, False, arch="sm_80", warps=4, stages=3)
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in k.ptx and "cvt.rna.tf32.f32" in k.ptx
    assert "wgmma" not in k.ptx


@needs_ptxas
@pytest.mark.parametrize("kb,max_phase", [(8, 2), (16, 4), (64, 8)])
def test_short_and_long_k_rows(kb: int, max_phase: int) -> None:
    # K rows of 32 and 64 bytes take the 32- and 64-byte swizzles; 256-byte rows two 128-byte panels
    # (A B^T: both operands K-contiguous, both read by descriptor)
    k = build(False, True, 128, 64, kb, 4, 3)
    assert "m64n64k8.f32.tf32.tf32" in k.ptx
    a_slot, b_slot = buffers(k.asm["ir-gpu"], 3)
    assert a_slot.startswith(f"128x{kb}xf32") and b_slot.startswith(f"64x{kb}xf32")
    assert f"max_phase={max_phase}," in a_slot and f"max_phase={max_phase}," in b_slot
    descs = re.findall(r"wgmma\.mma_async[^;]*;", k.ptx)
    assert len(descs) == (kb // 8) * 2  # K steps x the warpgroup's two 64-row blocks (4 warps, M 128)


@needs_ptxas
@pytest.mark.parametrize("ta,tb,producer", [(False, True, True), (False, False, False), (True, False, False)])
def test_persistent_tf32_products(ta: bool, tb: bool, producer: bool) -> None:
    # Every layout runs persistent. A B^T (both K-contiguous) with a producer warp; its float
    # accumulator is stored from its own registers (8-byte pairs), so the 3-stage 256x128
    # pipeline fits without 128 KiB for a layout exchange. A B computed transposed (a producer
    # warp made ptxas serialize its wgmma: C7512) and A^T B (restaged in the loop) loop over the
    # programs without a producer (tc_opt.persistent): their epilogue's exchange reuses the slots
    k = build(ta, tb, 256, 128, 32, 8, 3, persistent=True)
    assert k.persistent
    assert "C75" not in k.asm["ptxas"] and k.spills == 0
    assert k.num_warps == (9 if producer else 8)
    if producer:
        assert k.shared_bytes < 3 * (256 + 128) * 32 * 4 + 1024
        # (256 x 128 floats over 256 consumer threads: 64 pairs each; no shared-memory stores)
        assert re.findall(r"\bst\.global\S*", k.ptx) == ["st.global.v2.b32"] * 64
        assert not re.search(r"\bst\.shared", k.ptx)
    else:
        plain = build(ta, tb, 256, 128, 32, 8, 3, tma=True)
        assert not plain.persistent and k.shared_bytes == plain.shared_bytes
        # each program initializes the barriers after every thread is done with the previous
        # program's shared memory (its accesses ordered before the copies' async proxy)
        head = k.ptx[:k.ptx.index("mbarrier.init")]
        assert re.search(r"fence\.proxy\.async\.shared::cta;(?:(?!mbarrier|ld\.shared|st\.shared).)*bar\.sync\s+0;"
                         r"(?:(?!ld\.shared|st\.shared).)*$", head, re.S)
        assert "fence.proxy.async" not in plain.ptx[:plain.ptx.index("mbarrier.init")]
