"""TMA matmuls, warp-specialized and persistent ones, and TMA bulk-store epilogues, on the GPU
(CompileOptions.tma, .warp_specialize, .persistent, .tma_store): the tutorial kernel at multiples
of the tile and the masked kernel at odd sizes and at K = 0 (no iteration: the accumulator that
tc_opt.accumulator_init leaves undefined must come out as zeros), with more programs than SMs,
against torch. "tma+p" is a persistent grid without a producer warp (tc_opt.persistent);
"+overlap" issues each program's first dot before the previous one's stores, beside a producer
warpgroup that hands its registers to the consumers (tc_opt.overlap_epilogue). The
kernels are launched by tools/tma_check.py's own launcher (with the runtime's persistent grid)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0),
                       reason="needs a Hopper GPU (TMA, wgmma)"),
]

TOOL = Path(__file__).resolve().parents[3] / "tools" / "tma_check.py"


def _tool() -> Any:
    spec = importlib.util.spec_from_file_location("_tc_tma_check", TOOL)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("mode", ["tma", "tma+ws", "persistent", "tma+p"])
@pytest.mark.parametrize("cfg", [(128, 256, 64, 8, 3), (128, 128, 64, 4, 4)], ids=lambda c: "x".join(map(str, c)))
def test_specialized_matmuls_match_torch(mode: str, cfg: tuple[int, int, int, int, int]) -> None:
    assert _tool().check_correctness([cfg], (mode,)) == 0


@pytest.mark.parametrize("mode", ["tma+store", "ws+store", "persistent+store", "tma+p+store"])
@pytest.mark.parametrize("cfg", [(128, 256, 64, 8, 4), (128, 256, 64, 8, 3), (128, 128, 64, 4, 4), (256, 128, 64, 8, 3),
                                 (128, 256, 32, 8, 7)],
                         ids=lambda c: "x".join(map(str, c)))
def test_tma_store_epilogues_match_torch(mode: str, cfg: tuple[int, int, int, int, int]) -> None:
    """At the masked kernel's odd sizes the map's extents must clip the bulk stores: C lies inside
    a larger matrix whose other elements must keep their sentinel (tma_check.check_correctness).
    The persistent 3-stage kernel writes whole tiles (a buffer per panel) whose copies overlap the
    next tile; the 4-stage one two buffers in turns; 128x256x32 with 7 stages three buffers for
    four panels (it hung before its stmatrix became convergent). Each writes its accumulator with
    stmatrix (256 x 128: two 16-row blocks per warp, 128 rows apart)."""
    assert _tool().check_correctness([cfg], (mode,)) == 0


@pytest.mark.parametrize("mode,cfg", [("persistent+overlap", (128, 128, 64, 4, 4)),
                                      ("persistent+store+overlap", (128, 256, 64, 8, 4)),
                                      ("persistent+store+overlap", (128, 128, 64, 4, 4)),
                                      ("persistent+store+overlap", (128, 256, 32, 8, 7))],
                         ids=lambda v: v if isinstance(v, str) else "x".join(map(str, v)))
def test_overlapped_epilogues_match_torch(mode: str, cfg: tuple[int, int, int, int, int]) -> None:
    """Each program's first dot issued before the previous program's stores, beside a producer
    warpgroup (the launch has four warps more), at the tutorial's sizes and the masked kernel's
    odd ones: K = 8 (one iteration: the next program's loop runs none after the peeled one), K =
    77 (two) and K = 0 (the loop over the programs as it was, giving zeros), with more programs
    than SMs (every CTA peels for several). (Without the bulk store a 128x256 tile's exchange does
    not fit beside four slots.)"""
    tool = _tool()
    assert tool.build(tool.TUTORIAL, cfg, mode, tool.SPEC).num_warps == cfg[3] + 4
    assert tool.check_correctness([cfg], (mode,)) == 0
