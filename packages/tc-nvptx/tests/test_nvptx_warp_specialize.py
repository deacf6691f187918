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


def _persistent(stages: int = 3) -> CompiledKernel:
    return compile((KERNELS / "matmul_tutorial.tc").read_text(),
                   defines={"TYPE": "half", "MB": 128, "NB": 256, "KB": 64},
                   options=CompileOptions(arch="sm_90", num_warps=8, num_stages=stages, specialization=ALIGNED,
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
