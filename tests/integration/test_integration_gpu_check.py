"""tools/gpu_check.py's parts that need no GPU: reading the auto-tuner's choices from its log."""

from __future__ import annotations

import sys
from pathlib import Path

import tc_runtime as tc
from tc_torch.ops.matmul import A_VARIANTS, B_VARIANTS

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import gpu_check  # noqa: E402


def _chose_line(key: str, config: tc.Config, kernel: str = "matmul") -> str:
    """A line as tc_runtime.autotune prints it under TC_PRINT_AUTOTUNING (its `config` repr)."""
    return f"tc autotune: kernel '{kernel}' ({key}): chose {config!r} (1651.3 us)"


def test_the_choices_are_shortened_to_the_variant_the_key_and_the_tile() -> None:
    # (the matmul's own defines: values such as 'newaxis,:' and 'MB,KB' hold commas)
    variant = {"TYPE": "bf16", "ACC": "float", **A_VARIANTS[False], **B_VARIANTS[True]}
    persistent = tc.config({**variant, "MB": 128, "NB": 256, "KB": 64}, num_warps=8, num_stages=3,
                           options={"persistent": True, "tma_store": True})
    plain = tc.config({"TYPE": "float", "MB": 256, "NB": 128, "KB": 32}, num_warps=8, num_stages=4)
    other = tc.config({"TYPE": "float", "ACC": "float", "BLOCK_M": 64, "BLOCK_N": 32}, num_warps=2, num_stages=3)
    log = "\n".join([
        "tc autotune: kernel 'matmul' (M=4096, N=4096, K=4096): config(...): 1700.0 us",
        _chose_line("M=4096, N=4096, K=4096", persistent),
        "tc torch: something else",
        _chose_line("M=8192, N=8192, K=8192", plain),
        _chose_line("M=4096, N=4096", other, kernel="transpose"),
    ])
    got = gpu_check.tuned_choices(log)
    assert got == [
        "matmul bf16 a ^b M=4096, N=4096, K=4096: 128x256x64/8/3 "
        "{'persistent': True, 'tma_store': True, 'warp_specialize': True}",
        "matmul float M=8192, N=8192, K=8192: 256x128x32/8/4",
        "transpose float M=4096, N=4096: BLOCK_M=64 BLOCK_N=32/2/3",
    ]


def test_a_log_without_choices_gives_none() -> None:
    assert gpu_check.tuned_choices("") == []
    assert gpu_check.tuned_choices("tc autotune: kernel 'matmul' (M=1): using config(x)") == []
