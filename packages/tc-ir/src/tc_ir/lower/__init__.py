"""AST -> tile IR: `lower(unit, kernel=None)` builds a Module holding one kernel, helpers inlined.

The typed AST from `tc_lang.frontend` goes in; SSA tile IR with structured control flow comes out.
All implicit C conversions, splats and broadcasts become explicit ops, signedness becomes the op
kind, and every op carries the source location of the node it came from. Anything the IR cannot
express is a TcLoweringError at the user's line (see errors.py for the codes).
"""

from __future__ import annotations

from tc_lang import ast as A
from tc_lang import types as C
from tc_lang.deep import run_deep
from tc_lang.diagnostics import TcCompileError, with_source_lines

from ..ops import Block, Function, Module
from .analysis import purity_memo
from .attributes import attribute_values
from .cleanup import prune_dead
from .context import FnCtx, Lowerer
from .control import setup_return
from .errors import BAD_OPERAND, NO_KERNEL, fail, unknown_name
from .typemap import ir_type
from .types_ast import decl_type, resolve_typename

__all__ = ["lower", "lower_function"]


def lower(unit: A.TranslationUnit, kernel: str | None = None, *, verify: bool | None = None) -> Module:
    """The kernel named `kernel` (default: the only or first __global__ one) as a Module.

    The result is verified when `verify` is true, or when it is None (the default) in debug runs
    (Python's `__debug__`, i.e. not `python -O`): a failure there is a bug of the lowering."""
    if not isinstance(unit, A.TranslationUnit):
        raise TypeError(f"lower() needs a TranslationUnit (from tc_lang.frontend), not {type(unit).__name__}")
    if kernel is not None and not isinstance(kernel, str):
        raise TypeError(f"lower()'s kernel is the name of a __global__ function (a str), not {type(kernel).__name__}")
    try:
        return run_deep(unit, _lower, unit, kernel, verify)  # (a flat sum of 2000 terms is deep)
    except TcCompileError as e:
        raise with_source_lines(e, unit.source_line) from None


def _lower(unit: A.TranslationUnit, kernel: str | None, verify: bool | None) -> Module:
    kernels = unit.kernels()
    if kernel is None:
        if not kernels:
            fail("the source defines no __global__ kernel", unit.loc, NO_KERNEL)
        chosen = kernels[0]
    else:
        found = [k for k in kernels if k.name == kernel]
        if not found:
            names = ", ".join(f"'{k.name}'" for k in kernels) or "none"
            unknown_name(f"no __global__ kernel named '{kernel}' (kernels: {names})", unit.loc)
        chosen = found[0]
    with purity_memo():
        module = Module([lower_function(unit, chosen)])
    if verify if verify is not None else __debug__:
        from ..verifier import verify as verify_ir

        verify_ir(module)
    return module


def _signedness(t: C.Type) -> dict[str, int | bool]:
    """`unsigned` for an unsigned integer parameter: IR integers have no sign, and the runtime
    needs it to check the range of the value passed (a signed `int N` refuses 2**31)."""
    if isinstance(t, C.ScalarType) and t.is_integer and not t.is_bool and not t.is_signed:
        return {"unsigned": True}
    return {}


def lower_function(unit: A.TranslationUnit, f: A.FunctionDef) -> Function:
    """One __global__ kernel as an IR Function (its __device__ callees inlined)."""
    lw = Lowerer(unit)
    floc = f.loc if f.loc.line > 0 else f.body.loc  # the parser may leave a definition unlocated
    ret = f.return_ty if f.return_ty is not None else resolve_typename(lw, f.return_type)
    if not (isinstance(ret, C.ScalarType) and ret.is_void):
        fail(f"kernel '{f.name}' must return void, not '{ret}'", floc, BAD_OPERAND)
    ctypes = [decl_type(lw, p) for p in f.params]
    for p, t in zip(f.params, ctypes):
        if isinstance(t, C.TileType):
            fail(f"kernel parameter '{p.name}' cannot be a tile", p.loc, BAD_OPERAND)
    body = Block([ir_type(t, p.loc) for p, t in zip(f.params, ctypes)], [p.name for p in f.params])
    fn = Function(
        f.name,
        body,
        arg_names=[p.name for p in f.params],
        arg_attrs=[{**attribute_values(lw, p.attributes), **_signedness(t)} for p, t in zip(f.params, ctypes)],
        kind="global",
        loc=floc,
    )
    lw.b.position_at_end(body)
    lw.b.loc = floc
    for p, t, arg in zip(f.params, ctypes, body.args):
        lw.env.declare(p.name, t, arg)
    lw.fn = FnCtx(f.name, None)
    try:
        with lw.env.scope():
            setup_return(lw, f.body.items)
            lw.stmts(f.body.items)
    except RecursionError:
        fail(f"kernel '{f.name}' is nested too deeply to compile", floc)
    lw.b.loc = f.body.loc if f.body.loc.line > 0 else floc
    lw.b.ret()
    prune_dead(body)
    return fn

