"""tc-torch: tc kernels as torch operations (tensors as arguments; stream and device from them)."""

from __future__ import annotations

from .ops.add import add

__version__ = "0.1.0"

__all__ = ["add"]
