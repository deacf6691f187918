"""TMA copies in PTX (CompileOptions.tma): the tensor maps as 64-byte aligned by-value parameters
after the user's, one cp.async.bulk.tensor per swizzle panel completing on an mbarrier, the phase
wait loop; ptxas accepts it for sm_90a; the metadata the runtime encodes the maps from."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tc_ir.testing import filecheck
from tc_nvptx.compiler import CompiledKernel, compile
from tc_nvptx.emit import tensor_map_params
from tc_nvptx.ptxas import find_ptxas
from tc_opt import CompileOptions

KERNELS = Path(__file__).resolve().parents[2] / "tc-lang" / "tests" / "kernels"
ALIGNED = ("16", "16", "16", None, None, None, "16", "16", "16")
needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not on the PATH")


def _compile(stages: int = 4, warps: int = 8, tma: bool = True, nb: int = 256, *, tma_store: bool = False,
             warp_specialize: bool = False, persistent: bool = False, mb: int = 128,
             type_: str = "half") -> CompiledKernel:
    return compile((KERNELS / "matmul_tutorial.tc").read_text(),
                   defines={"TYPE": type_, "MB": mb, "NB": nb, "KB": 64},
                   options=CompileOptions(arch="sm_90", num_warps=warps, num_stages=stages, specialization=ALIGNED,
                                          tma=tma, tma_store=tma_store, warp_specialize=warp_specialize,
                                          persistent=persistent))


def test_ptx_of_tma_pipeline() -> None:
    k = _compile()
    assert k.arch == "sm_90a"
    filecheck(k.ptx, """
