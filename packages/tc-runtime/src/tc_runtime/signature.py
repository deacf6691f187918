"""Kernel signatures: checking the user's arguments, specializing them, packing them for a launch.

A signature is the list of argument kinds the compiler reports ("ptr<f32>", "i32", "f16", ...), the
same spelling as the IR types. From it the runtime builds, once, a `struct.Struct` in native layout
(the C parameter layout CUDA expects), a buffer and the array of pointers into that buffer that
cuLaunchKernel takes: a launch is then one `pack_into` and one driver call.
"""

from __future__ import annotations

import ctypes
import math
import operator
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

# IR scalar kind -> (struct code, C spelling)
_SCALARS: dict[str, tuple[str, str]] = {
    "i1": ("?", "bool"),
    "i8": ("b", "char"),
    "i16": ("h", "short"),
    "i32": ("i", "int"),
    "i64": ("q", "long"),
    "f16": ("e", "half"),
    "bf16": ("H", "bf16"),
    "f32": ("f", "float"),
    "f64": ("d", "double"),
}
_INT_BITS = {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64}

#: Specialization codes of one argument: 16 = divisible by 16 (pointers: 16-byte aligned),
#: 8 = divisible by 8 but not 16 (integers only: a 16-bit matrix's rows of 1000 or 4104 elements
#: are still 16-byte aligned), 1 = equal to 1 (integers only), 0 = nothing known. See
#: `Signature.specialize`.
DIV16, DIV8, ONE, NONE = 16, 8, 1, 0


#: The codes as tc_opt.CompileOptions.specialization names them (NONE: None).
_SPECIALIZATION_NAMES = {DIV16: "divisible_by_16", DIV8: "divisible_by_8", ONE: "equal_to_1"}


def int_code_expression(arg: str, value: Callable[[int], int] = int) -> str:
    """The specialization code of the integer argument named `arg` as a Python expression, for
    the generated launch paths; `value` maps each code (DIV16, DIV8, ONE, NONE) to the number the
    expression gives for it (the launch entry packs them into bits). The one spelling of the rule
    `Signature.specialize` applies to integers."""
    return (f"({value(DIV16)} if not {arg} & 15 else {value(DIV8)} if not {arg} & 7 else "
            f"{value(ONE)} if {arg} == 1 else {value(NONE)})")


def is_pointer(kind: str) -> bool:
    return kind.startswith("ptr<")


def pointee_kind(kind: str) -> str:
    """The kind a pointer kind points to: "ptr<f32>" (or "ptr<f32, 1>") -> "f32"."""
    return kind[4:-1].split(",")[0].strip()


def c_spelling(kind: str) -> str:
    """How Triton-C writes a kind: "ptr<f32>" -> "float*"."""
    if is_pointer(kind):
        return c_spelling(pointee_kind(kind)) + "*"
    return _SCALARS.get(kind, (None, kind))[1]


def _bf16_bits(value: float) -> int:
    """The bf16 bit pattern of a float (round to nearest even), for packing a bf16 scalar."""
    try:
        bits = int(struct.unpack("<I", struct.pack("<f", value))[0])
    except OverflowError:  # beyond the float32 range: infinity of that sign
        bits = 0xFF800000 if value < 0 else 0x7F800000
    if math.isnan(value):
        bits = 0x7FC00000
    if (bits & 0x7F800000) == 0x7F800000 and bits & 0xFFFF:  # NaN stays NaN
        return (bits >> 16) | 0x40
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


#: Pointee kind -> numpy dtype name of the arrays it reads (bf16 as its 16-bit pattern).
NP_DTYPES = {"i1": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
             "f16": "float16", "bf16": "uint16", "f32": "float32", "f64": "float64"}

