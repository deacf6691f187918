"""Warp-specialized TMA matmuls in PTX (CompileOptions.warp_specialize): one warp more than the
program's, which branches to the producer loop where its first thread issues the copies; the
consumer warps arrive on the slots' empty barriers and synchronise on a named barrier that counts
only them; ptxas accepts it for sm_90a."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tc_ir.testing import filecheck
from tc_nvptx.compiler import CompiledKernel, compile
from tc_nvptx.ptxas import find_ptxas
from tc_opt import CompileOptions

KERNELS = Path(__file__).resolve().parents[2] / "tc-lang" / "tests" / "kernels"
ALIGNED = ("16", "16", "16", None, None, None, "16", "16", "16")


def _compile(stages: int = 4, warps: int = 8, nb: int = 256, ws: bool = True) -> CompiledKernel:
    return compile((KERNELS / "matmul_tutorial.tc").read_text(),
                   defines={"TYPE": "half", "MB": 128, "NB": nb, "KB": 64},
                   options=CompileOptions(arch="sm_90", num_warps=warps, num_stages=stages, specialization=ALIGNED,
                                          warp_specialize=ws))


def test_ptx_of_the_two_roles() -> None:
    k = _compile()
    assert k.num_warps == 9  # launched with the producer warp
    filecheck(k.ptx, """
CHECK: .maxntid 288
CHECK: mbarrier.init.shared::cta.b64 [%r{{[0-9]+}}], 1;
CHECK: mbarrier.init.shared::cta.b64 [%r{{[0-9]+}}], 8;
CHECK: bar.sync 0;
CHECK: setp.gt.u32 %p[[ROLE:[0-9]+]], %r{{[0-9]+}}, 255;
CHECK: @%p[[ROLE]] bra
""")
    text = re.sub(r"[ \t]+", " ", k.ptx)
    # the producer: its first thread (256) issues; every lane waits for a free slot
    assert re.search(r"setp\.(eq|ne)\.(b32|s32|u32) %p\d+, %r\d+, 256;", text)  # (ne: a branch around)
    assert "mbarrier.arrive.expect_tx.shared::cta.b64" in text
    # the consumers: one arrival per warp on the slot's empty barrier, no CTA-wide barrier after
    # the roles split (the producer warp never reaches them)
    assert "mbarrier.arrive.shared::cta.b64 _," in text
    role = re.search(r"setp\.gt\.u32 %p\d+, %r\d+, 255;", text)
    assert role is not None
    split = role.end()
    assert "bar.sync 1, 256;" in text[split:]
    assert "bar.sync 0;" not in text[split:]


def test_plain_tma_pipeline_unchanged_when_off() -> None:
    k = _compile(ws=False)
    assert k.num_warps == 8 and ".maxntid 256" in re.sub(r"[ \t]+", " ", k.ptx)
    assert "bar.sync 1," not in k.ptx and "mbarrier.arrive.shared" not in k.ptx


@pytest.mark.skipif(find_ptxas() is None, reason="needs ptxas")
@pytest.mark.parametrize("stages,warps,nb", [(4, 8, 256), (3, 8, 256), (4, 4, 128)])
def test_ptxas_accepts(stages: int, warps: int, nb: int) -> None:
    k = _compile(stages, warps, nb)
    assert k.cubin and k.spills == 0
    assert k.num_warps == warps + 1
    assert k.registers * 32 * k.num_warps <= 64 * 1024


def _persistent(arch: str = "sm_90", stages: int = 3) -> CompiledKernel:
    return compile((KERNELS / "matmul_tutorial.tc").read_text(),
                   defines={"TYPE": "half", "MB": 128, "NB": 256, "KB": 64},
                   options=CompileOptions(arch=arch, num_warps=8, num_stages=stages, specialization=ALIGNED,
                                          warp_specialize=True, persistent=True))


def test_persistent_grid_parameters_precede_the_tensor_maps() -> None:
    k = _persistent()
    assert k.persistent and k.num_warps == 9 and len(k.signature) == 9
    filecheck(k.ptx, """
