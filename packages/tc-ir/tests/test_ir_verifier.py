"""The verifier: valid IR passes; each broken rule is reported at the op with its location."""

from __future__ import annotations

import pytest
from tc_lang.diagnostics import Location

from tc_ir import ops as O
from tc_ir.ir_parser import IRParseError, parse_module
from tc_ir.types import F32, I1, I32, TileType
from tc_ir.verifier import IRVerificationError, verify


def module(body: str, args: str = "%x: ptr<f32>, %n: i32") -> O.Module:
    return parse_module(f"module {{\n  tc.func global @k({args}) {{\n{body}\n    tc.return\n  }}\n}}\n")


def fails(body: str, *expected: str, args: str = "%x: ptr<f32>, %n: i32") -> str:
    with pytest.raises(IRVerificationError) as info:
        verify(module(body, args))
    text = str(info.value)
    for e in expected:
        assert e in text, text
    return text


GOOD = """
    %r = tc.make_range {start = 0, end = 8} : tile<8xi32>
    %ns = tc.splat %n : tile<8xi32>
    %m = tc.cmp %r, %ns {predicate = "slt"} : tile<8xi1>
    %px = tc.splat %x : tile<8xptr<f32>>
    %p = tc.addptr %px, %r : tile<8xptr<f32>>
    %z = tc.constant {value = 0.0} : tile<8xf32>
    %v = tc.load %p, %m, %z : tile<8xf32>
    %s = tc.reduce %v {kind = "fadd", axis = 0} : f32
    %c0 = tc.constant {value = 0} : i32
    %c1 = tc.constant {value = 1} : i32
    %t = tc.for %c0, %n, %c1, %s : f32 ({
    ^(%k: i32, %acc: f32):
      %a = tc.binary %acc, %s {kind = "fadd"} : f32
      tc.yield %a
    })
    tc.store %p, %v, %m
"""


def test_valid_module_passes() -> None:
    verify(module(GOOD))


