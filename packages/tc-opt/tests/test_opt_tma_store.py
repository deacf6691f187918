"""TMA bulk stores (CompileOptions.tma_store, tc_opt.tma_store): which stores qualify, the tensor
map of their destination, and the shared panel buffers the epilogue writes through."""

from __future__ import annotations

from pathlib import Path

import pytest
from tc_ir import ops as O
from tc_ir.layouts import Mma
from tc_ir.types import I32, TileType
from tc_ir.verifier import verify
from tc_opt import CompileOptions
from tc_opt.pipeline import gpu_pipeline
from tc_opt.shared_alloc import scratch_bytes
from tc_opt.tma import UNBOUNDED
from tc_opt.tma_store import panel_buffers, reads_pending

KERNELS = Path(__file__).resolve().parents[2] / "tc-lang" / "tests" / "kernels"
TUTORIAL = (KERNELS / "matmul_tutorial.tc").read_text()
ALIGNED = ("16", "16", "16", None, None, None, "16", "16", "16")
TILE = {"TYPE": "half", "MB": 128, "NB": 256, "KB": 64}

#: Stores a tile of Y, reads it back, stores it to X: only the last store is the kernel's last
#: access to global memory.
STORE_THEN_LOAD = """
__global__ void k(half* X, half* Y, int ld) {
    int r[64] = 0 ... 64;
    int c[64] = 0 ... 64;
    half* py[64, 64] = Y + (r[:, newaxis] * ld + c[newaxis, :]);
    half* px[64, 64] = X + (r[:, newaxis] * ld + c[newaxis, :]);
    *py = *px;
    half v[64, 64] = *py;
    *px = v + v;
}
"""


def _gpu_ir(src: str, spec: object = ALIGNED, *, tma_store: bool = True, tma: bool = True, arch: str = "sm_90",
            warps: int = 8, stages: int = 4, defines: dict[str, object] | None = None) -> O.Module:
    from tc_nvptx.compiler import frontend_module

    m = frontend_module(src, TILE if defines is None else defines, None, "<test>")
    opts = CompileOptions(arch=arch, num_warps=warps, num_stages=stages, specialization=spec,  # type: ignore[arg-type]
                          tma=tma, tma_store=tma_store)
    gpu_pipeline(opts).run(m)
    return m


def _ops(m: O.Module, cls: type[O.Operation]) -> list[O.Operation]:
    return [op for op in m.walk() if isinstance(op, cls)]


def test_tutorial_epilogue_becomes_a_tma_store() -> None:
    m = _gpu_ir(TUTORIAL)
    (st,) = _ops(m, O.TmaStoreOp)
    assert isinstance(st, O.TmaStoreOp)
    assert not _ops(m, O.StoreOp)
    # C (argument 2), contiguous along N: extents (N, M) from the mask, row stride stride_c_0
    assert (st.base, st.fast) == (2, 1)
    assert tuple(st.extents) == (4, 0, 3, 0)
    assert tuple(st.stride) == (8, 1)
    assert tuple(st.box) == (64, 128) and st.swizzle == 128
    assert st.descriptor == 2  # after the maps of the two operand loads
    assert {int(op.descriptor) for op in _ops(m, O.TmaLoadOp)} == {0, 1}  # type: ignore[attr-defined]
    # the accumulator goes to shared memory in its own layout: no conversion through shared memory
    value = st.operands[0].type
    assert isinstance(value, TileType) and isinstance(value.layout, Mma)
    assert not [op for op in _ops(m, O.ConvertLayoutOp) if op.operands[0].type.shape == (128, 256)]  # type: ignore[union-attr]
    # four 64-column panels written through two buffers of 128 rows x 128 bytes
    assert panel_buffers(st) == 2
    assert scratch_bytes(st) == 2 * 128 * 128
    assert all(v.type == I32 for v in st.operands[1:])


