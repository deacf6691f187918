"""tools/fuzz_kernels.py without a GPU: the compile-only run and the reducer of failing kernels."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import fuzz_kernels  # noqa: E402


def test_compile_only_run_prints_the_outcomes_by_feature(capsys: pytest.CaptureFixture[str]) -> None:
    assert fuzz_kernels.main(["0:2", "--compile-only", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1].split() == ["all", "2", "0", "0", "0"]


def test_the_reducer_keeps_only_the_lines_the_failure_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_outcome(program: Any, gpu: bool, arch: str = "sm_90") -> tuple[str, str]:
        return ("mismatch", "differs") if "z0" in program.source.split("bool mask")[1] else ("ok", "")

    monkeypatch.setattr(fuzz_kernels, "_outcome", fake_outcome)
    reduced = fuzz_kernels.reduce_source(5, gpu=True)
    body = reduced.split("bool mask")[1].splitlines()[1:]
    code = [line for line in body if line.strip() and not line.startswith("/*")]
    assert len(code) == 2 and "z0" in code[0] and code[1] == "}"
    assert reduced.rstrip().endswith("/* differs */")
