"""Property test: random element-wise, broadcast and reduction expressions, written as Triton-C
source, through the front end, the lowering and the interpreter, agree with numpy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tc_ir.interpreter import interpret
from tc_ir.testing import lower_source

M, N = 8, 16
Env = dict[str, Any]
Expr = tuple[str, Callable[[Env], Any]]  # (source text, numpy evaluation) at shape [M, N]

KERNEL = """
__global__ void k(T* out, T* pa, T* pb, T* pc, T s) {{
  int m[{M}] = 0 ... {M};
  int n[{N}] = 0 ... {N};
  T a[{M}, {N}] = *(pa + m[:, newaxis] * {N} + n[newaxis, :]);
  T b[{N}] = *(pb + n);
  T c[{M}] = *(pc + m);
  {store}
}}
"""

FLOAT_LEAVES: list[Expr] = [
    ("a", lambda e: e["a"]),
    ("b[newaxis, :]", lambda e: e["b"][np.newaxis, :]),
    ("c[:, newaxis]", lambda e: e["c"][:, np.newaxis]),
    ("s", lambda e: e["s"]),
    ("1.5f", lambda e: np.float32(1.5)),
]
INT_LEAVES: list[Expr] = FLOAT_LEAVES[:4] + [("3", lambda e: np.int32(3))]


def _float_ops(children: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
    def binary(op: str, f: Callable[[Any, Any], Any]) -> st.SearchStrategy[Expr]:
        return st.tuples(children, children).map(
            lambda t: (f"({t[0][0]} {op} {t[1][0]})", lambda e, t=t: f(t[0][1](e), t[1][1](e)))
        )

    f32 = np.float32
    return st.one_of(
        binary("+", lambda x, y: f32(x) + f32(y)),
        binary("-", lambda x, y: f32(x) - f32(y)),
        binary("*", lambda x, y: f32(x) * f32(y)),
        st.tuples(children, children).map(lambda t: (
            f"({t[0][0]} / (abs({t[1][0]}) + 1.0f))",
            lambda e, t=t: f32(t[0][1](e)) / (np.abs(f32(t[1][1](e))) + f32(1.0)))),
        st.tuples(children, children).map(lambda t: (
            f"min({t[0][0]}, {t[1][0]})", lambda e, t=t: np.minimum(f32(t[0][1](e)), f32(t[1][1](e))))),
        st.tuples(children, children).map(lambda t: (
            f"max({t[0][0]}, {t[1][0]})", lambda e, t=t: np.maximum(f32(t[0][1](e)), f32(t[1][1](e))))),
        children.map(lambda c: (f"(-{c[0]})", lambda e, c=c: -f32(c[1](e)))),
        children.map(lambda c: (f"abs({c[0]})", lambda e, c=c: np.abs(f32(c[1](e))))),
        st.tuples(children, children, children).map(lambda t: (
            f"({t[0][0]} > {t[1][0]} ? {t[1][0]} : {t[2][0]})",
            lambda e, t=t: np.where(f32(t[0][1](e)) > f32(t[1][1](e)), f32(t[1][1](e)), f32(t[2][1](e))))),
    )


def _int_ops(children: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
    i32 = np.int32

    def binary(op: str, f: Callable[[Any, Any], Any]) -> st.SearchStrategy[Expr]:
        return st.tuples(children, children).map(
            lambda t: (f"({t[0][0]} {op} {t[1][0]})", lambda e, t=t: f(i32(t[0][1](e)), i32(t[1][1](e))))
        )

    return st.one_of(
        binary("+", lambda x, y: x + y),
        binary("-", lambda x, y: x - y),
        binary("*", lambda x, y: x * y),
        binary("&", lambda x, y: x & y),
        binary("|", lambda x, y: x | y),
        binary("^", lambda x, y: x ^ y),
        st.tuples(children, children).map(lambda t: (
            f"max({t[0][0]}, {t[1][0]})", lambda e, t=t: np.maximum(i32(t[0][1](e)), i32(t[1][1](e))))),
        st.tuples(children, children).map(lambda t: (
            f"min({t[0][0]}, {t[1][0]})", lambda e, t=t: np.minimum(i32(t[0][1](e)), i32(t[1][1](e))))),
    )


def _expressions(leaves: list[Expr], ops: Callable[[st.SearchStrategy[Expr]], st.SearchStrategy[Expr]]
                 ) -> st.SearchStrategy[Expr]:
    return st.recursive(st.sampled_from(leaves), ops, max_leaves=10)


#: How the [M, N] expression is stored: whole, or reduced along one axis (or both).
SHAPINGS = ["tile", "sum0", "sum1", "max0", "min1", "sumall"]


def _store(kind: str, src: str) -> str:
    whole = f"T r[{M}, {N}] = {src};"
    return whole + {
        "tile": f" *(out + m[:, newaxis] * {N} + n[newaxis, :]) = r;",
        "sum0": " *(out + n) = r[+, :];",
        "sum1": " *(out + m) = r[:, +];",
        "max0": " *(out + n) = r[max, :];",
        "min1": " *(out + m) = r[:, min];",
        "sumall": " *out = r[+, +];",
    }[kind]


def _reference(kind: str, full: Any, dtype: Any) -> Any:
    full = np.broadcast_to(np.asarray(full, dtype), (M, N))
    acc = np.float64 if dtype == np.float32 else np.int64
    if kind == "tile":
        return full
    if kind == "sum0":
        return full.sum(axis=0, dtype=acc)
    if kind == "sum1":
        return full.sum(axis=1, dtype=acc)
    if kind == "max0":
        return full.max(axis=0)
    if kind == "min1":
        return full.min(axis=1)
    return np.asarray([full.sum(dtype=acc)])


def _check(expr: Expr, kind: str, dtype: Any, seed: int) -> None:
    ty = "float" if dtype == np.float32 else "int"
    src = KERNEL.format(M=M, N=N, store=_store(kind, expr[0]))
    module = lower_source(src, {"T": ty})
    rng = np.random.default_rng(seed)
    if dtype == np.float32:
        env: Env = {"a": rng.uniform(-2, 2, (M, N)).astype(dtype), "b": rng.uniform(-2, 2, N).astype(dtype),
                    "c": rng.uniform(-2, 2, M).astype(dtype), "s": np.float32(rng.uniform(-2, 2))}
    else:
        env = {"a": rng.integers(-1000, 1000, (M, N)).astype(dtype), "b": rng.integers(-1000, 1000, N).astype(dtype),
               "c": rng.integers(-1000, 1000, M).astype(dtype), "s": np.int32(rng.integers(-1000, 1000))}
    out = np.zeros(M * N, dtype)
    s_arg = float(env["s"]) if dtype == np.float32 else int(env["s"])
    interpret(module, [out, env["a"], env["b"], env["c"], s_arg], (1,), source=src)
    with np.errstate(all="ignore"):
        ref = np.asarray(_reference(kind, expr[1](env), dtype)).ravel()
    got = out[: ref.size]
    if dtype == np.float32:
        scale = max(1.0, float(np.abs(ref).max()))
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5 * scale, err_msg=src)
    else:
        np.testing.assert_array_equal(got, ref.astype(np.int64).astype(np.int32), err_msg=src)  # wraps


PROPERTY = settings(max_examples=150, derandomize=True, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(_expressions(FLOAT_LEAVES, _float_ops), st.sampled_from(SHAPINGS), st.integers(0, 2**16))
def test_random_float_expressions_agree_with_numpy(expr: Expr, kind: str, seed: int) -> None:
    _check(expr, kind, np.float32, seed)


@PROPERTY
@given(_expressions(INT_LEAVES, _int_ops), st.sampled_from(SHAPINGS), st.integers(0, 2**16))
def test_random_int_expressions_agree_with_numpy(expr: Expr, kind: str, seed: int) -> None:
    _check(expr, kind, np.int32, seed)
