"""The runtime's errors: every failure a user can cause or meet at run time is one of these.

They carry the CUDA error name and the kernel name where there is one, so that a failed launch
reads as a sentence about the user's kernel rather than a driver code.
"""

from __future__ import annotations


class TcRuntimeError(RuntimeError):
    """A CUDA driver call failed (module load, memory, synchronisation, ...)."""

    def __init__(self, message: str, *, cuda_error: str | None = None, kernel: str | None = None):
        self.cuda_error = cuda_error
        self.kernel = kernel
        super().__init__(message)


class TcDeviceError(TcRuntimeError):
    """The requested device does not exist or no CUDA GPU/driver is available."""


class TcLaunchError(TcRuntimeError):
    """A kernel launch was refused by the driver or its configuration is invalid."""


class TcCacheError(TcRuntimeError):
    """The on-disk kernel cache could not be read or written (never raised for corrupt entries,
    which are rebuilt)."""
