"""The IR builder: insertion points, locations, result types, conversions, control flow."""

from __future__ import annotations

import numpy as np
import pytest
from tc_lang.diagnostics import Location

from tc_ir import ops as O
from tc_ir.builder import Builder, BuilderError, conversion_kind
from tc_ir.interpreter import interpret
from tc_ir.testing import round_trip
from tc_ir.types import BF16, F16, F32, I1, I8, I32, I64, PointerType, TileType


def _fn_block() -> O.Block:
    return O.Block([PointerType(F32), I32], ["x", "n"])


def test_insertion_at_end_and_before() -> None:
    block = _fn_block()
    b = Builder(block)
    c1 = b.constant(1, I32)
    c3 = b.constant(3, I32)
    with b.before(c3.op):
        c2 = b.constant(2, I32)
    c4 = b.constant(4, I32)
    assert [op.value for op in block.ops] == [1, 2, 3, 4]  # type: ignore[attr-defined]
    assert all(op.parent is block for op in block.ops)
    inner = O.Block()
    with b.at_end(inner):
        b.constant(5, I32)
    b.constant(6, I32)
    assert len(inner.ops) == 1 and len(block.ops) == 5
    assert c1.type == c2.type == c4.type == I32


def test_location_is_given_to_new_ops() -> None:
    b = Builder(O.Block())
    loc = Location("k.tc", 3, 7)
    with b.location(loc):
        v = b.program_id(1)
    w = b.num_programs(0)
    assert v.op.loc == loc and w.op.loc is None
    assert v.type == I32 and v.op.axis == 1  # type: ignore[attr-defined]


def test_shape_ops_compute_types() -> None:
    b = Builder(O.Block())
    r = b.make_range(0, 128)
    assert r.type == TileType((128,), I32)
    col = b.expand_dims(r, 1)
    assert col.type == TileType((128, 1), I32)
    wide = b.broadcast(col, (128, 64))
    assert wide.type == TileType((128, 64), I32)
    t = b.trans(wide)
    assert t.type == TileType((64, 128), I32)
    flat = b.reshape(wide, (8192,))
    assert flat.type == TileType((8192,), I32)
    s = b.splat(b.constant(2.0, F32), (4, 4))
    assert s.type == TileType((4, 4), F32)
    one = b.reshape(b.make_range(0, 1), ())
    assert one.type == I32
    red = b.reduce("add", wide, 0)
    assert red.type == TileType((64,), I32)
    assert b.reduce("add", r, 0).type == I32
    with pytest.raises(BuilderError):
        b.broadcast(wide, (128, 32))
    with pytest.raises(BuilderError):
        b.trans(wide, (0, 0))


def test_elementwise_types_must_match() -> None:
    b = Builder(O.Block())
    x = b.constant(1, I32)
    y = b.constant(2, I64)
    with pytest.raises(BuilderError):
        b.binary("add", x, y)
    with pytest.raises(BuilderError):
        b.binary("fadd", x, x)
    assert b.cmp("slt", x, x).type == I1
    f = b.constant(1.0, F32)
    assert b.unary("exp", f, approx=True).op.approx is True  # type: ignore[attr-defined]
    assert b.fma(f, f, f).type == F32
    assert b.select(b.cmp("eq", x, x), f, f).type == F32


def test_constants_are_normalized() -> None:
    b = Builder(O.Block())
    assert b.constant(0xFFFFFFFF, I32).op.value == -1  # type: ignore[attr-defined]
    assert b.constant(1, I1).op.value is True  # type: ignore[attr-defined]
    assert isinstance(b.constant(2, F32).op.value, float)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("src", "dst", "signed", "kind"),
    [
        (I8, I32, True, "sext"),
        (I8, I32, False, "zext"),
        (I1, I32, True, "zext"),
        (I64, I32, True, "trunc"),
        (I32, F32, True, "sitofp"),
        (I32, F32, False, "uitofp"),
        (F16, F32, True, "fpext"),
        (F32, F16, True, "fptrunc"),
        (F16, BF16, True, "fpcast"),
    ],
)
def test_conversion_kinds(src: object, dst: object, signed: bool, kind: str) -> None:
    assert conversion_kind(src, dst, signed, True) == kind  # type: ignore[arg-type]