#: Pointee kind -> the (numpy dtype kind, item size) of the arrays a pointer of that kind may be
#: given: the same width and class of number (ints of either sign; bf16 also as its 16-bit
#: pattern). An i8 pointer (char*) may view any memory, as in C.
_ELEMENTS: dict[str, frozenset[tuple[str, int]]] = {
    "i1": frozenset({("b", 1), ("i", 1), ("u", 1)}),
    "i16": frozenset({("i", 2), ("u", 2)}),
    "i32": frozenset({("i", 4), ("u", 4)}),
    "i64": frozenset({("i", 8), ("u", 8)}),
    "f16": frozenset({("f", 2)}),
    "bf16": frozenset({("bf16", 2), ("i", 2), ("u", 2)}),
    "f32": frozenset({("f", 4)}),
    "f64": frozenset({("f", 8)}),
}


def element_of(dtype: object) -> tuple[str, int, str] | None:
    """(numpy kind, item size, name) of a numpy or torch dtype; None when numpy does not know it
    (tc_runtime never imports torch: a torch dtype is read by its name)."""
    import numpy as np

    if isinstance(dtype, np.dtype):
        return dtype.kind, dtype.itemsize, str(dtype)
    name = str(dtype).removeprefix("torch.")
    if name == "bfloat16":
        return "bf16", 2, name
    try:
        np_dtype = np.dtype(name)
    except TypeError:
        return None
    return np_dtype.kind, np_dtype.itemsize, name


def declared_multiples(arg_attrs: Sequence[Mapping[str, object]]) -> dict[int, int]:
    """Parameter index -> the number its value (an integer, or a pointer's byte address) must be
    a multiple of, by the kernel's `__multipleof(N)` / `__aligned(N)` (a tc_ir Function's
    `arg_attrs`); only the parameters that declare more than 1."""
    out: dict[int, int] = {}
    for i, a in enumerate(arg_attrs):
        m, n = a.get("multiple_of", 1), a.get("aligned", 1)
        if isinstance(m, int) and isinstance(n, int) and m >= 1 and n >= 1 and math.lcm(m, n) > 1:
            out[i] = math.lcm(m, n)
    return out


