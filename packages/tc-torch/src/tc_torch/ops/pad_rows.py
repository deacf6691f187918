"""Copies of matrices into padded rows: tc_torch's matmul copies an operand whose rows are not
16-byte aligned (or split L2's sectors) into rows of a multiple of PAD_ROWS_TO elements first.

On the GPU the copy is kernels/pad_rows.tc, launched with raw pointers: one allocation and one
launch per operand, where torch's strided copy_ cost the host several calls (views, a slice, the
copy) and moved an element per thread. The copy moves bits, so rows whose length and strides
allow it move as wider integers (`piece_width`: rows of halves 8 bytes apart move as longs). On
the interpreter torch copies (the kernel runs there too when called through `copy_rows`)."""

from __future__ import annotations

import torch

import tc_runtime as tc

from ..devices import INT32_LIMIT, GridFn, extent, launch, on_cuda
from ..library import get_kernel

#: The padded rows' length is a multiple of this many elements (128 bytes of halves: every row
#: starts a 128-byte line, whatever the tile's K step).
PAD_ROWS_TO = 64

#: The integer type the kernel moves a piece of a row as, by its width in bytes.
PIECES: dict[int, tuple[str, torch.dtype]] = {8: ("long", torch.int64), 4: ("int", torch.int32),
                                              2: ("short", torch.int16), 1: ("char", torch.int8)}

#: Bytes of a row one program copies (TC pieces); TR rows of them are tuned per shape.
ROW_BYTES = 256
ROWS_PER_PROGRAM = (8, 16, 32)
CPU_DEFINES = {"TR": 4, "TC": 8}
#: Grid axes 1 and 2 (column blocks, matrices) hold at most this many programs.
MAX_GRID = 65535

#: The GPU kernels made so far, by (piece width, device index): the fast path's look-up.
_KERNELS: dict[tuple[int, int], tc.Kernel] = {}

#: Bit patterns torch copies as one element on the interpreter, by width (complex128: 16 bytes of
#: anything).
_TORCH_PIECES = {16: torch.complex128, 8: torch.int64, 4: torch.int32}


