"""Viewing a tensor as rows for the row-wise kernels (softmax, cross_entropy, layer_norm)."""

from __future__ import annotations

import math

import torch

from ..devices import check_extent


def as_rows(x: torch.Tensor, n: int, op: str) -> torch.Tensor:
    """x as an (M, n) matrix whose rows are unit-stride: a view when the layout allows (a
    2-D slice keeps its row stride), else a contiguous copy."""
    if x.dim() == 2 and x.shape[1] == n and (x.stride(1) == 1 or n == 1):
        rows = x
    else:
        if x.numel() and x.stride(-1) != 1:
            x = x.contiguous()
        # (-1 cannot be inferred from rows of 0 elements: the rows are then the leading dims)
        rows = x.reshape(-1, n) if n else x.reshape(math.prod(x.shape[:-1]), 0)
        if rows.numel() and n > 1 and rows.stride(1) != 1:
            rows = rows.contiguous()
    check_extent(op, rows)
    return rows


def row_stride(rows: torch.Tensor) -> int:
    """The row stride to pass to a kernel (any value works for a single row)."""
    return int(rows.stride(0)) if rows.shape[0] > 1 else int(rows.shape[1])
