"""The IR text form: printing every op, reading it back, round trips and parse errors."""

from __future__ import annotations

import math
from typing import Any

import pytest
from tc_lang.diagnostics import Location

from tc_ir import ops as O
from tc_ir.ir_parser import IRParseError, parse_function, parse_module, parse_type
from tc_ir.layouts import Blocked, DotOperand, Mma, Shared, Slice
from tc_ir.printer import print_function, print_module, print_op
from tc_ir.types import F16, F32, I1, I32, I64, PointerType, ScalarType, TileType

BLK = Blocked([1, 8], [4, 8], [4, 1], [1, 0])


def loc(line: int, col: int = 1) -> Location:
    return Location("every.tc", line, col)


class Emit:
    """A tiny op emitter for tests: appends `Cls.create(...)` ops to a block."""

    def __init__(self, block: O.Block) -> None:
        self.block = block
        self.line = 1

    def __call__(self, cls: type[O.Operation], operands: list[O.Value], types: list[Any], **attrs: Any) -> Any:
        regions = attrs.pop("regions", [])
        op = cls.create(operands, types, attrs, regions, loc(self.line))
        self.line += 1
        self.block.append(op)
        return op.results[0] if len(op.results) == 1 else op


def every_op_module() -> O.Module:
    """One kernel using every registered op at least once, with layouts, attributes and regions."""
    t = TileType((16,), I32)
    tf = TileType((16,), F32)
    pf = PointerType(F32)
    body = O.Block([pf, I32, PointerType(I32)], ["x", "n", "cnt"])
    x, n, cnt = body.args
    e = Emit(body)
    pid = e(O.ProgramIdOp, [], [I32], axis=0)
    pid.name_hint = "pid"
    e(O.NumProgramsOp, [], [I32], axis=1)
    r = e(O.MakeRangeOp, [], [t], start=0, end=16)
    ns = e(O.SplatOp, [n], [t])
    off = e(O.BinaryOp, [ns, r], [t], kind="add")
    mask = e(O.CmpOp, [off, ns], [TileType((16,), I1)], predicate="slt")
    px = e(O.SplatOp, [x], [TileType((16,), pf)])
    p = e(O.AddPtrOp, [px, off], [TileType((16,), pf)])
    zero = e(O.ConstantOp, [], [tf], value=0.0)
    v = e(O.LoadOp, [p, mask, zero], [tf], volatile=True)
    w = e(O.UnaryOp, [v], [tf], kind="exp", approx=True)
    w = e(O.FmaOp, [w, v, zero], [tf])
    w = e(O.SelectOp, [mask, w, v], [tf])
    h = e(O.CastOp, [w], [TileType((16,), F16)], kind="fptrunc")
    h = e(O.CastOp, [h], [tf], kind="fpext")
    e(O.StoreOp, [p, h, mask], [])
    s = e(O.ReduceOp, [h], [F32], kind="fadd", axis=0)
    e(O.ConstantOp, [], [F32], value=float("-inf"))
    e(O.ConstantOp, [], [F32], value=1e-05)
    e(O.ConstantOp, [], [I1], value=True)
    col = e(O.ExpandDimsOp, [r], [TileType((16, 1), I32)], axis=1)
    mat = e(O.BroadcastOp, [col], [TileType((16, 16), I32)])
    tr = e(O.TransOp, [mat], [TileType((16, 16), I32)], perm=(1, 0))
    e(O.ReshapeOp, [tr], [TileType((256,), I32)])
    fm = e(O.CastOp, [mat], [TileType((16, 16), F16)], kind="sitofp")
    acc = e(O.ConstantOp, [], [TileType((16, 16), F32)], value=0)
    d = e(O.DotOp, [fm, fm, acc], [TileType((16, 16), F32)], precision="tf32")
    e(O.ConvertLayoutOp, [d], [TileType((16, 16), F32, BLK)])
    late = e(O.DotOp, [fm, fm, d], [TileType((16, 16), F32)], asynchronous=True)
    e(O.DotWaitOp, [late], [TileType((16, 16), F32)], pending=1)
    # an accumulator that the first dot does not read, and a wait that gives zeros unless valid
    started = e(O.UndefOp, [], [TileType((16, 16), F32)])
    flag = e(O.ConstantOp, [], [I1], value=False)
    first = e(O.DotOp, [fm, fm, started, flag], [TileType((16, 16), F32)], asynchronous=True)
    e(O.DotWaitOp, [first, flag], [TileType((16, 16), F32)])
    # shared memory and asynchronous copies (the GPU level of dot staging and pipelining)
    sh2 = Shared(8, 2, 4, (1, 0))
    one0 = e(O.ConstantOp, [], [I32], value=0)
    xh = e(O.CastOp, [x], [PointerType(F16)], kind="bitcast")
    buf = e(O.LocalAllocOp, [], [TileType((3, 16, 16), F16, Shared(8, 2, 4, (2, 1, 0)))])
    slot = e(O.LocalSubviewOp, [buf, one0], [TileType((16, 16), F16, sh2)])
    staged = e(O.LocalAllocOp, [fm], [TileType((16, 16), F16, sh2)])
    tview = e(O.LocalTransOp, [staged], [TileType((16, 16), F16, Shared(8, 2, 4, (0, 1)))], perm=(1, 0))
    regs = e(O.LocalLoadOp, [tview], [TileType((16, 16), F16, BLK)])
    e(O.LocalStoreOp, [regs, slot], [])
    hp = e(O.SplatOp, [xh], [TileType((16, 16), PointerType(F16))])
    e(O.AsyncCopyOp, [hp, slot], [])
    e(O.AsyncCommitGroupOp, [], [])
    e(O.AsyncWaitOp, [], [], pending=1)
    # TMA copies completing on mbarriers (the pipeliner with CompileOptions.tma)
    bars = e(O.LocalAllocOp, [], [TileType((3,), I64, Shared(1, 1, 1, (0,)))])
    e(O.MBarrierInitOp, [bars], [], count=1)
    yes = e(O.ConstantOp, [], [I1], value=True)
    e(O.MBarrierExpectOp, [bars, one0, yes], [], bytes=512)
    e(O.TmaLoadOp, [slot, bars, one0, yes, one0, n], [], descriptor=1, base=0, extents=(1, 0, -1, 64),
      stride=(1, 2), box=(16, 16), swizzle=64)
    e(O.MBarrierWaitOp, [bars, one0, one0], [])
    e(O.MBarrierArriveOp, [bars, one0, yes], [])
    # clusters that multicast a shared tile (CompileOptions.cluster_multicast, cluster_2x2)
    e(O.ClusterBarrierOp, [], [])
    e(O.TmaLoadOp, [slot, bars, one0, yes, one0, n, one0], [], descriptor=1, base=0, extents=(1, 0, -1, 64),
      stride=(1, 2), box=(16, 16), swizzle=64, multicast=True, half_descriptor=3)
    e(O.MBarrierArriveOp, [bars, one0, yes, yes], [], cluster=True, per_warpgroup=True)
    e(O.MBarrierArriveOp, [bars, one0, yes, yes, yes], [], cluster=True)
    e(O.TmaStoreOp, [fm, one0, n], [], descriptor=2, base=0, fast=1, extents=(1, 0, -1, 2147483647),
      stride=(1, 1), box=(16, 16), swizzle=32)
    # warp specialization: a producer region and a consumer region
    pb, cb = O.Block(), O.Block()
    Emit(pb)(O.MBarrierWaitOp, [bars, one0, one0], [])
    Emit(pb)(O.YieldOp, [], [])
    Emit(cb)(O.YieldOp, [], [])
    e(O.WarpSpecializeOp, [], [], regions=[pb, cb], producer_warps=4)
    e(O.MBarrierInvalOp, [bars], [])
    e(O.GridDimOp, [], [I32], axis=2)
    partials = e(O.WorkspaceOp, [], [PointerType(F32)], part="partials")
    e(O.WorkspaceOp, [], [PointerType(I32)], part="flags")
    e(O.PartialStoreOp, [partials, one0, d], [])
    e(O.PartialAddOp, [partials, one0, d], [TileType((16, 16), F32)])
    one = e(O.ConstantOp, [], [I32], value=1)
    e(O.AtomicRMWOp, [cnt, one], [I32], kind="add")
    e(O.AtomicCASOp, [cnt, one, n], [I32])
    e(O.BarrierOp, [], [])
    e(O.AssumeOp, [n], [I32], multiple_of=8)
    e(O.AssumeOp, [x], [pf], multiple_of=4, aligned=16)
    # for: body(iv, acc) -> yield
    fb = O.Block([I32, F32], ["k", "acc"])
    fe = Emit(fb)
    fe.line = 100
    a2 = fe(O.BinaryOp, [fb.args[1], s], [F32], kind="fadd")
    fe(O.YieldOp, [a2], [])
    floop = e(O.ForOp, [pid, n, one, s], [F32], regions=[fb])
    # if with results
    cond = e(O.CmpOp, [pid, n], [I1], predicate="ult")
    tb, eb = O.Block(), O.Block()
    Emit(tb)(O.YieldOp, [floop], [])
    Emit(eb)(O.YieldOp, [s], [])
    e(O.IfOp, [cond], [F32], regions=[tb, eb])
    # while: before(i) -> condition(c, i); after(i) -> yield(i + 1)
    bb, ab = O.Block([I32], ["i"]), O.Block([I32], ["i"])
    be = Emit(bb)
    c2 = be(O.CmpOp, [bb.args[0], n], [I1], predicate="slt")
    be(O.ConditionOp, [c2, bb.args[0]], [])
    ae = Emit(ab)
    inc = ae(O.BinaryOp, [ab.args[0], one], [I32], kind="add")
    ae(O.YieldOp, [inc], [])
    e(O.WhileOp, [pid], [I32], regions=[bb, ab])
    e(O.ReturnOp, [], [])
    fn = O.Function("every", body, ["x", "n", "cnt"], [{"aligned": 16, "noalias": True}, {}, {}], loc=loc(1))
    return O.Module([fn], {"num_warps": 4, "note": 'a "quoted" name', "sizes": (1, 2)})