def padded_length(length: int) -> int:
    """The row stride of the padded copy of rows of `length` elements (at least one row's worth)."""
    return -(-max(length, 1) // PAD_ROWS_TO) * PAD_ROWS_TO


def piece_width(mat: torch.Tensor) -> int:
    """The widest piece (8, 4, 2 or 1 bytes, at least an element) that tiles the rows of a 2-D or
    3-D `mat` (rows contiguous): its rows' length, its strides and its start are whole pieces."""
    _, _, length, sz = _shape(mat)
    return _width(mat.element_size(), length, int(mat.storage_offset()), (int(mat.stride(-2)), sz))


def configs(width: int) -> list[tc.Config]:
    """The tuned configurations of the kernel moving pieces of `width` bytes."""
    return [tc.config(defines={"TR": tr, "TC": ROW_BYTES // width}, num_warps=4) for tr in ROWS_PER_PROGRAM]


def kernel(width: int, device: torch.device) -> tc.Kernel:
    """The copy kernel moving pieces of `width` bytes on `device`."""
    defines: dict[str, object] = {"TYPE": PIECES[width][0]}
    if not on_cuda(device):
        return get_kernel("pad_rows", "pad_rows", device, {**defines, **CPU_DEFINES})
    kern = get_kernel("pad_rows", "pad_rows", device, defines, configs=configs(width), key=["R", "C"])
    _KERNELS[width, device.index] = kern
    return kern


def _shape(mat: torch.Tensor) -> tuple[int, int, int, int]:
    """(matrices, rows, row length, matrix stride) of a 2-D or 3-D `mat` (a single matrix's
    stride is 0: a 2-D matrix and a batch of one copy alike)."""
    if mat.dim() == 3 and mat.shape[0] != 1:
        return mat.shape[0], mat.shape[1], mat.shape[2], int(mat.stride(0))
    return 1, mat.shape[-2], mat.shape[-1], 0


def _width(es: int, length: int, start: int, strides: tuple[int, ...], widths: tuple[int, ...] = (8, 4, 2, 1)) -> int:
    """The widest piece among `widths` (bytes; at least an element of `es` bytes, else `es`) that
    tiles rows of `length` elements starting `start` elements in, with `strides` (rows, matrices)."""
    for w in widths:
        if w >= es and (length * es) % w == 0 and (start * es) % w == 0 and all((st * es) % w == 0 for st in strides):
            return w
    return es


def fits_grid(length: int, element_size: int, z: int) -> bool:
    """Whether the kernel's grid holds a copy of `z` matrices with rows of `length` elements."""
    return z <= MAX_GRID and -(-length * element_size // ROW_BYTES) <= MAX_GRID


def offsets_fit(*spans: int) -> bool:
    """Whether tensors spanning `spans` elements keep the kernel's int offsets in range (a padded
    copy may span more than its source: the general path then copies with torch and matmul's
    check_extent names the problem)."""
    return all(s < INT32_LIMIT for s in spans)


def _grid(rows: int, pieces: int, z: int) -> GridFn:
    """The copy's grid: blocks of TR rows, blocks of TC pieces, matrices."""
    def grid(opt: tc.Options) -> tuple[int, int, int]:
        return tc.cdiv(rows, opt.TR), tc.cdiv(pieces, opt.TC), z
    return grid


def copy_rows(y: torch.Tensor, x: torch.Tensor, device: torch.device) -> None:
    """y = x by the kernel, for 2-D or 3-D x and y of one shape and dtype with contiguous rows
    (stride 1 along the last dimension), on `device` (the GPU, or the interpreter)."""
    if tuple(y.shape) != tuple(x.shape) or y.dtype != x.dtype or x.dim() not in (2, 3) or \
            (x.shape[-1] > 1 and (x.stride(-1) != 1 or y.stride(-1) != 1)):
        raise ValueError(f"tc_torch.copy_rows: y and x must be 2-D or 3-D of one shape and dtype with "
                         f"contiguous rows, got {tuple(y.shape)} {y.dtype} and {tuple(x.shape)} {x.dtype}")
    if x.dim() == 3 and x.shape[0] == 1:  # (a batch of one: its matrix stride is no piece's concern)
        x, y = x[0], y[0]
    width = min(piece_width(x), piece_width(y))
    es = x.element_size()
    z, rows, length, sx = _shape(x)
    sy = _shape(y)[3]
    if not fits_grid(length, es, z):
        raise ValueError(f"tc_torch.copy_rows: {z} matrices of rows of {length} elements are more "
                         f"than the copy's grid holds")
    if not offsets_fit(extent(x), extent(y)):
        raise ValueError(f"tc_torch.copy_rows: tensors of shape {tuple(x.shape)} span more elements than "
                         f"the kernel's int offsets allow (2**31 - 1)")
    if x.numel() == 0:
        return
    kern = kernel(width, device)
    per = width // es
    ldx = int(x.stride(-2)) // per
    ldy = int(y.stride(-2)) // per
    if not on_cuda(device):  # (the interpreter reads the tensors themselves: as pieces)
        x, y = x.view(PIECES[width][1]), y.view(PIECES[width][1])
    launch(kern, device, _grid(rows, length // per, z), x, y, rows, length // per, ldx, ldy, sx // per, sy // per)


def padded(x: torch.Tensor, transposed: bool, ld: int, device: torch.device) -> tuple[torch.Tensor, int]:
    """x (R, C) or (Z, R, C) copied, as matmul reads it (row-major, or column-major when
    `transposed`), into rows of a multiple of PAD_ROWS_TO elements; with the new leading
    dimension. A leading dimension that is a multiple of PAD_ROWS_TO already is returned as it
    is. On the GPU the kernel copies; on the interpreter torch."""
    if ld % PAD_ROWS_TO == 0:
        return x, ld
    mat = x.transpose(-1, -2) if transposed else x  # rows contiguous
    length = mat.shape[-1]
    new_ld = padded_length(length)
    buf = torch.empty((*mat.shape[:-1], new_ld), dtype=x.dtype, device=x.device)
    y = buf[..., :length]
    if on_cuda(device) and fits_grid(length, x.element_size(), _shape(mat)[0]) and \
            offsets_fit(extent(mat), buf.numel()):
        copy_rows(y, mat, device)
    else:
        wide = _torch_piece(mat)
        if wide is None:
            y.copy_(mat)
        else:
            y.view(wide).copy_(mat.view(wide))
    return (y.transpose(-1, -2) if transposed else y), new_ld


def fast_padded(x: torch.Tensor, transposed: bool, index: int) -> tuple[torch.Tensor, int] | None:
    """`padded` on the GPU `index` once its kernel was made there: the same launch without the
    checks, into a flat buffer (what the caller reads is its pointer and the new leading
    dimension); None where the general path must copy."""
    es = x.element_size()
    shape = x.shape
    strides = x.stride()
    z = shape[0] if len(shape) == 3 else 1
    sx = strides[0] if z != 1 else 0
    if transposed:
        rows, length, s_row, s_col = shape[-1], shape[-2], strides[-1], strides[-2]
    else:
        rows, length, s_row, s_col = shape[-2], shape[-1], strides[-2], strides[-1]
    if s_col != 1 and length > 1:
        return None
    width = _width(es, length, int(x.storage_offset()), (s_row, sx))
    kern = _KERNELS.get((width, index))
    new_ld = padded_length(length)
    if kern is None or not fits_grid(length, es, z) or not offsets_fit(z * rows * new_ld):
        return None  # (the source's span: the caller's fast path checked it)
    y = x.new_empty(z * rows * new_ld)
    per = width // es
    pieces = length // per
    kern(x.data_ptr(), y.data_ptr(), rows, pieces, s_row // per, new_ld // per, sx // per,
         rows * new_ld // per if z != 1 else 0, grid=_grid(rows, pieces, z))
    return y, new_ld


def _torch_piece(mat: torch.Tensor) -> torch.dtype | None:
    """The widest type whose elements are whole runs of `mat`'s rows (rows contiguous), for
    torch's copy on the interpreter; None when no wider type fits (odd lengths or strides)."""
    es = mat.element_size()  # (every stride counts: torch's view checks a batch of one's too)
    w = _width(es, mat.shape[-1], int(mat.storage_offset()), tuple(int(s) for s in mat.stride()[:-1]),
               tuple(_TORCH_PIECES))
    return _TORCH_PIECES[w] if w > es else None


__all__ = ["PAD_ROWS_TO", "copy_rows", "fast_padded", "padded", "padded_length", "piece_width"]