CHECK: .param .u32 dot_param_8,
CHECK-NEXT: .param .align 64 .b8 dot_param_9[128],
CHECK-NEXT: .param .align 64 .b8 dot_param_10[128]
CHECK: cvta.param.u64
CHECK: mbarrier.init.shared::cta.b64
CHECK: fence.mbarrier_init.release.cluster;
CHECK: bar.sync
CHECK: mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r{{[0-9]+}}], 49152;
CHECK: cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
CHECK: mbarrier.try_wait.parity.shared::cta.b64
CHECK: wgmma.mma_async
CHECK: mbarrier.inval.shared::cta.b64
""")
    # per stage: A in one box, B (256 columns) in four 64-column panels; 3 prologue stages + the loop
    assert len(re.findall(r"cp\.async\.bulk\.tensor", k.ptx)) == 4 * 5
    assert "cp.async.cg" not in k.ptx and "cp.async.wait_group" not in k.ptx


@pytest.mark.parametrize("type_, ld, copies", [("half", "8", 20), ("half", None, 0), ("half", "16", 20)])
def test_rows_of_16_bytes_take_tma_whatever_their_element_count(type_: str, ld: str | None, copies: int) -> None:
    """Leading dimensions divisible by 8 (a half matrix of 1000 or 4104 columns: rows of 16-byte
    multiples) are as legal for TMA as multiples of 16, and give the same copies; without a
    fact about them nothing is copied by TMA (the runtime compiles that variant for odd ones)."""
    spec = ("16", "16", "16", None, None, None, ld, ld, ld)
    k = compile((KERNELS / "matmul_tutorial.tc").read_text(), defines={"TYPE": type_, "MB": 128, "NB": 256, "KB": 64},
                options=CompileOptions(arch="sm_90", num_warps=8, num_stages=4, specialization=spec))
    assert len(re.findall(r"cp\.async\.bulk\.tensor", k.ptx)) == copies
    if ld == "8":
        assert k.ptx == _compile().ptx  # (nothing in the kernel needs more than 16-byte rows)


def test_accumulator_structs_are_named_once_in_the_llvm_text() -> None:
    """The wgmma's 128-float results are one named struct type: its extractvalues name it instead
    of spelling 128 elements each (which made 2.75 of this kernel's 3.0 MB of LLVM text)."""
    k = _compile()
    llvm = k.asm["llvm"]
    assert llvm.count('%"float_x128" = type {' + ", ".join(["float"] * 128) + "}") == 1
    assert "extractvalue %\"float_x128\"" in llvm
    assert "{" + ", ".join(["float"] * 8) not in llvm.replace('%"float_x128" = type {', "")
    assert len(llvm) < 600_000


def _loop_blocks(ptx: str) -> list[tuple[str, list[str]]]:
    """The basic blocks (label, lines) of the loop around the first mbarrier phase wait, in text
    order: the blocks on a path from the wait's block back to it (LLVM may place the latch
    before the header, so text order alone does not delimit the loop)."""
    blocks: list[tuple[str, list[str]]] = [("entry", [])]
    for ln in ptx.splitlines():
        if re.match(r"^\$L__\w+:", ln):
            blocks.append((ln.rstrip(":"), []))
        else:
            blocks[-1][1].append(ln)
    names = [name for name, _ in blocks]
    succ: dict[str, set[str]] = {}
    for i, (name, lines) in enumerate(blocks):
        targets = set(re.findall(r"\bbra(?:\.uni)?\s+(\$L__\w+);", "\n".join(lines)))
        last = next((ln.strip() for ln in reversed(lines) if ln.strip() and not ln.strip().startswith("//")), "")
        if not last.startswith("bra") and i + 1 < len(blocks):  # falls through (or a predicated branch)
            targets.add(names[i + 1])
        succ[name] = targets

    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for t in succ.get(todo.pop(), ()):
                if t not in seen:
                    seen.add(t)
                    todo.append(t)
        return seen

    header = next(name for name, lines in blocks if any("mbarrier.try_wait" in ln for ln in lines))
    inside = {name for name in reach(header) if header in reach(name)}
    return [(name, lines) for name, lines in blocks if name in inside]


def test_loop_issues_copies_in_the_leaders_branch() -> None:
    """In the loop, thread 0's expect and copies sit in a block only it enters (a branch on
    "thread 0 and the iteration in range"), unpredicated: the other warps jump over them instead
    of running, predicated off, the uniform-register loops ptxas wraps around each copy."""
    loop = _loop_blocks(_compile().ptx)
    holding = [(name, lines) for name, lines in loop if any("cp.async.bulk.tensor" in ln for ln in lines)]
    assert len(holding) == 1
    name, lines = holding[0]
    copies = [ln.strip() for ln in lines if "cp.async.bulk.tensor" in ln or "expect_tx" in ln]
    assert len(copies) == 1 + 5 and not any(ln.startswith("@") for ln in copies)
    assert not any("wgmma" in ln or "mbarrier.try_wait" in ln for ln in lines)
    entered = [ln for _, ls in loop for ln in ls if re.search(rf"@%p\d+ bra\s+{re.escape(name)};", ln)]
    assert len(entered) == 1


def test_wgmma_descriptors_are_32_bit_arithmetic() -> None:
    """Shared pointers are 32 bits (the data layout's p3:32), so a descriptor of the k-step is one
    32-bit add to a per-slot start: no 64-bit address arithmetic anywhere in the loop, and at
    least one add per descriptor of k-steps 1..3 (A and B)."""
    loop = _loop_blocks(_compile().ptx)
    math = [ln.split()[0] for _, lines in loop for ln in lines
            if ln.startswith("\t") and ln.strip() and not ln.strip().startswith(("//", "{", "@"))]
    wide = [op for op in math if re.search(r"^(add|sub|mul|shl|shr|and)\.[su]?b?64$|^mul\.wide|^bfe\.u64", op)]
    assert not wide, wide
    assert math.count("add.s32") >= 6


@needs_ptxas
def test_ptxas_accepts_and_registers_drop() -> None:
    tma, plain = _compile(), _compile(tma=False)
    assert tma.cubin and tma.spills == 0
    # no pointer tiles (128 x 64 and 64 x 256 addresses) live across the loop any more
    assert tma.registers < plain.registers


@needs_ptxas
@pytest.mark.parametrize("stages,warps,nb", [(3, 4, 128), (2, 4, 128), (3, 8, 256)])
def test_other_schedules_assemble(stages: int, warps: int, nb: int) -> None:
    k = _compile(stages, warps, nb=nb)
    assert k.cubin and len(k.tensor_maps) == 2


def test_tensor_map_metadata_round_trips() -> None:
    k = _compile()
    assert k.tensor_maps == [
        {"base": 0, "element": "f16", "extents": [-1, 2**31 - 1, -1, 2**31 - 1], "stride": [6, 1], "box": [64, 128],
         "swizzle": 128},
        {"base": 1, "element": "f16", "extents": [-1, 2**31 - 1, -1, 2**31 - 1], "stride": [7, 1], "box": [64, 64],
         "swizzle": 128},
    ]
    again = CompiledKernel.from_json(k.to_json())
    assert again.tensor_maps == k.tensor_maps
    assert "tensor_maps" not in _compile(tma=False).to_json()


def test_only_tensor_map_parameters_are_marked() -> None:
    text = ('define ptx_kernel void @"k"(ptr addrspace(1) noundef %"A", ptr %"tc_tma_0", ptr %"tc_tma_1")\n'
            'call void asm "x", "l"(ptr %"tc_tma_0")\n')
    out = tensor_map_params(text)
    assert out.count('byval([128 x i8]) align 64 "nvvm.grid_constant"') == 2
    assert 'call void asm "x", "l"(ptr %"tc_tma_0")' in out


TORCH_MATMUL = Path(__file__).resolve().parents[2] / "tc-torch" / "src" / "tc_torch" / "kernels" / "matmul.tc"


@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, False), (False, True)])
def test_batched_matmul_copies_with_three_coordinates(trans_a: bool, trans_b: bool) -> None:
    """tc_torch's matmul (batch offset pz * stride_z, fused transpositions): 3-D copies whose last
    coordinate is the batch index, chosen once before the loop (0 where the batch stride is 0);
    ptxas accepts them."""
    from tc_torch.ops.matmul import A_VARIANTS, B_VARIANTS

    defines = {"TYPE": "half", "ACC": "float", "MB": 128, "NB": 256, "KB": 64,
               **A_VARIANTS[trans_a], **B_VARIANTS[trans_b]}
    k = compile(TORCH_MATMUL.read_text(), defines=defines,
                options=CompileOptions(arch="sm_90", num_warps=8, num_stages=4, specialization=("16",) * 12))
    filecheck(k.ptx, """
CHECK: .param .u64 matmul_param_11,
CHECK-NEXT: .param .align 64 .b8 matmul_param_12[128],
CHECK-NEXT: .param .align 64 .b8 matmul_param_13[128]
CHECK: %ctaid.y
CHECK: selp.b32
CHECK: cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%r{{[0-9]+}}], [%rd{{[0-9]+}}, {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}], [%r{{[0-9]+}}];
CHECK: wgmma.mma_async
""")
    assert "cp.async.bulk.tensor.2d" not in k.ptx and "cp.async.cg" not in k.ptx
    assert [m["box"][2] for m in k.tensor_maps] == [1, 1] and [m["stride"][2] for m in k.tensor_maps] == [9, 10]
    if find_ptxas() is not None:
        assert k.cubin and k.spills == 0