CHECK: .param .u32 dot_param_8,
CHECK-NEXT: .param .u32 dot_param_9,
CHECK-NEXT: .param .u32 dot_param_10,
CHECK-NEXT: .param .u32 dot_param_11,
CHECK-NEXT: .param .align 64 .b8 dot_param_12[128],
CHECK-NEXT: .param .align 64 .b8 dot_param_13[128]
CHECK: mov.u32 %r{{[0-9]+}}, %ctaid.x;
CHECK: mov.u32 %r{{[0-9]+}}, %nctaid.x;
""")
    assert re.search(r"ld\.param\.b32 %r\d+, \[dot_param_9\];", re.sub(r"[ \t]+", " ", k.ptx))


def test_persistent_metadata_round_trips() -> None:
    k = _persistent()
    meta = k.to_json()
    assert meta["persistent"] is True
    assert CompiledKernel.from_json(meta).persistent
    assert "persistent" not in _compile().to_json()


def _overlapped(arch: str = "sm_90") -> CompiledKernel:
    return compile((KERNELS / "matmul_tutorial.tc").read_text(),
                   defines={"TYPE": "half", "MB": 128, "NB": 256, "KB": 64},
                   options=CompileOptions(arch=arch, num_warps=8, num_stages=4, specialization=ALIGNED,
                                          warp_specialize=True, persistent=True, tma_store=True,
                                          overlap_epilogue=True))


def test_a_producer_warpgroup_hands_its_registers_to_the_consumers() -> None:
    """CompileOptions.overlap_epilogue: four producer warps lower their registers to 40 and all
    but the first leave; the consumers raise theirs to 232 before their loop. The producer
    returns at the end of its loop instead of joining the consumers' code (allocated with their
    registers): none of the consumers' instructions lie in its part of the kernel."""
    k = _overlapped()
    assert k.num_warps == 12
    text = re.sub(r"[ \t]+", " ", k.ptx)
    filecheck(text, """
CHECK: .maxntid 384
CHECK: setp.{{lt.u32 %p[0-9]+, %r[0-9]+, 256|gt.u32 %p[0-9]+, %r[0-9]+, 255}};
CHECK: setmaxnreg.dec.sync.aligned.u32 40;
CHECK: setp.gt.u32 %p{{[0-9]+}}, %r{{[0-9]+}}, 287;
CHECK: mbarrier.arrive.expect_tx
CHECK: setmaxnreg.inc.sync.aligned.u32 232;
CHECK: wgmma.mma_async
""")
    producer = text[text.index("setmaxnreg.dec"):text.index("setmaxnreg.inc")]
    assert "cp.async.bulk.tensor.2d.shared::cluster.global" in producer
    assert "wgmma" not in producer and "bar.sync" not in producer


@pytest.mark.skipif(find_ptxas() is None, reason="needs ptxas")
def test_ptxas_keeps_the_overlapped_dots_in_flight() -> None:
    """The converted tile and the next program's accumulator fit the consumers' 232 registers
    without spills, and ptxas does not serialize any wgmma (C7514/C7515/C7520: registers touched
    while in flight). It injects one wait where the consumers' loop exits (C7517)."""
    k = _overlapped("sm_90a")
    assert k.cubin and k.spills == 0 and k.registers <= 168
    log = k.asm["ptxas"]
    assert not re.search(r"C751[0-6]|C7518|C752\d", log), log
    assert len(re.findall(r"C7517", log)) <= 1, log


def _tf32_a_b(producer_warpgroup: bool) -> CompiledKernel:
    """The tutorial's C = A B in float32 on tf32 tensor cores: B is N-contiguous, so the dot runs
    transposed (C^T = B^T A^T) with B^T read into registers each K step."""
    return compile((KERNELS / "matmul_tutorial.tc").read_text(),
                   defines={"TYPE": "float", "MB": 256, "NB": 128, "KB": 32},
                   options=CompileOptions(arch="sm_90a", num_warps=8, num_stages=4, specialization=ALIGNED,
                                          warp_specialize=True, persistent=True, fp32_dot="tf32",
                                          producer_warpgroup=producer_warpgroup))


