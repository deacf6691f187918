"""Argument specialization: arguments known equal to 1 become constants, arguments divisible by
16 or 8 are recorded (`divisible_by_16`, `multiple_of`), pointers get their byte alignment
(`aligned`)."""

from __future__ import annotations

from tc_ir.ops import ConstantOp, Function, Module
from tc_ir.types import PointerType, ScalarType

from .ir_utils import replace_uses
from .pass_manager import Pass


class SpecializeArguments(Pass):
    """Argument specialization: what the launch promises of the arguments (equal to 1, divisible by
    16, aligned) becomes constants and attributes the later passes read."""

    name = "specialize"

    def run(self, module: Module) -> None:
        """Record the argument facts of `options.specialization`; arguments equal to 1 become constants."""
        for f in module.functions:
            self._function(f)

    def _function(self, f: Function) -> None:
        spec = self.options.specialization
        while len(f.arg_attrs) < len(f.args):
            f.arg_attrs.append({})
        if spec is not None and len(spec) != len(f.args):
            raise ValueError(
                f"kernel {f.name} has {len(f.args)} arguments but the specialization has {len(spec)}"
            )
        for i, arg in enumerate(f.args):
            attrs_ = f.arg_attrs[i]
            kind = None if spec is None else spec[i]
            if isinstance(arg.type, PointerType):
                elem_bytes = arg.type.pointee.bytes
                if spec is None:
                    attrs_.setdefault("aligned", 16)
                elif kind == "divisible_by_16":
                    attrs_["aligned"] = max(16, int(attrs_.get("aligned", 1)))
                    attrs_["divisible_by_16"] = True
                elif kind == "divisible_by_8":
                    attrs_["aligned"] = max(8, elem_bytes, int(attrs_.get("aligned", 1)))
                else:
                    attrs_.setdefault("aligned", elem_bytes)
                continue
            if not (isinstance(arg.type, ScalarType) and arg.type.is_int):
                continue
            if kind == "divisible_by_16":
                attrs_["divisible_by_16"] = True
                attrs_["multiple_of"] = max(16, int(attrs_.get("multiple_of", 1)))
            elif kind == "divisible_by_8":
                attrs_["multiple_of"] = max(8, int(attrs_.get("multiple_of", 1)))
            elif kind == "equal_to_1":
                attrs_["equal_to_1"] = True
                one = ConstantOp.create([], [arg.type], {"value": 1}, loc=f.loc)
                f.body.insert(0, one)
                replace_uses(f.body, arg, one.result)
