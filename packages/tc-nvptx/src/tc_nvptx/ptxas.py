"""Run ptxas: PTX -> cubin, with its resource report (registers, spills, shared memory)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile

import attrs


class PtxasError(RuntimeError):
    """ptxas is missing or rejected the PTX (its message is included)."""


@attrs.frozen
class PtxasInfo:
    """What ptxas reported for a kernel: registers per thread, spill stores and loads, shared memory and
    stack frame in bytes, and its whole `log`."""

    registers: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    shared_bytes: int = 0
    stack_bytes: int = 0
    log: str = ""

    @property
    def spills(self) -> int:
        return self.spill_stores + self.spill_loads


def find_ptxas() -> str | None:
    env = os.environ.get("TC_PTXAS")
    if env:
        return env
    return shutil.which("ptxas")


def parse_report(log: str) -> PtxasInfo:
    def num(pattern: str) -> int:
        m = re.search(pattern, log)
        return int(m.group(1)) if m else 0

    return PtxasInfo(
        registers=num(r"Used (\d+) registers"),
        spill_stores=num(r"(\d+) bytes spill stores"),
        spill_loads=num(r"(\d+) bytes spill loads"),
        shared_bytes=num(r"(\d+) bytes smem"),
        stack_bytes=num(r"(\d+) bytes stack frame"),
        log=log,
    )


def assemble(ptx: str, arch: str = "sm_90") -> tuple[bytes, PtxasInfo]:
    """The cubin of `ptx` for `arch` and ptxas's report."""
    exe = find_ptxas()
    if exe is None:
        raise PtxasError("ptxas was not found on the PATH (set TC_PTXAS to its location)")
    with tempfile.TemporaryDirectory(prefix="tc-ptxas-") as tmp:
        src = os.path.join(tmp, "kernel.ptx")
        out = os.path.join(tmp, "kernel.cubin")
        with open(src, "w") as fh:
            fh.write(ptx)
        cmd = [exe, "-v", f"--gpu-name={arch}", src, "-o", out]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise PtxasError(f"could not run ptxas: {exc}") from exc
        log = proc.stdout + proc.stderr
        if proc.returncode != 0:
            raise PtxasError(f"ptxas failed for {arch}:\n{log.strip()}")
        with open(out, "rb") as fh:
            cubin = fh.read()
    return cubin, parse_report(log)