class Signature:
    """The arguments of one kernel: names, kinds, and the derived packer."""

    def __init__(self, kernel: str, kinds: Sequence[str], names: Sequence[str] | None = None,
                 unsigned: Iterable[int] | None = None, multiples: Mapping[int, int] | None = None):
        """`unsigned`: the indices of the unsigned integer parameters (the IR's integers have no
        sign); None when unknown (metadata older than the field), which accepts either range.
        `multiples`: what the kernel declares its integer and pointer parameters to be multiples
        of (`declared_multiples`); the compiled code relies on it (vector accesses, TMA), so a
        value that breaks it is refused rather than launched."""
        self.kernel = kernel
        self.kinds = list(kinds)
        self.names = list(names) if names else [f"arg{i}" for i in range(len(kinds))]
        if len(self.names) != len(self.kinds):
            self.names = [f"arg{i}" for i in range(len(kinds))]
        self.unsigned: frozenset[int] | None = None if unsigned is None else frozenset(unsigned)
        for k in self.kinds:
            if not is_pointer(k) and k not in _SCALARS:
                raise ValueError(f"kernel '{kernel}': unsupported argument kind {k!r}")
        self.pointer_indices = [i for i, k in enumerate(self.kinds) if is_pointer(k)]
        self.int_indices = [i for i, k in enumerate(self.kinds) if k in _INT_BITS and k != "i1"]
        self._special = sorted(self.pointer_indices + self.int_indices)
        self._has_bf16 = "bf16" in self.kinds
        special = set(self._special)
        self.multiples = {int(i): int(m) for i, m in (multiples or {}).items() if i in special and m > 1}

    # ---------------------------------------------------------------------------- user messages

    def describe(self) -> str:
        """add(z: float*, x: float*, y: float*, N: int)"""
        params = ", ".join(f"{n}: {self.spelling(i)}" for i, n in enumerate(self.names))
        return f"{self.kernel}({params})"

    def spelling(self, i: int) -> str:
        """The C type of parameter `i` ("unsigned int" for an unsigned i32)."""
        kind = self.kinds[i]
        unsigned = self.unsigned is not None and i in self.unsigned and kind in _INT_BITS
        return f"unsigned {c_spelling(kind)}" if unsigned else c_spelling(kind)

    def check_count(self, n: int) -> None:
        if n != len(self.kinds):
            raise TypeError(f"{self.describe()} takes {len(self.kinds)} argument"
                            f"{'' if len(self.kinds) == 1 else 's'}, got {n}")

    def _bad(self, i: int, value: object, expected: str) -> TypeError:
        return TypeError(f"argument {i + 1} ('{self.names[i]}') of {self.describe()} must be "
                         f"{expected}, got {type(value).__name__} {_short(value)}")

    # ------------------------------------------------------------------------------ conversion

    def normalize(self, args: Sequence[object]) -> list[object]:
        """Check every argument against its kind and convert it to a plain Python value: pointers
        and integers to int (objects with data_ptr() give their address), floats to float."""
        self.check_count(len(args))
        out: list[object] = []
        for i, (kind, value) in enumerate(zip(self.kinds, args)):
            if is_pointer(kind):
                out.append(self._pointer(i, value))
            elif kind in _INT_BITS:
                out.append(self._integer(i, kind, value))
            else:
                out.append(self._float(i, kind, value))
        for i, m in self.multiples.items():
            self._check_multiple(i, out[i], m)
        return out

    def _check_multiple(self, i: int, value: object, m: int) -> None:
        """Refuse argument `i` where it is not the multiple of `m` the kernel declares."""
        assert isinstance(value, int)
        if value < 0 and self.unsigned is not None and i in self.unsigned:  # (normalized to signed bits)
            value += 1 << _INT_BITS[self.kinds[i]]
        if value % m == 0:
            return
        what = f"address {value:#x} is" if is_pointer(self.kinds[i]) else f"{value} is"
        declared = f"__aligned({m})" if is_pointer(self.kinds[i]) else f"__multipleof({m})"
        raise ValueError(f"argument {i + 1} ('{self.names[i]}') of {self.describe()}: {what} not a "
                         f"multiple of {m}, which the kernel declares ({declared}) and its compiled "
                         f"code relies on")

    def check_elements(self, i: int, dtype: object) -> None:
        """Refuse an array or tensor of `dtype` for pointer argument `i` when its elements are not
        the pointer's type: the kernel would read their bytes as its own type and compute garbage
        silently (on the GPU and on the interpreter alike). Plain addresses are not checked."""
        pointee = pointee_kind(self.kinds[i])
        allowed = _ELEMENTS.get(pointee)
        element = element_of(dtype)
        if allowed is None or element is None or element[:2] in allowed:
            return
        wanted = NP_DTYPES.get(pointee, pointee).replace("uint16", "bfloat16")
        raise TypeError(f"argument {i + 1} ('{self.names[i]}') of {self.describe()} holds "
                        f"{element[2]} elements, but the kernel reads it as "
                        f"{c_spelling(self.kinds[i])}; convert it to {wanted} first")

    def data_pointer(self, i: int, value: Any) -> Any:
        """`value.data_ptr()` for pointer argument `i`; a TypeError naming the argument where the
        object has no data pointer (torch's sparse and mkldnn tensors raise RuntimeError)."""
        try:
            return value.data_ptr()
        except Exception as exc:
            reason = f"{type(exc).__name__}: {exc}"
        # (raised outside the handler: nothing chained to the caller's error)
        raise TypeError(f"argument {i + 1} ('{self.names[i]}') of {self.describe()} has no data "
                        f"pointer to give the kernel ({reason}); pass a dense, strided tensor or "
                        f"an address")

    def _pointer(self, i: int, value: object) -> int:
        data_ptr = getattr(value, "data_ptr", None)
        if callable(data_ptr):
            dtype = getattr(value, "dtype", None)
            if dtype is not None:
                self.check_elements(i, dtype)
            value = self.data_pointer(i, value)
        if isinstance(value, (bool, float, complex, str, bytes)) or value is None:
            raise self._bad(i, value, "a pointer (an int address, e.g. tensor.data_ptr())")
        try:
            address = operator.index(value)  # type: ignore[arg-type]
        except TypeError:
            raise self._bad(i, value, "a pointer (an int address, e.g. tensor.data_ptr())") from None
        if not 0 <= address < 1 << 64:
            raise TypeError(f"argument {i + 1} ('{self.names[i]}') of {self.describe()}: "
                            f"{address} is not a valid 64-bit address")
        return address

    def _integer(self, i: int, kind: str, value: object) -> int:
        if isinstance(value, (float, complex, str, bytes)) or value is None:
            raise self._bad(i, value, f"an integer ({c_spelling(kind)})")
        try:
            v = operator.index(value)  # type: ignore[arg-type]
        except TypeError:
            raise self._bad(i, value, f"an integer ({c_spelling(kind)})") from None
        if kind == "i1":
            return int(bool(v))
        bits = _INT_BITS[kind]
        # a signed parameter takes its own range (2**31 would reach an `int N` as -2**31); an
        # unsigned one also takes negative values, converted modulo 2**bits as C converts them
        signed = self.unsigned is not None and i not in self.unsigned
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1 if signed else bits)) - 1
        if not lo <= v <= hi:
            wider = " (declare it long)" if signed and bits < 64 else ""
            raise TypeError(f"argument {i + 1} ('{self.names[i]}') of {self.describe()}: "
                            f"{v} does not fit in {self.spelling(i)} ({bits} bits){wider}")
        if v >= 1 << (bits - 1):  # an unsigned value: same bits, packed through the signed code
            v -= 1 << bits
        return v

    def _float(self, i: int, kind: str, value: object) -> float | int:
        if isinstance(value, (str, bytes, complex)) or value is None:
            raise self._bad(i, value, f"a number ({c_spelling(kind)})")
        try:
            v = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise self._bad(i, value, f"a number ({c_spelling(kind)})") from None
        return _bf16_bits(v) if kind == "bf16" else v

    # -------------------------------------------------------------------------- specialization

    def specialize(self, args: Sequence[Any]) -> tuple[int, ...]:
        """One code per pointer/integer argument (in order): DIV16, DIV8, ONE or NONE.

        Needs plain ints (call `normalize` first if this raises TypeError)."""
        out = []
        pointers = self.pointer_indices
        for i in self._special:
            v = args[i]
            if type(v) is not int:
                raise TypeError("not a plain int")
            if not v & 15:
                out.append(DIV16)
            elif not v & 7 and i not in pointers:
                out.append(DIV8)
            elif v == 1 and i not in pointers:
                out.append(ONE)
            else:
                out.append(NONE)
        return tuple(out)

    def options_specialization(self, key: tuple[int, ...]) -> tuple[str | None, ...]:
        """The key as `tc_opt.CompileOptions.specialization`: one entry per argument,
        "divisible_by_16", "divisible_by_8", "equal_to_1" or None."""
        out: list[str | None] = [None] * len(self.kinds)
        for i, code in zip(self._special, key):
            out[i] = _SPECIALIZATION_NAMES.get(code)
        return tuple(out)

    def key_function(self, extra: Sequence[int] = ()) -> Callable[..., tuple[Any, ...]]:
        """A function of the kernel's arguments (as positional parameters) returning the launch
        key: the specialization codes of `specialize`, then the values of the arguments at the
        `extra` indices (the auto-tuning key). Generated once per signature so that a launch
        spends a few hundred nanoseconds here rather than a loop over the arguments.

        It raises (TypeError, ValueError, ...) on anything unusual, a wrong argument count, a
        pointer that is not a plain int, a float where an int is expected; the caller then
        takes the slow path, which normalizes the arguments or reports the error clearly."""
        return self._generate_key(extra, None)

    def lookup_function(self, table: Mapping[tuple[Any, ...], Any],
                        extra: Sequence[int] = ()) -> Callable[..., Any]:
        """`lambda *args: table[key_function(extra)(*args)]` as one generated function (one
        Python call per launch instead of two); raises KeyError for a key not in `table` yet,
        and whatever `key_function` raises."""
        return self._generate_key(extra, table)

    def key_parts(self, extra: Sequence[int], pointers: bool = True) -> list[str]:
        """The key's entries as Python expressions of the arguments `a0, a1, ...`: the
        specialization codes (of pointers too unless `pointers` is False), then the values at
        `extra`; for the generated look-up and launch functions."""
        n = len(self.kinds)
        pointer_set = set(self.pointer_indices)
        parts = []
        for i in self._special:
            if i not in pointer_set:
                parts.append(int_code_expression(f"a{i}"))
            elif pointers:
                parts.append(f"(0 if a{i} & 15 else {DIV16})")
        for i in extra:
            if not 0 <= i < n:
                raise ValueError(f"key index {i} out of range for {self.describe()}")
            parts.append(f"a{i}")
        return parts

    def key_expression(self, extra: Sequence[int]) -> str:
        """The key (`key_function`) as one tuple expression of the arguments."""
        parts = self.key_parts(extra)
        return f"({', '.join(parts)}{',' if len(parts) == 1 else ''})"

    def _generate_key(self, extra: Sequence[int],
                      table: Mapping[tuple[Any, ...], Any] | None) -> Callable[..., Any]:
        n = len(self.kinds)
        params = ", ".join(f"a{i}" for i in range(n))
        checks = [f"type(a{i}) is not int" for i in self.pointer_indices]
        checks += [f"a{i} % {m}" for i, m in self.multiples.items()]  # (normalize says what is wrong)
        key = self.key_expression(extra)
        lines = [f"def key({params}):"]
        if checks:
            lines.append(f"    if {' or '.join(checks)}:")
            lines.append("        raise TypeError('not a plain int')")
        lines.append(f"    return {key}" if table is None else f"    return table[{key}]")
        namespace: dict[str, Any] = {"table": table}
        exec(compile("\n".join(lines), f"<tc key of {self.kernel}>", "exec"), namespace)
        fn: Callable[..., Any] = namespace["key"]
        return fn

    # ------------------------------------------------------------------------------- packing

    def packer(self) -> ArgPacker:
        return ArgPacker(self)


