"""Stream-K (CompileOptions.stream_k, tc_opt.stream_k) without a GPU: which kernels qualify, the
workspace parameters after the grid's, the exchange of partial sums (a spin on the flag, the
partial read back into the accumulator, the pass-on store and flag) and the metadata the runtime
reads. The products themselves: tc-torch's test_torch_stream_k.py on a GPU."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tc_nvptx.compiler import CompiledKernel, compile
from tc_opt import CompileOptions

KERNELS = Path(__file__).resolve().parents[2] / "tc-lang" / "tests" / "kernels"
SPEC = ("16", "16", "16", None, None, None, "16", "16", "16")

#: A store before the reduction loop: a program shared by stream-K would run it once per segment.
STORE_FIRST = (KERNELS / "matmul_tutorial.tc").read_text().replace(
    "// reduction loop", "*C = (TYPE)0;\n// reduction loop")

#: A second value carried by the loop and read after it: a program cut in segments would read
#: its segment's count, not the whole loop's.
COUNTED = (KERNELS / "matmul_tutorial.tc").read_text().replace(
    "float acc[MB, NB] = 0;", "float acc[MB, NB] = 0;\nint steps = 0;").replace(
    "pb += KB * stride_b_0;", "pb += KB * stride_b_0;\nsteps += 1;").replace(
    "pc = acc;", "pc = acc * (float)steps;")
#: Programs whose loops run different numbers of iterations (the bound reads the program id).
UNEVEN = (KERNELS / "matmul_tutorial.tc").read_text().replace(
    "for (int k = K; k > 0; k -= KB)", "for (int k = K - pid % 2; k > 0; k -= KB)")


def _compile(stream_k: bool, source: str | None = None) -> CompiledKernel:
    return compile(source or (KERNELS / "matmul_tutorial.tc").read_text(),
                   defines={"TYPE": "half", "MB": 128, "NB": 256, "KB": 64},
                   options=CompileOptions(arch="sm_90a", num_warps=8, num_stages=3, specialization=SPEC,
                                          persistent=True, stream_k=stream_k),
                   assemble_cubin=False)


def test_stream_k_kernel_takes_its_workspace_after_the_grid() -> None:
    k = _compile(True)
    assert k.persistent and k.stream_k == 128 * 256 * 4  # one float accumulator tile per partial sum
    assert k.to_json()["stream_k"] == k.stream_k and CompiledKernel.from_json(k.to_json()).stream_k == k.stream_k
    # the nine arguments, the grid's extents (3 x u32), the workspace (2 x u64), the tensor maps
    params = re.findall(r"\.param (\.u32|\.u64|\.align 64 \.b8)", k.ptx.split(")", 1)[0])
    assert params == [".u64"] * 3 + [".u32"] * 9 + [".u64"] * 2 + [".align 64 .b8"] * 2, params
    plain = re.findall(r"\.param (\.u32|\.u64|\.align 64 \.b8)", _compile(False).ptx.split(")", 1)[0])
    assert plain == params[:12] + params[14:]


def test_stream_k_exchanges_partial_sums() -> None:
    k = _compile(True)
    ir = k.asm["ir-gpu"]
    assert 'tc.workspace {part = "partials"}' in ir and 'tc.workspace {part = "flags"}' in ir
    assert "tc.while" in ir  # the spin on the flag
    # one compare-and-swap (the wait, acquire) and one exchange (the pass-on, released by fences)
    assert len(re.findall(r"atom\.acq_rel\.gpu\.global\.cas\.b32", k.ptx)) == 1 and ".sys" not in k.ptx
    assert len(re.findall(r"atom\.global\.exch\.b32", k.ptx)) == 1
    assert "tc.partial_store" in ir and "tc.partial_add" in ir
    # 128 floats a thread in registers order: 32 vectors of 4, chunk c of thread t at (c * 256 +
    # t) * 16 bytes, so one base register and coalesced stores 4096 bytes apart
    stores = re.findall(r"st\.global\.v4\.b32 \t\[(%rd\d+)(?:\+(\d+))?\]", k.ptx)
    by_base: dict[str, list[int]] = {}
    for base, off in stores:
        by_base.setdefault(base, []).append(int(off or 0))
    assert sorted([4096 * c for c in range(32)]) in [sorted(v) for v in by_base.values()], by_base
    # read back: 8 statements of 4 vector loads each, then their 16 adds
    loads = re.findall(r"\{ \.reg \.f32 [^;]*;((?: ld\.global\.v4\.f32 \{[^}]*\}, \[ %rd\d+ \+ 0 \];)+)"
                       r"((?: add\.rn\.f32 %r\d+, %r\d+, %tc_t\d+;)+) \}", k.ptx)
    assert [(ld.count("ld.global"), add.count("add.rn")) for ld, add in loads] == [(4, 16)] * 8


def test_plain_persistent_kernel_has_no_workspace() -> None:
    k = _compile(False)
    assert k.persistent and k.stream_k == 0 and "stream_k" not in k.to_json()
    assert "atom." not in k.ptx and "tc.workspace" not in k.asm["ir-gpu"]


def test_stream_k_option_is_checked() -> None:
    with pytest.raises(TypeError, match="stream_k"):
        CompileOptions(stream_k="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize("source", [STORE_FIRST, COUNTED, UNEVEN], ids=["store-first", "counted", "uneven"])
def test_kernels_that_do_not_qualify_stay_plain_persistent(source: str) -> None:
    assert source != (KERNELS / "matmul_tutorial.tc").read_text()  # (the replacement took place)
    k = _compile(True, source)
    assert k.persistent and k.stream_k == 0 and "tc.workspace" not in k.asm["ir-gpu"]

