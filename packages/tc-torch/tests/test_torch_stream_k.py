"""Stream-K matmuls (CompileOptions.stream_k, tc_opt.stream_k) on the GPU: the programs of the last
waves are shared between CTAs, whose partial sums meet in the workspace; every product must equal
torch's, launch after launch (the flags are left 0 for the next one)."""

from __future__ import annotations

import pytest
import torch

from tc_torch.ops import matmul as mm

STREAM_K_CONFIGS = {
    torch.float32: [mm._cfg(256, 128, 32, 8, 4, persistent=True, stream_k=True),
                    mm._cfg(128, 256, 32, 8, 3, persistent=True, stream_k=True)],
    torch.float16: [mm._cfg(128, 256, 64, 8, 4, persistent=True, stream_k=True)],
}

#: (batches, M, N, K), for 132 SMs and 256x128 programs (128x256: the same counts): 256 programs
#: (124 shared by stream-K), 297 (33 shared, each cut between four CTAs: chains of partial sums;
#: fp16's 289 programs leave 25, too few to share), K of 2 k-steps (segments of one or two
#: iterations), 2 batches of 96 programs (60 shared, straddling the two matrices), K = 0 (nothing
#: shared: zeros), fewer programs than SMs: 72, 40 and 8 (plain persistent, one CTA each).
CASES = [(1, 4096, 2048, 1000), (1, 2176, 4224, 3000), (1, 4096, 2048, 40), (2, 1000, 3000, 520),
         (1, 2048, 4096, 0), (1, 1536, 1536, 700), (1, 1280, 1024, 300), (1, 512, 512, 300)]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True)])
def test_stream_k_on_the_gpu(ta: bool, tb: bool, dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    precision = "tf32" if dtype == torch.float32 else "ieee"

    def operand(z: int, rows: int, cols: int, transposed: bool) -> torch.Tensor:
        x = torch.randn(z, cols, rows, dtype=dtype, device="cuda") if transposed else \
            torch.randn(z, rows, cols, dtype=dtype, device="cuda")
        return x.transpose(1, 2) if transposed else x

    for z, m, n, k in CASES:
        a, b = operand(z, m, k, ta), operand(z, k, n, tb)
        ref = a.double() @ b.double()
        for c in STREAM_K_CONFIGS[dtype]:
            for launch in range(3):  # (the flags must be 0 again after each launch)
                got = torch.full((z, m, n), float("nan"), device="cuda", dtype=dtype)
                mm.matmul_out(got, a, b, configs=[c], precision=precision)
                err = float((got.double() - ref).abs().max())
                assert err <= 0.5 + 1e-2 * float(ref.abs().max()), (z, m, n, k, launch, c.defines, c.options)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_stream_k_on_two_streams() -> None:
    """Each stream has a workspace of its own: products on two streams at once stay exact."""
    torch.manual_seed(1)
    c = STREAM_K_CONFIGS[torch.float32][0]
    a = torch.randn(1, 4096, 1000, device="cuda")
    b = torch.randn(1, 1000, 2048, device="cuda")
    ref = a.double() @ b.double()
    outs = [torch.empty(1, 4096, 2048, device="cuda") for _ in range(2)]
    streams = [torch.cuda.Stream() for _ in range(2)]  # type: ignore[no-untyped-call]
    torch.cuda.synchronize()
    for _ in range(5):
        for s, out in zip(streams, outs):
            with torch.cuda.stream(s):
                mm.matmul_out(out, a, b, configs=[c], precision="tf32")
    torch.cuda.synchronize()
    for out in outs:
        assert float((out.double() - ref).abs().max()) <= 0.5 + 1e-2 * float(ref.abs().max())
