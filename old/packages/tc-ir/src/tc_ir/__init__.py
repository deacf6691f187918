"""tc-ir: the tile IR (types, ops, builder, text form, verifier), the lowering from the checked
AST, and the numpy reference interpreter that defines tc's semantics."""

from __future__ import annotations

from . import layouts, ops, types
from .builder import Builder, BuilderError
from .interpreter import (
    AssumptionError,
    Interpreter,
    InterpreterError,
    Memory,
    MisalignedAccessError,
    OutOfBoundsError,
    RawMemory,
    interpret,
)
from .ir_parser import IRParseError, parse_function, parse_module, parse_type
from .lower import lower
from .ops import Block, Function, Module, Operation, Value
from .printer import print_function, print_module, print_op
from .verifier import IRVerificationError, verify

__version__ = "0.1.0"

__all__ = [
    "AssumptionError",
    "Block",
    "Builder",
    "BuilderError",
    "Function",
    "IRParseError",
    "IRVerificationError",
    "Interpreter",
    "InterpreterError",
    "Memory",
    "MisalignedAccessError",
    "Module",
    "OutOfBoundsError",
    "Operation",
    "RawMemory",
    "Value",
    "interpret",
    "layouts",
    "lower",
    "ops",
    "parse_function",
    "parse_module",
    "parse_type",
    "print_function",
    "print_module",
    "print_op",
    "types",
    "verify",
]