def test_message_names_op_location_and_problem() -> None:
    text = fails('    %a = tc.binary %n, %x {kind = "add"} : i32 loc("k.tc":7:12)',
                 "k.tc:7:12", "tc.binary", "operand types differ: i32 and ptr<f32>")
    assert "in: %" in text  # the op as IR text


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('    %a = tc.binary %n, %n {kind = "fadd"} : i32', "float op 'fadd' on i32"),
        ('    %a = tc.binary %n, %n {kind = "add"} : i64', "result type i64 differs"),
        ('    %a = tc.cmp %n, %n {predicate = "slt"} : i32', "result must be i1"),
        ('    %a = tc.cmp %n, %n {predicate = "olt"} : i1', "float predicate 'olt' on i32"),
        ("    %a = tc.splat %n : tile<4xf32>", "splat of i32 cannot give tile<4xf32>"),
        ("    %r = tc.make_range {start = 0, end = 4} : tile<4xi32>\n"
         "    %b = tc.broadcast %r : tile<8xi32>", "cannot broadcast shape [4] to [8]"),
        ("    %r = tc.make_range {start = 0, end = 4} : tile<4xi32>\n"
         "    %b = tc.expand_dims %r {axis = 0} : tile<4x1xi32>", "gives shape [1, 4]"),
        ("    %r = tc.make_range {start = 0, end = 4} : tile<5xi32>", "must be tile<4xi32>"),
        ("    %r = tc.make_range {start = 0, end = 4} : tile<4xi32>\n"
         "    %b = tc.reshape %r : tile<2x3xi32>", "reshape of 4 element(s) to 6"),
        ("    %r = tc.make_range {start = 0, end = 4} : tile<4xi32>\n"
         "    %e = tc.expand_dims %r {axis = 1} : tile<4x1xi32>\n"
         "    %b = tc.trans %e {perm = [0, 0]} : tile<4x1xi32>", "not a permutation"),
        ("    %r = tc.make_range {start = 0, end = 4} : tile<4xi32>\n"
         "    %e = tc.expand_dims %r {axis = 1} : tile<4x1xi32>\n"
         '    %s = tc.reduce %e {kind = "add", axis = 1} : tile<1xi32>', "gives shape [4] of i32"),
        ("    %r = tc.make_range {start = 0, end = 4} : tile<4xi32>\n"
         '    %s = tc.reduce %r {kind = "fadd", axis = 0} : i32', "reduction fadd on i32"),
        ("    %a = tc.constant {value = 0.0} : tile<16x8xf32>\n"
         "    %b = tc.constant {value = 0.0} : tile<16x8xf32>\n"
         "    %c = tc.constant {value = 0.0} : tile<16x8xf32>\n"
         "    %d = tc.dot %a, %b, %c : tile<16x8xf32>", "dot inner dimensions differ: [16, 8] @ [16, 8]"),
        ("    %a = tc.constant {value = 0.0} : tile<16x8xf32>\n"
         "    %b = tc.constant {value = 0.0} : tile<8x4xf32>\n"
         "    %c = tc.constant {value = 0.0} : tile<16x8xf32>\n"
         "    %d = tc.dot %a, %b, %c : tile<16x8xf32>", "dot accumulator [16, 8] is not [16, 4]"),
        ("    %a = tc.constant {value = 0.0} : tile<16x8xf32>\n"
         "    %b = tc.constant {value = 0.0} : tile<8x4xf32>\n"
         "    %c = tc.undef : tile<16x4xf32>\n"
         "    %d = tc.dot %a, %b, %c, %n : tile<16x4xf32>", "a dot's use_acc operand must be a scalar i1, not i32"),
        ("    %c = tc.undef : tile<16x4xf32>\n"
         "    %m = tc.constant {value = true} : tile<16x4xi1>\n"
         "    %d = tc.dot_wait %c, %m : tile<16x4xf32>", "a dot_wait's valid operand must be a scalar i1"),
        ("    %c = tc.undef : tile<4xptr<f32>>", "undef of tile<4xptr<f32>>: not a number"),
        ("    %v = tc.load %x : i32", "load through ptr<f32> cannot give i32"),
        ("    %v = tc.load %n : i32", "load from a non-pointer i32"),
        ("    %px = tc.splat %x : tile<4xptr<f32>>\n"
         "    %m = tc.constant {value = true} : tile<8xi1>\n"
         "    %v = tc.load %px, %m : tile<4xf32>", "load mask tile<8xi1> must be i1 of the pointer's shape [4]"),
        ("    %px = tc.splat %x : tile<4xptr<f32>>\n"
         "    %v = tc.constant {value = 1.0} : tile<8xf32>\n"
         "    tc.store %px, %v", "cannot store tile<8xf32> through tile<4xptr<f32>>"),
        ("    %px = tc.splat %x : tile<4xptr<f32>>\n"
         "    %o = tc.constant {value = 1.0} : f32\n"
         "    %p = tc.addptr %px, %o : tile<4xptr<f32>>", "offset must be an integer of the pointer's shape"),
        ("    %a = tc.cast %n {kind = \"sext\"} : i16", "cast sext cannot convert i32 to i16"),
        ("    %a = tc.cast %n {kind = \"bitcast\"} : f16", "cast bitcast cannot convert i32 to f16"),
        ("    %c = tc.constant {value = 1} : i32\n"
         "    %s = tc.select %c, %n, %n : i32", "select condition must be i1"),
        ('    %a = tc.atomic_rmw %x, %n {kind = "add"} : i32', "atomic value i32 does not match the pointer ptr<f32>"),
        ("    %p = tc.program_id {axis = 3} : i32", "axis 3 is not 0, 1 or 2"),
        ("    %c = tc.constant {value = 1.5} : i32", "a float value 1.5 for an i32 constant"),
        ("    %a = tc.constant {value = 0.0} : tile<16x8xf32, #blocked<spt=[1], tpw=[32], wpc=[4], order=[0]>>",
         "has rank 1 but the tile"),
        ("    %c = tc.constant {value = 1.5} : f32\n"
         "    %a = tc.assume %c {multiple_of = 4} : f32", "only integers and pointers"),
        ("    %a = tc.assume %x {aligned = 12} : ptr<f32>", "aligned 12 is not a power of two"),
        ("    %a = tc.assume %n {multiple_of = 0} : i32", "multiple_of must be a positive integer"),
        ("    %a = tc.assume %n {multiple_of = 8} : i64", "assume changes the type i32 -> i64"),
        ("    %b = tc.local_alloc : tile<4x8xf32, #shared<vec=1, per_phase=1, max_phase=1, order=[1, 0]>>\n"
         "    %v = tc.constant {value = 0.0} : tile<8x4xf32, #blocked<spt=[1, 1], tpw=[8, 4], wpc=[1, 1], order=[1, 0]>>\n"
         "    tc.local_store %v, %b", "local_store of tile<8x4xf32"),
        ("    %v = tc.constant {value = 0.0} : tile<8x4xf32>\n"
         "    tc.local_store %v, %v", "the destination must be a shared tile"),
        ("    %v = tc.constant {value = 0.0} : tile<8x12xf32>\n"
         "    %c = tc.convert_layout %v {columns = 8} : tile<8x12xf32>",
         "convert_layout in rounds of 8 columns: they must divide the tile's last dimension (12)"),
        ("    %v = tc.constant {value = 0.0} : tile<8x12xf32>\n"
         "    %c = tc.convert_layout %v {columns = -4} : tile<8x12xf32>", "in rounds of -4 columns"),
    ],
)
def test_op_rules(body: str, message: str) -> None:
    fails(body, message)


