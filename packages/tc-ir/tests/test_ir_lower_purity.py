"""The lowering asks whether an expression is pure (tc_ir.lower.analysis.is_pure) at every
nested `?:`: within one lowering each node is examined once, so a chain of n conditionals costs
the lowering O(n), not O(n^2) (2000 of them took 16 s), and the answers are the same."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tc_ir.interpreter import interpret
from tc_ir.lower import analysis
from tc_ir.testing import lower_source


def _chain(n: int) -> str:
    """y = x > n-1 ? n-1 : ... : x > 0 ? 0 : -1, a chain of n conditionals."""
    chain = " : ".join(f"(x > {i}.0f) ? {i}.0f" for i in reversed(range(n))) + " : -1.0f"
    return f"__global__ void k(float* p) {{ float x = *p; float y = {chain}; *p = y; }}"


def _children_calls(monkeypatch: pytest.MonkeyPatch, n: int) -> int:
    calls = 0
    real = analysis.children

    def counting(node: Any) -> Any:
        nonlocal calls
        calls += 1
        return real(node)

    monkeypatch.setattr(analysis, "children", counting)
    lower_source(_chain(n), {})
    monkeypatch.setattr(analysis, "children", real)
    return calls


def test_purity_of_a_chain_of_conditionals_is_examined_once_per_node(monkeypatch: pytest.MonkeyPatch) -> None:
    small, large = _children_calls(monkeypatch, 60), _children_calls(monkeypatch, 120)
    assert large < 2.5 * small  # linear: twice the chain, about twice the work (was about 4x)


@pytest.mark.parametrize("x, want", [(-3.0, -1.0), (0.5, 0.0), (7.5, 7.0), (500.0, 39.0)])
def test_the_chain_computes_the_first_true_branch(x: float, want: float) -> None:
    src = _chain(40)
    p = np.array([x], np.float32)
    interpret(lower_source(src, {}), [p], (1,), source=src)
    assert p[0] == want


def test_the_memo_lives_only_inside_a_lowering() -> None:
    assert analysis._PURE.get() is None
    lower_source(_chain(3), {})
    assert analysis._PURE.get() is None
