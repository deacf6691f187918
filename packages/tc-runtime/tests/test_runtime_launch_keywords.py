"""A launch given a keyword other than grid= and stream= (a misspelt `grid`, an argument by its
name) is a TypeError naming the kernel, the keyword and the accepted keywords, on the CPU
interpreter and on both GPU launch paths (the general path and the generated launch entry,
against the simulated driver of test_runtime_fakegpu.py). It named a Python function before
("_call() got an unexpected keyword argument", "entry() got ..."). Also: a flat expression of
2000 terms runs on the interpreter."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tc_runtime as tc


def _fakegpu() -> Any:
    path = Path(__file__).with_name("test_runtime_fakegpu.py")
    spec = importlib.util.spec_from_file_location("_tc_fakegpu_for_keywords", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_fake = _fakegpu()
fake = _fake.fake  # (the simulated driver, both back ends)

SRC = """
__global__ void fill_ones(float* z, int N) {
    int off[16] = get_program_id(0) * 16 + (0 ... 16);
    *?(off < N)(z + off) = 1.0f;
}
"""


def _check(info: pytest.ExceptionInfo[TypeError], *keywords: str) -> str:
    text = str(info.value)
    assert text.startswith("kernel 'fill_ones' got an unexpected keyword argument")
    for k in keywords:
        assert f"'{k}'" in text
    assert "accepts only the keywords 'grid' and 'stream'" in text
    assert "fill_ones(z: float*, N: int)" in text
    assert "_call" not in text and "entry" not in text
    return text


def test_unknown_keyword_on_the_cpu() -> None:
    k = tc.kernel(SRC, device="cpu")
    z = np.zeros(16, np.float32)
    with pytest.raises(TypeError) as info:
        k(z, 16, gird=(1,))
    _check(info, "gird")
    np.testing.assert_array_equal(z, 0)  # nothing ran
    k(z, 16, grid=(1,))
    np.testing.assert_array_equal(z, 1)
    with pytest.raises(TypeError) as info:  # once compiled too
        k(z, grid=(1,), N=16)
    assert _check(info, "N").endswith("; pass 'N' by position")


def test_unknown_keywords_on_the_gpu_paths(fake: Any) -> None:
    buf = fake.alloc(4 * 16)
    z = buf.ctypes.data
    k = tc.kernel(SRC, device="cuda:0")
    with pytest.raises(TypeError) as info:  # the general path (no launch yet)
        k(z, 16, gird=(1,))
    _check(info, "gird")
    assert fake.launches == 0
    k(z, 16, grid=(1,))
    k(z, 16, grid=(1,))
    assert fake.launches == 2
    assert k._entry.__name__ == "entry"  # the generated launch entry takes the calls now
    for kwargs in ({"gird": (1,)}, {"grid": (1,), "N": 16, "blocks": 2}):
        with pytest.raises(TypeError) as info:
            k(z, 16, **kwargs)
        _check(info, *[w for w in kwargs if w != "grid"])
    with pytest.raises(TypeError) as info:  # a missing argument given by name
        k(z, grid=(1,), N=16)
    assert _check(info, "N").endswith("; pass 'N' by position")
    assert fake.launches == 2


def test_a_source_that_does_not_compile_still_names_the_keyword() -> None:
    k = tc.kernel("__global__ void broken(float* z) { *z = undeclared; }", device="cpu",
                  name="broken")
    with pytest.raises(TypeError, match=r"kernel 'broken' got an unexpected keyword argument "
                                        r"'gird': .*'grid' and 'stream'"):
        k(np.zeros(1, np.float32), gird=(1,))


def test_a_flat_sum_of_2000_terms_runs_on_the_interpreter() -> None:
    # a tree 2000 levels deep (it stopped the lowering at about 250 terms, E0601)
    src = ("__global__ void k(float* p) {\n  float x0 = *p;\n  *p = "
           + " + ".join(["x0"] * 2000) + ";\n}\n")
    k = tc.kernel(src, device="cpu")
    p = np.array([1.5], np.float32)
    k(p, grid=(1,))
    assert p[0] == 3000.0  # every partial sum of 1.5s is exact in float