@needs_ptxas
def test_spec_matmul_copies_with_tma() -> None:
    """The spec's matmul.tc (`A + rk * 1 + rm * lda`, `for (k = K; k > 0; k -= TK)`, advances
    `TK * 1`): its operand tiles arrive by TMA on mbarriers, no per-thread cp.async; ptxas accepts
    it for sm_90a. A 64 x 32 f16 tile of A is one 64-byte swizzled box, B's 32 x 64 one 128-byte
    one: two copies per stage, 2 prologue stages + the loop."""
    k = compile((KERNELS / "matmul.tc").read_text(), defines={"TYPE": "half", "TM": 64, "TN": 64, "TK": 32},
                options=CompileOptions(arch="sm_90", num_warps=4, num_stages=3, specialization=ALIGNED))
    assert k.arch == "sm_90a" and len(k.tensor_maps) == 2
    filecheck(k.ptx, """
CHECK: .param .align 64 .b8 dot_param_9[128],
CHECK-NEXT: .param .align 64 .b8 dot_param_10[128]
CHECK: mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r{{[0-9]+}}], 8192;
CHECK: cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
CHECK-DAG: mbarrier.try_wait.parity.shared::cta.b64
CHECK-DAG: wgmma.mma_async
""")
    assert len(re.findall(r"cp\.async\.bulk\.tensor", k.ptx)) == 2 * 3
    assert "cp.async.cg" not in k.ptx and "cp.async.ca" not in k.ptx
    assert k.cubin and k.spills == 0


