"""tools/ptx_edits.py: each edit removes its part of a kernel and keeps the rest, and the refill
edits keep the refill's barrier byte count equal to what is still copied."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import ptx_edits  # noqa: E402  (tools/ is not a package)

#: The shape of a pipelined kernel: a prologue copy, a loop that loads register fragments, a
#: refill (one copy of A, two panels of B) and an epilogue through shared memory.
KERNEL = """\
.visible .entry matmul(
)
{
\tmbarrier.arrive.expect_tx.shared::cta.b64 _, [%r58], 300;
\tcp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%r32], [%rd2, {%r1, %r2, %r3}], [%r58];
$L__BB0_10:
\tld.shared.v2.b32 \t{%r95, %r96}, [%r124+131072];
\twgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 {%r1}, {%r95, %r96}, %rd10, p, 1, 1;
\t@%p16 bra \t$L__BB0_11;
$L__BB0_11:
\tmbarrier.arrive.expect_tx.shared::cta.b64 _, [%r129], 300;
\tcp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%r130], [%rd2, {%r338, %r19, %r20}], [%r129];
\tcp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%r131], [%rd1, {%r17, %r338, %r21}], [%r129];
\tcp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%r132], [%rd1, {%r133, %r338, %r21}], [%r129];
\tbra.uni \t$L__BB0_12;
$L__BB0_12:
\tst.shared.v2.b32 \t[%r13], {%r339, %r340};
\tld.shared.v4.b32 \t{%r146, %r147, %r148, %r149}, [%r14];
\t@%p21 st.global.v4.b32 [ %rd15 + 0 ], {%r146, %r147, %r148, %r149};
\tret;
}
"""


def _edit(name: str) -> tuple[list[str], int]:
    return ptx_edits.EDITS[name](KERNEL.splitlines(), 200, 100)


def _removed(name: str) -> list[str]:
    lines, _ = _edit(name)
    return [line.strip() for line in KERNEL.splitlines() if line not in lines]


def test_the_store_edit_keeps_the_exchange_that_keeps_the_products_alive() -> None:
    assert [line.split()[0] for line in _removed("no-global-stores")] == ["ld.shared.v4.b32", "@%p21"]
    # without an exchange through shared memory nothing would read the accumulator: not edited
    direct = [line for line in KERNEL.splitlines() if "st.shared" not in line]
    assert ptx_edits.EDITS["no-global-stores"](direct, 200, 100) == (direct, 0)


def test_the_fragment_edit_removes_only_the_register_operand_loads() -> None:
    assert _removed("no-fragment-loads") == ["ld.shared.v2.b32 \t{%r95, %r96}, [%r124+131072];"]


def test_the_refill_edits_drop_one_operand_from_the_last_refill_and_its_bytes() -> None:
    lines, removed = _edit("no-a-refill")
    assert removed == 1
    assert "\tmbarrier.arrive.expect_tx.shared::cta.b64 _, [%r129], 100;" in lines  # 300 - A's 200
    assert not any("[%r130], [%rd2" in line for line in lines)
    assert any("[%r32], [%rd2" in line for line in lines)  # the prologue's copy stays
    lines, removed = _edit("no-b-refill")
    assert removed == 2
    assert "\tmbarrier.arrive.expect_tx.shared::cta.b64 _, [%r129], 200;" in lines  # 300 - B's 100
    assert sum("[%rd1," in line for line in lines) == 0 and sum("[%rd2," in line for line in lines) == 2


def test_the_transpose_edit_turns_off_the_transposed_reads_of_16_bit_products_only() -> None:
    half = ("\t{ .reg .pred p; setp.ne.b32 p, %r60, 0; wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 "
            "{%r222, %r223}, %rd9, %rd10, p, 1, 1, 0, 1; }")
    plain = half.replace("0, 1; }", "0, 0; }")
    tf32 = KERNEL.splitlines()
    lines, changed = ptx_edits.EDITS["untransposed"]([*tf32, half, plain], 200, 100)
    assert changed == 1 and lines == [*tf32, plain, plain]
    assert ptx_edits.EDITS["untransposed"](tf32, 200, 100) == (tf32, 0)  # (tf32 takes no flags)


def test_the_tool_writes_one_folder_per_edit_that_applies(tmp_path: Path) -> None:
    dumped = tmp_path / "matmul-0123456789abcdef.ptx"
    dumped.write_text("\n".join(line for line in KERNEL.splitlines() if "ld.shared.v2" not in line) + "\n")
    assert ptx_edits.main([str(dumped), str(tmp_path / "out")]) == 0
    written = sorted(p.parent.name for p in (tmp_path / "out").glob("*/matmul-0123456789abcdef.ptx"))
    assert written == sorted(set(ptx_edits.EDITS) - {"no-fragment-loads", "untransposed"})  # (nothing to edit)
    assert ptx_edits.main([str(tmp_path / "missing.ptx"), str(tmp_path / "out")]) == 2
    assert (tmp_path / "out" / "same" / dumped.name).read_text() == dumped.read_text()
