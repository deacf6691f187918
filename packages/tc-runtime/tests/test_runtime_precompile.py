"""tc_runtime.precompile: worker processes fill the disk cache with the kernels an auto-tuner is
about to build, and nothing depends on them (a failing job, a disabled cache, too few jobs)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tc_runtime import compiler, knobs, precompile

SRC = """
__global__ void add(float* z, float* x, int N) {
    int off[BLOCK] = get_program_id(0) * BLOCK + (0 ... BLOCK);
    bool check[BLOCK] = off < N;
    *?(check)(z + off) = *?(check)(x + off) + 1;
}
"""
SPEC = ("divisible_by_16", "divisible_by_16", None)


def _jobs(blocks: list[int]) -> list[dict[str, Any]]:
    return [precompile.job(SRC, filename="<add>", name=None, defines={"BLOCK": str(b)}, arch="sm_80",
                           num_warps=4, num_stages=3, spec=SPEC) for b in blocks]


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TC_CACHE_DIR", str(tmp_path / "cache"))
    for knob in ("TC_DISABLE_CACHE", "TC_ALWAYS_COMPILE", "TC_COMPILE_WORKERS"):
        monkeypatch.delenv(knob, raising=False)


def _compile_from_cache_only(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"compiled in this process: {kwargs.get('defines')}")

    monkeypatch.setattr(compiler, "compile_source", refuse)


def test_workers_compile_the_missing_jobs_into_the_disk_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = _jobs([32, 64, 128, 256])
    assert len(precompile.missing(jobs)) == 4
    assert precompile.precompile(jobs, workers=2) == 2
    assert precompile.missing(jobs) == []
    _compile_from_cache_only(monkeypatch)
    for j in jobs:
        binary = precompile.compile_job(j)
        assert f"mov.u32" in binary.ptx and binary.name == "add"


def test_a_job_that_does_not_compile_is_left_to_the_caller() -> None:
    jobs = _jobs([3, 32, 64])  # BLOCK = 3: not a power of two
    assert precompile.precompile(jobs, workers=3) == 3
    assert precompile.missing(jobs) == jobs[:1]


def test_no_worker_starts_where_it_could_not_help(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_process(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a worker was started")

    monkeypatch.setattr(subprocess, "Popen", no_process)
    jobs = _jobs([32, 64, 128])
    assert precompile.precompile(jobs, workers=1) == 0  # one worker: the caller compiles
    assert precompile.precompile(jobs[:2], workers=4) == 0  # fewer jobs than MIN_JOBS
    monkeypatch.setenv("TC_ALWAYS_COMPILE", "1")  # the caller would not read what they wrote
    assert precompile.missing(jobs) == [] and precompile.precompile(jobs, workers=4) == 0
    monkeypatch.delenv("TC_ALWAYS_COMPILE")
    monkeypatch.setenv("TC_DISABLE_CACHE", "1")
    assert precompile.precompile(jobs, workers=4) == 0


def test_jobs_that_cannot_be_keyed_or_sent_are_left_to_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = _jobs([32, 64, 128])
    broken = dict(jobs[0], source='#include "nowhere.h"\n' + SRC)  # the preprocessor fails on it
    assert precompile.missing([broken, *jobs[1:]]) == jobs[1:]
    unsendable = [dict(j, options={"flag": object()}) for j in jobs]  # not JSON
    assert precompile.precompile(unsendable, workers=2) == 0
    monkeypatch.setattr("sys.executable", "")
    assert precompile.precompile(jobs, workers=2) == 0
    assert len(precompile.missing(jobs)) == 3


def test_a_worker_that_cannot_start_leaves_its_share_to_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise OSError("no processes left")

    monkeypatch.setattr(subprocess, "Popen", fail)
    jobs = _jobs([32, 64, 128])
    assert precompile.precompile(jobs, workers=2) == 0
    assert len(precompile.missing(jobs)) == 3


def test_a_worker_reads_its_jobs_from_stdin_and_survives_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import json

    monkeypatch.setattr("sys.stdin", io.StringIO("not json"))
    assert precompile.main() == 2
    jobs = _jobs([3, 64])
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(jobs)))
    assert precompile.main() == 0
    assert precompile.missing(jobs) == jobs[:1]


def test_compile_workers_knob(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TC_COMPILE_WORKERS", "3")
    assert knobs.compile_workers() == 3
    monkeypatch.setenv("TC_COMPILE_WORKERS", "0")
    assert knobs.compile_workers() == 0
    monkeypatch.delenv("TC_COMPILE_WORKERS")
    assert 1 <= knobs.compile_workers() <= 8
    for bad in ("two", "-1", "1.5"):
        monkeypatch.setenv("TC_COMPILE_WORKERS", bad)
        with pytest.raises(ValueError, match="TC_COMPILE_WORKERS must be a whole number"):
            knobs.compile_workers()
