"""12 warps (three warpgroups; CompileOptions accepts them beside the powers of two): the thread
maps take a warp's coordinate by division and remainder where a count is not a power of two,
and the layouts built from num_warps cover their tiles. The GPU results: tc_torch's 192x192
configurations (tests of tc-torch) and the catalogue's 12-warp dot and atomic tiles
(tests/integration/test_integration_gpu_vs_interpreter.py)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import tc_nvptx
from tc_ir.layouts import Blocked, DotOperand, Mma
from tc_nvptx.layout_math import layout_warps, thread_map
from tc_opt import CompileOptions
from tc_opt.k_major_operands import restaging_layout, transposing_copy_layout

sys.path.insert(0, str(Path(__file__).parent))
import nvptx_catalogue as cat  # noqa: E402

DOT = """
__global__ void dot(float* C, half* A, half* B) {
    int m[192] = 0 ... 192;
    int n[192] = 0 ... 192;
    int k[64] = 0 ... 64;
    float c[192, 192] = *(A + m[:, newaxis] * 64 + k[newaxis, :]) @ *(B + k[:, newaxis] * 192 + n[newaxis, :]);
    *(C + m[:, newaxis] * 192 + n[newaxis, :]) = c;
}
"""


def test_three_warpgroups_take_their_rows_by_remainder() -> None:
    ck = tc_nvptx.compile(DOT, options=CompileOptions(arch="sm_90a", num_warps=12,
                                                      specialization=("divisible_by_16",) * 3), assemble_cubin=False)
    assert ".maxntid 384" in ck.ptx
    assert "wgmma.mma_async.sync.aligned.m64n192k16.f32.f16.f16" in ck.ptx
    ll = ck.asm["llvm"]
    group = re.search(r'(%"[.\w]+") = lshr i32 %"warp", 2\n', ll)  # (warp / 4: the warpgroup, 0 to 2)
    assert group is not None
    assert f"urem i32 {group.group(1)}, 3" in ll and f"and i32 {group.group(1)}, 2" not in ll
    # (16 rows per warp: warp mod 12 with the warps along M, not warp & 11)
    assert 'urem i32 %"warp", 12' in ll and 'and i32 %"warp", 11' not in ll


def test_power_of_two_warps_keep_their_shifts_and_masks() -> None:
    ck = tc_nvptx.compile(DOT.replace("192", "128"), options=CompileOptions(
        arch="sm_90a", num_warps=8, specialization=("divisible_by_16",) * 3), assemble_cubin=False)
    ll = ck.asm["llvm"]
    assert "urem" not in ll and "udiv" not in ll
    assert 'and i32 %"warp", 7' in ll


@pytest.mark.parametrize("shape, fast, kdim", [((32, 192), 1, 0), ((192, 32), 0, 1)])
def test_copy_layouts_of_twelve_warps_cover_their_tiles(shape: tuple[int, int], fast: int, kdim: int) -> None:
    # 8 of the 12 warps spread over the tile, the other 4 hold copies (12 along K = 32 left
    # blocks of 24 that do not divide it)
    for build in (transposing_copy_layout, restaging_layout):
        lay = build(shape, fast, kdim, 12)
        assert lay.warps_per_cta[0] * lay.warps_per_cta[1] == 8
        assert thread_map(shape, lay).per_thread * 32 * 8 == shape[0] * shape[1]
        four = build(shape, fast, kdim, 4)
        assert four.warps_per_cta[0] * four.warps_per_cta[1] == 4  # (powers of two as before)


#: Row sums of a 192x64 wgmma accumulator (a tile of 192 over 384 threads) and the accumulator
#: added atomically (a blocked layout of 8 of the 12 warps): the catalogue's kernel, which the
#: GPU runs against the interpreter.
ROW_SUMS = cat.ATOMIC_TILE


def _twelve_warp_llvm(source: str, arch: str) -> str:
    ck = tc_nvptx.compile(source, options=CompileOptions(arch=arch, num_warps=12), assemble_cubin=False)
    return ck.asm["llvm"]


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_a_tile_of_192_covered_twice_takes_its_element_by_remainder(arch: str) -> None:
    # 384 threads over the 192 row sums: thread t holds element t % 192 (t & 191 would leave
    # rows 64-127 unwritten, as the GPU showed at fc4c115)
    ll = _twelve_warp_llvm(ROW_SUMS, arch)
    assert re.search(r"urem i32 %\"[.\w]+\", 192\n", ll)
    assert not re.search(r"and i32 %\"[.\w]+\", 191\n", ll)


def test_warps_a_layout_does_not_spread_over_do_not_repeat_atomics() -> None:
    # the [192, 64] tile added atomically is spread over 8 warps (in powers of two); warps 8-11
    # hold copies of warps 0-3 and must not add them a second time
    ll = _twelve_warp_llvm(ROW_SUMS, "sm_90a")
    below = re.search(r'(%"[.\w]+") = icmp ult i32 %"warp", 8\n', ll)
    assert below is not None
    owner = re.search(rf'(%"[.\w]+") = and i1 1, {re.escape(below.group(1))}\n', ll)
    assert owner is not None
    atomics = ll.count("atomicrmw fadd")
    assert atomics == 192 * 64 // (32 * 8)
    assert ll.count(f"br i1 {owner.group(1)}, label %\"atomic") == atomics


def test_layouts_tell_their_warps_apart() -> None:
    assert layout_warps(Blocked([1, 4], [2, 16], [8, 1], [1, 0])) == 8
    assert layout_warps(DotOperand(Mma(3, [12, 1], [64, 64, 16]), 0, 2)) == 12
