"""Occupancy: how many programs of a kernel one SM holds, and what bounds that number.

The code generator asks ptxas for at least one program per SM (`.minnctapersm 1`), which leaves
ptxas free to use registers for speed. For a kernel whose registers alone keep a further program
off the SM (a row kernel at 80 registers where 64 would fit two programs of 512 threads instead
of one), `raise_occupancy` assembles the same PTX again asking for more programs per SM, and keeps
the result when ptxas gets there without spilling. More resident programs keep more loads in
flight, which is what bandwidth-bound kernels lack; kernels with dots are left alone (their
register tiles are sized on purpose by their configurations, and their auto-tuner picks warps and
stages for the occupancy it wants).
"""

from __future__ import annotations

import re

import attrs

from .ptxas import PtxasInfo, assemble

REGISTERS_PER_SM = 65536
#: Registers are given to warps in blocks of this many.
REGISTER_BLOCK = 256
#: (threads, programs, shared bytes) one SM holds, per architecture.
SM_LIMITS = {
    "sm_80": (2048, 32, 164 * 1024),
    "sm_86": (1536, 16, 100 * 1024),
    "sm_89": (1536, 24, 100 * 1024),
    "sm_90": (2048, 32, 228 * 1024),
    "sm_90a": (2048, 32, 228 * 1024),
}
#: Shared memory the hardware reserves for each resident program.
RESERVED_SHARED = 1024
#: At most this many further programs per SM are asked for (one ptxas run each): 3 takes the f32
#: layer_norm backward at N = 1024 from 5 to 8 programs, 0.94x -> 1.03x Triton on an H100.
MAX_EXTRA = 3

_MIN_CTAS = re.compile(r"\.minnctapersm \d+")


@attrs.frozen
class Occupancy:
    """Programs per SM that the registers allow and that everything else allows."""

    by_registers: int
    by_other: int

    @property
    def programs(self) -> int:
        return min(self.by_registers, self.by_other)


def occupancy(registers: int, num_warps: int, shared_bytes: int, arch: str) -> Occupancy:
    """The programs per SM of a kernel of `num_warps` warps using `registers` per thread and
    `shared_bytes` of shared memory per program on `arch`."""
    threads, programs, shared = SM_LIMITS.get(arch, SM_LIMITS["sm_80"])
    per_warp = -(-max(registers, 1) * 32 // REGISTER_BLOCK) * REGISTER_BLOCK
    by_registers = REGISTERS_PER_SM // per_warp // num_warps
    by_other = min(programs, threads // (32 * num_warps))
    if shared_bytes:
        by_other = min(by_other, shared // (shared_bytes + RESERVED_SHARED))
    return Occupancy(by_registers, by_other)


def raise_occupancy(ptx: str, info: PtxasInfo, num_warps: int, shared_bytes: int,
                    arch: str) -> tuple[str, bytes, PtxasInfo] | None:
    """(ptx, cubin, report) of the same kernel assembled for more programs per SM, when only its
    registers limited them and ptxas reaches the higher count without spills; else None."""
    if not _MIN_CTAS.search(ptx) or info.spills:
        return None
    occ = occupancy(info.registers, num_warps, shared_bytes, arch)
    best: tuple[str, bytes, PtxasInfo] | None = None
    target = occ.by_registers + 1
    while target <= min(occ.by_other, occ.by_registers + MAX_EXTRA):
        text = _MIN_CTAS.sub(f".minnctapersm {target}", ptx)
        cubin, got = assemble(text, arch)
        if got.spills or occupancy(got.registers, num_warps, shared_bytes, arch).by_registers < target:
            break
        best = (text, cubin, got)
        target += 1
    return best
