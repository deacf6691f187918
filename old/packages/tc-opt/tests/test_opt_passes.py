"""tc-opt passes on small IR: folding, CSE, DCE, specialization, the pass manager."""

from __future__ import annotations

import io

import pytest
from tc_ir.ops import (
    AddPtrOp,
    BinaryOp,
    Block,
    ConstantOp,
    Function,
    LoadOp,
    Module,
    ProgramIdOp,
    ReturnOp,
    StoreOp,
)
from tc_ir.types import F32, I32, PointerType
from tc_opt import (
    Canonicalize,
    CommonSubexpressionElimination,
    CompileOptions,
    DeadCodeElimination,
    Pass,
    PassManager,
    SpecializeArguments,
    gpu_pipeline,
)
from tc_opt.canonicalize import fold_int_binary


def _kernel() -> tuple[Module, Block]:
    body = Block([PointerType(F32), I32], ["p", "n"])
    f = Function("k", body, ["p", "n"], [{}, {}])
    return Module([f]), body


def _names(block: Block) -> list[str]:
    return [op.NAME for op in block.ops]


def test_fold_int_semantics() -> None:
    assert fold_int_binary("add", 2**31 - 1, 1, 32) == -(2**31)  # i32 wraps
    assert fold_int_binary("sdiv", -7, 2, 32) == -3  # truncates toward zero
    assert fold_int_binary("srem", -7, 2, 32) == -1
    assert fold_int_binary("udiv", -1, 2, 32) == 2**31 - 1
    assert fold_int_binary("sdiv", 1, 0, 32) is None


def test_canonicalize_folds_and_simplifies() -> None:
    m, body = _kernel()
    c3 = body.append(ConstantOp.create([], [I32], {"value": 3}))
    c4 = body.append(ConstantOp.create([], [I32], {"value": 4}))
    mul = body.append(BinaryOp.create([c3.result, c4.result], [I32], {"kind": "mul"}))
    one = body.append(ConstantOp.create([], [I32], {"value": 1}))
    x = body.append(BinaryOp.create([body.args[1], one.result], [I32], {"kind": "mul"}))
    add = body.append(BinaryOp.create([x.result, mul.result], [I32], {"kind": "add"}))
    ptr = body.append(AddPtrOp.create([body.args[0], add.result], [PointerType(F32)]))
    ld = body.append(LoadOp.create([ptr.result], [F32]))
    body.append(StoreOp.create([ptr.result, ld.result], []))
    body.append(ReturnOp.create([], []))
    Canonicalize().run(m)
    DeadCodeElimination().run(m)
    assert add.operands[0] is body.args[1]  # n * 1 -> n
    folded = add.operands[1]
    assert isinstance(getattr(folded, "op", None), ConstantOp) and folded.op.value == 12  # type: ignore[attr-defined]
    assert "tc.binary" in _names(body) and _names(body).count("tc.binary") == 1


def test_cse_merges_equal_ops_but_not_loads() -> None:
    m, body = _kernel()
    a = body.append(ProgramIdOp.create([], [I32], {"axis": 0}))
    b = body.append(ProgramIdOp.create([], [I32], {"axis": 0}))
    s = body.append(BinaryOp.create([a.result, b.result], [I32], {"kind": "add"}))
    l1 = body.append(LoadOp.create([body.args[0]], [F32]))
    l2 = body.append(LoadOp.create([body.args[0]], [F32]))
    f = body.append(BinaryOp.create([l1.result, l2.result], [F32], {"kind": "fadd"}))
    body.append(StoreOp.create([body.args[0], f.result], []))
    body.append(ReturnOp.create([], []))
    CommonSubexpressionElimination().run(m)
    assert s.operands[0] is s.operands[1] is a.result
    assert _names(body).count("tc.load") == 2
    DeadCodeElimination().run(m)
    assert _names(body).count("tc.binary") == 1  # the unused integer add is gone, fadd stays
    assert _names(body).count("tc.program_id") == 0  # dead once the unused add is gone


def test_dce_keeps_side_effects() -> None:
    m, body = _kernel()
    c = body.append(ConstantOp.create([], [F32], {"value": 1.0}))
    body.append(ConstantOp.create([], [F32], {"value": 2.0}))
    body.append(StoreOp.create([body.args[0], c.result], []))
    body.append(ReturnOp.create([], []))
    DeadCodeElimination().run(m)
    assert _names(body) == ["tc.constant", "tc.store", "tc.return"]


def test_specialization() -> None:
    m, body = _kernel()
    body.append(StoreOp.create([body.args[0], body.args[1]], []))
    SpecializeArguments(CompileOptions(specialization=("divisible_by_16", "equal_to_1"))).run(m)
    f = m.functions[0]
    assert f.arg_attrs[0]["aligned"] == 16
    assert f.arg_attrs[1]["equal_to_1"] is True
    store = body.ops[-1]
    assert isinstance(getattr(store.operands[1], "op", None), ConstantOp)


def test_default_specialization_assumes_aligned_pointers() -> None:
    m, body = _kernel()
    SpecializeArguments(CompileOptions()).run(m)
    assert m.functions[0].arg_attrs[0]["aligned"] == 16
    assert "multiple_of" not in m.functions[0].arg_attrs[1]


def test_options_validation() -> None:
    with pytest.raises(ValueError):
        CompileOptions(arch="sm_70")
    with pytest.raises(ValueError):
        CompileOptions(num_warps=3)
    with pytest.raises(ValueError):
        CompileOptions(specialization=("bogus",))
    assert CompileOptions(specialization=(1, 16, None)).specialization == ("equal_to_1", "divisible_by_16", None)
    assert CompileOptions().sm == 90


def test_pass_manager_prints_times_and_runs_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    class Record(Pass):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

        def run(self, module: Module) -> None:
            seen.append(self.name)

    out = io.StringIO()
    pm = PassManager([Record("a"), Record("b")], verify=False, stream=out)
    monkeypatch.setenv("TC_DUMP_IR", "b")
    m, body = _kernel()
    body.append(ReturnOp.create([], []))
    pm.run(m)
    assert seen == ["a", "b"]
    assert "IR after b" in out.getvalue() and "IR after a" not in out.getvalue()
    assert set(pm.timings) == {"a", "b"}


def test_gpu_pipeline_names() -> None:
    names = gpu_pipeline(CompileOptions()).names
    assert names.index("assign-layouts") < names.index("allocate-shared")
    assert names[0] == "specialize"