def test_ptx_of_tma_store_epilogue() -> None:
    """CompileOptions.tma_store: the accumulator is written once to two swizzled panel buffers
    (converted two values per instruction, 64 per thread, and written by 16 stmatrix .x4 per
    thread: four 8 x 8 blocks each, no other shared store), each of the four 64-column panels
    is one bulk tensor store issued by thread 0 after a proxy fence and a barrier, the third and
    fourth wait until the store two panels back has read its buffer; no global store remains."""
    k = _compile(tma_store=True)
    ptx = k.ptx
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta\.bulk_group", ptx)) == 4
    assert len(re.findall(r"cp\.async\.bulk\.commit_group", ptx)) == 4
    assert len(re.findall(r"cp\.async\.bulk\.wait_group\.read 1;", ptx)) == 2
    assert len(re.findall(r"cp\.async\.bulk\.wait_group\.read 0;", ptx)) == 1
    assert len(re.findall(r"fence\.proxy\.async\.shared::cta", ptx)) == 4
    assert len(re.findall(r"stmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16 ", ptx)) == 16
    assert len(re.findall(r"cvt\.rn\.f16x2\.f32 ", ptx)) == 64 and "cvt.rn.f16.f32" not in ptx
    assert not re.findall(r"st\.shared\.", ptx)
    assert "st.global" not in ptx
    filecheck(ptx, """
CHECK: .param .align 64 .b8 dot_param_11[128]
CHECK: wgmma.wait_group.sync.aligned 0;
CHECK: stmatrix
CHECK: fence.proxy.async.shared::cta;
CHECK: bar.sync
CHECK: @%p{{[0-9]+}} cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd{{[0-9]+}}, {%r{{[0-9]+}}, %r{{[0-9]+}}}], [%r{{[0-9]+}}];
CHECK: cp.async.bulk.commit_group;
CHECK: cp.async.bulk.wait_group.read 1;
CHECK: cp.async.bulk.wait_group.read 0;
""")
    # the destination's map: C (argument 2), extents N and M (the store's mask), rows of stride_c_0
    assert k.tensor_maps[2] == {"base": 2, "element": "f16", "extents": [4, 0, 3, 0], "stride": [8, 1],
                                "box": [64, 128], "swizzle": 128}


def test_persistent_bulk_store_waits_before_reuse_and_at_exit() -> None:
    """In the loop over the programs the whole tile goes to its four panel buffers in one step:
    thread 0 first waits until the previous tile's copies have read them, then issues the four
    copies as one group and goes on (nothing waits for them in the loop); it waits for their
    reads once more before the kernel returns. The 4-stage kernel, with two buffers in turns,
    waits before each panel for the copy that read its buffer last."""
    k = _compile(3, tma_store=True, warp_specialize=True, persistent=True)
    assert k.ptx.count("cp.async.bulk.commit_group;") == 1
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta", k.ptx)) == 4
    filecheck(k.ptx, """
CHECK: wgmma.wait_group.sync.aligned 0;
CHECK: cp.async.bulk.wait_group.read 0;
CHECK: bar.sync
CHECK: stmatrix
CHECK: fence.proxy.async.shared::cta;
CHECK: cp.async.bulk.tensor.2d.global.shared::cta
CHECK: cp.async.bulk.commit_group;
CHECK-NOT: cp.async.bulk.wait_group
CHECK: bra.uni
CHECK: cp.async.bulk.wait_group.read 0;
CHECK-NOT: cp.async.bulk
CHECK: ret;
""")
    four = _compile(4, tma_store=True, warp_specialize=True, persistent=True)
    assert four.ptx.count("cp.async.bulk.commit_group;") == 4
    assert four.ptx.count("cp.async.bulk.wait_group.read 1;") == 4


#: C = A B^T in float32 on tf32 tensor cores (both operands K-contiguous: wgmma reads them as they
#: are): a 128 x 256 float tile is eight 32-column panels of 16 KiB.
TF32_A_BT = """
__global__ void abt(float* A, float* B, float* C, int M, int N, int K, int lda, int ldb, int ldc) {
    int pid_m = get_program_id(0) % ((M + 127) / 128);
    int pid_n = get_program_id(0) / ((M + 127) / 128);
    int rm[128] = pid_m * 128 + 0 ... 128;
    int rn[256] = pid_n * 256 + 0 ... 256;
    int rk[32] = 0 ... 32;
    float* pa[128, 32] = A + (rm[:, newaxis] * lda + rk[newaxis, :]);
    float* pb[32, 256] = B + (rn[newaxis, :] * ldb + rk[:, newaxis]);
    float acc[128, 256] = 0;
    for (int k = K; k > 0; k -= 32) {
        acc += (*pa) @ (*pb);
        pa += 32;
        pb += 32;
    }
    *?(rm[:, newaxis] < M && rn[newaxis, :] < N)(C + (rm[:, newaxis] * ldc + rn[newaxis, :])) = acc;
}
"""