def test_every_op_round_trips() -> None:
    m = every_op_module()
    text = print_module(m)
    for name in O.OPS:
        assert f" {name}" in text or f"{name} " in text, f"{name} missing from the sample"
    again = print_module(parse_module(text))
    assert again == text


def test_printed_form_is_readable() -> None:
    text = print_module(every_op_module())
    lines = [ln.strip() for ln in text.splitlines()]
    assert 'module attributes {num_warps = 4, note = "a \\"quoted\\" name", sizes = [1, 2]} {' in lines
    assert any(ln.startswith('tc.func global @every(%x: ptr<f32> {aligned = 16, noalias = true}, %n: i32') for ln in lines)
    assert '%pid = tc.program_id {axis = 0} : i32 loc("every.tc":1:1)' in lines
    assert '%3 = tc.binary %2, %1 {kind = "add"} : tile<16xi32> loc("every.tc":5:1)' in lines
    assert any("tc.load %" in ln and "{volatile = true}" in ln for ln in lines)
    assert any("{value = -inf} : f32" in ln for ln in lines)
    assert any("{value = 1e-05} : f32" in ln for ln in lines)
    assert any("{value = 0.0} : tile<16xf32>" in ln for ln in lines)
    assert "^(%k: i32, %acc: f32):" in lines
    assert any("#blocked<spt=[1, 8], tpw=[4, 8], wpc=[4, 1], order=[1, 0]>" in ln for ln in lines)


