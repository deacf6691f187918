"""Options of one compilation: the target and the launch configuration the code is generated for."""

from __future__ import annotations

from collections.abc import Iterable

import attrs

ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a")

#: Values of one entry of `CompileOptions.specialization` (one entry per kernel argument): an
#: integer equal to 1, an integer (a pointer's byte address) divisible by 16, or by 8 but not 16.
#: Divisible by 8 matters to 16-bit matrices whose rows are 16-byte aligned but not a multiple of
#: 16 elements long (1000, 4104): vector copies and TMA need only the 16 bytes.
SPECIALIZATIONS = ("equal_to_1", "divisible_by_16", "divisible_by_8")


def _check_arch(_inst: object, _a: object, value: str) -> None:
    if value not in ARCHS:
        raise ValueError(f"unknown GPU architecture {value!r} (expected one of {', '.join(ARCHS)})")


def _check_int(name: str, value: object) -> None:
    """An int option given another type (4.0, "3", True) would reach the generated code as
    text (an LLVM parse error) or fail a comparison: refused by name here."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__} {value!r}")


#: The warps a program may have: powers of two, and 12 (three warpgroups: a wgmma tile of 192 rows).
NUM_WARPS = (1, 2, 4, 8, 12, 16, 32)


def _check_warps(_inst: object, _a: object, value: int) -> None:
    _check_int("num_warps", value)
    if value not in NUM_WARPS:
        raise ValueError(f"num_warps must be a power of two from 1 to 32, or 12, not {value}")


def _check_stages(_inst: object, _a: object, value: int) -> None:
    _check_int("num_stages", value)
    if value < 1:
        raise ValueError(f"num_stages must be at least 1, not {value}")


def _check_fp32_dot(_inst: object, _a: object, value: str) -> None:
    if value not in ("ieee", "tf32"):
        raise ValueError(f"fp32_dot must be 'ieee' or 'tf32', not {value!r}")


def _check_bool(_inst: object, a: attrs.Attribute[bool], value: bool) -> None:
    """A flag given a non-bool ("False" is truthy) would silently switch a schedule on."""
    if not isinstance(value, bool):
        raise TypeError(f"{a.name} must be True or False, not {type(value).__name__} {value!r}")


def _spec(value: object) -> tuple[str | None, ...] | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise TypeError(f"specialization must be a sequence with one entry per kernel argument "
                        f"({', '.join(SPECIALIZATIONS)} or None), not {type(value).__name__} {value!r}")
    out: list[str | None] = []
    for v in value:
        if v in (None, ""):
            out.append(None)
        elif v in ("equal_to_1", 1, "1"):
            out.append("equal_to_1")
        elif v in ("divisible_by_16", 16, "16"):
            out.append("divisible_by_16")
        elif v in ("divisible_by_8", 8, "8"):
            out.append("divisible_by_8")
        else:
            raise ValueError(f"unknown argument specialization {v!r}")
    return tuple(out)


@attrs.frozen
class CompileOptions:
    """How to compile: target arch, warps per program, pipelining depth and argument facts.

    `specialization` has one entry per kernel argument: "equal_to_1", "divisible_by_16",
    "divisible_by_8" or None.
    When it is None (no runtime information, e.g. the tcc CLI) pointer arguments are assumed to be
    16-byte aligned; the runtime guarantees this by checking and re-specialising.
    """

    arch: str = attrs.field(default="sm_90", validator=_check_arch)
    num_warps: int = attrs.field(default=4, validator=_check_warps)
    num_stages: int = attrs.field(default=3, validator=_check_stages)
    specialization: tuple[str | None, ...] | None = attrs.field(default=None, converter=_spec)
    #: Precision of fp32 dots whose IR says "ieee": "ieee" keeps them exact (FMA), "tf32" allows
    #: tensor cores (set by the user; never implied).
    fp32_dot: str = attrs.field(default="ieee", validator=_check_fp32_dot)
    #: fp32 division `/`: False (the default, as in Triton 3.x) gives div.full.f32, at most 2 ulp
    #: from the IEEE quotient and several times cheaper; True gives the IEEE-rounded div.rn.f32.
    precise_div: bool = attrs.field(default=False, validator=_check_bool)
    #: The math built-ins: False (the default) keeps exp and log the fast approximate versions the
    #: language specifies (ex2.approx / lg2.approx, like __expf); True makes every math op accurate
    #: (tc_nvptx.precise_math: about 1 ulp, sin/cos over the whole float range, see the
    #: PreciseMath pass) and implies precise_div (IEEE-rounded fp32 division): setting it sets precise_div.
    precise_math: bool = attrs.field(default=False, validator=_check_bool)
    #: Hopper (sm_90): pipelined dot-operand loads of 2-D tiles become TMA copies completing on
    #: mbarriers (tc_opt.tma says which; the runtime passes their tensor maps), not cp.async.
    #: On by default: measured faster on an H100 (BENCHMARKS.md, 2026-11-24); False keeps cp.async.
    tma: bool = attrs.field(default=True, validator=_check_bool)
    #: Hopper, with `tma`: stores of whole 2-D tiles (a matmul's epilogue) become TMA bulk stores
    #: from swizzled shared panels (tc_opt.tma_store), the mask becoming the map's extents.
    tma_store: bool = attrs.field(default=False, validator=_check_bool)
    #: Hopper, with `tma`: a TMA-pipelined wgmma loop gets a producer warp of its own
    #: (tc_opt.warp_specialize; the launch has one warp more than num_warps).
    warp_specialize: bool = attrs.field(default=False, validator=_check_bool)
    #: With `tma`: a kernel with a TMA-pipelined loop loops over its programs (tc_opt.persistent),
    #: the runtime launching one CTA per SM and passing the grid as hidden parameters; both roles
    #: do with `warp_specialize` (tc_opt.warp_specialize), the whole body does without a producer.
    persistent: bool = attrs.field(default=False, validator=_check_bool)
    #: With `persistent` and `warp_specialize`: the consumers issue the next program's first dot
    #: before this program's stores (tc_opt.overlap_epilogue), and the producer becomes a warpgroup
    #: that hands its registers to them (the launch has four warps more than num_warps).
    overlap_epilogue: bool = attrs.field(default=False, validator=_check_bool)
    #: With `warp_specialize`: the producer is a whole warpgroup that hands the registers it does
    #: not need to the consumers (setmaxnreg: 40 a producer thread, 232 a consumer thread beside
    #: 8 warps), so that a producer also fits loops whose consumers need more than the 168
    #: registers a thread of a launch with one producer warp: a tf32 dot reading A into
    #: registers (C = A B computed transposed, which ptxas otherwise serializes: C7512) and large
    #: accumulators (the launch has four warps more than num_warps).
    producer_warpgroup: bool = attrs.field(default=False, validator=_check_bool)
    #: With `persistent` and `warp_specialize`: the kernel is launched in clusters of 2 CTAs that
    #: run consecutive programs, and where the two programs' tiles of an operand coincide (B of
    #: two tiles of one column of a grouped order) each CTA copies half of it into both CTAs'
    #: shared memory (TMA multicast): that operand's traffic from L2 is halved
    #: (tc_opt.warp_specialize; the runtime launches an even number of CTAs).
    cluster_multicast: bool = attrs.field(default=False, validator=_check_bool)
    #: With `cluster_multicast`: clusters of 4 CTAs instead of 2, running programs t .. t + 3 (a
    #: 2 x 2 block of tiles where the grouped order has groups of 2 rows), each CTA sharing one
    #: operand's tile with the CTA of rank ^ 1 (the same column) and the other's with rank ^ 2
    #: (the same row): both operands' traffic from L2 is halved (the runtime launches a multiple
    #: of 4 CTAs, no more than fit at once). Correct, and slower on an H100 (thirty-eighth
    #: session): it holds 30 such clusters of one CTA an SM (120 of 132 SMs; 66 clusters of 2),
    #: and 192x192 tiles ran 4104^3 at 503 TFLOPS against 585 in clusters of 2, 128x256 at 555
    #: against 581, 8192^3 606 against 660. Not among tc_torch's tiles: a config option.
    cluster_2x2: bool = attrs.field(default=False, validator=_check_bool)
    #: With `persistent` (a plain TMA pipeline: no producer warp, so `warp_specialize` is not
    #: applied): the last wave of programs is shared by stream-K (tc_opt.stream_k). Every CTA of
    #: the grid (one per SM) takes whole programs round robin for the full waves, then an equal
    #: share of the last wave's reduction-loop iterations (when that wave is at least a quarter
    #: full); a program cut between CTAs meets its partial sums in a workspace the runtime
    #: allocates. No SM idles through a partly filled last wave. On an H100 it paid for a tf32
    #: A B at 8192^3 and not at 4096^3 (BENCHMARKS.md, twenty-ninth session): a config option.
    stream_k: bool = attrs.field(default=False, validator=_check_bool)
    debug: bool = attrs.field(default=False, validator=_check_bool)
    verify: bool = attrs.field(default=True, validator=_check_bool)
    print_after_all: bool = attrs.field(default=False, validator=_check_bool)

    def __attrs_post_init__(self) -> None:
        if self.precise_math and not self.precise_div:
            object.__setattr__(self, "precise_div", True)  # frozen: the one implied option

    @property
    def sm(self) -> int:
        """The compute capability as a number (80, 90)."""
        return int(self.arch[3:5])
