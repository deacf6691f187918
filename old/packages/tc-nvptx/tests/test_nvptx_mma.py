"""Tensor-core dot and software pipelining, checked on the PTX (no GPU): mma.sync + ldmatrix for
fp16/bf16, cp.async inside pipelined loops, FMA for exact fp32, tf32 on request, no spills for
the tutorial's autotune configurations (ptxas -v)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tc_ir import parse_module, print_module
from tc_nvptx import compile
from tc_nvptx.compiler import CompiledKernel
from tc_nvptx.ptxas import find_ptxas
from tc_opt import CompileOptions

KERNELS = Path(__file__).resolve().parents[2] / "tc-lang" / "tests" / "kernels"
DEFINES = json.loads((KERNELS / "defines.json").read_text())
#: strides and pointers divisible by 16, as the runtime specializes them (M, N, K unknown)
SPEC9 = tuple(None if i in (3, 4, 5) else "divisible_by_16" for i in range(9))

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not on the PATH")


def build(name: str, defines: dict[str, object], *, arch: str = "sm_80", warps: int = 4, stages: int = 3,
          fp32_dot: str = "ieee") -> CompiledKernel:
    opts = CompileOptions(arch=arch, num_warps=warps, num_stages=stages, specialization=SPEC9, fp32_dot=fp32_dot)
    return compile((KERNELS / name).read_text(), defines=defines, options=opts, filename=name)


def loop_body(ptx: str) -> str:
    """The PTX between the first mma/ldmatrix loop label and its back branch (the main loop)."""
    m = re.search(r"\$L__BB\d+_\d+:(?:(?!\$L__BB).)*?mma\.sync.*?bra\.uni\s+\$L__BB\d+_\d+;", ptx, re.S)
    return m.group(0) if m else ""


@needs_ptxas
def test_hopper_tutorial_epilogue_moves_fp16_through_shared_memory() -> None:
    # the fp32 accumulator is narrowed to fp16 in its own layout, then the fp16 tile changes
    # layout through shared memory: 4-byte stores of fp16 pairs, half the bytes of fp32 pairs
    k = build("matmul_tutorial.tc", {"TYPE": "half", "MB": 128, "NB": 256, "KB": 64}, arch="sm_90",
              warps=8)
    epilogue = k.ptx[k.ptx.index("wgmma.wait_group.sync.aligned 0"):]
    assert "st.shared.v2.b32" not in epilogue and "st.shared.v2.f32" not in epilogue
    assert epilogue.count("st.shared.b32") == 128 * 256 // 2 // 256  # one per pair per thread
    assert k.spills == 0


#: The kernels whose pipelined operand loads qualify for TMA on sm_90 (tc_opt.tma).
TMA_KERNELS = ("matmul.tc", "matmul_tutorial.tc", "matmul_autotuned.tc", "matmul_prefetch.tc",
               "matmul_remat.tc", "matmul_fused_trans.tc")

CASES = [(name, var) for name in ("matmul.tc", "matmul_prefetch.tc", "matmul_remat.tc", "matmul_tutorial.tc",
                                  "matmul_autotuned.tc", "matmul_fused_trans.tc") for var in DEFINES[name]]


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("ty", ["half", "bf16"])
@pytest.mark.parametrize("name,var", CASES)
def test_spec_matmuls_use_tensor_cores(name: str, var: str, ty: str, arch: str) -> None:
    d = dict(DEFINES[name][var], TYPE=ty)
    k = build(name, d, arch=arch)
    suffix = "f16.f16" if ty == "half" else "bf16.bf16"
    rows, cols = int(d.get("TM", d.get("MB", 0))), int(d.get("TN", d.get("NB", 0)))  # type: ignore[call-overload]
    if arch == "sm_90" and rows >= 64:  # a warpgroup (the 4 warps) takes 64-row blocks: wgmma
        assert k.arch == "sm_90a"  # wgmma exists on sm_90a only
        assert f"wgmma.mma_async.sync.aligned.m64n{cols}k16.f32.{suffix}" in k.ptx
        assert "mma.sync" not in k.ptx and "ldmatrix" not in k.ptx  # operands stay in shared memory
        assert "wgmma.wait_group.sync.aligned 0" in k.ptx  # the accumulator is read after it
        if name in TMA_KERNELS:  # operand tiles of row-major matrices: TMA copies on mbarriers
            assert "cp.async.bulk.tensor.2d" in k.ptx and "mbarrier.try_wait.parity" in k.ptx
            assert "cp.async.cg" not in k.ptx
        else:  # cp.async writes reach wgmma (the async proxy) through a fence
            assert "fence.proxy.async.shared::cta" in k.ptx
    else:
        assert k.arch == arch
        assert f"mma.sync.aligned.m16n8k16.row.col.f32.{suffix}.f32" in k.ptx
        assert "ldmatrix.sync.aligned.m8n8.x4" in k.ptx
    assert "fma.rn.f32" not in k.ptx
    assert k.cubin is not None


@needs_ptxas
@pytest.mark.parametrize("var, trans_a, trans_b", [("NN", 0, 1), ("NT", 0, 0), ("TN", 1, 1), ("TT", 1, 0)])
def test_wgmma_reads_either_major_order(var: str, trans_a: int, trans_b: int) -> None:
    # wgmma's "transpose" flags mean M (A) or N (B) is the contiguous dimension in shared memory:
    # A [TM, TK] row-major is K-major (0), the spec's ^a of a [TK, TM] tile M-major (1); B [TK, TN]
    # row-major is N-major (1), ^b of a [TN, TK] tile K-major (0)
    d = dict(DEFINES["matmul_fused_trans.tc"][var], TYPE="half")
    ptx = build("matmul_fused_trans.tc", d, arch="sm_90").ptx
    flags = set(re.findall(r"wgmma\.mma_async[^;]*, p, 1, 1, (\d), (\d);", ptx))
    assert flags == {(str(trans_a), str(trans_b))}


@needs_ptxas
@pytest.mark.parametrize("ty", ["half", "bf16"])
def test_tutorial_loop_is_pipelined(ty: str) -> None:
    k = build("matmul_tutorial.tc", dict(DEFINES["matmul_tutorial.tc"]["half"], TYPE=ty), stages=3)
    body = loop_body(k.ptx)
    assert "cp.async.cg.shared.global" in body and "cp.async.commit_group" in body
    assert "cp.async.wait_group 1" in body
    assert "ld.global" not in body  # every operand load became a cp.async
    assert "cp.async.wait_group 0" in k.ptx  # drained after the loop
    ir = k.asm["ir-gpu"]
    assert ir.count("tc.async_copy") == 6  # 2 operands x (2 prologue stages + the loop)


@needs_ptxas
@pytest.mark.parametrize("name,var", [("matmul_prefetch.tc", "half"), ("matmul_remat.tc", "half"),
                                      ("matmul_fused_trans.tc", "NN"), ("matmul_fused_trans.tc", "TT")])
def test_hand_prefetched_loops_are_pipelined(name: str, var: str) -> None:
    # the 2020 kernels carry the next operand tiles in registers (`a = check ? *pa : 0`);
    # tc_opt.reroll_prefetch turns that back into loads of the body, which cp.async pipelines
    k = build(name, dict(DEFINES[name][var]), stages=3)
    # the main loop: its label to the (here conditional) branch back to it
    m = re.search(r"(\$L__BB\d+_\d+):(?:(?!\$L__BB\d+_\d+:).)*?mma\.sync.*?bra(?:\.uni)?\s+\1;", k.ptx, re.S)
    assert m is not None
    body = m.group(0)
    assert "cp.async.cg.shared.global" in body and "cp.async.wait_group 1" in body
    assert "ld.global" not in body
    ir = k.asm["ir-gpu"]
    assert ir.count("tc.async_copy") == 6 and "tc.if" not in ir
    hopper = build(name, dict(DEFINES[name][var]), arch="sm_90")  # and TMA on sm_90
    assert "cp.async.bulk.tensor.2d" in hopper.ptx and "cp.async.cg" not in hopper.ptx


@needs_ptxas
def test_num_stages_one_means_no_pipelining() -> None:
    k = build("matmul_tutorial.tc", dict(DEFINES["matmul_tutorial.tc"]["half"]), stages=1)
    assert "cp.async" not in k.ptx and "mma.sync" in k.ptx


@needs_ptxas
@pytest.mark.parametrize("stages", [2, 4])
def test_stages_set_buffers_and_wait(stages: int) -> None:
    d = {"TYPE": "half", "MB": 64, "NB": 64, "KB": 32}
    k = build("matmul_tutorial.tc", d, stages=stages)
    assert f"cp.async.wait_group {stages - 2}" in loop_body(k.ptx)
    assert k.shared_bytes >= stages * (64 * 32 + 32 * 64) * 2


@needs_ptxas
def test_shared_memory_above_48k_is_recorded() -> None:
    d = {"TYPE": "half", "MB": 128, "NB": 128, "KB": 64}
    k = build("matmul_tutorial.tc", d, stages=4)
    assert k.shared_bytes >= 4 * (128 * 64 * 2) * 2 > 48 * 1024
    assert ".extern .shared" in k.ptx  # dynamic shared memory, sized at launch


@needs_ptxas
def test_fp32_dot_is_exact_by_default() -> None:
    k = build("matmul_tutorial.tc", dict(DEFINES["matmul_tutorial.tc"]["float"]))
    assert "mma.sync" not in k.ptx and "fma.rn.f32" in k.ptx


@needs_ptxas
def test_fp32_dot_tf32_on_request() -> None:
    k = build("matmul_tutorial.tc", dict(DEFINES["matmul_tutorial.tc"]["float"]), fp32_dot="tf32")
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in k.ptx
    assert "cvt.rna.tf32.f32" in k.ptx
    assert "cp.async" in loop_body(k.ptx)


#: The autotune list of the spec's matrix-multiplication tutorial.
TUTORIAL_CONFIGS = [(128, 128, 32, 4), (64, 128, 32, 4), (128, 64, 32, 4), (64, 64, 64, 4),
                    (32, 128, 64, 4), (128, 32, 64, 4), (64, 32, 64, 2), (32, 64, 64, 2)]


@needs_ptxas
@pytest.mark.parametrize("mb,nb,kb,warps", TUTORIAL_CONFIGS)
def test_tutorial_configs_do_not_spill(mb: int, nb: int, kb: int, warps: int) -> None:
    k = build("matmul_tutorial.tc", {"TYPE": "half", "MB": mb, "NB": nb, "KB": kb}, warps=warps, stages=3)
    assert k.spills == 0, f"{k.spills} bytes of spills with {k.registers} registers"
    assert "mma.sync" in k.ptx and "cp.async" in loop_body(k.ptx)


@needs_ptxas
@pytest.mark.parametrize("warps", [1, 2, 8])
@pytest.mark.parametrize("mb,nb,kb", [(16, 16, 16), (32, 64, 16), (64, 32, 32)])
def test_shapes_and_warps(mb: int, nb: int, kb: int, warps: int) -> None:
    k = build("matmul_autotuned.tc", {"TYPE": "half", "MB": mb, "NB": nb, "KB": kb}, warps=warps)
    assert "mma.sync" in k.ptx and k.cubin is not None


def test_pipelined_ir_round_trips() -> None:
    k = build("matmul_tutorial.tc", dict(DEFINES["matmul_tutorial.tc"]["half"]))
    text = k.asm["ir-gpu"]
    for op in ("tc.local_alloc", "tc.local_subview", "tc.local_load", "tc.async_copy",
               "tc.async_commit_group", "tc.async_wait", "#mma<", "#shared<vec=8"):
        assert op in text
    assert print_module(parse_module(text)) == text


def test_transposed_operand_ir_round_trips() -> None:
    k = build("matmul_fused_trans.tc", dict(DEFINES["matmul_fused_trans.tc"]["TT"]))
    text = k.asm["ir-gpu"]
    assert "tc.local_trans" in text
    assert print_module(parse_module(text)) == text


CHAINED = """
__global__ void chained(half* Q, half* K, half* V, float* O) {
  int rm[32] = 0 ... 32;
  int rd[64] = 0 ... 64;
  half q[32, 64] = *(Q + rm[:, newaxis] * 64 + rd[newaxis, :]);
  half kt[64, 64] = *(K + rd[:, newaxis] + rd[newaxis, :] * 64);
  half v[64, 64] = *(V + rd[:, newaxis] * 64 + rd[newaxis, :]);
  float s[32, 64] = q @ kt;
  *(O + rm[:, newaxis] * 64 + rd[newaxis, :]) = (half[32, 64]) s @ v;
}
"""


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_a_chained_dot_reads_its_own_operand(arch: str) -> None:
    # the second dot's A (the first dot's result, through a buffer that reuses q's memory) is
    # read by ldmatrix of its own: LLVM merged the two reads of that address when ldmatrix had no
    # memory effect, and the GPU multiplied q instead (32-row tiles run mma.sync on sm_90 too)
    k = compile(CHAINED, options=CompileOptions(arch=arch, num_warps=4, num_stages=1))
    assert "mma.sync" in k.ptx
    mmas = re.findall(r"mma\.sync\.aligned\.m16n8k16\S+ \{[^}]*\}, (\{[^}]*\})", k.ptx)
    assert len(mmas) == 2 * 16  # (per warp: 16 rows x 32 columns, 4 k16 steps, two dots)
    assert not set(mmas[:16]) & set(mmas[16:])  # no A fragment of the first dot feeds the second
    # q: 4, K^T: 8, s: 4, V: 8 (x4 each)
    assert k.ptx.count("ldmatrix.sync.aligned.m8n8.x4") == 24
