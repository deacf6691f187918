"""tools/bench_matmul_configs.py's choice of configurations (no GPU needed): the tuner's own
lists per product, and the close tiles it compares by default."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import bench_matmul_configs as configs  # noqa: E402
from tc_torch.ops import matmul as mm  # noqa: E402


def test_the_tuners_lists_per_product() -> None:
    assert configs.tuner_configs("half", "nn") == mm.TENSOR_CORE_CONFIGS
    assert configs.tuner_configs("tf32", "nn") == mm.TF32_CONFIGS
    assert configs.tuner_configs("tf32", "nt") == mm.TF32_K_MAJOR_B_CONFIGS


def test_default_tiles_are_the_close_ones_with_distinct_labels() -> None:
    half = [configs.label(c) for c in configs.default_configs("half", "nn")]
    assert "128x256x64/8/3" in half and "128x256x64/8/4/overlap_epilogue/persistent/tma_store" in half
    assert not any(name.startswith(("64x", "128x128x")) for name in half)
    tf32_nt = [configs.label(c) for c in configs.default_configs("tf32", "nt")]
    # A B^T: the bulk-store 8/3 that interleaved benchmarks put first at 8192^3, beside the
    # persistent tiles without the store the tuner chose instead (BENCHMARKS.md, 2026-11-26)
    assert {"128x256x32/8/3/persistent/tma_store", "128x256x32/8/3/persistent",
            "256x128x32/8/4/persistent"} <= set(tf32_nt)
    tf32_nn = [configs.label(c) for c in configs.default_configs("tf32", "nn")]
    assert "256x128x32/8/4/persistent/group4" in tf32_nn and "256x128x32/8/4/persistent" in tf32_nn
    for names in (half, tf32_nt, tf32_nn):
        assert len(names) == len(set(names))  # (the timings are keyed by label)