def test_a_tf32_dot_from_registers_gets_a_producer_warpgroup() -> None:
    """CompileOptions.producer_warpgroup: a dot that reads A into registers, refused a producer
    warp (its consumers would need more than 168 registers), gets a producer warpgroup that
    hands its registers over (40 left to it, 232 to the consumers); without the option the
    persistent kernel runs without a producer, as before."""
    plain = _tf32_a_b(False)
    assert plain.num_warps == 8 and plain.persistent and "setmaxnreg" not in plain.ptx
    k = _tf32_a_b(True)
    assert k.num_warps == 12 and k.persistent
    text = re.sub(r"[ \t]+", " ", k.ptx)
    filecheck(text, """
CHECK: .maxntid 384
CHECK: setmaxnreg.dec.sync.aligned.u32 40;
CHECK: mbarrier.arrive.expect_tx
CHECK: setmaxnreg.inc.sync.aligned.u32 232;
CHECK: wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 {{.*}}, {%r
""")
    producer = text[text.index("setmaxnreg.dec"):text.index("setmaxnreg.inc")]
    assert "cp.async.bulk.tensor" in producer and "wgmma" not in producer
    # the consumers store the f32 accumulator as it lies: its transposed layout pairs the rows
    # (the tile's N), so where the tile is whole each thread writes 8-byte neighbours, 64 stores
    # for its 128 values (an edge tile's masked stores go element by element)
    consumers = text[text.index("setmaxnreg.inc"):]
    assert consumers.count("st.global.v2.b32") == 256 * 128 // 256 // 2


