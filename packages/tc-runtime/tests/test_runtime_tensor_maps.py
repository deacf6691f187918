"""Tensor maps for TMA kernels against a fake driver: the geometry read from the arguments, the
cuTensorMapEncodeTiled call, the cache, and the packer that passes the maps after the user's
arguments (no GPU: the fake records the calls and returns recognisable bytes)."""

from __future__ import annotations

import ctypes
import struct
from typing import Any

import pytest

from tc_runtime.errors import TcLaunchError
from tc_runtime.signature import Signature
from tc_runtime.tensor_maps import MAP_BYTES, PLACED_PER_MAP, TensorMapCache, TmaArgPacker, map_geometry, packer_for

KINDS = ["ptr<f16>", "ptr<f16>", "ptr<f16>", "i32", "i32", "i32", "i32", "i32", "i32"]
NAMES = ["A", "B", "C", "M", "N", "K", "lda", "ldb", "ldc"]
#: A's map in the masked matmul: K along the rows (arg 5), M rows (arg 3), stride lda (arg 6)
MAP_A = {"base": 0, "element": "f16", "extents": [5, 0, 3, 0], "stride": [6, 1], "box": [64, 128], "swizzle": 128}
MAP_B = {"base": 1, "element": "bf16", "extents": [-1, 2**31 - 1, -1, 2**31 - 1], "stride": [7, 2], "box": [32, 64],
         "swizzle": 64}


class FakeMap:
    def __init__(self, words: list[int]) -> None:
        self.opaque = words


class FakeCu:
    def __init__(self, fail: bool = False, context: bool = True) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.fail = fail
        self.context = context  # (False: a thread without a current context)

    def cuTensorMapEncodeTiled(self, *args: Any) -> tuple[int, Any]:  # noqa: N802 - the driver's name
        self.calls.append(args)
        if self.fail:
            return 1, None
        if not self.context:
            return 201, None  # CUDA_ERROR_INVALID_CONTEXT
        address = args[2]
        return 0, FakeMap([address & 0xFFFFFFFF, len(self.calls)] + [0] * 14)


def _args(a: int = 0x10000, b: int = 0x20000, m: int = 300, k: int = 200, lda: int = 256) -> tuple[int, ...]:
    return (a, b, 0x30000, m, 520, k, lda, 512, 520)


def test_geometry_from_arguments() -> None:
    base, extents, strides = map_geometry(MAP_A, _args())
    assert (base, extents, strides) == (0x10000, (200, 300), (512,))  # 256 halves per row = 512 bytes
    base, extents, strides = map_geometry(MAP_B, _args())
    assert (base, extents, strides) == (0x20000, (2**31 - 1, 2**31 - 1), (512 * 2 * 2,))


@pytest.mark.parametrize("args", [_args(a=0x10008), _args(lda=100)])
def test_geometry_refuses_what_tma_cannot_address(args: tuple[int, ...]) -> None:
    with pytest.raises(TcLaunchError, match="16-byte aligned"):
        map_geometry(MAP_A, args)


def test_empty_extent_is_clamped_to_one() -> None:
    assert map_geometry(MAP_A, _args(k=0))[1] == (1, 300)


def test_encode_call_and_cache() -> None:
    cu = FakeCu()
    cache = TensorMapCache(cu, capacity=2)
    first = cache.get(MAP_A, _args())
    assert len(first) == MAP_BYTES and struct.unpack_from("<Q", first)[0] == 0x10000
    dtype, rank, address, dims, strides, box, elem_strides, interleave, swizzle, l2, oob = cu.calls[0]
    assert (dtype, rank, address, dims, strides, box, elem_strides) == (6, 2, 0x10000, [200, 300], [512], [64, 128], [1, 1])
    assert (interleave, swizzle, oob) == (0, 3, 0)  # no interleave, 128-byte swizzle, zeros outside
    assert l2 == 2  # CU_TENSOR_MAP_L2_PROMOTION_L2_128B (256 bytes slowed rows split across sectors)
    assert cache.get(MAP_A, _args()) is first and cache.encoded == 1  # same tensors: no driver call
    cache.get(MAP_A, _args(m=301))
    cache.get(MAP_A, _args(m=302))
    assert cache.encoded == 3
    cache.get(MAP_A, _args())  # dropped (capacity 2): encoded again
    assert cache.encoded == 4
    assert cu.calls[-1][0] == 6 and TensorMapCache(cu).get(MAP_B, _args()) and cu.calls[-1][0] == 9


def test_encode_failure_is_a_launch_error() -> None:
    with pytest.raises(TcLaunchError, match="cuTensorMapEncodeTiled failed"):
        TensorMapCache(FakeCu(fail=True)).get(MAP_A, _args())