def test_for_rules() -> None:
    fails("""
    %c0 = tc.constant {value = 0} : i32
    %f = tc.constant {value = 0.0} : f32
    %t = tc.for %c0, %n, %c0, %f : f32 ({
    ^(%k: i32, %acc: i32):
      tc.yield %k
    })""", "body arguments do not match the loop-carried inits")
    fails("""
    %c0 = tc.constant {value = 0} : i32
    %f = tc.constant {value = 0.0} : f32
    %t = tc.for %c0, %n, %c0, %f : f32 ({
    ^(%k: i32, %acc: f32):
      tc.yield %k
    })""", "yielded values do not match")
    fails("""
    %c0 = tc.constant {value = 0} : i64
    tc.for %c0, %n, %n ({
    ^(%k: i64):
      tc.yield
    })""", "lb, ub and step must be one scalar integer type")


def test_if_and_while_rules() -> None:
    fails("""
    %c = tc.constant {value = true} : i1
    %r = tc.if %c : i32 ({
      tc.yield %n
    }, {
      %f = tc.constant {value = 1.0} : f32
      tc.yield %f
    })""", "else region's yield does not match the results")
    fails("""
    tc.if %n ({
      tc.yield
    }, {
      tc.yield
    })""", "condition must be a scalar i1")
    fails("""
    %r = tc.while %n : i32 ({
    ^(%i: i32):
      tc.condition %i, %i
    }, {
    ^(%i2: i32):
      tc.yield %i2
    })""", "must end with tc.condition of a scalar i1")
    fails("""
    %r = tc.while %n : i32 ({
    ^(%i: i32):
      %c = tc.cmp %i, %n {predicate = "slt"} : i1
      tc.condition %c, %i
    }, {
    ^(%i2: f32):
      tc.yield %i2
    })""", "after-region arguments do not match")


def test_missing_and_misplaced_terminators() -> None:
    fails("""
    %c = tc.constant {value = true} : i1
    tc.if %c ({
      tc.return
    }, {
      tc.yield
    })""", "this region must end with tc.yield")
    m = module("    tc.yield")
    with pytest.raises(IRVerificationError, match="terminator must be the last op"):
        verify(m)
    fn = m.functions[0]
    fn.body.ops.pop()  # the return
    with pytest.raises(IRVerificationError, match="must end with tc.return"):
        verify(m)


def test_dominance_use_before_definition_and_outside_region() -> None:
    body = O.Block([I32])
    loc = Location("d.tc", 3, 5)
    late = O.BinaryOp.create([body.args[0], body.args[0]], [I32], {"kind": "add"})
    early = O.BinaryOp.create([late.results[0], body.args[0]], [I32], {"kind": "add"}, loc=loc)
    body.append(early)
    body.append(late)
    body.append(O.ReturnOp.create([], []))
    with pytest.raises(IRVerificationError) as info:
        verify(O.Function("f", body))
    assert "d.tc:3:5" in str(info.value) and "used before its definition or outside its region" in str(info.value)

    m = module(GOOD)
    fn = m.functions[0]
    for_op = next(op for op in fn.walk() if isinstance(op, O.ForOp))
    inner = for_op.body.ops[0].results[0]
    bad = O.BinaryOp.create([inner, inner], [F32], {"kind": "fadd"}, loc=Location("d.tc", 9, 1))
    fn.body.insert(len(fn.body.ops) - 1, bad)
    with pytest.raises(IRVerificationError, match="d.tc:9:1"):
        verify(m)



def test_dominance_between_sibling_regions_and_of_an_op_over_itself() -> None:
    # a value of the then-region used in the else-region
    m = module("""
    %c = tc.constant {value = true} : i1
    %r = tc.if %c : i32 ({
      %a = tc.binary %n, %n {kind = "add"} : i32
      tc.yield %a
    }, {
      tc.yield %n
    })""")
    iff = next(op for op in m.functions[0].walk() if isinstance(op, O.IfOp))
    iff.regions[1].ops[0].operands[0] = iff.regions[0].ops[0].results[0]
    with pytest.raises(IRVerificationError, match="tc.yield: operand #0 .* outside its region"):
        verify(m)
    # an argument of a while's before-region used in its after-region
    m = module("""
    %r = tc.while %n : i32 ({
    ^(%i: i32):
      %c = tc.cmp %i, %n {predicate = "slt"} : i1
      tc.condition %c, %i
    }, {
    ^(%j: i32):
      tc.yield %j
    })""")
    w = next(op for op in m.functions[0].walk() if isinstance(op, O.WhileOp))
    w.regions[1].ops[0].operands[0] = w.regions[0].args[0]
    with pytest.raises(IRVerificationError, match="tc.yield: operand #0 .* outside its region"):
        verify(m)
    # an op that uses its own result
    m = module('    %a = tc.binary %n, %n {kind = "add"} : i32')
    op = m.functions[0].body.ops[0]
    op.operands[1] = op.results[0]
    with pytest.raises(IRVerificationError, match="tc.binary: operand #1 .* before its definition"):
        verify(m)
    # the text form refuses the same thing at parse time
    with pytest.raises(IRParseError, match="undefined value %a"):
        module("""
    %c = tc.constant {value = true} : i1
    %r = tc.if %c : i32 ({
      %a = tc.binary %n, %n {kind = "add"} : i32
      tc.yield %a
    }, {
      tc.yield %a
    })""")


