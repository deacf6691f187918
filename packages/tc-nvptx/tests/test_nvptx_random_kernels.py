"""The random kernels of random_kernels.py (the GPU-against-interpreter fuzzer's) are valid:
they run on the interpreter and compile and assemble for the GPU without a GPU; the generator
is deterministic and exercises every feature it names."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from tc_nvptx.ptxas import find_ptxas

sys.path.insert(0, str(Path(__file__).parent))
import random_kernels as rk  # noqa: E402

FEATURES = {"atomic", "cast", "dot", "if", "int-bits", "int-div", "int-shift", "loop", "math", "reduce",
            "reshape", "select", "transpose"}


def test_generation_is_deterministic() -> None:
    assert rk.generate(7).source == rk.generate(7).source
    assert rk.generate(7).source != rk.generate(8).source


def test_a_hundred_seeds_cover_every_feature() -> None:
    seen: set[str] = set()
    for seed in range(100):
        seen |= set(rk.generate(seed).features)
    assert seen == FEATURES


def test_wide_kernels_add_their_constructs_and_keep_the_plain_ones() -> None:
    seen: set[str] = set()
    for seed in range(100):
        seen |= set(rk.generate(seed, wide=True).features)
    assert seen == FEATURES | {"helper", "while", "return"}
    assert rk.generate(3, wide=False).source == rk.generate(3).source


@pytest.mark.parametrize("wide", [False, True], ids=["plain", "wide"])
@pytest.mark.parametrize("seed", range(8))
def test_random_kernel_interprets_and_compiles(seed: int, wide: bool) -> None:
    program = rk.generate(seed, wide)
    outputs = rk.interpret(program)
    assert len(outputs) == len(program.make_args())
    if find_ptxas() is not None:
        rk.compile_for(program)