def test_packer_appends_maps_after_the_arguments() -> None:
    sig = Signature("mm", KINDS, NAMES)
    cu = FakeCu()
    p = packer_for(sig, [MAP_A, MAP_B], cu)
    assert isinstance(p, TmaArgPacker)
    assert isinstance(packer_for(sig, [], cu), type(sig.packer())) and not isinstance(packer_for(sig, [], cu), TmaArgPacker)
    address = p.pack(_args())
    pointers = [int(x or 0) for x in (ctypes.c_void_p * 11).from_address(address)]
    # the user's arguments as ArgPacker lays them out
    assert ctypes.c_uint64.from_address(pointers[0]).value == 0x10000
    assert ctypes.c_int32.from_address(pointers[5]).value == 200
    # then each map, 64-byte aligned, holding the encoded bytes
    for k in (0, 1):
        assert pointers[9 + k] % 64 == 0
        assert ctypes.string_at(pointers[9 + k], MAP_BYTES) == p.map_bytes(k)
    assert struct.unpack_from("<Q", p.map_bytes(1))[0] == 0x20000
    before = p.map_bytes(0)
    p.pack(_args())
    assert len(cu.calls) == 2 and p.map_bytes(0) == before  # cached
    p.pack(_args(a=0x40000))
    assert struct.unpack_from("<Q", p.map_bytes(0))[0] == 0x40000 and len(cu.calls) == 3


def test_packer_accepts_tensor_like_arguments() -> None:
    class Tensor:
        def data_ptr(self) -> int:
            return 0x50000

    p = packer_for(Signature("mm", KINDS, NAMES), [MAP_A], FakeCu())
    p.pack((Tensor(), 0x20000, 0x30000, 300, 520, 200, 256, 512, 520))
    assert isinstance(p, TmaArgPacker) and struct.unpack_from("<Q", p.map_bytes(0))[0] == 0x50000


def test_kernel_binary_keeps_the_maps(tmp_path: Any) -> None:
    from tc_runtime import binary

    kb = binary.KernelBinary(name="mm", arch="sm_90a", ptx="// ptx", cubin=None, signature=tuple(KINDS),
                             arg_names=tuple(NAMES), num_warps=8, tensor_maps=(MAP_A, MAP_B))
    assert kb.metadata()["tensor_maps"] == [MAP_A, MAP_B]
    again = binary.read(binary.save(kb, tmp_path / "mm.ptx"))
    assert again.tensor_maps == (MAP_A, MAP_B)
    plain = binary.KernelBinary(name="mm", arch="sm_90a", ptx="// ptx", cubin=None, signature=tuple(KINDS),
                                arg_names=tuple(NAMES), num_warps=8)
    assert "tensor_maps" not in plain.metadata() and plain.tensor_maps == ()


#: A's map in tc_torch's batched matmul: a third dimension of stride stride_az (arg 9), box 1.
MAP_BATCHED = {"base": 0, "element": "f16", "extents": [5, 0, 3, 0, -1, 2**31 - 1], "stride": [6, 1, 9, 1],
               "box": [64, 128, 1], "swizzle": 128}


def test_batched_map_has_rank_three() -> None:
    args = (*_args(), 300 * 256, 0, 300 * 520)
    assert map_geometry(MAP_BATCHED, args) == (0x10000, (200, 300, 2**31 - 1), (512, 300 * 256 * 2))
    cu = FakeCu()
    TensorMapCache(cu).get(MAP_BATCHED, args)
    _, rank, _, dims, strides, box, elem_strides, *_ = cu.calls[0]
    assert (rank, dims, strides, box, elem_strides) == (3, [200, 300, 2**31 - 1], [512, 153600], [64, 128, 1],
                                                        [1, 1, 1])


def test_broadcast_batch_is_one_batch_of_a_positive_stride() -> None:
    """Batch stride 0 (one matrix for every batch): the kernel reads batch coordinate 0; the map,
    which needs positive strides, has one batch."""
    base, extents, strides = map_geometry(MAP_BATCHED, (*_args(), 0, 0, 0))
    assert extents == (200, 300, 1) and strides == (512, 16)
    with pytest.raises(TcLaunchError, match="16-byte aligned"):  # a zero row stride is still refused
        map_geometry(MAP_BATCHED, (*_args(lda=0), 0, 0, 0))


def _recording_packer(maps: list[dict[str, Any]], cu: FakeCu, monkeypatch: pytest.MonkeyPatch
                      ) -> tuple[TmaArgPacker, list[int]]:
    """A packer of `maps` whose cache records the base argument of each map it derives."""
    p = packer_for(Signature("mm", KINDS, NAMES), maps, cu)
    assert isinstance(p, TmaArgPacker)
    looked_up: list[int] = []
    real_get = p.cache.get

    def get(spec: Any, values: Any) -> bytes:
        looked_up.append(int(spec["base"]))
        return real_get(spec, values)

    monkeypatch.setattr(p.cache, "get", get)
    return p, looked_up


