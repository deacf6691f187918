"""Layout conversions exchanged in rounds of columns (tc_opt.exchange_rounds): the layouts that
keep each thread's elements in fixed column panels (layout_utils.thread_block, panel_layout), the
widths a conversion can take, and the persistent warp-specialized matmul whose C rows are not
16-byte aligned (no TMA store): it did not fit a 128x256x64 four-stage pipeline beside a whole
tile's exchange, and now fits with rounds, while kernels that fit keep the whole exchange."""

from __future__ import annotations

from pathlib import Path

import pytest
from tc_ir import ops as O
from tc_ir.layouts import Blocked, Mma
from tc_ir.testing import filecheck, round_trip
from tc_ir.types import F16, TileType
from tc_opt import CompileOptions
from tc_opt.exchange_rounds import exchange_in_rounds, round_widths
from tc_opt.layout_utils import panel_layout, thread_block
from tc_opt.pipeline import gpu_pipeline
from tc_opt.resources import ResourceLimitError, max_shared_bytes
from tc_opt.shared_alloc import allocate, scratch_bytes

KERNELS = Path(__file__).resolve().parents[2] / "tc-lang" / "tests" / "kernels"
TUTORIAL = (KERNELS / "matmul_tutorial.tc").read_text()
#: A, B, C aligned; M, N, K anything; lda, ldb multiples of 8 (16-byte rows); ldc odd.
UNALIGNED_C = ("16", "16", "16", None, None, None, "8", "8", None)
ALIGNED_C = ("16", "16", "16", None, None, None, "8", "8", "8")
STORE = Blocked([1, 1], [1, 32], [1, 8], [1, 0])  # coalesced for 256 columns of odd rows


def _spec(spec: tuple[str | None, ...]) -> tuple[str | None, ...]:
    names = {"16": "divisible_by_16", "8": "divisible_by_8"}
    return tuple(names.get(s) if s else None for s in spec)


def _compile(spec: tuple[str | None, ...], nb: int = 256, stages: int = 4, ws: bool = True) -> O.Module:
    from tc_nvptx.compiler import frontend_module

    m = frontend_module(TUTORIAL, {"TYPE": "half", "MB": 128, "NB": nb, "KB": 64}, None, "<test>")
    opts = CompileOptions(arch="sm_90a", num_warps=8, num_stages=stages, specialization=_spec(spec),
                          warp_specialize=ws, persistent=True, tma_store=True, overlap_epilogue=ws)
    gpu_pipeline(opts).run(m)
    return m


def _converts(m: O.Module) -> list[O.ConvertLayoutOp]:
    return [op for op in m.walk() if isinstance(op, O.ConvertLayoutOp) and scratch_bytes(op)]


def test_thread_blocks_of_blocked_and_tensor_core_layouts() -> None:
    assert thread_block(STORE, (128, 256), 1) == 256  # lanes and warps along the columns
    assert thread_block(STORE, (128, 256), 0) == 1  # each thread holds every row
    assert thread_block(Blocked([1, 2], [1, 32], [8, 1], [1, 0]), (128, 256), 1) == 64
    assert thread_block(STORE, (128, 128), 1) is None  # 256 threads' columns wrap around 128
    acc = Mma(3, (8, 1), (64, 256, 16))
    assert thread_block(acc, (128, 256), 1) == 8  # 2 columns x 4 lanes, no warps along N
    assert thread_block(acc, (128, 256), 0) == 128
    assert thread_block(Mma(3, (4, 2), (64, 128, 16)), (128, 256), 1) == 16


