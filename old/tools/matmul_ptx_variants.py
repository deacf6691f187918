"""Hand-edited PTX of the persistent bulk-store tutorial matmul (128x256x64, 8 warps): experiments
that ask what the 4096^3 kernel is bound by, timed in interleaved rounds with cuBLAS on the GPU.
Measure-only; nothing here is a compiler feature.

    PYTHONPATH=<packages/*/src> python3 tools/matmul_ptx_variants.py [--sizes 4096,8192]
        [--stages 3,4] [--variants halfB,noA,nostore,nowait,cluster,multicast] [--rounds 7]
        [--kernel tutorial|tf32nt|torchnn] [--save FILE] [--overlap]

--save FILE writes the first unedited kernel (JSON) for `ncu_cycles.py NAME=FILE`, e.g. from another
commit's worktree; `--kernel torchnn` (tc_torch's fp16 C = A B kernel, 128x256x64) only saves.
--kernel tf32nt edits tc_torch's matmul kernel instead, as tc_torch runs float32 A B^T with
precision="tf32" (persistent 128x256x32, 8 warps and a producer, `--stages` 4): both operands
K-contiguous, each loaded as one box per k-step, so its multicast variant is `multicast0`:
rank 0 of each cluster loads B's whole box into both CTAs, rank 1 loads only its A.

Timing-only variants (their results are wrong on purpose and are not checked):
  halfB    2 of the 4 panels of B not loaded (the `full` barrier expects 16 KiB less)
  noA      A not loaded (16 KiB less)
  nostore  the epilogue's bulk copies to global memory removed
  noepi    the copies and all but the first stmatrix removed (ptxas drops the conversions): what
           the epilogue costs but for its barriers (the most that overlapping it with the next
           program's wgmma could win; one stmatrix keeps the accumulator, and so every wgmma, live)
  nowait   the epilogue's waits for a buffer's previous copy removed (buffers in turns; the
           waits for all copies, `wait_group.read 0`, stay)
  nowait0  every wait for the copies' reads removed but the one before the kernel's exit
  prefetchN  (correct) the producer also prefetches into L2 each box N iterations further along K
           (N = 4 by default; TC_PREFETCH_KSTEP = the kernel's KB, 64 by default)
  drain    the issuing thread waits for each group of copies to read its buffer right after
           committing it (correct, timed only here)
  storeef  the bulk copies with an L2 evict-first cache policy (correct, but timed only here)
  skipstore  the bulk copies skipped at run time by a predicate ptxas cannot fold (the code that
           computes their coordinates and the waits stay: against nostore, what the copies cost)
Correct variants (checked against torch first):
  cluster    clusters of 2 CTAs (ranks 2c, 2c+1 take tiles of the same pid_n under the tutorial's
             group size 8): each consumer warp also arrives on the peer's `empty` mbarrier
             (mapa + mbarrier.arrive.shared::cluster, CUTLASS's way: no cluster barrier per step)
  multicast  the same, and each CTA loads half of B's panels into both (.multicast::cluster)
  deeper     (4 stages) two wgmma groups in flight instead of one: more work queued on the
             tensor cores when a step's operands arrive late, the same lead for the loads
  sleep      every mbarrier try_wait with a suspend-time hint of 10 ms (cuBLAS's kernels do so:
             ptxas then emits NANOSLEEP.SYNCS, a warp that finds the phase incomplete sleeps
             until it completes instead of spinning on the try_wait)
  sleepp     the same for the producer's waits (for a free slot) alone
  halves     each m64n256k16 as two m64n128k16 (columns 0-127, then 128-255 of B's slot: two of
             its four 64-column panels further), as cuBLAS's 256x128 loop issues its products
  halvesk    the same, all K steps of the first half before those of the second

A rank-1 CTA's shared addresses carry bit 24 (its window in the cluster's shared space), so the
edits mask a wgmma descriptor's start address to its 14 bits (the compiler does not: it never
launches clusters). H100, 2026-11-25 (3 stages): halfB 1.13-1.14x and noA 1.08-1.12x the
unedited kernel's speed, cluster and multicast 0.99-1.02x (BENCHMARKS.md, tenth session).
halves and halvesk (fourteenth session): 0.994x cuBLAS -> 0.940x / 0.929x at 4096^3, 1.057x ->
1.025x / 1.014x at 8192^3.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

LOAD = re.compile(r"^\s*cp\.async\.bulk\.tensor\.(\d)d\.shared::cluster\.global\.mbarrier::complete_tx::bytes "
                  r"(\[%r\d+\]), \[(%rd\d+), (\{[%r\d, ]+\})\], (\[%r\d+\]);")
STORE = re.compile(r"^\s*@%p\d+ cp\.async\.bulk\.tensor\.\dd\.global\.shared::cta\.bulk_group")
TIMING_ONLY = ("halfB", "noA", "nostore", "nowait", "nowait0", "skipstore", "storeef", "drain", "noepi")
#: (prefetchN variants are correct too: checked like CORRECT's)
CORRECT = ("cluster", "multicast", "multicast0", "deeper", "halves", "halvesk", "sleep", "sleepp")
STEP_BYTES = 49152  # A (128 x 64) and B (64 x 256) halves per k-step


def _maps(lines: list[str]) -> tuple[str, list[int], list[int]]:
    """(B's map, the line numbers of A's copies, of B's copies): B is the map with most copies,
    or of one copy each, the second (tc's operands are planned A first)."""
    loads = [(i, m.group(3)) for i, line in enumerate(lines) if (m := LOAD.match(line))]
    names = [name for _, name in loads]
    bmap = max(dict.fromkeys(names), key=lambda n: (names.count(n), names.index(n)))
    return bmap, [i for i, n in loads if n != bmap], [i for i, n in loads if n == bmap]


def timing_variant(ptx: str, variant: str) -> str:
    lines = ptx.splitlines()
    _, a_lines, b_lines = _maps(lines)
    less = 0
    if variant == "halfB":
        drop, less = set(b_lines[2:]), 16384
    elif variant == "noA":
        drop, less = set(a_lines), 16384
    elif variant == "nostore":
        drop = {i for i, line in enumerate(lines) if STORE.match(line)}
    elif variant == "noepi":  # (ptxas then drops the conversions the stmatrix read)
        stsm = [i for i, line in enumerate(lines) if "stmatrix." in line]
        # (the first stays: with no reader of the accumulator ptxas drops the wgmma too)
        drop = {i for i, line in enumerate(lines) if STORE.match(line)} | set(stsm[1:])
    elif variant == "nowait":
        drop = {i for i, line in enumerate(lines) if re.search(r"cp\.async\.bulk\.wait_group\.read [1-9]", line)}
    elif variant == "nowait0":
        waits = [i for i, line in enumerate(lines) if "cp.async.bulk.wait_group.read" in line]
        drop = set(waits[:-1])  # (the last: thread 0's wait before the kernel's exit)
    elif variant == "skipstore":
        return skipped_store_variant(lines)
    elif variant == "storeef":
        return evict_first_variant(lines)
    elif variant.startswith("prefetch"):  # prefetchN: N iterations ahead (default 4)
        return prefetch_variant(lines, int(variant[8:] or 4))
    elif variant == "drain":  # (correct) the leader waits for each group's reads right after committing it
        out = [ln + ("\n\tcp.async.bulk.wait_group.read 0;" if ln.strip() == "cp.async.bulk.commit_group;" else "")
               for ln in lines]
        return "\n".join(out) + "\n"
    else:
        raise ValueError(variant)
    if not drop:
        raise ValueError(f"{variant}: nothing to edit in this kernel")
    out = [line.replace(str(STEP_BYTES), str(STEP_BYTES - less)) if less and "expect_tx" in line else line
           for i, line in enumerate(lines) if i not in drop]
    return "\n".join(out) + "\n"


def _with_prologue(lines: list[str], decls: list[str], code: list[str]) -> list[str]:
    """`lines` with register declarations `decls` and instructions `code` after the kernel's own
    declarations."""
    out = list(lines)
    regs_end = max(i for i, line in enumerate(out) if line.strip().startswith(".reg"))
    out[regs_end + 1:regs_end + 1] = [f"\t{x}" for x in (*decls, *code)]
    return out


def skipped_store_variant(lines: list[str]) -> str:
    """The bulk copies to global memory predicated on a condition false at run time that ptxas
    cannot know (%nctaid.z > 1000): the code that computes their coordinates stays."""
    stores = [i for i, line in enumerate(lines) if STORE.match(line)]
    if not stores:
        raise ValueError("skipstore: nothing to edit in this kernel")
    out = list(lines)
    for i in stores:
        out[i] = re.sub(r"@%p\d+", "@%ptc_never", out[i], count=1)
    out = _with_prologue(out, [".reg .pred %ptc_never;", ".reg .b32 %rtc_never;"],
                         ["mov.u32 %rtc_never, %nctaid.z;", "setp.gt.u32 %ptc_never, %rtc_never, 1000;"])
    return "\n".join(out) + "\n"


def evict_first_variant(lines: list[str]) -> str:
    """The bulk copies to global memory with an L2 evict-first policy (the output is not read
    again, the operands are)."""
    stores = [i for i, line in enumerate(lines) if STORE.match(line)]
    if not stores:
        raise ValueError("storeef: nothing to edit in this kernel")
    out = list(lines)
    for i in stores:
        line = out[i].replace(".bulk_group ", ".bulk_group.L2::cache_hint ", 1)
        out[i] = line[:line.rindex(";")] + ", %rdtc_policy;"
    out = _with_prologue(out, [".reg .b64 %rdtc_policy;"], ["createpolicy.fractional.L2::evict_first.b64 %rdtc_policy, 1.0;"])
    return "\n".join(out) + "\n"


def prefetch_variant(lines: list[str], ahead: int) -> str:
    """After the producer's copies of an iteration, an L2 prefetch of each of its boxes `ahead`
    iterations further along K (cp.async.bulk.prefetch.tensor: into L2 only, no shared memory,
    nothing to wait for; boxes past the end are clipped by the map). K is the coordinate every
    load shares; its step is the kernel's KB."""
    loads = [(i, m) for i, line in enumerate(lines) if (m := LOAD.match(line))]
    if not loads:
        raise ValueError("prefetch: no loads")
    coord_lists = [[c.strip() for c in m.group(4).strip("{}").split(",")] for _, m in loads]
    common = set(coord_lists[0]).intersection(*coord_lists[1:])
    if len(common) != 1:
        raise ValueError(f"prefetch: no single K coordinate ({common})")
    k = common.pop()
    step = int(os.environ.get("TC_PREFETCH_KSTEP", "64"))
    last = loads[-1][0]
    code = [f"\tadd.s32 %rtc_pk, {k}, {ahead * step};"]
    for (_, m), coords in zip(loads, coord_lists):
        shifted = ", ".join("%rtc_pk" if c == k else c for c in coords)
        code.append(f"\tcp.async.bulk.prefetch.tensor.{m.group(1)}d.L2.global [{m.group(3)}, {{{shifted}}}];")
    out = list(lines)
    out[last + 1:last + 1] = code
    out = _with_prologue(out, [".reg .b32 %rtc_pk;"], [])
    return "\n".join(out) + "\n"


def cluster_variant(ptx: str, multicast: bool | str) -> str:
    """Clusters of 2 (see the module's doc); `multicast` True splits B's four panels between the
    two CTAs, "rank0" has rank 0 load B's one box into both."""
    lines = ptx.splitlines()
    bmap, _, _ = _maps(lines)
    out: list[str] = []
    cta_barriers = panels = 0
    cluster_barrier = "\tbarrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;"
    for line in lines:
        s = line.strip()
        if s.startswith(".minnctapersm"):
            out += [line, ".reqnctapercluster 2, 1, 1"]
        elif s.startswith(".reg .b64"):
            out += [line, "\t.reg .pred %tcq<2>;\n\t.reg .b32 %tcrank, %tcpeer;\n\t.reg .b16 %tcmask;"]
        elif s.startswith("mov.u32") and "%tid.x" in s:
            out += [line, "\tmov.u32 %tcrank, %cluster_ctarank;\n\txor.b32 %tcpeer, %tcrank, 1;\n"
                    "\tsetp.eq.u32 %tcq0, %tcrank, 0;\n\tsetp.eq.u32 %tcq1, %tcrank, 1;\n\tmov.b16 %tcmask, 3;"]
        elif m := re.match(r"@(%p\d+) mbarrier\.init\.shared::cta\.b64 (\[%r\d+\]), 8;", s):
            out.append(f"\t@{m.group(1)} mbarrier.init.shared::cta.b64 {m.group(2)}, 16;")  # both CTAs' warps
        elif re.match(r"bar\.sync\s+0;", s) and (cta_barriers := cta_barriers + 1) == 2:
            out.append(cluster_barrier)  # every CTA's barriers initialized before any remote arrive
        elif m := re.match(r"@(%p\d+) mbarrier\.arrive\.shared::cta\.b64 _, \[(%r\d+)\];", s):
            out += [line, f"\t{{ .reg .b32 rr; mapa.shared::cluster.u32 rr, {m.group(2)}, %tcpeer; "
                          f"@{m.group(1)} mbarrier.arrive.shared::cluster.b64 _, [rr]; }}"]
        elif "mbarrier.inval" in s:
            continue  # (the peer may still arrive on them)
        elif s == "ret;":
            out += [cluster_barrier, line]  # no CTA leaves while its peer may still arrive
        elif m := re.match(r"shr\.u32\s+(%r\d+), %r\d+, 4;", s):
            out += [line, f"\tand.b32 {m.group(1)}, {m.group(1)}, 16383;"]  # descriptor start address
        elif (m := LOAD.match(line)) and multicast and m.group(3) == bmap:
            dims, dst, tmap, coords, bar = m.groups()
            rank = "%tcq0" if multicast == "rank0" or panels % 4 < 2 else "%tcq1"
            panels += 1
            out.append(f"\t@{rank} cp.async.bulk.tensor.{dims}d.shared::cluster.global.mbarrier::complete_tx::bytes"
                       f".multicast::cluster {dst}, [{tmap}, {coords}], {bar}, %tcmask;")
        else:
            out.append(line)
    if cta_barriers < 2 or (multicast and panels != (1 if multicast == "rank0" else 4)):
        raise ValueError("the kernel's PTX is not shaped as these edits expect")
    return "\n".join(out) + "\n"


TRY_WAIT = re.compile(r"(mbarrier\.try_wait\.parity\.shared::cta\.b64 \w+, \[%r\d+\], %r\d+);")


def sleep_variant(ptx: str, producer_only: bool = False) -> str:
    """Every try_wait with a suspend-time hint (10 ms: the warp sleeps until the phase completes
    or the hint runs out); with `producer_only`, the waits that an expect_tx follows within 20
    lines (the producer's, for a free slot)."""
    lines = ptx.splitlines()
    n = 0
    for i, line in enumerate(lines):
        if TRY_WAIT.search(line) and (not producer_only or any("expect_tx" in x for x in lines[i:i + 20])):
            lines[i] = TRY_WAIT.sub(r"\1, 10000000;", line)
            n += 1
    if not n:
        raise ValueError("sleep: no try_wait to edit in this kernel")
    return "\n".join(lines) + "\n"


def deeper_variant(ptx: str, stages: int) -> str:
    """Two wgmma groups left in flight instead of one (`wait_group 2`): a consumer releases the
    slot of the step two back (from the third step of a tile on), and the last two after the
    tile's final wait. Correct with 4 stages (slot indices modulo a power of two)."""
    if stages != 4:
        raise ValueError("deeper: only with 4 stages")
    lines = ptx.splitlines()
    loop_wait = [i for i, line in enumerate(lines) if line.strip() == "wgmma.wait_group.sync.aligned 1;"]
    movs = [m for line in lines if (m := re.match(r"\s*mov\.b32\s+(%r\d+), (%r\d+);$", line))]
    if len(loop_wait) != 1:
        raise ValueError("deeper: not one loop wait")
    w = loop_wait[0]
    lines[w] = lines[w].replace("aligned 1;", "aligned 2;")
    setp = next(i for i in range(w, w + 8) if re.match(r"\s*setp\.gt\.s32\s+%p\d+, %r\d+, 0;", lines[i]))
    lines[setp] = lines[setp].replace(", 0;", ", 64;")  # (KB = 64: the third step on)
    shl = next(i for i in range(setp, setp + 8) if re.match(r"\s*shl\.b32\s+%r\d+, %r\d+, 3;", lines[i]))
    dst, prev = re.findall(r"%r\d+", lines[shl])
    cur = next(m.group(2) for m in movs if m.group(1) == prev)  # the loop's `prev = cur`
    lines[shl] = f"\tadd.s32 {dst}, {cur}, 2;\n\tand.b32 {dst}, {dst}, 3;\n\tshl.b32 {dst}, {dst}, 3;"
    final = next(i for i, line in enumerate(lines) if "wgmma.wait_group.sync.aligned 0;" in line)
    arrive = next(i for i in range(final, final + 12) if "mbarrier.arrive.shared::cta.b64" in lines[i])
    pred, addr = re.match(r"\s*(@%p\d+) mbarrier\.arrive\.shared::cta\.b64 _, \[(%r\d+)\];", lines[arrive]).groups()  # type: ignore[union-attr]
    add = next(line for line in lines[final:arrive] if re.match(rf"\s*add\.s32\s+{addr}, ", line))
    row, offset = re.findall(r"(%r\d+), (\d+);", add)[0]
    base_add = next(line for line in lines[final:arrive] if re.match(rf"\s*add\.s32\s+{row}, ", line))
    base = re.findall(r"%r\d+", base_add)[1]
    slot = re.findall(r"%r\d+", next(line for line in lines[final:arrive] if re.match(r"\s*shl\.b32", line)))[1]
    lines[arrive] += (f"\n\t{{ .reg .b32 t; add.s32 t, {slot}, 3; and.b32 t, t, 3; shl.b32 t, t, 3; add.s32 t, {base}, t; "
                      f"add.s32 t, t, {offset}; {pred} mbarrier.arrive.shared::cta.b64 _, [t]; }}")
    return "\n".join(lines) + "\n"


WGMMA = re.compile(r"^\s*\{ \.reg \.pred p; setp\.ne\.b32 p, (%r\d+), 0; "
                   r"wgmma\.mma_async\.sync\.aligned\.m64n256k16\.f32\.(\w+)\.(\w+) \{([^}]*)\}, "
                   r"(%rd\d+), (%rd\d+), p, 1, 1, 0, 1; \}$")
#: B's slot holds 64-column panels of 8 KiB (an N-contiguous B, 128-byte swizzle): columns 128-255
#: start 16 KiB further, 1024 in the descriptor's 16-byte units.
HALF_B_OFFSET = 1024


def halves_variant(ptx: str, k_first: bool) -> str:
    """Each m64n256k16 of the loop as two m64n128k16 (accumulator registers 0-63 then 64-127:
    columns 0-127, 128-255); with `k_first`, the loop's first halves for every K step, then the
    second halves (all at the place of the last product, where every descriptor is computed)."""
    lines = ptx.splitlines()
    found = [(i, m) for i, line in enumerate(lines) if (m := WGMMA.match(line))]
    if len(found) != 4:
        raise ValueError(f"halves: {len(found)} m64n256k16 products in the loop, expected 4")

    def product(m: re.Match[str], half: int) -> str:
        scale, ta, tb, regs, da, db = m.groups()
        acc = [r.strip() for r in regs.split(",")]
        offset = f".reg .b64 d; add.s64 d, {db}, {HALF_B_OFFSET}; " if half else ""  # (columns 128-255)
        return (f"{{ .reg .pred p; {offset}setp.ne.b32 p, {scale}, 0; "
                f"wgmma.mma_async.sync.aligned.m64n128k16.f32.{ta}.{tb} {{{', '.join(acc[64 * half:64 * half + 64])}}}, "
                f"{da}, {'d' if half else db}, p, 1, 1, 0, 1; }}")

    if k_first:
        for i, _ in found:
            lines[i] = ""
        lines[found[-1][0]] = "\n".join(product(m, h) for h in (0, 1) for _, m in found)
    else:
        for i, m in found:
            lines[i] = product(m, 0) + "\n" + product(m, 1)
    return "\n".join(lines) + "\n"


def variant_ptx(ptx: str, variant: str, stages: int) -> str:
    """The PTX of `variant` (see the module's doc) of a kernel with `stages` stages; ValueError
    where the edit does not apply."""
    if variant == "deeper":
        return deeper_variant(ptx, stages)
    if variant in ("halves", "halvesk"):
        return halves_variant(ptx, variant == "halvesk")
    if variant in ("sleep", "sleepp"):
        return sleep_variant(ptx, variant == "sleepp")
    if variant in ("cluster", "multicast", "multicast0"):
        return cluster_variant(ptx, "rank0" if variant == "multicast0" else variant == "multicast")
    return timing_variant(ptx, variant)


def build_torch_matmul(type_: str, b_transposed: bool, stages: int, tile: tuple[int, int, int],
                       overlap: bool = False) -> Any:
    """tc_torch's matmul kernel as tc_torch runs C = A B (B^T row-major with `b_transposed`) for
    `type_` (half, bf16, or float with precision="tf32"): persistent, 8 warps and a producer warp,
    a bulk-store epilogue (as the tuner's persistent configurations), every argument divisible by
    16 (`overlap`: CompileOptions.overlap_epilogue). Its arguments: A, B, C, M, N, K, lda, ldb, ldc
    and three batch strides."""
    from tc_nvptx.compiler import compile as tc_compile
    from tc_opt.options import CompileOptions
    from tc_torch.library import source
    from tc_torch.ops.matmul import A_VARIANTS, B_VARIANTS

    options = CompileOptions(arch="sm_90a", num_warps=8, num_stages=stages, persistent=True,
                             warp_specialize=True, tma_store=True, specialization=("divisible_by_16",) * 12,
                             overlap_epilogue=overlap,
                             fp32_dot="tf32" if type_ == "float" else "ieee")
    mb, nb, kb = tile
    defines = {"TYPE": type_, "ACC": "float", **A_VARIANTS[False], **B_VARIANTS[b_transposed],
               "MB": mb, "NB": nb, "KB": kb}
    return tc_compile(source("matmul"), defines=defines, options=options)


def build_tf32_nt(stages: int) -> Any:
    """tc_torch's matmul kernel as it runs float32 A B^T with precision="tf32": persistent
    128x256x32, both operands K-contiguous (build_torch_matmul)."""
    return build_torch_matmul("float", True, stages, (128, 256, 32))


def build_overlapped(kernel: str, stages: int) -> Any:
    """`kernel` (tutorial, tf32nt or torchnn) as main builds it, with CompileOptions.overlap_epilogue."""
    import tma_check

    if kernel == "tf32nt":
        return build_torch_matmul("float", True, stages, (128, 256, 32), overlap=True)
    if kernel == "torchnn":
        return build_torch_matmul("half", False, stages, (128, 256, 64), overlap=True)
    return tma_check.build(tma_check.TUTORIAL, (128, 256, 64, 8, stages), "persistent+store+overlap", tma_check.SPEC)


def edited(ck: Any, ptx: str) -> Any:
    """A copy of compiled kernel `ck` with other PTX (loaded from PTX: no cubin)."""
    keep = ("name", "num_warps", "shared_bytes", "persistent", "signature", "arg_names", "tensor_maps", "registers")
    return types.SimpleNamespace(**{k: getattr(ck, k) for k in keep}, ptx=ptx, cubin=None)


def main() -> None:
    import torch
    from tc_opt.overlap_epilogue import MIN_STAGES

    import tma_check
    from bench_rounds import interleaved

    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="4096,8192")
    ap.add_argument("--stages", default="3")
    ap.add_argument("--variants", default=",".join(TIMING_ONLY[:3] + CORRECT))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--kernel", default="tutorial", choices=("tutorial", "tf32nt", "torchnn"),
                    help="torchnn (tc_torch's fp16 C = A B kernel, 128x256x64) only with --save")
    ap.add_argument("--load", action="append", default=[], metavar="NAME=FILE",
                    help="also time (and check) a kernel saved by --save, e.g. by another commit's compiler")
    ap.add_argument("--save", metavar="FILE", help="save the first unedited kernel built here (JSON) and stop")
    ap.add_argument("--overlap", action="store_true",
                    help="also build each kernel with CompileOptions.overlap_epilogue (named 'sN ov', checked)")
    args = ap.parse_args()
    tf32 = args.kernel == "tf32nt"
    if args.kernel == "torchnn" and not args.save:
        ap.error("--kernel torchnn only saves its kernel (for ncu_cycles --kernel torchnn NAME=FILE): give --save")
    kernels: dict[str, tuple[Any, bool]] = {}  # name -> (launchable, checked)
    for stages in (int(s) for s in args.stages.split(",")):
        if tf32:
            ck = build_tf32_nt(stages)
        elif args.kernel == "torchnn":
            ck = build_torch_matmul("half", False, stages, (128, 256, 64))
        else:
            ck = tma_check.build(tma_check.TUTORIAL, (128, 256, 64, 8, stages), "persistent+store", tma_check.SPEC)
        if args.save:
            Path(args.save).write_text(json.dumps({"meta": ck.to_json(), "ptx": ck.ptx}))
            return
        kernels[f"s{stages}"] = (tma_check.Launchable(ck), True)
        if args.overlap and stages >= MIN_STAGES:  # (fewer stages: the option changes nothing)
            kernels[f"s{stages} ov"] = (tma_check.Launchable(build_overlapped(args.kernel, stages)), True)
        for v in (v for v in args.variants.split(",") if v):
            try:
                checked = v in CORRECT or v.startswith("prefetch")
                kernels[f"s{stages} {v}"] = (tma_check.Launchable(edited(ck, variant_ptx(ck.ptx, v, stages))), checked)
            except ValueError as exc:
                print(f"s{stages} {v}: {exc}", flush=True)
    for item in args.load:
        from tc_nvptx.compiler import CompiledKernel

        name, _, file = item.partition("=")
        saved = json.loads(Path(file).read_text())
        kernels[name] = (tma_check.Launchable(CompiledKernel.from_json(saved["meta"], ptx=saved["ptx"])), True)
    failures = 0
    torch.backends.cuda.matmul.allow_tf32 = True  # (the tf32 kernel's peer; fp16 ignores it)
    for size in (int(x) for x in args.sizes.split(",") if x):
        dtype = torch.float32 if tf32 else torch.float16
        a = torch.randn(size, size, device="cuda", dtype=dtype)
        b = torch.randn(size, size, device="cuda", dtype=dtype)  # tf32nt: B^T, row-major
        c = torch.empty(size, size, device="cuda", dtype=dtype)
        bb = b.t() if tf32 else b
        ref = torch.matmul(a.double() if tf32 else a, bb.double() if tf32 else bb).float()
        providers: dict[str, Callable[[], object]] = {"cuBLAS": lambda: torch.matmul(a, bb)}
        grid = (size // 128) * (size // 256)
        tail = (0, 0, 0) if tf32 else ()  # (tc_torch's kernel: batch strides)
        for name, (k, checked) in kernels.items():
            def run(k: Any = k) -> None:
                k(grid, a.data_ptr(), b.data_ptr(), c.data_ptr(), size, size, size, size, size, size, *tail)

            c.zero_()
            run()
            torch.cuda.synchronize()
            if checked:
                err = (c.float() - ref).abs().max().item()
                print(f"{size} {name}: max error {err:.3g}", flush=True)
                if err > (1e-2 * ref.abs().max().item() if tf32 else 0.5):
                    failures += 1
                    continue
            providers[name] = run
        ms = interleaved(providers, rounds=args.rounds, rep=100)
        flops = 2.0 * size ** 3
        print(f"{size}^3, medians of {args.rounds} interleaved rounds: " + ", ".join(
            f"{n} {flops / (t * 1e-3) / 1e12:.1f} TFLOPS ({ms['cuBLAS'] / t:.3f}x)" for n, t in ms.items()),
            flush=True)
    print("FAILURES", failures)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
