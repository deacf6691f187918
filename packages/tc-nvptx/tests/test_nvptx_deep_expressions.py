"""Flat expressions of thousands of terms compile: `x0 + x0 + ... + x0` is a left-deep tree as deep
as it has terms, which the checker and the IR lowering walk recursively (they stopped at about 250
terms with E0601 "nested too deeply"). Beyond what even a large stack holds, a located error
(E0601 from the lowering here; E0211 from the checker: test_lang_fuzz.py), never a crash."""

from __future__ import annotations

import re
import shutil
import sys

import pytest

import tc_ir
import tc_lang
import tc_nvptx
from tc_lang import deep


def _sum_kernel(terms: int) -> str:
    return ("__global__ void k(float* p) {\n  float x0 = *p;\n  *p = "
            + " + ".join(["x0"] * terms) + ";\n}\n")


@pytest.mark.parametrize("terms", [250, 2000])
def test_a_flat_sum_of_thousands_of_terms_compiles(terms: int) -> None:
    limit = sys.getrecursionlimit()
    kernel = tc_nvptx.compile(_sum_kernel(terms))
    assert kernel.name == "k" and ".entry k" in kernel.ptx
    # every term is added (nothing folded away): terms - 1 additions of f32
    assert len(re.findall(r"\badd(\.rn)?\.f32\b", kernel.ptx)) == terms - 1
    if shutil.which("ptxas"):
        assert kernel.cubin
    assert sys.getrecursionlimit() == limit  # (raised only while the deep passes ran)


def test_flat_chains_of_other_operators_compile() -> None:
    n = 2000
    for expr in (" && ".join(["x > 0"] * n), "y = " * n + "x", "- " * n + "x", "(float)" * n + "x"):
        src = f"__global__ void k(float* p) {{\n  float x = *p;\n  float y = 0;\n  *p = {expr};\n}}\n"
        assert ".entry k" in tc_nvptx.compile(src).ptx, expr[:20]


def test_a_chain_too_deep_for_the_lowering_is_a_located_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # checked under a higher limit than the lowering then gets: 60,000 levels need more frames
    # than deep.RECURSION_LIMIT in any lowering that takes a frame a level
    chain = " + ".join(["x"] * 60_000)
    src = f"__global__ void k(int* o, int x) {{\n  int a = 1;\n  *o = {chain};\n}}\n"
    with monkeypatch.context() as m:
        m.setattr(deep, "RECURSION_LIMIT", 200_000)
        unit = tc_lang.check(tc_lang.parse(src, filename="d.tc"))
    assert deep.RECURSION_LIMIT < 60_000
    with pytest.raises(tc_lang.TcCompileError) as info:
        tc_ir.lower(unit)
    assert [d.code for d in info.value.diagnostics] == ["E0601"]
    loc = info.value.first.location
    assert (loc.file, loc.line, loc.col) == ("d.tc", 3, 3)
    assert "nested too deeply" in info.value.first.message


def test_a_deep_pass_raises_its_errors_in_the_caller() -> None:
    # a type error inside a deep tree: reported as from a shallow one (the pass ran on a worker)
    src = "__global__ void k(float* p) {\n  float x0 = *p;\n  *p = " + " + ".join(["x0"] * 500) \
        + " + p;\n}\n"
    with pytest.raises(tc_lang.TcCompileError) as info:
        tc_nvptx.compile(src, filename="e.tc")
    assert info.value.first.code == "E0401"
    assert info.value.first.location.line == 3


def test_tree_depth_counts_levels_without_recursion() -> None:
    unit = tc_lang.parse(_sum_kernel(5000))
    # TranslationUnit > FunctionDef > Compound > ExprStmt > Assign > 4999 Binary > Name
    assert deep.tree_depth(unit) == 5 + 4999 + 1
    assert deep.tree_depth(unit, limit=10) == 11
