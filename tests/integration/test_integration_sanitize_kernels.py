"""tools/sanitize_kernels.py's parts that need no GPU: the cases it runs and how its options choose
among them (the runs themselves are compute-sanitizer's, in gpu_check's sanitizer section)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from tc_torch.ops import matmul as mm

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import sanitize_kernels  # noqa: E402


def test_every_configuration_in_every_layout_it_may_run_in() -> None:
    cases = list(sanitize_kernels.matmul_cases())
    tf32_k_major_only = [c for c in mm.TF32_K_MAJOR_B_CONFIGS if c.key() not in {t.key() for t in mm.TF32_CONFIGS}]
    extra = sanitize_kernels.extra_fp16_configs()
    assert len(cases) == 4 * len(mm.TENSOR_CORE_CONFIGS) + 4 * len(mm.TF32_CONFIGS) \
        + 2 * len(tf32_k_major_only) + len(mm.STREAM_K_CONFIGS) + 4 * len(extra)
    assert len({label for label, *_ in cases}) == len(cases)  # (labels name one case each: --match)
    # the extra tiles are 176 columns wide (partial swizzle panels) or run in clusters of 4, and
    # none is the tuner's
    assert all(c.defines["NB"] == "176" or (c.options or {}).get("cluster_2x2") for c in extra)
    assert sum(bool((c.options or {}).get("cluster_2x2")) for c in extra) == 2
    assert not {c.key() for c in extra} & {c.key() for c in mm.TENSOR_CORE_CONFIGS}
    assert sum("'cluster_2x2': True" in label for label, *_ in cases) == 2 * 4


def test_the_shapes_cover_aligned_odd_and_unaligned_c_rows() -> None:
    aligned, odd, unaligned_c = sanitize_kernels.MATMUL_SHAPES
    assert aligned[4] and aligned[2] * 2 % 16 == 0  # (16-bit C rows of 16-byte multiples)
    assert not odd[4] and odd[0] > 1
    assert unaligned_c[4] and unaligned_c[2] * 2 % 16 != 0  # (16-bit C rows; 32-bit ones are aligned)
    # more programs of a 128x256 tile than an H100 has SMs: the persistent kernels loop
    for _, m, n, _, _ in (aligned, unaligned_c):
        assert -(-m // 128) * -(-n // 256) > 132


@pytest.mark.parametrize("argv,message", [(["--matmul", "--shape", "3"], "invalid choice"),
                                          (["--matmul", "--shard", "2/2"], "--shard takes I/N")])
def test_bad_options_are_refused(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        sanitize_kernels.main(argv)
    assert message in capsys.readouterr().err