def test_default_attributes_are_left_out() -> None:
    body = O.Block([PointerType(F32)])
    e = Emit(body)
    e(O.LoadOp, [body.args[0]], [F32])
    assert "volatile" not in print_op(body.ops[0])
    assert print_op(body.ops[0]).startswith("%1 = tc.load %0 : f32")


def test_round_trip_of_function_and_name_uniquing() -> None:
    body = O.Block([I32], ["a"])
    e = Emit(body)
    v1 = e(O.BinaryOp, [body.args[0], body.args[0]], [I32], kind="add")
    v1.name_hint = "a"
    v2 = e(O.BinaryOp, [v1, v1], [I32], kind="mul")
    v2.name_hint = "a"
    v3 = e(O.BinaryOp, [v2, v2], [I32], kind="mul")
    v3.name_hint = "7 odd name!"
    e(O.ReturnOp, [], [])
    text = print_function(O.Function("f", body, ["a"], [{}]))
    assert "%a_1 = tc.binary %a, %a" in text
    assert "%a_2 = tc.binary %a_1, %a_1" in text
    assert "%v7_odd_name_ = tc.binary %a_2, %a_2" in text
    assert print_function(parse_function(text)) == text


@pytest.mark.parametrize(
    "t",
    [
        I1, I64, ScalarType("bf16"), PointerType(F16), PointerType(PointerType(I32)), PointerType(F32, 3),
        TileType((128, 64), F16), TileType((4,), PointerType(F32)), TileType((), F32),
        TileType((128, 64), F16, BLK),
        TileType((128,), F32, Slice(BLK, 1)),
        TileType((64, 64), F32, Mma(2, [2, 2], [16, 8])),
        TileType((64, 32), F16, DotOperand(Mma(3, [4, 1], [16, 64, 16]), 0, 2)),
        TileType((256, 128), F32, Mma(3, [8, 1], [64, 256, 8], transposed=True)),
        TileType((64, 32), F16, Shared(8, 1, 8, [1, 0])),
        TileType((8, 16), F32, Slice(Slice(Blocked([1, 1, 4], [1, 4, 8], [1, 2, 2], [2, 1, 0]), 0), 0)),
    ],
)
def test_types_round_trip(t: Any) -> None:
    assert parse_type(str(t)) == t


