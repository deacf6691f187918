"""The spec's vector add: compiles for every type/block/warp combination, ptxas accepts it, and
float/half with enough elements per thread use 128-bit global accesses."""

from __future__ import annotations

import re

import pytest
from tc_nvptx import CompiledKernel, assemble, compile
from tc_opt import CompileOptions

ADD = """
__global__ void add(TYPE* z, TYPE* x, TYPE* y, int N) {
  int pid = get_program_id(0);
  int off[BLOCK] = pid * BLOCK + 0 ... BLOCK;
  bool check[BLOCK] = off < N;
  *?(check)(z + off) = *?(check)(x + off) + *?(check)(y + off);
}
"""


def _add(type_: str, block: int, warps: int = 4, arch: str = "sm_90", **kw: object) -> CompiledKernel:
    return compile(ADD, defines={"TYPE": type_, "BLOCK": block}, options=CompileOptions(arch=arch, num_warps=warps, **kw))  # type: ignore[arg-type]


@pytest.mark.parametrize("type_", ["float", "half"])
@pytest.mark.parametrize("block", [128, 256, 512, 1024, 2048, 4096])
@pytest.mark.parametrize("warps", [1, 2, 4, 8])
def test_vector_add_compiles_and_assembles(type_: str, block: int, warps: int) -> None:
    k = _add(type_, block, warps)
    assert k.name == "add"
    assert k.signature == [f"ptr<{'f32' if type_ == 'float' else 'f16'}>"] * 3 + ["i32"]
    assert k.arg_names == ["z", "x", "y", "N"]
    assert k.cubin is not None and k.cubin[:4] == b"\x7fELF"
    if block // (32 * warps) <= 32:  # 128 floats per thread for x and y exceed the register file
        assert k.spills == 0
    assert f".maxntid {32 * warps}" in k.ptx
    per_thread_bits = block // (32 * warps) * (32 if type_ == "float" else 16)
    if per_thread_bits >= 128:
        assert "ld.global.v4" in k.ptx and "st.global.v4" in k.ptx


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("type_", ["float", "half"])
def test_ptxas_accepts_both_archs(arch: str, type_: str) -> None:
    k = _add(type_, 1024, 4, arch)
    assert f".target {arch}" in k.ptx
    cubin, info = assemble(k.ptx, arch)
    assert cubin and info.registers > 0


@pytest.mark.parametrize("block", [512, 1024, 4096])
def test_float_steady_state_is_all_128_bit(block: int) -> None:
    k = _add("float", block)
    n_vec = block // 128 // 4  # vectors per thread per tile (4 warps)
    assert k.ptx.count("ld.global.v4.b32") >= 2 * n_vec
    assert k.ptx.count("st.global.v4.b32") >= n_vec


def test_partial_vectors_fall_back_to_predicated_scalars() -> None:
    # N is not known to be a multiple of 4: each vector tests "all lanes in bounds" and only a
    # partially masked vector takes per-element predicated accesses.
    ptx = _add("float", 1024).ptx
    assert re.search(r"@%p\d+ ld\.global\.b32", ptx)
    assert re.search(r"@%p\d+ st\.global\.b32", ptx)


def test_specialized_n_uses_one_predicated_vector_access() -> None:
    k = _add("float", 1024, specialization=("divisible_by_16",) * 4)
    assert re.search(r"@%p\d+ ld\.global\.v4\.b32", k.ptx)
    assert re.search(r"@%p\d+ st\.global\.v4\.b32", k.ptx)
    assert not re.search(r"ld\.global\.b32", k.ptx)


def test_unaligned_pointers_do_not_vectorize() -> None:
    k = _add("float", 1024, specialization=(None, None, None, None))
    assert "ld.global.v4" not in k.ptx
    assert k.cubin is not None


def test_metadata_round_trip() -> None:
    k = _add("half", 1024)
    meta = k.to_json()
    import json

    again = CompiledKernel.from_json(json.loads(json.dumps(meta)), ptx=k.ptx, cubin=k.cubin)
    assert again.to_json() == meta
    assert all(isinstance(v, (str, int, list)) for v in meta.values())
    assert set(k.asm) >= {"ir", "ir-gpu", "llvm", "ptx"}
    assert "#blocked<spt=[8]" in k.asm["ir-gpu"]
    assert "define ptx_kernel void" in k.asm["llvm"]
