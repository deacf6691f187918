"""The disk cache across processes: concurrent compilation, corruption, precompiled kernels loaded
without the compiler, and a new process finding its kernel in the cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tc_runtime as tc
from tc_runtime.cache import KernelCache

ADD_SRC = """
__global__ void add(TYPE* z, TYPE* x, TYPE* y, int N) {
    int off[BLOCK] = get_program_id(0) * BLOCK + (0 ... BLOCK);
    bool check[BLOCK] = off < N;
    *?(check)(z + off) = *?(check)(x + off) + *?(check)(y + off);
}
"""

BUILD = textwrap.dedent("""
    import json, sys, time
    import tc_runtime as tc
    src = sys.argv[1]
    t0 = time.perf_counter()
    b = tc.build(src, defines={"TYPE": "float", "BLOCK": 1024},
                 specialization=["divisible_by_16"] * 4)
    print(json.dumps({"name": b.name, "ptx": len(b.ptx), "s": time.perf_counter() - t0,
                      "compiler": "tc_nvptx" in sys.modules}))
""")


def _run(script: str, *args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", script, *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _entries(root: Path) -> list[Path]:
    return [p for p in root.glob("??/*") if p.is_dir()]


def test_four_processes_compile_one_kernel(tmp_path: Path) -> None:
    env = dict(os.environ, TC_CACHE_DIR=str(tmp_path))
    env.pop("TC_ALWAYS_COMPILE", None)
    procs = [_run(BUILD, ADD_SRC, env=env) for _ in range(4)]
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert json.loads(out)["name"] == "add"
    entries = _entries(tmp_path)
    assert len(entries) == 1
    assert not [p for p in tmp_path.iterdir() if p.name.startswith((".tmp", ".trash"))]
    cache = KernelCache(tmp_path)
    key = entries[0].name
    whole = cache.get(key)
    assert whole is not None and whole.name == "add" and ".entry add" in whole.ptx
    # a new process finds it without compiling (and without importing the back end)
    p = _run(BUILD, ADD_SRC, env=env)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert json.loads(out)["compiler"] is False
    # truncate the PTX: detected, removed, rebuilt by the next process
    ptx = entries[0] / "kernel.ptx"
    ptx.write_bytes(ptx.read_bytes()[: len(ptx.read_bytes()) // 2])
    p = _run(BUILD, ADD_SRC, env=env)
    out, err = p.communicate(timeout=240)
    assert p.returncode == 0, err
    assert json.loads(out)["compiler"] is True
    rebuilt = cache.get(key)
    assert rebuilt is not None and rebuilt.ptx == whole.ptx


LOAD = textwrap.dedent("""
    import sys
    import tc_runtime as tc
    from tc_runtime.binary import read
    b = read(sys.argv[1])
    assert b.name == "add" and b.signature == ("ptr<f32>",) * 3 + ("i32",), b
    try:
        tc.load(sys.argv[1], device="cuda:0")
    except tc.TcDeviceError:
        pass  # no GPU here: the GPU test launches it
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in
                    ("tc_lang", "tc_ir", "tc_opt", "tc_nvptx", "llvmlite"))
    print(",".join(loaded))
""")


@pytest.mark.parametrize("name", ["add.ptx", "add.json", "add.cubin"])
def test_precompiled_file_loads_without_the_compiler(tmp_path: Path, name: str) -> None:
    binary = tc.build(ADD_SRC, defines={"TYPE": "float", "BLOCK": 256})
    if name.endswith(".cubin") and binary.cubin is None:
        pytest.skip("ptxas is not installed")
    path = tc.save(binary, tmp_path / name)
    back = tc.binary.read(path)
    assert back.name == "add" and back.num_warps == 4 and back.signature == binary.signature
    p = _run(LOAD, str(path), env=dict(os.environ))
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert out.strip() == ""  # no compiler module was imported


def test_bad_precompiled_files(tmp_path: Path) -> None:
    (tmp_path / "k.ptx").write_text(".version 8.0")
    with pytest.raises(FileNotFoundError, match="metadata file k.ptx.json is missing"):
        tc.binary.read(tmp_path / "k.ptx")
    (tmp_path / "k.ptx.json").write_text(json.dumps({"name": "k", "arch": "sm_90"}))
    with pytest.raises(ValueError, match="lacks signature, num_warps"):
        tc.binary.read(tmp_path / "k.ptx")
    (tmp_path / "k.ptx.json").write_text(json.dumps({"version": 9, "name": "k"}))
    with pytest.raises(ValueError, match="metadata version 9"):
        tc.binary.read(tmp_path / "k.ptx")
    (tmp_path / "j.json").write_text("{")
    with pytest.raises(ValueError, match="j.json is not a valid tc kernel file"):
        tc.load(tmp_path / "j.json")
    with pytest.raises(FileNotFoundError, match="no such precompiled kernel"):
        tc.load(tmp_path / "missing.ptx")


LAUNCH_FAKE = textwrap.dedent("""
    import ctypes, sys
    sys.path.insert(0, sys.argv[2])
    import numpy as np
    import tc_runtime as tc
    from tc_runtime import driver
    from test_runtime_fakegpu import FakeCuda  # the simulated driver (no compiler import)
    cu = FakeCuda()
    driver._cu, driver._initialized, driver._raw_launch = cu, True, False

    def add(params, grid):
        z, x, y = (ctypes.c_uint64.from_address(p).value for p in params[:3])
        n = ctypes.c_int32.from_address(params[3]).value
        arrays = [np.ctypeslib.as_array((ctypes.c_float * n).from_address(a)) for a in (z, x, y)]
        arrays[0][:] = arrays[1] + arrays[2]

    cu.kernels["add"] = add
    k = tc.load(sys.argv[1], device="cuda:0", defines={"BLOCK": 256})
    z, x, y = (cu.alloc(4 * 300).view(np.float32) for _ in range(3))
    x[:], y[:] = np.arange(300), 2
    k(z.ctypes.data, x.ctypes.data, y.ctypes.data, 300, grid=lambda opt: (tc.cdiv(300, opt.BLOCK),))
    assert cu.calls[-1][:4] == ("launch", "add", (2, 1, 1), 128), cu.calls[-1]
    assert (z == np.arange(300) + 2).all()
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in
                    ("tc_lang", "tc_ir", "tc_opt", "tc_nvptx", "llvmlite", "torch"))
    print(",".join(loaded) or "none")
""")


def test_precompiled_kernel_launches_without_the_compiler(tmp_path: Path) -> None:
    """The launch path of tc.load (simulated driver, so it runs without a GPU): no compiler
    package is imported, only tc_runtime."""
    binary = tc.build(ADD_SRC, defines={"TYPE": "float", "BLOCK": 256})
    path = tc.save(binary, tmp_path / "add.ptx")
    p = _run(LAUNCH_FAKE, str(path), str(Path(__file__).parent), env=dict(os.environ))
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert out.strip() == "none"