def test_convert_picks_float_to_int_by_destination_and_goes_through_f32() -> None:
    b = Builder(O.Block())
    f = b.constant(1.5, F32)
    to_u = b.convert(f, I32, signed_src=True, signed_dst=False)
    assert to_u.op.kind == "fptoui"  # type: ignore[attr-defined]
    h = b.constant(1.0, F16)
    hb = b.convert(h, BF16, signed_src=True)
    assert hb.type == BF16 and hb.op.kind == "fptrunc"  # type: ignore[attr-defined]
    assert b.convert(f, F32, True) is f


def test_memory_ops() -> None:
    block = _fn_block()
    b = Builder(block)
    x, n = block.args
    r = b.make_range(0, 16)
    ptrs = b.addptr(b.splat(x, (16,)), r)
    mask = b.cmp("slt", r, b.splat(n, (16,)))
    other = b.constant(0.0, TileType((16,), F32))
    v = b.load(ptrs, mask, other)
    assert v.type == TileType((16,), F32) and len(v.op.operands) == 3
    st = b.store(ptrs, v, mask)
    assert isinstance(st, O.StoreOp) and st.results == []
    old = b.atomic_rmw("fadd", ptrs, v, mask)
    assert old.type == v.type
    with pytest.raises(BuilderError):
        b.load(ptrs, None, other)
    with pytest.raises(BuilderError):
        b.store(ptrs, r)
    # the built kernel is valid IR that round-trips and runs: x[i] += x[i] twice over, for i < n
    b.ret()
    fn = O.Function("k", block, arg_names=["x", "n"])
    round_trip(fn)
    data = np.arange(16, dtype=np.float32) - 3
    want = np.where(np.arange(16) < 10, 2 * data, data)
    interpret(fn, [data, 10], (1,))
    np.testing.assert_array_equal(data, want)


def test_dot_checks_shapes() -> None:
    b = Builder(O.Block())
    a = b.constant(1.0, TileType((16, 8), F16))
    w = b.constant(1.0, TileType((8, 32), F16))
    acc = b.constant(0.0, TileType((16, 32), F32))
    assert b.dot(a, w, acc).type == acc.type
    with pytest.raises(BuilderError):
        b.dot(w, a, acc)


def test_structured_control_flow() -> None:
    block = _fn_block()
    b = Builder(block)
    zero = b.constant(0, I32)
    step = b.constant(1, I32)
    acc0 = b.constant(0.0, F32)
    loop = b.for_(zero, block.args[1], step, [acc0], iv_name="i", arg_names=["acc"])
    assert [a.type for a in loop.body.args] == [I32, F32]
    with b.at_end(loop.body):
        b.yield_([b.binary("fadd", loop.body.args[1], acc0)])
    assert loop.results[0].type == F32 and loop.inits == [acc0]
    cond = b.cmp("slt", zero, step)
    iff = b.if_(cond, [I32])
    assert len(iff.regions) == 2 and iff.results[0].type == I32
    for region, value in zip(iff.regions, (zero, step)):
        with b.at_end(region):
            b.yield_([value])
    w = b.while_([zero])
    with b.at_end(w.before):
        b.condition(b.cmp("slt", w.before.args[0], step), [w.before.args[0]])
    with b.at_end(w.after):
        b.yield_([w.after.args[0]])
    b.ret()
    assert isinstance(block.terminator, O.ReturnOp)
    round_trip(O.Function("k", block, arg_names=["x", "n"]))
    with pytest.raises(BuilderError):
        b.for_(b.constant(0, I64), zero, step)


def test_assume_records_facts_and_refuses_floats() -> None:
    block = _fn_block()
    b = Builder(block)
    x, n = block.args
    v = b.assume(n, multiple_of=8)
    assert isinstance(v.op, O.AssumeOp) and v.type == I32 and v.op.multiple_of == 8 and v.op.aligned == 1
    p = b.assume(x, aligned=16)
    assert p.type == PointerType(F32) and p.op.attributes() == {"multiple_of": 1, "aligned": 16}
    with pytest.raises(BuilderError, match="only integers and pointers"):
        b.assume(b.constant(1.0, F32), multiple_of=2)
    with pytest.raises(BuilderError, match="positive"):
        b.assume(n, multiple_of=0)
