"""The launch entry of a kernel on a GPU: one generated Python function per kernel that does the
whole launch of an already chosen variant in one frame.

A launch of a cached kernel must cost the host no more than the peers' (CuPy's RawKernel calls
the driver from Cython). Every Python call, attribute load and tuple built on the way to
cuLaunchKernel shows up in that figure, so the entry inlines what the general path
(`Kernel._call`) spreads over a look-up function, grid and stream helpers and the variant's launch
closure: it checks the argument count, that pointers are plain ints and 16-byte aligned (the
specialization tc compiles for first), computes the rest of the key (integers divisible by 16 or
equal to 1, the auto-tuning key's values) straight from its arguments, looks up the variant's
launch record (one tuple of everything the launch needs, bound once), reads a grid of ints (or
calls the grid function), gets the stream, packs the arguments with `struct.pack_into` and calls
the driver.

Anything it does not handle takes the general path with the same arguments, so errors, compiling,
tuning, other threads, several devices, odd grids and stream objects behave exactly as there:
a key seen for the first time, arguments that are not plain ints where pointers go (tensors are
normalized there), pointers that are not 16-byte aligned, a grid that is not a tuple of 1..3 valid
ints, a stream that is neither None nor an int, a call from a thread other than the one that
built the variant, several GPUs in use, and values `struct` cannot pack.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from . import driver
from .signature import DIV16, NONE, ONE, Signature

#: Launch record fields, in order (a tuple: the entry unpacks it into these names once per launch).
RECORD_FIELDS = ("pack_into", "buffer", "launch", "handle", "block_x", "shared", "params", "owner",
                 "opt", "failed", "packer")


def entry_key(sig: Signature, key: tuple[Any, ...]) -> Any:
    """The entry's table key for the general path's `key` (`Signature.key_function`): the codes of
    the integer arguments and the auto-tuning values (one value alone, not a 1-tuple), or None when
    a pointer is not 16-byte aligned (such launches take the general path)."""
    pointers = set(sig.pointer_indices)
    codes = key[:len(sig._special)]
    if any(code != DIV16 for i, code in zip(sig._special, codes) if i in pointers):
        return None
    rest = tuple(code for i, code in zip(sig._special, codes) if i not in pointers)
    rest += tuple(key[len(sig._special):])
    return rest[0] if len(rest) == 1 else rest


def _entry_key_expression(sig: Signature, extra: list[int]) -> str:
    """`entry_key` as an expression of the arguments (the pointers' alignment is checked apart)."""
    parts = sig.key_parts(extra, pointers=False)
    return parts[0] if len(parts) == 1 else f"({', '.join(parts)})" if parts else "()"


def launch_record(v: Any, ctypes_backend: bool) -> tuple[Any, ...] | None:
    """The fields the entry needs to launch variant `v` (a kernel.Variant), or None when its
    function uses the other driver back end than the entry was generated for."""
    fn = v.function
    raw = fn._raw
    if (raw is not None) != ctypes_backend:
        return None
    if ctypes_backend:
        launch, handle, params = raw, fn._chandle, v.packer.pointers
    else:
        launch, handle, params = fn._launch, fn.handle, v.packer.address
    # (the thread that owns the variant's buffer: others launch through its locked spare packer)
    return (v.pack_into, v.buffer, launch, handle, fn.block_x, fn.shared_bytes, params,
            v.owner, v.opt, fn._failed, v.packer)


_TEMPLATE = '''
def entry(*args, grid=None, stream=None):
    """Launch the kernel: k(*args, grid=..., stream=None) (see tc_runtime.Kernel)."""
    try:
{unpack}
{pointer_check}
        r = table[{key}]
    except Exception:
        r = None
    if r is None or grid is None or drv._several:
        return general(*args, grid=grid, stream=stream)
    {fields} = r
    if type(grid) is not tuple:
        if not callable(grid):
            return general(*args, grid=grid, stream=stream)
        grid = grid(opt)
        if type(grid) is not tuple:
            return general(*args, grid=grid, stream=stream)
    n = len(grid)
    if n == 1:
        gx = grid[0]
        gy = gz = 1
        if type(gx) is not int or not 0 < gx <= MAX_X:
            return general(*args, grid=grid, stream=stream)
    else:
        if n == 2:
            gx, gy = grid
            gz = 1
        elif n == 3:
            gx, gy, gz = grid
        else:
            return general(*args, grid=grid, stream=stream)
        if (type(gx) is not int or type(gy) is not int or type(gz) is not int
                or not (0 < gx <= MAX_X and 0 < gy <= MAX_Y and 0 < gz <= MAX_Z)):
            return general(*args, grid=grid, stream=stream)
    if stream is None:
        s = stream_fn(INDEX)
    elif type(stream) is int:
        s = stream
    else:
        return general(*args, grid=grid, stream=stream)
    if get_ident() != owner:
        return general(*args, grid=grid, stream=stream)
    try:
        pack_into(buffer, 0, {names})
    except Exception:
        packed = False
    else:
        packed = True
    if not packed:
        return general(*args, grid=grid, stream=stream)
{launch}
    if err:
        failed(err, gx, gy, gz, s, packer)
'''

_LAUNCH_CTYPES = '''\
    cs = cstreams.get(s, False)
    if cs is False:
        cs = cstream(s)
    err = launch(handle, gx, gy, gz, block_x, 1, 1, shared, cs, params, None)'''

_LAUNCH_CUDA_PYTHON = '''\
    cs = streams.get(s, False)
    if cs is False:
        cs = streams[s] = stream_object(s)
    err = launch(handle, gx, gy, gz, block_x, 1, 1, shared, cs, params, 0)[0]'''


#: cuda-python stream arguments by raw handle: None for the legacy default stream (0), which
#: cuLaunchKernel's wrapper takes without converting an object.
_cuda_python_streams: dict[int, Any] = {0: None}


def make_entry(sig: Signature, extra: list[int], table: Mapping[Any, tuple[Any, ...]],
               general: Callable[..., None], stream_fn: Callable[[int], int], index: int,
               max_grid: tuple[int, ...], ctypes_backend: bool) -> Callable[..., None]:
    """The generated entry of one kernel: `table` maps `entry_key`s to `launch_record`s; `general(*args, grid=, stream=)` is the
    kernel's general launch path; `stream_fn(index)` gives the current stream's raw handle."""
    n = len(sig.kinds)
    names = ", ".join(f"a{i}" for i in range(n))
    if n == 0:
        unpack = "        if args:\n            raise TypeError('wrong argument count')"
    else:
        unpack = f"        {names}{',' if n == 1 else ''} = args"
    ptrs = sig.pointer_indices
    checks = " or ".join(f"type(a{i}) is not int" for i in ptrs)
    pointer_check = (f"        if {checks} or ({' | '.join(f'a{i}' for i in ptrs)}) & 15:\n"
                     f"            raise TypeError('not plain aligned ints')" if ptrs else "")
    source = _TEMPLATE.format(fields=", ".join(RECORD_FIELDS), unpack=unpack,
                              pointer_check=pointer_check, names=names,
                              key=_entry_key_expression(sig, extra),
                              launch=_LAUNCH_CTYPES if ctypes_backend else _LAUNCH_CUDA_PYTHON)
    max_x, max_y, max_z = max_grid
    namespace: dict[str, Any] = {
        "table": table, "general": general, "stream_fn": stream_fn, "INDEX": index,
        "MAX_X": max_x, "MAX_Y": max_y, "MAX_Z": max_z, "drv": driver,
        "get_ident": threading.get_ident, "cstreams": driver._cstreams,
        "cstream": driver.cstream, "streams": _cuda_python_streams,
        "stream_object": driver.stream_object,
    }
    exec(compile(source, f"<tc launch entry of {sig.kernel}>", "exec"), namespace)
    fn: Callable[..., None] = namespace["entry"]
    return fn
