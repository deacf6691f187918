"""The launch entry of a kernel on a GPU: one generated Python function per kernel that does the
whole launch of an already chosen variant in one frame.

A launch of a cached kernel must cost the host no more than the peers' (CuPy's RawKernel calls
the driver from Cython). Every Python call, attribute load and tuple built on the way to
cuLaunchKernel shows up in that figure, so the entry inlines what the general path
(`Kernel._call`) spreads over a look-up function, grid and stream helpers and the variant's launch
closure: it takes the arguments as positional parameters (no argument tuple), takes the address
of pointer arguments that are not ints from their `data_ptr()` (torch tensors) once their dtype
is one the pointer reads (`Signature.check_elements`, learned per dtype) and they are in GPU
memory (`check_gpu_memory`), checks that the pointers are 16-byte aligned (the specialization
tc compiles for first), computes the rest of the key (integers divisible by 16 or equal to 1, two
bits each of one int, then the auto-tuning key's values) straight from its arguments, looks up
the variant's launch record (one tuple of everything the launch needs, bound once), reads a grid
of ints (or calls the grid function), gets the stream (a constant 0 without torch), packs the
arguments with `struct.pack_into` and calls the driver with the cheapest argument forms its
wrapper takes (see the launch snippets below).

Anything it does not handle takes the general path with the same arguments (pointers given as
tensors may arrive there as their addresses, which it treats the same), so errors, compiling,
tuning, other threads, several devices, odd grids and stream objects behave exactly as there:
a wrong argument count, keywords other than grid and stream (`**unknown`: the general path
names the kernel, where Python's own error named the entry), a key seen for the first time,
pointer arguments that are neither ints nor have a `data_ptr()` giving one (or have no `dtype`
or `is_cuda`, or elements of another type than the pointer's, or are in host memory), pointers
that are not 16-byte aligned, a grid that is not a tuple of 1..3 valid ints, a stream that is
neither None nor an int, several GPUs in use, and values `struct` cannot pack. A call from a
thread other than the one that built the variant launches through a record of its own
(`thread_record`: a packer with buffers of its own, made on the thread's first call; a kernel's
backward pass runs on torch's autograd thread), up to THREAD_RECORDS of them per kernel; beyond,
such calls take the general path, which locks.

`tools/bench_launch_host.py` times the entry per call form against a no-op driver.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping
from typing import Any

from . import driver
from .signature import DIV8, DIV16, NONE, ONE, Signature, int_code_expression

#: Launch record fields, in order (a tuple: the entry unpacks it into these names once per launch).
RECORD_FIELDS = ("pack_into", "buffer", "launch", "handle", "block_x", "shared", "params", "owner",
                 "opt", "failed", "packer", "programs")


#: Records a kernel's entry makes for threads other than a variant's owner, at most.
THREAD_RECORDS = 64

#: An integer argument's specialization code as its two bits of the entry's key.
_DIGITS = {DIV16: 2, DIV8: 3, ONE: 1, NONE: 0}


def _digit(code: int, bit: int) -> int:
    """An integer argument's code as its two bits of the entry's key, at `bit`."""
    return _DIGITS[code] << bit


def entry_key(sig: Signature, key: tuple[Any, ...]) -> Any:
    """The entry's table key for the general path's `key` (`Signature.key_function`), or None when
    a pointer is not 16-byte aligned (such launches take the general path).

    The specialization codes of the integer arguments are one int, two bits each (`_DIGITS`, the
    j-th integer argument at bits 2j and 2j+1): computing and hashing it costs the entry less than
    a tuple of codes. Then the auto-tuning key's values; one part alone is the key itself, several
    are a tuple."""
    pointers = set(sig.pointer_indices)
    codes = key[:len(sig._special)]
    if any(code != DIV16 for i, code in zip(sig._special, codes) if i in pointers):
        return None
    ints = [code for i, code in zip(sig._special, codes) if i not in pointers]
    parts: list[Any] = [sum(_digit(c, 2 * j) for j, c in enumerate(ints))] if ints else []
    parts += key[len(sig._special):]
    return parts[0] if len(parts) == 1 else tuple(parts)


def _entry_key_expression(sig: Signature, extra: list[int]) -> str:
    """`entry_key` as an expression of the arguments `a0, a1, ...` (the pointers' alignment is
    checked apart)."""
    pointers = set(sig.pointer_indices)
    ints = [i for i in sig._special if i not in pointers]
    parts = []
    if ints:
        parts.append(" | ".join(int_code_expression(f"a{i}", functools.partial(_digit, bit=2 * j))
                                for j, i in enumerate(ints)))
    for i in extra:
        if not 0 <= i < len(sig.kinds):
            raise ValueError(f"key index {i} out of range for {sig.describe()}")
        parts.append(f"a{i}")
    if len(parts) == 1:
        return parts[0]
    return f"({', '.join(parts)})" if parts else "()"


def launch_record(v: Any, ctypes_backend: bool) -> tuple[Any, ...] | None:
    """The fields the entry needs to launch variant `v` (a kernel.Variant), or None when its
    function uses the other driver back end than the entry was generated for or it runs
    stream-K (its launch also takes a workspace per stream: the general path does it). A
    persistent variant's record has its `programs(gx, gy, gz)` (kernel.launch_persistently): the
    entry packs the program grid after the arguments and launches that many CTAs."""
    fn = v.function
    raw = fn._raw
    if (raw is not None) != ctypes_backend or (v.binary.persistent and v.programs is None):
        return None
    if ctypes_backend:
        launch, handle, params = raw, fn._chandle, v.packer.pointers
    else:
        launch, handle, params = fn._launch, fn.handle, v.packer.address
    # (the thread that owns the variant's buffer: others launch through its locked spare packer)
    return (v.pack_into, v.buffer, launch, handle, fn.block_x, fn.shared_bytes, params,
            v.owner, v.opt, fn._failed, v.packer, v.programs)


def thread_record(record: tuple[Any, ...], pack_into_of: Callable[[Any], Callable[..., None]],
                  ctypes_backend: bool, owner: int) -> tuple[Any, ...]:
    """`record` (a launch_record) for thread `owner`: the same launch through a packer with
    buffers of its own (`packer.another()`; `pack_into_of` gives its pack_into, as the variant's
    is kernel._pack_into_of's), so that threads never pack into one another's buffers."""
    fields = dict(zip(RECORD_FIELDS, record))
    packer = fields["packer"].another()
    fields.update(pack_into=pack_into_of(packer), buffer=packer.buffer, owner=owner, packer=packer,
                  params=packer.pointers if ctypes_backend else packer.address)
    return tuple(fields[name] for name in RECORD_FIELDS)


_TEMPLATE = '''
def entry({params}*rest, grid=None, stream=None, **unknown):
    \"\"\"Launch the kernel: k(*args, grid=..., stream=None) (see tc_runtime.Kernel).\"\"\"
{addresses}    try:
{alignment}
        k = {key}
        r = table[k]
    except Exception:
        r = None
    if r is None or rest{missing} or unknown or drv._several:
        return fallback({names_tuple}, rest, grid, stream, unknown)
    {fields} = r
    if type(grid) is not tuple:
        if not callable(grid):
            return general({names_args}grid=grid, stream=stream)
        grid = grid(opt)
        if type(grid) is not tuple:
            return general({names_args}grid=grid, stream=stream)
    n = len(grid)
    if n == 1:
        gx, = grid
        if type(gx) is not int or not 0 < gx <= {max_x}:
            return general({names_args}grid=grid, stream=stream)
        gy = gz = 1
    else:
        if n == 2:
            gx, gy = grid
            gz = 1
        elif n == 3:
            gx, gy, gz = grid
        else:
            return general({names_args}grid=grid, stream=stream)
        if (type(gx) is not int or type(gy) is not int or type(gz) is not int
                or not (0 < gx <= {max_x} and 0 < gy <= {max_y} and 0 < gz <= {max_z})):
            return general({names_args}grid=grid, stream=stream)
    if stream is None:
        s = {current_stream}
    elif type(stream) is int:
        s = stream
    else:
        return general({names_args}grid=grid, stream=stream)
    if get_ident() != owner:  # (another thread: through a packer of its own)
        r = adopt(k)
        if r is None:
            return general({names_args}grid=grid, stream=stream)
        {fields} = r
    try:
        if programs is None:
            pack_into(buffer, 0, {names_args})
        else:  # (persistent: the program grid after the arguments, on as many CTAs as it takes)
            pack_into(buffer, 0, {names_args}gx, gy, gz)
            gx, gy, gz = programs(gx, gy, gz), 1, 1
    except Exception:
        packed = False
    else:
        packed = True
    if not packed:
        return general({names_args}grid=grid, stream=stream)
{launch}
    if err:
        failed(err, gx, gy, gz, s, packer)
'''

# The driver call. Stream: None for 0 (the legacy default stream: NULL for both back ends, and no
# dictionary look-up), else the back end's memoized object for the raw handle. cuda-python's
# wrapper converts the fewest objects when given the CUfunction itself, a CUstream (or None) and
# kernelParams as the int address of the variant's prebuilt void* array (measured against a
# no-op libcuda: a plain-int handle or stream costs it a CUfunction/CUstream construction per
# call, a ctypes array a buffer-protocol request).
_LAUNCH_CTYPES = '''\
    if s:
        cs = cstreams.get(s)
        if cs is None:
            cs = cstream(s)
    else:
        cs = None
    err = launch(handle, gx, gy, gz, block_x, 1, 1, shared, cs, params, None)'''

_LAUNCH_CUDA_PYTHON = '''\
    if s:
        cs = streams.get(s)
        if cs is None:
            cs = streams[s] = stream_object(s)
    else:
        cs = None
    err = launch(handle, gx, gy, gz, block_x, 1, 1, shared, cs, params, 0)[0]'''


#: cuda-python stream arguments by raw handle: None for the legacy default stream (0), which
#: cuLaunchKernel's wrapper takes without converting an object.
_cuda_python_streams: dict[int, Any] = {0: None}


class _Missing:
    """The default of the entry's parameters: an argument the caller did not pass."""

    def __repr__(self) -> str:
        return "<missing argument>"


MISSING: Any = _Missing()


def check_gpu_memory(sig: Signature, i: int, value: Any, device: int) -> None:
    """Refuse a tensor in host memory (`is_cuda` False) for pointer argument `i` of a kernel on
    GPU `device` unless the driver maps it (pinned memory): the kernel would fault on it, and a
    fault ends the process's CUDA context. A tensor on torch's meta device holds no data (its
    data_ptr() is 0: the kernel would be given a null pointer). Objects without `is_cuda` are
    taken as addresses."""
    if getattr(value, "is_cuda", True):
        return
    if getattr(getattr(value, "device", None), "type", None) == "meta":
        raise ValueError(f"argument {i + 1} ('{sig.names[i]}') of {sig.describe()} is a tensor on the "
                         f"meta device, which holds no data; this kernel runs on cuda:{device}")
    address = value.data_ptr()
    if address and not driver.pointer_mapped(address):
        raise ValueError(f"argument {i + 1} ('{sig.names[i]}') of {sig.describe()} is a tensor in "
                         f"CPU memory, but this kernel runs on cuda:{device}; move it to the GPU "
                         f"first (tensor.to('cuda:{device}'))")


def make_entry(sig: Signature, extra: list[int], table: Mapping[Any, tuple[Any, ...]],
               general: Callable[..., None], stream_fn: Callable[[int], int], index: int,
               max_grid: tuple[int, ...], ctypes_backend: bool,
               pack_into_of: Callable[[Any], Callable[..., None]]) -> Callable[..., None]:
    """The generated entry of one kernel: `table` maps `entry_key`s to `launch_record`s;
    `general(*args, grid=, stream=)` is the kernel's general launch path; `stream_fn(index)`
    gives the current stream's raw handle (`driver._default_stream`: always 0, inlined);
    `pack_into_of(packer)` the pack_into of another thread's packer (`thread_record`).

    The kernel's arguments are positional-only parameters `a0, a1, ...` defaulting to MISSING,
    plus `*rest`: binding them costs CPython less than building an argument tuple and unpacking
    it, and a call with too few (the last one MISSING) or too many (`rest`) arguments goes to the
    general path, which reports the count. Pointer arguments that are not ints are replaced by
    their `data_ptr()` before the alignment check (one branch the int-only call skips); past the
    first check the entry falls back with the arguments as they are then (a tensor's address
    normalizes as the tensor would)."""
    n = len(sig.kinds)
    names = [f"a{i}" for i in range(n)]
    names_tuple = f"({', '.join(names)}{',' if n == 1 else ''})"
    params = "".join(f"{a}=MISSING, " for a in names) + ("/, " if n else "")
    ptrs = sig.pointer_indices
    addresses = alignment = ""
    if ptrs:
        not_ints = " or ".join(f"type(a{i}) is not int" for i in ptrs)
        converts = "".join(f"            if type(a{i}) is not int:\n"
                           f"                if a{i}.dtype not in dtypes{i} or not a{i}.is_cuda:\n"
                           f"                    accept({i}, a{i})\n"
                           f"                a{i} = a{i}.data_ptr()\n" for i in ptrs)
        addresses = (f"    if {not_ints}:\n"
                     f"        try:\n{converts}"
                     f"            ok = not ({not_ints})\n"
                     f"        except Exception:\n"
                     f"            ok = False\n"
                     f"        if not ok:\n"
                     f"            return fallback({names_tuple}, rest, grid, stream, unknown)\n")
        alignment = (f"        if ({' | '.join(f'a{i}' for i in ptrs)}) & 15:\n"
                     f"            raise TypeError('a pointer not 16-byte aligned')")
    if sig.multiples:  # (values the kernel declares multiples of: the general path names a bad one)
        alignment += (f"\n        if {' or '.join(f'a{i} % {m}' for i, m in sig.multiples.items())}:\n"
                      f"            raise ValueError('not the declared multiple')")
    # a last argument not passed is MISSING: a pointer fails the check above, an integer the key
    # (`MISSING & 15` raises); other kinds are compared
    last_checked = n > 0 and (n - 1 in ptrs or n - 1 in sig.int_indices)
    max_x, max_y, max_z = max_grid
    source = _TEMPLATE.format(
        fields=", ".join(RECORD_FIELDS), params=params, addresses=addresses,
        alignment=alignment, names_tuple=names_tuple,
        names_args="".join(f"{a}, " for a in names),
        missing=f" or a{n - 1} is MISSING" if n and not last_checked else "",
        key=_entry_key_expression(sig, extra),
        max_x=max_x, max_y=max_y, max_z=max_z,
        current_stream="0" if stream_fn is driver._default_stream else f"stream_fn({index})",
        launch=_LAUNCH_CTYPES if ctypes_backend else _LAUNCH_CUDA_PYTHON)

    def fallback(given: tuple[object, ...], rest: tuple[object, ...], grid: object,
                 stream: object, unknown: dict[str, object]) -> None:
        """The general path with the caller's arguments (MISSING ones dropped), where their count
        is not known to be right yet (past that, the entry calls `general` directly), and any
        keywords other than grid and stream (which it refuses, naming the kernel)."""
        if rest:
            given += rest
        elif given and given[-1] is MISSING:
            given = tuple(a for a in given if a is not MISSING)
        return general(*given, grid=grid, stream=stream, **unknown)

    adopted: dict[tuple[int, Any], tuple[Any, ...]] = {}

    def adopt(key: Any) -> tuple[Any, ...] | None:
        """This thread's record of the variant `table[key]` (made on its first launch here), or
        None beyond THREAD_RECORDS (the general path then launches under the variant's lock)."""
        tid = threading.get_ident()
        r = adopted.get((tid, key))
        if r is None and len(adopted) < THREAD_RECORDS:
            r = adopted[tid, key] = thread_record(table[key], pack_into_of, ctypes_backend, tid)
        return r

    namespace: dict[str, Any] = {
        "table": table, "general": general, "fallback": fallback, "stream_fn": stream_fn,
        "adopt": adopt,
        "MISSING": MISSING, "drv": driver, "get_ident": threading.get_ident,
        "cstreams": driver._cstreams, "cstream": driver.cstream,
        "streams": _cuda_python_streams, "stream_object": driver.stream_object,
    }
    # the element types each pointer argument was seen to accept (torch dtypes are singletons:
    # a set look-up costs the entry far less than `Signature.check_elements`)
    dtypes: dict[int, set[object]] = {i: set() for i in ptrs}

    def accept(i: int, tensor: Any) -> None:
        """Check tensor argument `i` (its dtype; when it is not in GPU memory, whether the GPU
        can read it) and learn its dtype, or raise: the entry then falls back to the general
        path, which reports the problem. Pinned host tensors pass here on every launch."""
        sig.check_elements(i, tensor.dtype)
        check_gpu_memory(sig, i, tensor, index)
        if tensor.is_cuda:
            dtypes[i].add(tensor.dtype)

    namespace.update({f"dtypes{i}": dtypes[i] for i in ptrs}, accept=accept)
    exec(compile(source, f"<tc launch entry of {sig.kernel}>", "exec"), namespace)
    fn: Callable[..., None] = namespace["entry"]
    return fn
