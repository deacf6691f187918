"""Dot staging and software pipelining at the IR level: which loads become cp.async, how many
buffers, the wait count, and the verifier's rules for the shared-memory ops."""

from __future__ import annotations

from pathlib import Path

import pytest
from tc_ir import ops as O
from tc_ir.layouts import DotOperand, Mma, Shared
from tc_ir.types import F16, I32, TileType
from tc_ir.verifier import IRVerificationError, verify
from tc_opt import CompileOptions
from tc_opt.dot_layouts import mma_warps, shared_layout
from tc_opt.pipeline import gpu_pipeline

KERNELS = Path(__file__).resolve().parents[2] / "tc-lang" / "tests" / "kernels"
SPEC9 = tuple(None if i in (3, 4, 5) else "divisible_by_16" for i in range(9))


def _gpu_ir(name: str, defines: dict[str, object], stages: int, spec: object = SPEC9) -> O.Module:
    from tc_nvptx.compiler import frontend_module

    m = frontend_module((KERNELS / name).read_text(), defines, None, name)
    # (the cp.async pipeline: TMA copies have their own tests, test_opt_tma.py)
    opts = CompileOptions(num_warps=4, num_stages=stages, specialization=spec, tma=False)
    gpu_pipeline(opts).run(m)  # type: ignore[arg-type]
    return m


def _ops(m: O.Module, cls: type[O.Operation]) -> list[O.Operation]:
    return [op for op in m.walk() if isinstance(op, cls)]


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_tutorial_is_pipelined(stages: int) -> None:
    m = _gpu_ir("matmul_tutorial.tc", {"TYPE": "half", "MB": 64, "NB": 64, "KB": 32}, stages)
    bufs = [op for op in _ops(m, O.LocalAllocOp) if not op.operands]
    assert len(bufs) == 2 and all(op.result.type.shape[0] == stages for op in bufs)  # type: ignore[union-attr]
    assert len(_ops(m, O.AsyncCopyOp)) == 2 * stages  # (stages - 1) prologue copies + the loop's
    waits = sorted(op.pending for op in _ops(m, O.AsyncWaitOp))  # type: ignore[attr-defined]
    assert waits == [0, stages - 2]
    assert not _ops(m, O.LoadOp)  # no synchronous operand loads left
    dot = _ops(m, O.DotOp)[0]
    assert isinstance(dot.result.type.layout, Mma)  # type: ignore[union-attr]
    assert all(isinstance(v.type.layout, DotOperand) for v in dot.operands[:2])  # type: ignore[union-attr]


def test_one_stage_stages_without_copies() -> None:
    m = _gpu_ir("matmul_tutorial.tc", {"TYPE": "half", "MB": 64, "NB": 64, "KB": 32}, 1)
    assert not _ops(m, O.AsyncCopyOp) and len(_ops(m, O.LocalAllocOp)) == 2


def test_unaligned_operands_are_not_pipelined() -> None:
    # without divisibility facts on the strides the loads cannot be 4-byte cp.async vectors
    m = _gpu_ir("matmul_tutorial.tc", {"TYPE": "half", "MB": 64, "NB": 64, "KB": 32}, 3, spec=None)
    assert not _ops(m, O.AsyncCopyOp) and len(_ops(m, O.LoadOp)) == 2


def test_transposed_operand_is_a_view() -> None:
    import json

    d = json.loads((KERNELS / "defines.json").read_text())["matmul_fused_trans.tc"]["TN"]
    m = _gpu_ir("matmul_fused_trans.tc", d, 3)
    (tr,) = _ops(m, O.LocalTransOp)
    assert tr.result.type.layout.order == (0, 1)  # type: ignore[union-attr]  # M contiguous: ldmatrix.trans
    assert not _ops(m, O.TransOp)


def test_layout_choices() -> None:
    assert mma_warps(128, 128, 4) == (2, 2)
    assert mma_warps(128, 128, 8) == (4, 2)
    assert mma_warps(16, 16, 8)[0] * mma_warps(16, 16, 8)[1] == 8
    # 12 warps (three warpgroups): the factor 3 where it divides the 16x8 blocks, M first, then
    # the powers of two as for 4 or 8 warps
    assert mma_warps(192, 192, 12) == (3, 4)
    assert mma_warps(128, 192, 12) == (4, 3)  # (128 rows are not 3 x 16-row blocks, 192 columns are 3 x 8)
    assert shared_layout((64, 32), (1, 0), F16, True) == Shared(8, 2, 4, (1, 0))  # 64-byte rows
    assert shared_layout((32, 128), (1, 0), F16, True) == Shared(8, 1, 8, (1, 0))
    assert shared_layout((64, 32), (1, 0), F16, False) == Shared(1, 1, 1, (1, 0))


def test_verifier_rejects_bad_subview() -> None:
    body = O.Block([], [])
    buf = O.LocalAllocOp.create([], [TileType((3, 16, 16), F16, Shared(8, 2, 4, (2, 1, 0)))])
    idx = O.ConstantOp.create([], [I32], {"value": 0})
    bad = O.LocalSubviewOp.create([buf.result, idx.result], [TileType((16, 8), F16, Shared(8, 2, 4, (1, 0)))])
    for op in (buf, idx, bad, O.ReturnOp.create([], [])):
        body.append(op)
    with pytest.raises(IRVerificationError, match="subview"):
        verify(O.Function("k", body))
