"""Compile an auto-tuned kernel's configurations in parallel processes before they are timed.

The auto-tuner needs every configuration compiled, and one compilation of a Hopper matmul takes
half a second to a second (the passes in Python, LLVM, ptxas): tc_torch.matmul's 27 16-bit
configurations took 12.3 s one after another on a two-core machine, 7.5 s with four workers.
Here the configurations missing from the disk cache are shared among up to TC_COMPILE_WORKERS
processes (`python -m tc_runtime.precompile`, jobs as JSON on stdin), each of which compiles its
share into the cache; the tuner then finds them there. Nothing depends on the workers: a job
that fails in one (a configuration that does not compile, a worker that cannot start or is
killed) is simply compiled again by the caller, which reports its errors as before. Workers are
fresh interpreters (no fork of a process that holds a CUDA context), started with this process's
import path, and are given a time limit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from . import knobs
from .binary import KernelBinary
from .build import cached_binary, source_kernel_key
from .cache import KernelCache

#: Seconds a worker may take per job it was given, beyond which it is killed (its jobs then fall
#: back to the caller).
SECONDS_PER_JOB = 120.0
#: Fewer missing configurations than this are compiled by the caller alone (a worker's start,
#: about a second of imports, would not pay).
MIN_JOBS = 3


def job(source: str, *, filename: str, name: str | None, defines: Mapping[str, str], arch: str,
        num_warps: int, num_stages: int, spec: Sequence[str | None],
        options: Mapping[str, object] | None = None) -> dict[str, Any]:
    """One compilation, as build.cached_binary takes it (JSON-serializable)."""
    return {"source": source, "filename": filename, "name": name, "defines": dict(defines), "arch": arch,
            "num_warps": num_warps, "num_stages": num_stages, "spec": list(spec),
            "options": dict(options) if options else None}


def missing(jobs: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The jobs whose kernels the disk cache does not hold yet; none when the caller would not
    read what workers wrote (TC_DISABLE_CACHE, TC_ALWAYS_COMPILE)."""
    if knobs.disable_cache() or knobs.always_compile():
        return []
    cache = KernelCache()
    out = []
    for j in jobs:
        try:
            key = _key(j)
        except Exception:  # noqa: BLE001  (e.g. an #include that fails: the caller reports it)
            continue
        if not cache.entry_dir(key).is_dir():
            out.append(j)
    return out


def compile_job(j: Mapping[str, Any]) -> KernelBinary:
    """Job `j` compiled, or read from the disk cache, by build.cached_binary."""
    binary, _ = cached_binary(j["source"], filename=j["filename"], name=j["name"], defines=j["defines"],
                              arch=j["arch"], num_warps=j["num_warps"], num_stages=j["num_stages"], spec=j["spec"],
                              options=j["options"])
    return binary


def _key(j: Mapping[str, Any]) -> str:
    """The cache key build.cached_binary files job `j` under."""
    return source_kernel_key(j["source"], filename=j["filename"], name=j["name"], defines=j["defines"], arch=j["arch"],
                             num_warps=j["num_warps"], num_stages=j["num_stages"], spec=j["spec"], options=j["options"])


def precompile(jobs: Sequence[Mapping[str, Any]], workers: int | None = None) -> int:
    """Compile the `jobs` missing from the disk cache in up to `workers` processes (default
    TC_COMPILE_WORKERS) and wait for them; returns how many workers ran (0: nothing was worth
    it, and the caller compiles everything itself)."""
    workers = knobs.compile_workers() if workers is None else workers
    if workers < 2 or not sys.executable:  # (an embedded interpreter may have no executable)
        return 0
    todo = missing(jobs)
    if len(todo) < MIN_JOBS:
        return 0
    shares = [todo[i::workers] for i in range(min(workers, len(todo)))]
    try:
        payloads = [json.dumps(share).encode() for share in shares]
    except (TypeError, ValueError):  # (options that are not JSON: compiled by the caller)
        return 0
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
    procs = []
    for payload in payloads:
        try:
            proc = subprocess.Popen([sys.executable, "-m", "tc_runtime.precompile"], stdin=subprocess.PIPE,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        except OSError:  # (a worker that cannot start leaves its share to the caller)
            continue
        try:
            assert proc.stdin is not None
            with proc.stdin:  # (the worker reads all of it first, so this never waits long)
                proc.stdin.write(payload)
        except OSError:
            proc.kill()
            proc.wait()
            continue
        procs.append(proc)
    deadline = time.monotonic() + SECONDS_PER_JOB * max(len(share) for share in shares)
    try:
        for proc in procs:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
    finally:  # (also when the caller is interrupted: no worker outlives the wait)
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return len(procs)


def main() -> int:
    """A worker: compile each job read from stdin into the disk cache; a job that fails is left
    to the caller, which compiles it again and reports why."""
    try:
        jobs = json.loads(sys.stdin.read())
    except ValueError:
        return 2
    for j in jobs:
        try:
            compile_job(j)
        except Exception:  # noqa: BLE001  (the caller compiles it again and reports the error)
            continue
    return 0


if __name__ == "__main__":
    sys.exit(main())
