"""The shared-memory bank model (tc_opt.smem_banks) and what it chooses: the row padding of a
transposition's exchange buffer (shared_alloc.trans_exchange_strides), and the barrier the first
user of shared memory can do without (shared_alloc.runs_first_in_shared_memory)."""

from __future__ import annotations

from pathlib import Path

import pytest
import tc_lang
from tc_ir.layouts import Blocked
from tc_ir.lower import lower
from tc_ir.ops import ForOp, Module, TransOp
from tc_ir.types import ScalarType, TileType
from tc_opt import CompileOptions, allocate, blocked_for, gpu_pipeline
from tc_opt.shared_alloc import padded_strides, runs_first_in_shared_memory, trans_exchange_strides
from tc_opt.smem_banks import vector_elements, wavefronts

TORCH_KERNELS = Path(__file__).resolve().parents[2] / "tc-torch" / "src" / "tc_torch" / "kernels"
F16 = ScalarType("f16")
F32 = ScalarType("f32")


def _rows(shape: tuple[int, int], warps: int, vec: int) -> Blocked:
    """The coalesced layout of a row-major tile (what loads and stores get)."""
    return blocked_for(shape, warps, (1, 0), vec)


def test_one_row_per_access_is_one_wavefront_per_128_bytes() -> None:
    # 32 lanes of one 4-byte word each along a row: one wavefront per access; 16-byte vectors
    # (8 lanes a phase): four
    lay = Blocked([1, 1], [1, 32], [1, 1], [1, 0])
    assert wavefronts((1, 32), lay, (32, 1), 4) == 1
    vec = Blocked([1, 4], [1, 32], [1, 1], [1, 0])
    assert vector_elements((1, 128), vec, (128, 1), 4) == 4
    assert wavefronts((1, 128), vec, (128, 1), 4) == 4


def test_column_reads_of_rows_a_bank_cycle_apart_conflict() -> None:
    # a warp reading one column of 32 rows of 32 words: every lane in bank 0 (32-way); one word
    # of padding per row spreads them over all banks
    lay = Blocked([1, 1], [32, 1], [1, 1], [1, 0])
    assert wavefronts((32, 1), lay, (32, 1), 4) == 32
    assert wavefronts((32, 1), lay, (33, 1), 4) == 1


def test_vectors_need_aligned_rows() -> None:
    lay = _rows((64, 64), 4, 8)
    assert vector_elements((64, 64), lay, padded_strides((64, 64), 0), 2) == 8
    assert vector_elements((64, 64), lay, padded_strides((64, 64), 8), 2) == 8  # 144-byte rows
    assert vector_elements((64, 64), lay, padded_strides((64, 64), 2), 2) == 2  # 132: words
    assert vector_elements((64, 64), lay, padded_strides((64, 64), 1), 2) == 1  # 130: halves


@pytest.mark.parametrize(
    "elem, vec, pad, plain, padded16",
    [(F16, 8, 2, 272, 272), (F32, 4, 1, 544, 288)],
)
def test_transpose_padding_avoids_conflicts_on_both_sides(
    elem: ScalarType, vec: int, pad: int, plain: int, padded16: int
) -> None:
    # a 64 x 64 transposition between coalesced layouts (4 warps): the writes run along rows and
    # the reads down columns, each thread's elements 8 (fp16) or 4 (fp32) rows apart. Rows of 128
    # or 256 bytes (or padded by 16) put a column's lanes into 1-2 banks; the chosen padding
    # costs at most half of that
    shape = (64, 64)
    eb = elem.bytes
    src = TileType(shape, elem, _rows(shape, 4, vec))
    dst = TileType(shape, elem, _rows(shape, 4, vec))

    def cost(strides: tuple[int, ...]) -> int:
        return wavefronts(shape, src.layout, strides, eb) + wavefronts(shape, dst.layout, strides[::-1], eb)  # type: ignore[arg-type]

    assert cost(padded_strides(shape, 0)) == plain
    assert cost(padded_strides(shape, 16 // eb)) == padded16
    chosen = trans_exchange_strides(src, dst, (1, 0))
    assert chosen == padded_strides(shape, pad)
    assert 2 * cost(chosen) <= min(plain, padded16)


def test_transpose_padding_of_other_layouts_is_the_exchange_default() -> None:
    from tc_ir.layouts import Slice
    from tc_opt.shared_alloc import exchange_strides

    t = TileType((64, 64), F32, Slice(Blocked([1, 1, 4], [1, 2, 16], [1, 4, 1], [2, 1, 0]), 0))
    assert trans_exchange_strides(t, t, (1, 0)) == exchange_strides((64, 64), 4)


def _laid_out(src: str, defines: dict[str, object], **kw: object) -> Module:
    m = lower(tc_lang.frontend(src, defines))  # type: ignore[arg-type]
    gpu_pipeline(CompileOptions(**kw)).run(m)  # type: ignore[arg-type]
    return m


def test_first_user_of_shared_memory() -> None:
    m = _laid_out((TORCH_KERNELS / "transpose.tc").read_text(), {"TYPE": "half", "TM": 64, "TN": 64},
                  specialization=("divisible_by_16",) * 6)
    f = m.functions[0]
    trans = [op for op in f.walk() if isinstance(op, TransOp)][0]
    assert runs_first_in_shared_memory(f, allocate(f), trans)


LOOPED = """
__global__ void t(float* X, float* Y) {
  int r[32] = 0 ... 32;
  for (int i = 0; i < 4; i++) {
    float* px[32, 32] = X + i * 1024 + r[:, newaxis] * 32 + r[newaxis, :];
    float* py[32, 32] = Y + i * 1024 + r[:, newaxis] * 32 + r[newaxis, :];
    *py = ^(*px);
  }
}
"""


def test_a_transposition_in_a_loop_keeps_its_first_barrier() -> None:
    # the next iteration's writes must wait for this one's reads
    m = _laid_out(LOOPED, {})
    f = m.functions[0]
    trans = [op for op in f.walk() if isinstance(op, TransOp)]
    assert len(trans) == 1 and any(isinstance(op, ForOp) for op in f.walk())
    alloc = allocate(f)
    assert trans[0] in alloc.offsets
    assert not runs_first_in_shared_memory(f, alloc, trans[0])
