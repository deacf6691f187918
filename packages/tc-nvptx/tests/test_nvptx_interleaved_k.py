"""K-interleaved shared tiles (Shared.k_interleave) in the lowering, without a GPU: the address
arithmetic for a run-time coordinate (JIT-compiled for the host with llvmlite) places every
element where `interleaved_position` says. (The products themselves: test_nvptx_gpu_tf32.py.)"""

from __future__ import annotations

import ctypes
import types
from collections.abc import Callable
from typing import Any

import llvmlite.binding as llvm
import llvmlite.ir as ir
from tc_ir.layouts import interleaved_position
from tc_nvptx.swizzle import SharedView

_engines: list[Any] = []


def _host_function(build: Callable[[ir.IRBuilder, ir.Argument], ir.Value]) -> Callable[[int], int]:
    """`build(builder, arg)` -> i32, as a host function int32 -> int32."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    mod = ir.Module("interleave")
    i32 = ir.IntType(32)
    fn = ir.Function(mod, ir.FunctionType(i32, [i32]), "f")
    b = ir.IRBuilder(fn.append_basic_block())
    b.ret(build(b, fn.args[0]))
    target = llvm.Target.from_default_triple().create_target_machine()
    parsed = llvm.parse_assembly(str(mod))
    engine = llvm.create_mcjit_compiler(parsed, target)
    engine.finalize_object()
    f = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32)(engine.get_function_address("f"))
    _engines.append(engine)  # (keep the code alive)
    return f  # type: ignore[no-any-return]


def test_run_time_coordinates_are_interleaved_like_constant_ones() -> None:
    def interleaved(b: ir.IRBuilder, c: ir.Argument) -> ir.Value:
        out = SharedView._interleaved(types.SimpleNamespace(b=b), c)  # type: ignore[arg-type]
        assert isinstance(out, ir.Value)
        return out

    f = _host_function(interleaved)
    assert [f(c) for c in range(64)] == [interleaved_position(c) for c in range(64)]
    assert [f(c) for c in range(8)] == [0, 4, 1, 5, 2, 6, 3, 7]
