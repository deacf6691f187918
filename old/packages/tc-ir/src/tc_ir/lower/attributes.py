"""Declaration attributes: `__multipleof(N)`, `__aligned(N)`, `__noalias`, `__readonly`,
`__writeonly`, `__retune`. On kernel parameters they go to `Function.arg_attrs`; on local
variables the value facts (multiple_of, aligned) become `tc.assume` ops at the declaration and at
every later assignment, so the alignment analysis sees them wherever the variable is defined."""

from __future__ import annotations

from tc_lang import ast as A
from tc_lang import types as C

from ..ops import Value
from .context import Lowerer
from .errors import BAD_OPERAND

#: Source spelling (without leading underscores) -> IR attribute name.
ATTR_NAMES = {
    "multipleof": "multiple_of",
    "multiple_of": "multiple_of",
    "aligned": "aligned",
    "noalias": "noalias",
    "readonly": "readonly",
    "writeonly": "writeonly",
    "retune": "retune",
}

#: Attributes that state a fact about a value (the others are about what a parameter points to).
VALUE_FACTS = frozenset({"multiple_of", "aligned"})


def attribute_values(lw: Lowerer, attributes: tuple[A.Attribute, ...]) -> dict[str, int | bool]:
    """IR name -> value (True for flags), each checked: known name, positive integer argument."""
    out: dict[str, int | bool] = {}
    for a in attributes:
        key = ATTR_NAMES.get(a.name.lstrip("_"))
        if key is None:
            lw.fail(f"unknown attribute '{a.name}'", a.loc, BAD_OPERAND)
        if a.value is None:
            if key in VALUE_FACTS:
                lw.fail(f"attribute '{a.name}' needs a value, e.g. {a.name}(16)", a.loc, BAD_OPERAND)
            out[key] = True
            continue
        v = a.value.const if a.value.const is not None else getattr(a.value, "value", None)
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            lw.fail(f"attribute '{a.name}' needs a positive integer constant", a.loc, BAD_OPERAND)
        if key == "aligned" and v & (v - 1):
            lw.fail(f"'{a.name}({v})': an alignment must be a power of two", a.loc, BAD_OPERAND)
        out[key] = v
    return out


def local_facts(lw: Lowerer, d: A.Decl, ctype: C.Type) -> dict[str, int]:
    """The value facts of a local declaration's attributes (others are refused: they describe
    what a kernel parameter points to)."""
    values = attribute_values(lw, d.attributes)
    facts: dict[str, int] = {}
    el = C.element_of(ctype)
    for a in d.attributes:
        key = ATTR_NAMES[a.name.lstrip("_")]
        if key not in VALUE_FACTS:
            lw.fail(
                f"attribute '{a.name}' applies to kernel parameters only, not to the local '{d.name}'",
                a.loc,
                BAD_OPERAND,
            )
        if not (isinstance(el, C.PointerType) or (isinstance(el, C.ScalarType) and el.is_integer and not el.is_bool)):
            lw.fail(f"attribute '{a.name}' needs an integer or pointer variable, not '{ctype}'", a.loc, BAD_OPERAND)
        v = values[key]
        assert isinstance(v, int)
        facts[key] = v
    return facts


def assert_facts(lw: Lowerer, value: Value, facts: dict[str, int]) -> Value:
    """`value` through a tc.assume carrying `facts` (unchanged when there are none)."""
    if not facts:
        return value
    out = lw.b.assume(value, facts.get("multiple_of", 1), facts.get("aligned", 1))
    out.name_hint = getattr(value, "name_hint", None)
    return out