@pytest.mark.parametrize("nb, swizzle", [(176, 32), (160, 64), (96, 64), (192, 128)])
def test_tiles_not_a_whole_number_of_128_byte_panels_store_in_narrower_panels(nb: int, swizzle: int) -> None:
    # the widest swizzle that divides the rows: 176 halves in 11 panels of 16 columns (32 bytes),
    # 160 and 96 in panels of 32 (64 bytes); each panel buffer is 128 rows x the swizzle's bytes
    m = _gpu_ir(TUTORIAL, defines={"TYPE": "half", "MB": 128, "NB": nb, "KB": 64})
    (st,) = _ops(m, O.TmaStoreOp)
    assert isinstance(st, O.TmaStoreOp) and not _ops(m, O.StoreOp)
    assert st.swizzle == swizzle and tuple(st.box) == (swizzle // 2, 128)
    assert scratch_bytes(st) == panel_buffers(st) * 128 * swizzle


def test_tma_store_lets_a_persistent_four_stage_tile_fit() -> None:
    from tc_nvptx.compiler import frontend_module

    def shared(tma_store: bool) -> int:
        m = frontend_module(TUTORIAL, TILE, None, "<test>")
        opts = CompileOptions(arch="sm_90", num_warps=8, num_stages=4, specialization=ALIGNED,  # type: ignore[arg-type]
                              warp_specialize=True, persistent=True, tma_store=tma_store, verify=True)
        from tc_opt.pass_manager import PassManager

        # (without the exchange in rounds, which makes the store without TMA fit too:
        # test_opt_exchange_rounds)
        passes = [p for p in gpu_pipeline(opts).passes if p.name not in ("check-resources", "exchange-in-rounds")]
        PassManager(passes).run(m)
        return int(m.attributes["shared_bytes"])

    assert shared(True) <= 232448 < shared(False)


@pytest.mark.parametrize("stages,buffers", [(3, 4), (4, 2)])
def test_persistent_store_writes_whole_tiles_where_they_fit(stages: int, buffers: int) -> None:
    """In a persistent kernel's loop over the programs the store gets a buffer per panel (its
    copies then read while the next tile computes) when the whole tile fits next to the loop's
    stages: 3 x 48 KiB + 64 KiB does, 4 x 48 KiB + 64 KiB does not (two buffers in turns)."""
    from tc_nvptx.compiler import frontend_module

    m = frontend_module(TUTORIAL, TILE, None, "<test>")
    opts = CompileOptions(arch="sm_90", num_warps=8, num_stages=stages, specialization=ALIGNED,  # type: ignore[arg-type]
                          warp_specialize=True, persistent=True, tma_store=True, verify=True)
    gpu_pipeline(opts).run(m)
    (st,) = _ops(m, O.TmaStoreOp)
    assert isinstance(st, O.TmaStoreOp)
    assert panel_buffers(st) == buffers and st.buffers == (buffers if buffers == 4 else 0)
    assert scratch_bytes(st) == buffers * 128 * 128
    assert int(m.attributes["shared_bytes"]) <= 232448
    # outside a loop the store keeps two buffers in turns
    (plain,) = _ops(_gpu_ir(TUTORIAL, stages=3), O.TmaStoreOp)
    assert isinstance(plain, O.TmaStoreOp)
    assert panel_buffers(plain) == 2 and plain.buffers == 0


def _pending_by_simulation(panels: int, buffers: int, in_loop: bool) -> list[int | None]:
    """For each panel of the second of two iterations (the first one alone outside a loop): how
    many copies were issued after the one that last read the panel's buffer (buffer = panel %
    buffers, restarting at 0 every iteration), None where none read it."""
    issued: list[int] = []  # the buffer each issued copy read, in issue order
    out: list[int | None] = []
    for _ in range(2 if in_loop else 1):
        out = []
        for j in range(panels):
            b = j % buffers
            readers = [i for i, x in enumerate(issued) if x == b]
            out.append(len(issued) - 1 - readers[-1] if readers else None)
            issued.append(b)
    return out


@pytest.mark.parametrize("in_loop", [False, True])
def test_bulk_store_waits_for_exactly_the_last_reader_of_each_buffer(in_loop: bool) -> None:
    """Each panel may leave pending every copy issued after the one that last read its buffer,
    and no more; in a loop the last reader of a panel's buffer may be a copy of the previous
    iteration (3 panels through 2 buffers: panel 0's buffer was read by the previous panel 2,
    the last copy issued, so nothing may stay pending)."""
    for panels in range(2, 10):
        for buffers in range(2, panels):
            want = _pending_by_simulation(panels, buffers, in_loop)
            assert [reads_pending(j, panels, buffers, in_loop) for j in range(panels)] == want, (panels, buffers)
    assert reads_pending(0, 3, 2, True) == 0


ROWS_IN_A_LOOP = """
__global__ void rows(half* C, int M, int N, int ldc) {
    for (int t = 0; t < M; t += 64) {
        int rm[64] = t + (0 ... 64);
        int rn[64] = 0 ... 64;
        float v[64, 64] = rm[:, newaxis] * 1.0 + rn[newaxis, :];
        float s[64] = v[+, :];
        *?(rm[:, newaxis] < M && rn[newaxis, :] < N)(C + rm[:, newaxis] * ldc + rn[newaxis, :]) = v + s[newaxis, :];
    }
}
"""


def test_a_bulk_store_in_a_loop_keeps_its_buffers_to_the_end() -> None:
    """A bulk store in a loop does not wait for its copies at the end of the iteration (they may
    read its buffers until it writes them again, and until the kernel's exit), so no other
    shared memory of the loop or after it may lie on those buffers: here the reduction's scratch,
    which would otherwise share offset 0 with them."""
    from tc_opt.shared_alloc import allocate, loops_of

    m = _gpu_ir(ROWS_IN_A_LOOP, ("16", None, None, "16"), warps=4, stages=3, defines={})
    f = m.functions[0]
    (st,) = _ops(m, O.TmaStoreOp)
    (red,) = _ops(m, O.ReduceOp)
    assert loops_of(st) and loops_of(red)
    offsets = allocate(f).offsets
    spans = {op: (offsets[op], offsets[op] + scratch_bytes(op)) for op in (st, red)}
    assert spans[st][1] <= spans[red][0] or spans[red][1] <= spans[st][0], spans
    assert int(m.attributes["shared_bytes"]) >= scratch_bytes(st) + scratch_bytes(red)


def test_masked_store_keeps_its_bounds_as_extents() -> None:
    src = TUTORIAL.replace("*? (rm[:, newaxis] < M && rn [newaxis, :] < N) pc = acc;", "*? (rn[newaxis, :] < N) pc = acc;")
    m = _gpu_ir(src)
    (st,) = _ops(m, O.TmaStoreOp)
    assert tuple(st.extents) == (4, 0, -1, UNBOUNDED)  # type: ignore[attr-defined]


@pytest.mark.parametrize("what,kwargs", [
    ("option off", {"tma_store": False}),
    ("TMA off", {"tma": False}),
    ("Ampere", {"arch": "sm_80", "stages": 3}),
    ("C not known 16-byte aligned", {"spec": ("16", "16", None, None, None, None, "16", "16", "16")}),
    ("ldc not a multiple of 16 bytes", {"spec": ("16", "16", "16", None, None, None, "16", "16", None)}),
])
def test_stores_that_keep_plain_stores(what: str, kwargs: dict[str, object]) -> None:
    m = _gpu_ir(TUTORIAL, **kwargs)  # type: ignore[arg-type]
    assert not _ops(m, O.TmaStoreOp), what
    assert len(_ops(m, O.StoreOp)) == 1


def test_only_the_last_access_to_global_memory_becomes_a_bulk_store() -> None:
    m = _gpu_ir(STORE_THEN_LOAD, ("16", "16", "16"), defines={}, warps=4)
    (st,) = _ops(m, O.TmaStoreOp)
    (plain,) = _ops(m, O.StoreOp)
    assert st.base == 0  # type: ignore[attr-defined]  # X: after it nothing reads memory
    assert plain.operands[0].type.shape == (64, 64)  # type: ignore[union-attr]
    # one 64-column panel of a blocked tile: one buffer for the whole tile
    assert panel_buffers(st) == 1  # type: ignore[arg-type]
    assert scratch_bytes(st) == 64 * 128


def test_verifier_checks_the_coordinates() -> None:
    m = _gpu_ir(TUTORIAL)
    (st,) = _ops(m, O.TmaStoreOp)
    st.operands = st.operands[:2]  # one coordinate for a rank-2 map
    with pytest.raises(Exception, match="tma_store|operand"):
        verify(m)
