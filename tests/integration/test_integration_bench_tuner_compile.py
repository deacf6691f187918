"""tools/bench_tuner_compile.py: the tuner's compile jobs for tc_torch.matmul, and its timing of
them one by one and in worker processes (a short list here)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import bench_tuner_compile as btc  # noqa: E402  (tools/ is not a package)
from tc_torch.ops import matmul as mm  # noqa: E402


def test_the_jobs_are_the_tuners_configurations() -> None:
    half = btc.jobs_for("half", "sm_90", None)
    assert len(half) == len(mm.TENSOR_CORE_CONFIGS)
    assert all(j["defines"]["TYPE"] == "half" and j["spec"] == ["divisible_by_16"] * 12 for j in half)
    tf32 = btc.jobs_for("tf32", "sm_90", 2)
    assert len(tf32) == 2 and all(j["options"]["fp32_dot"] == "tf32" for j in tf32)


def test_it_times_both_ways_and_leaves_the_cache_setting_alone(capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    monkeypatch.setenv("TC_CACHE_DIR", str(tmp_path))
    assert btc.main(["--dtype", "tf32", "--limit", "3", "--workers", "0,3"]) == 0
    out = capsys.readouterr().out
    assert "3 tf32 configurations for sm_90" in out
    assert "workers 0: " in out and "workers 3: " in out
    assert os.environ["TC_CACHE_DIR"] == str(tmp_path) and not any(tmp_path.iterdir())
    with pytest.raises(SystemExit):
        btc.main(["--workers", "two"])