@pytest.mark.skipif(find_ptxas() is None, reason="needs ptxas")
def test_ptxas_keeps_the_tf32_register_dots_in_flight_beside_a_producer_warpgroup(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With the handoff ptxas neither spills nor serializes the wgmma; with a one-warp producer
    (the refusal lifted by hand) it serializes them for want of registers (C7512)."""
    k = _tf32_a_b(True)
    assert k.cubin and k.spills == 0 and k.registers <= 168
    assert "C7512" not in k.asm["ptxas"] and not re.search(r"C751[0-6]", k.asm["ptxas"]), k.asm["ptxas"]
    import tc_opt.warp_specialize as ws

    monkeypatch.setattr(ws, "reads_a_from_registers", lambda dot: False)
    one_warp = _tf32_a_b(False)
    assert one_warp.num_warps == 9 and "C7512" in one_warp.asm["ptxas"]


def _multicast(tma_store: bool = False, overlap_epilogue: bool = False) -> CompiledKernel:
    return compile((KERNELS / "matmul_tutorial.tc").read_text(),
                   defines={"TYPE": "half", "MB": 128, "NB": 256, "KB": 64},
                   options=CompileOptions(arch="sm_90a", num_warps=8, num_stages=3, specialization=ALIGNED,
                                          warp_specialize=True, persistent=True, cluster_multicast=True,
                                          tma_store=tma_store, overlap_epilogue=overlap_epilogue))


def test_clusters_of_two_multicast_the_tiles_two_programs_share() -> None:
    """CompileOptions.cluster_multicast: the kernel requires clusters of 2; a cluster barrier
    follows the barriers' initialization (the empty barriers count one warp of each consumer
    warpgroup of both CTAs: only wgmma reads the slots) and precedes their invalidation; the
    producer copies a tile both programs read in halves (half of B's panels), each to both CTAs
    (.multicast::cluster, mask 0b11), and the whole tile for itself otherwise; the first warp of
    each warpgroup arrives on its CTA's empty barrier, the second on the other CTA's (mapa); the
    wgmma descriptors keep 18 bits of the shared addresses."""
    k = _multicast()
    assert k.cluster == 2 and k.persistent and k.num_warps == 9
    text = re.sub(r"[ \t]+", " ", k.ptx)
    filecheck(text, """
CHECK: .maxntid 288
CHECK-NEXT: .minnctapersm 1
CHECK-NEXT: .explicitcluster
CHECK-NEXT: .reqnctapercluster 2, 1, 1
CHECK: mov.u32 %r[[RANK:[0-9]+]], %cluster_ctarank;
CHECK: mbarrier.init.shared::cta.b64 [%r{{[0-9]+}}], 1;
CHECK: mbarrier.init.shared::cta.b64 [%r{{[0-9]+}}], 4;
CHECK: fence.mbarrier_init.release.cluster;
CHECK: barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;
CHECK-DAG: mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r{{[0-9]+}}], 49152;
CHECK-DAG: cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%r{{[0-9]+}}], [%rd{{[0-9]+}}, {%r{{[0-9]+}}, %r{{[0-9]+}}}], [%r{{[0-9]+}}], %rs{{[0-9]+}};
CHECK-DAG: cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [
CHECK: wgmma.mma_async
CHECK: mbarrier.arrive.shared::cta.b64 _,
CHECK: mapa.shared::cluster.u32 remote, %r{{[0-9]+}}, %r{{[0-9]+}}; @%p{{[0-9]+}} mbarrier.arrive.shared::cluster.b64 _, [remote];
CHECK: barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;
CHECK: mbarrier.inval.shared::cta.b64
""")
    assert re.search(r"mov\.b16 %rs\d+, 3;", text)  # the multicast mask: both CTAs
    # each descriptor's start address (shared address >> 4) masked to the 14-bit field
    masks = re.findall(r"shr\.u32 %r(\d+), %r\d+, 4;\n and\.b32 %r\d+, %r(\d+), (\d+);", text)
    assert masks and all(a == b and int(m) & ~0x3FFF == 0 for a, b, m in masks), masks
    plain = re.sub(r"[ \t]+", " ", _persistent("sm_90a").ptx)
    assert not re.search(r"shr\.u32 %r(\d+), %r\d+, 4;\n and\.b32 %r\d+, %r\1, \d+;", plain)
    # B's 256 columns are four 64-column panels: where shared each CTA copies two of them to both
    # CTAs, where not all four (the boxes stay whole); A (one panel) is never shared
    assert text.count("multicast::cluster [") == 2
    assert text.count("complete_tx::bytes [") == 1 + 4
    meta = k.to_json()
    assert meta["cluster"] == 2 and CompiledKernel.from_json(meta).cluster == 2
    assert "cluster" not in _persistent().to_json() and "cluster_ctarank" not in _persistent().ptx


def _quad() -> CompiledKernel:
    return compile((KERNELS / "matmul_tutorial.tc").read_text(),
                   defines={"TYPE": "half", "MB": 192, "NB": 192, "KB": 64, "GROUP_SIZE": 2},
                   options=CompileOptions(arch="sm_90a", num_warps=12, num_stages=3, specialization=ALIGNED,
                                          warp_specialize=True, persistent=True, cluster_multicast=True,
                                          cluster_2x2=True, tma_store=True))


def test_clusters_of_four_share_both_operands() -> None:
    """CompileOptions.cluster_2x2: the kernel requires clusters of 4; each program compares its
    tiles with those of programs ^ 1, ^ 2 and ^ 3 (t ^ 1 below it, t ^ 2 beside it in groups of 2
    rows), so A and B (192 rows each: split by rows through maps of half the rows) both have a
    multicast copy, whose mask names this CTA and the partner (1 << rank | 1 << (rank ^ d)); the
    empty barriers count 3 warpgroups of 3 CTAs, and each warpgroup's second and third warps
    arrive on the partners' across rank bits 1 and 2."""
    k = _quad()
    assert k.cluster == 4 and k.persistent
    text = re.sub(r"[ \t]+", " ", k.ptx)
    assert ".reqnctapercluster 4, 1, 1" in text
    assert re.findall(r"mbarrier\.init\.shared::cta\.b64 \[%r\d+\], (\d+);", text) == ["1"] * 3 + ["9"] * 3
    assert text.count("multicast::cluster [") == 1 + 3 and text.count("complete_tx::bytes [") == 1 + 3
    assert [m["box"] for m in k.tensor_maps][:4] == [[64, 192], [64, 64], [64, 96], [64, 32]]
    assert not re.search(r"mov\.b16 %rs\d+, 3;", text)  # (clusters of 2: the constant mask)
    rank = re.search(r"mov\.u32 (%r\d+), %cluster_ctarank;", text)
    assert rank and re.search(rf"shl\.b32 %r\d+, %r\d+, {rank.group(1)};", text)  # 1 << rank
    assert len(re.findall(r"cvt\.u16\.u32 %rs\d+, %r\d+;", text)) == 2  # a mask per operand
    ir = k.asm["ir-gpu"]
    assert sorted(set(re.findall(r"tc\.constant \{value = (\d)\} : i32\n\s*%\d+ = tc\.binary %program, %\d+ "
                                 r"\{kind = \"xor\"\}", ir))) == ["1", "2", "3"]
    arrivals = re.findall(r"tc\.mbarrier_arrive (%\w+), %\w+, %\w+, %\w+, %\w+ \{cluster = true, per_warpgroup = true\}",
                          ir)
    assert len(arrivals) == 2, arrivals  # (in the loop and after it; one flag per partner)
    copies = re.findall(r"tc\.tma_load [^\n]*", ir)
    assert len(copies) == 2 and all("multicast = true" in c for c in copies), copies


def test_clusters_need_a_persistent_producer() -> None:
    """Without a persistent grid (or without a producer) the option changes nothing."""
    k = compile((KERNELS / "matmul_tutorial.tc").read_text(),
                defines={"TYPE": "half", "MB": 128, "NB": 256, "KB": 64},
                options=CompileOptions(arch="sm_90a", num_warps=8, num_stages=3, specialization=ALIGNED,
                                       warp_specialize=True, cluster_multicast=True))
    assert k.cluster == 1 and ".reqnctapercluster" not in k.ptx and "multicast" not in k.ptx


@pytest.mark.skipif(find_ptxas() is None, reason="needs ptxas")
@pytest.mark.parametrize("store,overlap", [(False, False), (True, False), (True, True)])
def test_ptxas_accepts_the_clusters(store: bool, overlap: bool) -> None:
    k = _multicast(store, overlap)
    assert k.cubin and k.spills == 0 and k.cluster == 2
    assert not re.search(r"C751[0-6]|C7518|C752\d", k.asm["ptxas"]), k.asm["ptxas"]


def test_clusters_overlap_the_epilogue_too() -> None:
    """CompileOptions.overlap_epilogue in clusters: the peeled first iteration of the next program
    does not arrive (iv = lb), so the consumers' `paired` flags (which read the program) do not
    keep the rewrite out, and the producer becomes a warpgroup handing its registers over (the
    tuner's 128x256x64/8/4 overlapped multicast tile ran without the overlap before)."""
    def overlapped(cluster: bool) -> CompiledKernel:
        return compile((KERNELS / "matmul_tutorial.tc").read_text(),
                       defines={"TYPE": "half", "MB": 128, "NB": 256, "KB": 64},
                       options=CompileOptions(arch="sm_90a", num_warps=8, num_stages=4, specialization=ALIGNED,
                                              warp_specialize=True, persistent=True, cluster_multicast=cluster,
                                              tma_store=True, overlap_epilogue=True))

    k = overlapped(True)
    assert k.cluster == 2 and k.num_warps == 12
    assert "setmaxnreg.inc.sync.aligned.u32 232;" in k.ptx
    # the rewritten loop's dot and its two peeled copies, and the loop as it was (for K = 0)
    dots = len(re.findall(r"= tc\.dot ", k.asm["ir-gpu"]))
    assert dots == 4 == len(re.findall(r"= tc\.dot ", overlapped(False).asm["ir-gpu"]))
    if find_ptxas() is not None:
        assert k.spills == 0 and not re.search(r"C751[0-6]|C7518|C752\d", k.asm["ptxas"]), k.asm["ptxas"]


@pytest.mark.skipif(find_ptxas() is None, reason="needs ptxas")
def test_ptxas_accepts_clusters_of_four() -> None:
    k = _quad()
    assert k.cubin and k.spills == 0 and k.cluster == 4
    assert not re.search(r"C751[0-6]|C7518|C752\d", k.asm["ptxas"]), k.asm["ptxas"]


def test_clusters_pair_programs_one_by_one() -> None:
    """Each program asks whether the other CTA runs its partner (program ^ 1 < count), in the
    producer's loop over the programs (before the shared copy, whose partner bit it selects) and
    in the consumers' (for their arrivals): an odd count leaves only its last program unshared
    (a test of the count's parity left whole grids unshared: 4104^3 has 33 x 17 tiles of
    128x256)."""
    ir = _multicast().asm["ir-gpu"]
    checks = """
CHECK: tc.warp_specialize
CHECK: tc.for %{{[0-9]+}}, %[[COUNT:[0-9]+]], %{{[0-9]+}}
CHECK-NEXT: ^(%program: i32
CHECK: %[[OTHER:[0-9]+]] = tc.binary %program, %[[ONE:[0-9]+]] {kind = "xor"} : i32
CHECK: %[[OTHER2:[0-9]+]] = tc.binary %program, %{{[0-9]+}} {kind = "xor"} : i32
CHECK-NEXT: %[[EXISTS:[0-9]+]] = tc.cmp %[[OTHER2]], %[[COUNT]] {predicate = "slt"} : i1
CHECK: %[[ROW:[0-9]+]] = tc.binary %[[EXISTS]], %{{[0-9]+}} {kind = "and"} : i1
CHECK: %[[SAME:[0-9]+]] = tc.binary %[[ROW]], %{{[0-9]+}} {kind = "and"} : i1
CHECK: %[[PARTNER:[0-9]+]] = tc.select %[[SAME]], %{{[0-9]+}}, %{{[0-9]+}} : i32
CHECK: tc.tma_load {{.*}}, %[[PARTNER]] {descriptor = 1
CHECK: tc.for %{{[0-9]+}}, %[[COUNT]], %{{[0-9]+}}
CHECK-NEXT: ^(%program_1: i32
CHECK-NEXT: %[[ONE1:[0-9]+]] = tc.constant {value = 1} : i32
CHECK-NEXT: %[[OTHER1:[0-9]+]] = tc.binary %program_1, %[[ONE1]] {kind = "xor"} : i32
CHECK-NEXT: tc.cmp %[[OTHER1]], %[[COUNT]] {predicate = "slt"} : i1
"""
    filecheck(ir, checks)


def test_tiles_of_one_panel_are_shared_by_rows_through_maps_of_half_the_rows() -> None:
    """Where no operand has an even number of panels (128x64 tiles of fp16: A and B one 64-column
    panel each), the rows are split: each copy that may be shared gets a second tensor map whose
    box has half the rows (after the plans' maps), which only the multicast copies use; the
    copies that are not shared keep the whole tile's box."""
    k = compile((KERNELS / "matmul_tutorial.tc").read_text(), defines={"TYPE": "half", "MB": 128, "NB": 64, "KB": 64},
                options=CompileOptions(arch="sm_90a", num_warps=4, num_stages=4, specialization=ALIGNED,
                                       warp_specialize=True, persistent=True, cluster_multicast=True))
    assert k.cluster == 2
    assert [m["box"] for m in k.tensor_maps] == [[64, 128], [64, 64], [64, 64], [64, 32]]
    assert all(m["base"] == whole["base"] for m, whole in zip(k.tensor_maps[2:], k.tensor_maps[:2]))
    text = re.sub(r"[ \t]+", " ", k.ptx)
    # the register each map's address is in: mov.b64 of the parameter, then cvta.param
    maps = {m.group(1): int(m.group(2)) - 12 for m in re.finditer(r"mov\.b64 (%rd\d+), dot_param_(1[2-5]);", text)}
    maps.update({m.group(1): maps[m.group(2)] for m in re.finditer(r"cvta\.param\.u64 (%rd\d+), (%rd\d+);", text)
                 if m.group(2) in maps})
    used = [(bool(c.group(1)), maps.get(c.group(2))) for c in re.finditer(
        r"complete_tx::bytes(\.multicast::cluster)? \[%r\d+\], \[(%rd\d+),", text)]
    assert sorted(used) == [(False, 0), (False, 1), (True, 2), (True, 3)], used


def test_every_consumer_warp_arrives_where_it_reads_the_slot_itself() -> None:
    """A tf32 A B reads B^T from the slot into registers warp by warp: in clusters each consumer
    warp still arrives on both CTAs' empty barriers (2 x 8), not one warp of each warpgroup."""
    k = compile((KERNELS / "matmul_tutorial.tc").read_text(), defines={"TYPE": "float", "MB": 256, "NB": 128, "KB": 32},
                options=CompileOptions(arch="sm_90a", num_warps=8, num_stages=4, specialization=ALIGNED,
                                       warp_specialize=True, persistent=True, fp32_dot="tf32",
                                       producer_warpgroup=True, cluster_multicast=True))
    assert k.cluster == 2
    text = re.sub(r"[ \t]+", " ", k.ptx)
    assert re.search(r"mbarrier\.init\.shared::cta\.b64 \[%r\d+\], 16;", text)
    assert not re.search(r"mbarrier\.init\.shared::cta\.b64 \[%r\d+\], 4;", text)