def test_panel_layout_moves_warps_then_lanes_to_the_rows() -> None:
    # 16-bit elements: pairs per thread, at most 128 bytes of a row per block
    assert panel_layout(STORE, (128, 256), 2) == Blocked([1, 2], [1, 32], [8, 1], [1, 0])
    vectors = Blocked([1, 8], [1, 32], [1, 8], [1, 0])
    assert panel_layout(vectors, (128, 256), 2) == Blocked([1, 8], [4, 8], [8, 1], [1, 0])
    assert panel_layout(Blocked([1, 4], [1, 32], [1, 8], [1, 0]), (128, 256), 4) == \
        Blocked([1, 4], [4, 8], [8, 1], [1, 0])  # (32-bit: 8 lanes of 16 bytes a row)
    # 160 columns: pairs of 32 lanes would not cover them in whole blocks of 64; single elements do
    rows_of_160 = Blocked([1, 1], [1, 32], [8, 1], [1, 0])  # (the coalesced layout there)
    assert panel_layout(rows_of_160, (128, 160), 2) == rows_of_160
    # 192 rows (not a power of two) as 128: 8 warps and 4 lanes along them
    assert panel_layout(vectors, (192, 256), 2) == Blocked([1, 8], [4, 8], [8, 1], [1, 0])
    assert panel_layout(vectors, (48, 256), 2) == Blocked([1, 8], [2, 16], [8, 1], [1, 0])  # (not 32 | 48)
    # too few rows to take the threads without replicas: unchanged
    assert panel_layout(STORE, (1, 256), 2) == STORE
    # not a row-major 2-D Blocked layout: unchanged
    column_major = Blocked([1, 1], [32, 1], [8, 1], [0, 1])
    assert panel_layout(column_major, (256, 128), 2) == column_major


def test_an_unaligned_c_takes_rounds_and_fits_beside_four_stages() -> None:
    m = _compile(UNALIGNED_C)
    limit = max_shared_bytes("sm_90a")
    assert 0 < m.attributes["shared_bytes"] <= limit
    rounds = _converts(m)
    assert rounds and all(op.columns == 128 for op in rounds)  # (the widest that fits: 2 rounds)
    for op in rounds:
        t = op.result.type
        assert isinstance(t, TileType) and t.shape == (128, 256) and t.element == F16
        assert t.layout == Blocked([1, 2], [1, 32], [8, 1], [1, 0])
        assert scratch_bytes(op) == 128 * (128 + 8) * 2  # one round, rows padded by 16 bytes
    filecheck(round_trip(m), """
CHECK: tc.warp_specialize
CHECK: tc.convert_layout %{{[0-9]+}} {columns = 128} : tile<128x256xf16, #blocked<spt=[1, 2], tpw=[1, 32], wpc=[8, 1]
CHECK: tc.store
""")
    # the whole tile's exchange would not fit: 64 KiB and its padding beside 192 KiB of pipeline
    for op in rounds:
        op.columns = 0
    f = m.functions[0]
    assert allocate(f).size > limit
    assert exchange_in_rounds(f, limit) and all(op.columns == 128 for op in rounds)


def test_kernels_that_fit_keep_the_whole_exchange() -> None:
    aligned = _compile(ALIGNED_C)  # (its C goes by TMA store: no exchange at all)
    assert not [op for op in aligned.walk() if isinstance(op, O.ConvertLayoutOp) and op.columns]
    narrow = _compile(UNALIGNED_C, nb=128)
    assert _converts(narrow) and not [op for op in _converts(narrow) if op.columns]


def test_round_widths_are_whole_blocks_of_both_layouts() -> None:
    m = _compile(UNALIGNED_C)
    (op, *_) = _converts(m)
    op.columns = 0
    assert round_widths(op) == [128, 64]  # (blocks of 8 and 64 columns; narrower than 256)
    # a result layout whose threads spread over all 256 columns cannot be split
    t = op.result.type
    assert isinstance(t, TileType)
    op.results[0].type = TileType(t.shape, t.element, STORE)
    assert round_widths(op) == []


def test_a_kernel_that_does_not_fit_even_in_rounds_is_reported() -> None:
    # five stages of 128x256x64 take 240 KiB before any epilogue
    with pytest.raises(ResourceLimitError, match="shared memory"):
        from tc_nvptx import compile as compile_kernel

        compile_kernel(TUTORIAL, defines={"TYPE": "half", "MB": 128, "NB": 256, "KB": 64},
                       options=CompileOptions(arch="sm_90a", num_warps=8, num_stages=5,
                                              specialization=_spec(UNALIGNED_C), warp_specialize=True,
                                              persistent=True, tma_store=True, overlap_epilogue=True))