@pytest.mark.parametrize("value", [0.0, -0.0, 1.5, 1e300, 3.0e-40, float("inf"), 123456789.125, 2, -7, True, False])
def test_constant_values_round_trip_exactly(value: Any) -> None:
    body = O.Block()
    t = I32 if isinstance(value, int) and not isinstance(value, bool) else I1 if isinstance(value, bool) else F32
    Emit(body)(O.ConstantOp, [], [t], value=value)
    Emit(body)(O.ReturnOp, [], [])
    fn = parse_function(print_function(O.Function("c", body)))
    got = fn.body.ops[0].value  # type: ignore[attr-defined]
    assert type(got) is type(value) and got == value and math.copysign(1, got) == math.copysign(1, value)


def test_nan_constant() -> None:
    body = O.Block()
    Emit(body)(O.ConstantOp, [], [F32], value=float("nan"))
    Emit(body)(O.ReturnOp, [], [])
    fn = parse_function(print_function(O.Function("c", body)))
    assert math.isnan(fn.body.ops[0].value)  # type: ignore[attr-defined]


def _error(text: str) -> IRParseError:
    with pytest.raises(IRParseError) as info:
        parse_module(text)
    return info.value


HEAD = "module {\n  tc.func global @k(%a: i32) {\n"


def test_parse_error_unknown_op() -> None:
    err = _error(HEAD + "    %0 = tc.frobnicate %a : i32\n    tc.return\n  }\n}\n")
    assert "<ir>:3:10" in str(err) and "unknown op 'tc.frobnicate'" in str(err)
    assert err.location.line == 3 and err.location.col == 10


def test_parse_error_undefined_value() -> None:
    err = _error(HEAD + '    %0 = tc.binary %a, %b {kind = "add"} : i32\n    tc.return\n  }\n}\n')
    assert "<ir>:3:24" in str(err) and "undefined value %b" in str(err)


def test_parse_error_value_used_outside_its_region() -> None:
    text = HEAD + (
        "    %c = tc.constant {value = true} : i1\n"
        "    tc.if %c ({\n"
        "      %in = tc.constant {value = 1} : i32\n"
        "      tc.yield\n"
        "    }, {\n"
        "      tc.yield\n"
        "    })\n"
        '    %x = tc.binary %in, %a {kind = "add"} : i32\n'
        "    tc.return\n  }\n}\n"
    )
    assert "undefined value %in" in str(_error(text))


def test_parse_errors_bad_type_and_redefinition_and_counts() -> None:
    assert "expected a type" in str(_error(HEAD + "    %0 = tc.constant {value = 1} : int32\n  }\n}\n"))
    assert "defined twice" in str(_error(HEAD + "    %a = tc.constant {value = 1} : i32\n  }\n}\n"))
    assert "names 2 result(s) but gives 1" in str(_error(HEAD + "    %0, %1 = tc.constant {value = 1} : i32\n  }\n}\n"))
    assert "bad attributes for tc.constant" in str(_error(HEAD + "    %0 = tc.constant {valu = 1} : i32\n  }\n}\n"))
    assert "unknown layout #weird" in str(_error(HEAD + "    %0 = tc.constant {value = 1} : tile<4xi32, #weird<a=1>>\n  }\n}\n"))
    assert "unterminated" in str(_error(HEAD + "    tc.return\n"))
    assert "after the end" in str(_error("module {\n}\nextra"))


def test_parse_error_renders_source_line_and_caret() -> None:
    err = _error(HEAD + "    %0 = tc.constant {value = 1} : i33\n  }\n}\n")
    text = str(err)
    assert "%0 = tc.constant {value = 1} : i33" in text
    assert "^" in text.splitlines()[-1]


def test_truncated_or_corrupted_text_always_gives_parse_errors() -> None:
    text = print_module(every_op_module())
    for cut in range(0, len(text) - 2, 7):
        with pytest.raises(IRParseError):
            parse_module(text[:cut])
    for i in range(0, len(text), 13):
        broken = text[:i] + "@" + text[i + 1 :]
        if broken == text:
            continue
        try:
            parse_module(broken)
        except IRParseError:
            pass


def test_many_values_of_one_name_hint_are_uniqued_in_linear_time() -> None:
    # a hint shared by thousands of values (`a += 1` written 3000 times) used to try a, a_1,
    # ... a_k afresh for each value; the names are the same as before: the first free suffix,
    # skipping a name another hint ("a_2") took first
    body = O.Block([I32], ["a_2"])
    e = Emit(body)
    v = body.args[0]
    for _ in range(3000):
        v = e(O.BinaryOp, [v, v], [I32], kind="add")
        v.name_hint = "a"
    e(O.ReturnOp, [], [])
    text = print_function(O.Function("f", body, ["a_2"], [{}]))
    assert "%a = tc.binary %a_2, %a_2" in text
    assert "%a_1 = tc.binary %a, %a" in text and "%a_3 = tc.binary %a_1, %a_1" in text
    assert "%a_3000 = tc.binary %a_2999, %a_2999" in text and "%a_3001" not in text
