"""tc-torch: tc kernels as differentiable torch operations.

Tensors are the arguments: the device and the stream come from them (torch's current stream, so
the ops also work under torch.cuda.graph capture once a warm-up call has compiled and tuned them).
CPU tensors run on the reference interpreter, which is how every op is checked without a GPU.
"""

from __future__ import annotations

from .ops.add import add
from .ops.cross_entropy import cross_entropy
from .ops.layer_norm import layer_norm
from .ops.matmul import matmul
from .ops.softmax import softmax
from .ops.transpose import transpose

__version__ = "0.1.0"

__all__ = ["add", "cross_entropy", "layer_norm", "matmul", "softmax", "transpose"]