def test_persistent_bulk_store_writes_through_as_many_buffers_as_fit() -> None:
    """A persistent tf32 128x256x32 kernel with 3 stages (144 KiB) has room for five of its eight
    16 KiB panel buffers: panel j waits for the copy of panel j - 5 (or of the previous tile),
    and the leader waits for the next panel's buffer before the barrier that ends a panel's
    writes, so each panel costs one barrier (the two-buffer scheme needs two)."""
    k = compile(TF32_A_BT, options=CompileOptions(
        arch="sm_90", num_warps=8, num_stages=3, specialization=ALIGNED, fp32_dot="tf32", tma_store=True,
        warp_specialize=True, persistent=True))
    assert 3 * 48 * 1024 + 5 * 16384 <= k.shared_bytes <= 232448
    epilogue = k.ptx[k.ptx.index("wgmma.wait_group.sync.aligned 0;"):]
    waits = [int(n) for n in re.findall(r"cp\.async\.bulk\.wait_group\.read (\d+);", epilogue)]
    # before panel 0 (the previous tile's copies of panels 6 and 7 may read on), then before the
    # barriers of panels 0..6 for the buffer of the next panel, one copy fewer issued; at the exit all
    assert waits == [2, 1, 1, 6, 6, 3, 3, 3, 0]
    assert epilogue.count("cp.async.bulk.commit_group;") == 8
    copies = re.split(r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta", epilogue)
    assert len(copies) == 9 and all(c.count("bar.sync") == 1 for c in copies[1:-1])
    if find_ptxas() is not None:
        assert k.cubin and k.spills == 0


@pytest.mark.parametrize("type_", ["half", "bf16"])
@pytest.mark.parametrize("mb, nb, warps", [(256, 128, 8), (128, 128, 4)])
def test_bulk_store_epilogues_write_with_stmatrix(mb: int, nb: int, warps: int, type_: str) -> None:
    """Every 16 x 16 block of the accumulator goes to shared memory in one stmatrix .x4 (each
    thread's 4 packed registers: rows r and r + 8 of columns c and c + 8), at four addresses per
    thread (the swizzle's 16-byte units: one per even column block within a 64-column panel) plus
    immediate offsets; a warpgroup's 64 x 128 per thread is 128 values: 64 packed conversions,
    16 stmatrix. 256 x 128 on 8 warps holds two such row blocks per warp (rows 0-15, 128-143)."""
    k = _compile(3, warps, nb=nb, mb=mb, tma_store=True, warp_specialize=True, persistent=True, type_=type_)
    stores = re.findall(r"stmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16 \[(%r\d+)\+(\d+)\], \{[^}]*\};", k.ptx)
    per_thread = mb * nb // (warps * 32)
    assert len(stores) == per_thread // 8
    assert len({base for base, _ in stores}) == 4
    assert len(set(stores)) == len(stores)  # (no block written twice)
    cvt = "cvt.rn.f16x2.f32" if type_ == "half" else "cvt.rn.bf16x2.f32"
    assert k.ptx.count(cvt) == per_thread // 2
    assert not re.findall(r"st\.shared\.", k.ptx)
    assert k.spills == 0


@needs_ptxas
@pytest.mark.parametrize("ws,persistent", [(False, False), (True, False), (True, True)])
def test_tma_store_epilogues_assemble(ws: bool, persistent: bool) -> None:
    k = _compile(tma_store=True, warp_specialize=ws, persistent=persistent)
    assert k.cubin and k.spills == 0 and len(k.tensor_maps) == 3


@needs_ptxas
@pytest.mark.parametrize("stages,warps,nb,schedule", [
    (4, 8, 256, "plain"), (4, 8, 256, "tma_store"), (3, 8, 256, "tma_store"), (4, 8, 256, "warp_specialize"),
    (3, 8, 256, "ws+store"), (3, 8, 256, "persistent"), (4, 8, 256, "persistent+store"),
    (3, 8, 256, "persistent+store"), (3, 4, 128, "persistent"), (4, 4, 128, "persistent+store")])
def test_ptxas_keeps_the_wgmma_pipelined(stages: int, warps: int, nb: int, schedule: str) -> None:
    """ptxas serializes the wgmma of a kernel (its advisories C75xx; on the H100 the 4096^3
    bulk-store kernel ran at 0.82x cuBLAS instead of 0.94x, the persistent bulk-store one at
    0.83x) when other instructions define or read accumulator registers while a wgmma may be in
    flight, or when the loop's first iteration is peeled into a divergent path: the zeroed
    accumulator of the zero-trip path, laid out between the loop and its final wait, once did;
    tc_opt.accumulator_init leaves it undefined, the first wgmma not reading it. The report is
    kept as the "ptxas" stage."""
    k = _compile(stages, warps, nb=nb, tma_store=schedule.endswith(("tma_store", "+store")),
                 warp_specialize=schedule != "plain" and schedule != "tma_store",
                 persistent=schedule.startswith("persistent"))
    assert k.cubin and "Used" in k.asm["ptxas"] and k.spills == 0
    assert not re.search(r"\(C75\d\d\)", k.asm["ptxas"]), k.asm["ptxas"]


def test_aligned_instructions_stay_out_of_the_leaders_branches() -> None:
    """stmatrix (like every `.aligned` instruction) must be executed by all the threads of a warp
    at the same instruction. With three panel buffers for four panels (fp16 128x256x32, 7 stages)
    the epilogue writes a panel between the leader's copy of the previous one and its wait for the
    next buffer; LLVM threaded the two branches on "thread 0" across the stmatrix, duplicating it
    into both sides, and the kernel hung on the H100. As convergent calls they stay put: each of
    the tile's 16 register blocks is written by one stmatrix."""
    k = compile((KERNELS / "matmul_tutorial.tc").read_text(), defines={"TYPE": "half", "MB": 128, "NB": 256, "KB": 32},
                options=CompileOptions(arch="sm_90", num_warps=8, num_stages=7, specialization=ALIGNED,
                                       tma_store=True, warp_specialize=True, persistent=True))
    assert k.ptx.count("cp.async.bulk.commit_group;") == 4  # (a panel at a time: fewer buffers than panels)
    assert k.ptx.count("stmatrix.sync.aligned") == 16
    aligned = [ln for ln in k.asm["llvm"].splitlines() if " asm " in ln and ".aligned" in ln]
    assert aligned and all(ln.rstrip().endswith("convergent") for ln in aligned), aligned[:3]


@pytest.mark.parametrize("stages", [3, 4])
def test_persistent_epilogue_keeps_work_off_the_path_between_programs(stages: int) -> None:
    """Between a program's last wgmma and the next program's first, the tensor cores idle: the
    persistent kernel's accumulator starts as zeros written by one asm statement (its 128
    registers once, not once for each way into the loop over K), its final wait zeroes nothing
    (a loop of no iteration leaves those zeros), and the grouped order's divisions that the bulk
    stores' coordinates come from are computed again just before that wait, not in the elected
    thread's branch after the tile's stores to shared memory (H100, 4096^3: 3.4% -> 1.9% more
    cycles than cuBLAS with 3 stages)."""
    k = _compile(stages, tma_store=True, warp_specialize=True, persistent=True)
    assert "selp.f32" not in k.ptx
    zeros = [ln for ln in k.ptx.splitlines() if "0f00000000" in ln]
    assert len(zeros) == 1 and len(re.findall(r"mov\.b32 %r\d+, 0f00000000;", zeros[0])) == 128, zeros
    filecheck(k.ptx, """
CHECK: wgmma.mma_async
CHECK: mov.b32 %r{{[0-9]+}}, %r{{[0-9]+}};
CHECK: div.s32
CHECK: mov.b32 %r{{[0-9]+}}, %r{{[0-9]+}};
CHECK: wgmma.wait_group.sync.aligned 0;
CHECK-NOT: {{div|rem}}.s32
CHECK: stmatrix
CHECK-NOT: {{div|rem}}.s32
CHECK: cp.async.bulk.tensor.2d.global.shared::cta
""")


@needs_ptxas
def test_first_wgmma_does_not_read_the_zero_started_accumulator() -> None:
    """The first batch's scale-d comes from the loop (iv != lb), the later batches accumulate (1);
    nothing zeroes the accumulator's 128 registers before the loop; the final wait zeroes them in
    the same asm statement when the loop ran no iteration."""
    k = _compile(3)
    scale_d = re.findall(r"setp\.ne\.b32 p, (%r\d+|\d+), 0; wgmma\.mma_async", k.ptx)
    assert len(scale_d) >= 4 and len(set(scale_d)) == 2, scale_d
    assert len(re.findall(r"mov\.b32\s+%r\d+, 0f00000000;", k.ptx)) < 8
    filecheck(k.ptx, """
CHECK: wgmma.mma_async
CHECK: { .reg .pred v; setp.ne.b32 v, %r{{[0-9]+}}, 0; wgmma.wait_group.sync.aligned 0; selp.f32 %r{{[0-9]+}}, %r{{[0-9]+}}, 0f00000000, v;
""")