class ArgPacker:
    """Native-layout argument buffer + void* array for cuLaunchKernel, built once per signature."""

    def __init__(self, sig: Signature) -> None:
        codes = ["Q" if is_pointer(k) else _SCALARS[k][0] for k in sig.kinds]
        fmt = "@" + "".join(codes)
        self.sig = sig
        self.struct = struct.Struct(fmt)
        self.buffer = ctypes.create_string_buffer(max(self.struct.size, 8))
        base = ctypes.addressof(self.buffer)
        offsets = [struct.calcsize("@" + "".join(codes[:i]) + "0" + c) for i, c in enumerate(codes)]
        self.pointers = (ctypes.c_void_p * max(len(codes), 1))(*[base + o for o in offsets])
        #: The value passed as cuLaunchKernel's kernelParams.
        self.address = ctypes.addressof(self.pointers)
        self._pack_into = self.struct.pack_into
        self._always_normalize = sig._has_bf16  # bf16 scalars are packed as their bit pattern

    def another(self) -> ArgPacker:
        """A packer of the same kind with buffers of its own (for another thread)."""
        return ArgPacker(self.sig)

    def pack_normalized(self, values: Sequence[object]) -> int:
        """Write arguments `Signature.normalize` has converted already (packed as they are)."""
        self._pack_into(self.buffer, 0, *values)
        return self.address

    def pack(self, args: Sequence[object]) -> int:
        """Write the arguments into the buffer; returns the kernelParams address."""
        if self._always_normalize:
            args = self.sig.normalize(args)
        try:
            self._pack_into(self.buffer, 0, *args)
        except struct.error:
            self._pack_into(self.buffer, 0, *self.sig.normalize(args))
        return self.address


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