def test_region_terminators_belong_to_their_op() -> None:
    fails("""
    %c = tc.constant {value = true} : i1
    tc.if %c ({
      tc.condition %c
    }, {
      tc.yield
    })""", "region must end with tc.yield")
    fails("""
    %c0 = tc.constant {value = 0} : i32
    tc.for %c0, %n, %n ({
    ^(%k: i32):
      tc.return
    })""", "region must end with tc.yield")

def test_all_problems_are_reported_together() -> None:
    text = fails('    %a = tc.binary %n, %n {kind = "fadd"} : i32\n    %b = tc.splat %n : tile<4xf32>',
                 "float op 'fadd'", "splat of i32")
    assert text.count("error[E0690]") == 2


def test_tile_argument_rejected() -> None:
    body = O.Block([TileType((4,), I1)])
    body.append(O.ReturnOp.create([], []))
    with pytest.raises(IRVerificationError, match="argument of tile type"):
        verify(O.Function("f", body))


TMA = """
    %buf = tc.local_alloc : tile<16x16xf16, #shared<vec=8, per_phase=2, max_phase=4, order=[1, 0]>>
    %bars = tc.local_alloc : tile<3xi64, #shared<vec=1, per_phase=1, max_phase=1, order=[0]>>
    %c0 = tc.constant {value = 0} : i32
    %yes = tc.constant {value = true} : i1
"""


def test_multicast_copies_and_cluster_arrivals() -> None:
    """A multicast tma_load takes the partner's rank bit (an i32) after its coordinates and a box
    of the whole tile; it splits the rows (through `half_descriptor`) or an even number of panels.
    A cluster arrive takes one `paired` flag per partner: one or two."""
    copy = "    tc.tma_load %buf, %bars, %c0, %yes, %c0, %n{flag} {{extents = [1, 0, -1, 64], stride = [1, 2], " \
           "box = [{box}], swizzle = 64{more}}}"
    verify(module(TMA + "\n".join([
        copy.format(flag=", %c0", box="16, 16", more=", multicast = true, half_descriptor = 1"),
        copy.format(flag=", %c0", box="8, 16", more=", multicast = true"),
        copy.format(flag="", box="16, 8", more=""),
        "    tc.mbarrier_arrive %bars, %c0, %yes, %yes {cluster = true}",
        "    tc.mbarrier_arrive %bars, %c0, %yes, %yes, %yes {cluster = true}",
        "    tc.cluster_barrier"])))
    fails(TMA + copy.format(flag=", %c0", box="16, 16", more=", multicast = true"),
          "a multicast tma_load splits its 16 rows (a multiple of 16, through half_descriptor) or its panels "
          "(an even number, not 1)")
    fails(TMA + copy.format(flag=", %c0", box="16, 8", more=", multicast = true, half_descriptor = 1"),
          "a multicast tma_load's box has all the tile's 16 rows, not 8")
    fails(TMA + copy.format(flag="", box="16, 16", more=", multicast = true, half_descriptor = 1"),
          "expects 7 operand(s), has 6")
    fails(TMA + copy.format(flag=", %yes", box="16, 16", more=", multicast = true, half_descriptor = 1"),
          "last operand (the partner's rank bit, 0 for none) is an i32")
    fails(TMA + copy.format(flag="", box="16, 16", more=", half_descriptor = 1"),
          "half_descriptor is for a multicast tma_load")
    fails(TMA + copy.format(flag="", box="16, 6", more=""), "the box's 6 rows must divide the tile's 16")
    fails(TMA + "    tc.mbarrier_arrive %bars, %c0, %yes {cluster = true}",
          "a cluster's mbarrier_arrive takes (barriers, i32, i1) and one or two i1 flags (its partners), not 3")
    fails(TMA + "    tc.mbarrier_arrive %bars, %c0, %yes, %yes, %yes, %yes {cluster = true}",
          "one or two i1 flags (its partners), not 6")
    fails(TMA + "    tc.mbarrier_arrive %bars, %c0, %yes, %yes", "expects 3 operand(s), has 4")
