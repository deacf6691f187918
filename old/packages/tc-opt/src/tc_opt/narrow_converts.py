"""Narrow before converting: a tile that changes layout only to be cast to a narrower type (the
float32 accumulator of a matmul stored as fp16) is cast first, in its own layout, and the
narrower tile changes layout: half the bytes through shared memory, and half the scratch."""

from __future__ import annotations

import attrs
from tc_ir.ops import Block, CastOp, ConvertLayoutOp, Module, OpResult
from tc_ir.types import ScalarType, TileType

from .ir_utils import uses
from .pass_manager import Pass


def narrow_before_convert(body: Block) -> int:
    """Rewrite every cast(convert(x)) that narrows, where the convert has no other reader, as
    convert(cast(x)); the number rewritten."""
    users = uses(body)
    done = 0
    for op in list(body.walk()):
        if not isinstance(op, CastOp) or op.parent is None:
            continue
        src = op.operands[0]
        if not isinstance(src, OpResult) or not isinstance(src.op, ConvertLayoutOp):
            continue
        conv = src.op
        wide, narrow = conv.result.type, op.result.type
        if not isinstance(wide, TileType) or not isinstance(narrow, TileType):
            continue
        if not isinstance(wide.element, ScalarType) or not isinstance(narrow.element, ScalarType):
            continue
        if narrow.element.bits >= wide.element.bits or users.get(conv.result, []) != [op]:
            continue
        orig = conv.operands[0]
        orig_t = orig.type
        assert isinstance(orig_t, TileType)
        cast = CastOp.create([orig], [attrs.evolve(narrow, layout=orig_t.layout)], op.attributes(), loc=op.loc)
        assert conv.parent is not None
        conv.parent.insert(conv.parent.ops.index(conv), cast)
        conv.operands = [cast.result]
        conv.results[0].type = narrow
        for u in users.get(op.result, []):
            u.operands = [conv.result if v is op.result else v for v in u.operands]
        op.parent.remove(op)
        done += 1
    return done


class NarrowBeforeConvert(Pass):
    """cast(convert(x)) -> convert(cast(x)) for casts to narrower elements."""

    name = "narrow-before-convert"

    def run(self, module: Module) -> None:
        for f in module.functions:
            narrow_before_convert(f.body)
