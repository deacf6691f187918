"""Partial sums read back into a tensor-core accumulator (split-K, stream-K): the read and the
store of the partial keep the accumulator's layout (tc_opt.layout_assign), and the read is added
vector by vector inside one asm statement (tc_nvptx.lower_memory._accumulating_add), so a
128x256 float accumulator over 8 warps fits without spills."""

from __future__ import annotations

import re

import pytest
from tc_nvptx.compiler import CompiledKernel, compile
from tc_nvptx.ptxas import find_ptxas
from tc_opt import CompileOptions

#: Program 1 adds the partial sum program 0 left in W (a split-K over two programs, flags aside).
SPLIT_K = """
__global__ void split(half* A, half* B, float* W, half* C, int K, int lda, int ldb, int ldc) {
    int pid = get_program_id(0);
    int rm[MB] = 0 ... MB;
    int rn[NB] = 0 ... NB;
    int rk[KB] = pid * (K / 2) + (0 ... KB);
    half* pa[MB, KB] = A + (rk[newaxis, :] + rm[:, newaxis] * lda);
    half* pb[KB, NB] = B + (rk[:, newaxis] * ldb + rn[newaxis, :]);
    float acc[MB, NB] = 0;
    for (int i = 0; i < K / 2 / KB; i++) {
        half a[MB, KB] = *pa;
        half b[KB, NB] = *pb;
        acc += a @ b;
        pa += KB;
        pb += KB * ldb;
    }
    float* pw[MB, NB] = W + (rm[:, newaxis] * NB + rn[newaxis, :]);
    if (pid == 0) {
        *pw = acc;
    } else {
        acc += *pw;
        half* pc[MB, NB] = C + (rm[:, newaxis] * ldc + rn[newaxis, :]);
        *pc = acc;
    }
}
"""
#: The same accumulator stored to W only: no partial is read back, so the store is exchanged.
STORE_ONLY = SPLIT_K.replace("acc += *pw;", "")


def _compile(src: str, mb: int = 128, nb: int = 256) -> CompiledKernel:
    return compile(src, defines={"MB": mb, "NB": nb, "KB": 64},
                   options=CompileOptions(arch="sm_90a", num_warps=8, num_stages=3,
                                          specialization=("divisible_by_16",) * 8))


def _line(ir: str, pattern: str) -> str:
    found = [ln for ln in ir.splitlines() if re.search(pattern, ln)]
    assert len(found) == 1, found
    return found[0]


def test_partial_sum_keeps_the_accumulator_layout() -> None:
    ir = _compile(SPLIT_K).asm["ir-gpu"]
    load = _line(ir, r"= tc\.load %\w+ :.*128x256xf32")
    stored_to = _line(ir, r"%pw = tc\.addptr")
    add = _line(ir, r'kind = "fadd"')
    for text in (load, stored_to, add):
        assert "#mma<v=3" in text, text
    # nothing crosses shared memory between the partial and the accumulator
    assert not re.search(r"tc\.convert_layout .*128x256xf32", ir), ir


def test_stored_accumulator_without_read_back_is_exchanged() -> None:
    ir = _compile(STORE_ONLY).asm["ir-gpu"]
    assert re.search(r"tc\.convert_layout .*128x256xf32, #blocked", ir)
    assert not re.search(r"tc\.load %\w+ :.*xf32", ir)


def test_partial_sum_is_added_as_it_arrives() -> None:
    # batches of LOAD_AND_ADD_BATCH (16) floats: 8 loads of two in flight, then their 16 adds
    ptx = _compile(SPLIT_K).ptx
    statements = re.findall(r"\{ \.reg \.f32 [^;]*;((?: ld\.global\.v2\.f32 \{%tc_t\d+, %tc_t\d+\}, \[ %rd\d+ \+ 0 \];)+)"
                            r"((?: add\.rn\.f32 %r\d+, %r\d+, %tc_t\d+;)+) \}", ptx)
    assert len(statements) == 128 * 256 // 256 // 16  # 128 floats per thread, 16 per statement
    for loads, adds in statements:
        assert loads.count("ld.global.v2.f32") == 8 and adds.count("add.rn.f32") == 16
        assert "%tc_t0," in loads and adds.rstrip(";").endswith("%tc_t15")
    assert "ld.global.v2.b32" not in ptx  # (no separate load of the partial)


@pytest.mark.skipif(find_ptxas() is None, reason="needs ptxas")
def test_no_spills_with_a_128x256_accumulator() -> None:
    k = _compile(SPLIT_K)
    assert k.spills == 0 and k.registers <= 255