def test_packer_skips_the_maps_when_their_arguments_repeat(monkeypatch: pytest.MonkeyPatch) -> None:
    # a launch with the same pointers, extents and strides leaves the maps in place (no look-up);
    # a change of any of them (here M, A's row extent) brings the maps made of it up to date
    p, looked_up = _recording_packer([MAP_A, MAP_B], FakeCu(), monkeypatch)
    p.pack(_args())
    assert looked_up == [0, 1]
    p.pack(_args())
    p.pack(tuple(_args()))
    assert looked_up == [0, 1]
    args: list[object] = list(_args())
    args[3] = 301  # M: A's map covers 301 rows now
    address = p.pack(tuple(args))
    assert looked_up == [0, 1, 0]  # (B's map is not made of M)
    pointers = [int(x or 0) for x in (ctypes.c_void_p * 11).from_address(address)]
    assert ctypes.c_int32.from_address(pointers[3]).value == 301
    assert p.map_bytes(0) == TensorMapCache.get(p.cache, MAP_A, tuple(args))  # (the cache's bytes)
    # arguments struct cannot take as they are (a numpy-style integer pointer) are normalized
    class Index:
        def __init__(self, value: int) -> None:
            self.value = value

        def __index__(self) -> int:
            return self.value

    args[0] = Index(0x60000)
    p.pack(tuple(args))
    assert struct.unpack_from("<Q", p.map_bytes(0))[0] == 0x60000
    with pytest.raises(Exception, match="alignment|aligned|16"):
        p.pack((0x60001, *args[1:]))  # (a misaligned base is refused, not packed stale)


def test_packer_points_at_the_maps_of_arguments_seen_before(monkeypatch: pytest.MonkeyPatch) -> None:
    """An output tensor new per call (tc_torch.matmul's C, whose address alternates between two in
    a loop) re-places only the maps made of it, from the copies made the first time: no map is
    derived again, and each launch's parameters point at the bytes of its own arguments."""
    map_c = {"base": 2, "element": "f16", "extents": [4, 0, 3, 0], "stride": [8, 1], "box": [64, 128],
             "swizzle": 128}
    cu = FakeCu()
    p, looked_up = _recording_packer([MAP_A, MAP_B, map_c], cu, monkeypatch)

    def launch(c: int) -> list[int]:
        """The map parameters of a pack with C at `c`, checked against a fresh encoding."""
        args = (0x10000, 0x20000, c, 300, 520, 200, 256, 512, 520)
        address = p.pack(args)
        pointers = [int(x or 0) for x in (ctypes.c_void_p * 12).from_address(address)]
        for k, spec in enumerate((MAP_A, MAP_B, map_c)):
            assert pointers[9 + k] % 64 == 0
            assert ctypes.string_at(pointers[9 + k], MAP_BYTES)[:4] == struct.pack("<I", [0x10000, 0x20000, c][k])
            assert ctypes.string_at(pointers[9 + k], MAP_BYTES) == p.map_bytes(k)
        return pointers[9:]

    first = launch(0x30000)
    second = launch(0x70000)
    assert looked_up == [0, 1, 2, 2] and first[:2] == second[:2] and first[2] != second[2]
    for _ in range(3):
        assert launch(0x30000) == first and launch(0x70000) == second
    assert looked_up == [0, 1, 2, 2] and len(cu.calls) == 4
    # each map keeps the copies of PLACED_PER_MAP argument values, then starts over
    for i in range(PLACED_PER_MAP):
        launch(0x100000 + 0x100 * i)
    assert looked_up.count(2) == 2 + PLACED_PER_MAP and len(p._placed[2]) == 2  # (cleared at the 63rd)
    launch(0x30000)
    assert looked_up.count(2) == 3 + PLACED_PER_MAP


def test_a_thread_without_a_context_gets_the_kernels_device_context() -> None:
    """cuTensorMapEncodeTiled refuses a thread that has no current context (one that never used
    CUDA, such as a worker thread launching a kernel first): the packer sets the kernel's
    device's context and encodes again; without a way to set it, the error names the failure."""
    cu = FakeCu(context=False)
    made_current: list[bool] = []

    def make_current() -> None:
        made_current.append(True)
        cu.context = True

    p = packer_for(Signature("mm", KINDS, NAMES), [MAP_A], cu, make_current=make_current)
    assert isinstance(p, TmaArgPacker)
    p.pack(_args())
    assert made_current == [True] and len(cu.calls) == 2
    assert struct.unpack_from("<Q", p.map_bytes(0))[0] == 0x10000
    other = p.another()  # (another thread's packer sets the context the same way)
    cu.context = False
    other.pack(_args(a=0x40000))
    assert made_current == [True, True] and struct.unpack_from("<Q", other.map_bytes(0))[0] == 0x40000
    cu.context = False
    with pytest.raises(TcLaunchError, match=r"cuTensorMapEncodeTiled failed \(201\)"):
        packer_for(Signature("mm", KINDS, NAMES), [MAP_A], cu).pack(_args())
