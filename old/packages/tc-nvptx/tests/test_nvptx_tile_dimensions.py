"""Tile dimensions that are multiples of 16 but not powers of two: covered by whole blocks of
threads, or refused at the source line; never spread unevenly (silently wrong results)."""

from __future__ import annotations

import pytest
import tc_nvptx
from tc_ir.layouts import Blocked, Mma
from tc_lang.diagnostics import TcLoweringError
from tc_opt import CompileOptions

from tc_nvptx.layout_math import LayoutError, check_cover, thread_map

SCALE = "__global__ void k(float* x) {\n  int r[N] = 0 ... N;\n  *(x + r) = *(x + r) * 2.0f;\n}\n"


def test_check_cover_refuses_blocks_that_do_not_divide_the_dimension() -> None:
    check_cover(192, 64)
    check_cover(16, 64)
    with pytest.raises(LayoutError, match="dimension of 192 cannot be covered by whole blocks of 128"):
        check_cover(192, 128)
    with pytest.raises(LayoutError):
        check_cover(48, 64)  # (threads 48..63 would hold copies of some elements only)


def test_thread_maps_repeat_blocks_along_a_dimension_of_192() -> None:
    m = thread_map((128, 192), Blocked([1, 8], [4, 8], [8, 1], [1, 0]))
    cols = m.dims[1]
    assert cols.mode == "tile" and len(cols.offsets) == 3 * 8  # 3 blocks of 64 columns
    acc = thread_map((128, 192), Mma(3, (8, 1), (64, 192, 16)))
    assert acc.per_thread == 128 * 192 // 256
    with pytest.raises(LayoutError):
        thread_map((192, 256), Mma(3, (8, 1), (64, 256, 16)))  # 128 rows of warps do not divide 192


@pytest.mark.parametrize("n,warps", [(96, 4), (48, 4), (192, 8), (384, 4)])
def test_1d_tiles_of_multiples_of_16_compile_for_any_warps(n: int, warps: int) -> None:
    ck = tc_nvptx.compile(SCALE, defines={"N": n}, options=CompileOptions(arch="sm_90", num_warps=warps))
    assert "ld.global" in ck.ptx and "st.global" in ck.ptx


def test_a_dot_that_no_warp_arrangement_covers_is_refused_at_its_line() -> None:
    src = ("__global__ void k(half* a, half* b, float* c) {\n  int rm[48] = 0 ... 48;\n"
           "  int rn[80] = 0 ... 80;\n  int rk[32] = 0 ... 32;\n"
           "  float acc[48, 80] = *(a + rm[:, newaxis] * 32 + rk[newaxis, :]) @ *(b + rk[:, newaxis] * 80 + rn[newaxis, :]);\n"
           "  *(c + rm[:, newaxis] * 80 + rn[newaxis, :]) = acc;\n}\n")
    with pytest.raises(TcLoweringError) as info:
        tc_nvptx.compile(src, options=CompileOptions(arch="sm_80", num_warps=4), filename="k.tc")
    d = info.value.first
    assert (d.location.file, d.location.line) == ("k.tc", 5)
    assert "cannot be covered by whole blocks" in d.message and "128 threads" in d.message
    assert "num_warps" in (d.hint or "")
    tc_nvptx.compile(src, options=CompileOptions(arch="sm_80", num_warps=1))  # one warp covers it
