"""Hardware limits of the targets, and the check that refuses a configuration needing more than
the target has at compile time (a typed error the auto-tuner can skip), rather than at launch.

Shared memory per block is the opt-in maximum of dynamic shared memory (the runtime raises the
kernel's limit above the 48 KB default with cuFuncSetAttribute): 163 KB on sm_80 (A100), 99 KB
on sm_86/sm_89, 227 KB on sm_90 (H100). Registers: 64 K 32-bit registers per block, 255 per
thread."""

from __future__ import annotations

import re

from tc_ir.layouts import Shared
from tc_ir.ops import Module
from tc_ir.types import TileType
from tc_lang.diagnostics import Category, Diagnostic, Location, TcResourceError

from .options import CompileOptions
from .pass_manager import Pass

KB = 1024

#: Opt-in dynamic shared memory per block, in bytes (CUDA programming guide, table of compute
#: capabilities: 163 KB for 8.0, 99 KB for 8.6/8.9, 227 KB for 9.0).
MAX_SHARED_BYTES = {
    "sm_80": 163 * KB,
    "sm_86": 99 * KB,
    "sm_89": 99 * KB,
    "sm_90": 227 * KB,
    "sm_90a": 227 * KB,
}

#: 32-bit registers per block (every listed target), and per thread.
MAX_REGISTERS_PER_BLOCK = 64 * KB
MAX_REGISTERS_PER_THREAD = 255


#: The code of each resource's error.
RESOURCE_CODES = {"shared memory": "E0701", "registers": "E0702", "parameter space": "E0703"}


class ResourceLimitError(TcResourceError):
    """A configuration needs more of a resource than the target has: `resource` ("shared
    memory", "registers", "parameter space": RESOURCE_CODES), `needed` and `limit` in `unit`,
    and a `hint` on what to shrink."""

    def __init__(
        self, resource: str, needed: int, limit: int, unit: str, arch: str, hint: str, loc: Location | None = None
    ) -> None:
        self.resource = resource
        self.needed = needed
        self.limit = limit
        self.unit = unit
        self.arch = arch
        self.hint = hint
        per = "" if resource == "parameter space" else " per block"
        message = f"the kernel needs {needed} {unit} of {resource}{per} but {arch} has at most {limit} {unit}"
        super().__init__([Diagnostic(Category.RESOURCE, RESOURCE_CODES[resource],
                                     message, loc or Location("<source>", 0, 0), hint=hint)])


def max_shared_bytes(arch: str) -> int:
    """The opt-in maximum of dynamic shared memory per block on `arch` (48 KB for unlisted targets)."""
    return MAX_SHARED_BYTES.get(arch, 48 * KB)


def check_shared(needed: int, options: CompileOptions, loc: Location | None = None) -> None:
    limit = max_shared_bytes(options.arch)
    if needed > limit:
        raise ResourceLimitError(
            "shared memory", needed, limit, "bytes", options.arch,
            "use smaller tiles (the defines that size the tiles), fewer pipeline stages (num_stages) "
            "or a smaller element type", loc,
        )


def check_parameter_space(ptxas_message: str, arch: str, loc: Location | None = None) -> None:
    """ptxas's refusal of a kernel whose parameters (the user's arguments, and the grid, tensor
    maps and workspace the compiler adds) take more than the target's parameter space, as a
    ResourceLimitError at the kernel (E0703) instead of ptxas's text about a temporary file."""
    found = re.search(r"too much parameter space \((0x[0-9a-fA-F]+) bytes, (0x[0-9a-fA-F]+) max\)", ptxas_message)
    if found:
        raise ResourceLimitError(
            "parameter space", int(found.group(1), 16), int(found.group(2), 16), "bytes", arch,
            "pass fewer arguments (e.g. gather many pointers into one array in GPU memory)", loc,
        )


def check_registers(registers: int, num_warps: int, arch: str, loc: Location | None = None) -> None:
    """Registers reported by ptxas against the per-block register file."""
    needed = registers * 32 * num_warps
    if registers > MAX_REGISTERS_PER_THREAD or needed > MAX_REGISTERS_PER_BLOCK:
        raise ResourceLimitError(
            "registers", needed, MAX_REGISTERS_PER_BLOCK, "32-bit registers", arch,
            "use smaller tiles or fewer warps (num_warps)", loc,
        )


#: The most elements of one register tile a thread may hold. The code generator gives each its
#: own value (a thread has at most 255 registers): beyond this a kernel runs from local memory,
#: and LLVM and ptxas take minutes over the unrolled code (a 1M-element tile over 128 threads:
#: 3 minutes; 1024 per thread: 4 seconds), which to the user looks like a hang.
MAX_TILE_ELEMENTS_PER_THREAD = 1024


def check_tiles(module: Module, options: CompileOptions) -> None:
    """Refuse a register tile larger than the program's threads can hold (E0702, at the op that
    makes it): a configuration with too few warps for its tiles, skipped by the auto-tuner."""
    threads = 32 * options.num_warps
    for op in module.walk():
        for result in op.results:
            t = result.type
            if not isinstance(t, TileType) or isinstance(t.layout, Shared):
                continue
            per_thread = -(-t.numel // threads)
            if per_thread > MAX_TILE_ELEMENTS_PER_THREAD:
                tile = (f"a tile of {t.numel} elements" if len(t.shape) == 1 else
                        f"a {'x'.join(str(d) for d in t.shape)} tile ({t.numel} elements)")
                raise TcResourceError([Diagnostic(
                    Category.RESOURCE, "E0702",
                    f"{tile} gives each of the program's {threads} "
                    f"threads {per_thread} of them; at most {MAX_TILE_ELEMENTS_PER_THREAD} fit "
                    f"(a thread has {MAX_REGISTERS_PER_THREAD} registers)",
                    op.loc or Location("<source>", 0, 0),
                    hint="use more warps (num_warps) or smaller tiles, looping over the data")])


class CheckResources(Pass):
    """Refuses a module whose shared memory (recorded by allocate-shared) exceeds the target, or
    whose register tiles are too large for its threads (check_tiles)."""

    name = "check-resources"

    def run(self, module: Module) -> None:
        """Raise `ResourceLimitError` where the module needs more shared memory than the target has, or
        register tiles too large for its threads."""
        needed = int(module.attributes.get("shared_bytes", 0))
        loc = module.functions[0].loc if module.functions else None
        check_shared(needed, self.options, loc)
        check_tiles(module, self.options)
