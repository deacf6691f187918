"""Malformed variants of the spec kernels give a TcCompileError and nothing else: no other
exception, no output, no hang, no RecursionError, no internal compiler error.

Mutations touch code tokens only (never whitespace or comments), so almost every variant is
really malformed; the few that stay valid C (e.g. two swapped names) are counted and bounded.
"""

from __future__ import annotations

import collections
import json
import random
import re
import time
from pathlib import Path

import pytest

import tc_lang
from tc_lang import TcCompileError

KERNELS = Path(__file__).parent / "kernels"
DEFINES: dict[str, dict[str, dict[str, str | int]]] = json.loads(
    (KERNELS / "defines.json").read_text()
)
TOKEN = re.compile(r"\s+|//[^\n]*|\w+|\.\.\.|[<>=!&|+\-*/%^]=|&&|\|\||<<|>>|\+\+|--|.", re.S)
INSERTS = ["(", ")", "[", "]", "{", "}", ";", ",", "*", "?", ":", "...", "@", "^", "newaxis",
           "max", "int", "float", "=", "+=", "0", "x", "#", "#if", "\n#endif\n", "\"", "'",
           "__global__", "return", "bitcast", "<", ">", "99999999999999999999999", "1e999",
           "0x", "1.5f", "*?(", "#define X X\n", "__multipleof(", "F32_INFINITY", "\\"]
KINDS = ("delete", "insert", "swap", "truncate", "replace", "deep-nesting", "huge-literal",
         "non-utf8", "bad-define")
BAD_DEFINES = ["(", "]", "0 ... 3", "", "a b c", "-1", "0x", "{", "3 +", "__global__"]
HUGE = ["99999999999999999999999", "18446744073709551616", "0x1FFFFFFFFFFFFFFFFF",
        "1" + "0" * 400, "0777777777777777777777777"]

Mutant = tuple[str, str, bytes | str, dict[str, str | int]]  # kind, file, source, defines


def _is_code(tok: str) -> bool:
    return not tok.isspace() and not tok.startswith("//")


def mutate(rng: random.Random) -> Mutant | None:
    """One mutant of a random spec kernel (None when the chosen mutation does not apply)."""
    name = rng.choice(sorted(DEFINES))
    src = (KERNELS / name).read_text()
    defines = dict(next(iter(DEFINES[name].values())))
    toks = TOKEN.findall(src)
    code = [i for i, t in enumerate(toks) if _is_code(t)]
    kind = rng.choice(KINDS)
    i = rng.choice(code)
    if kind == "delete":
        del toks[i]
    elif kind == "insert":
        toks.insert(i, " " + rng.choice(INSERTS) + " ")
    elif kind == "swap":
        j = rng.choice(code)
        if toks[i] == toks[j]:
            return None
        toks[i], toks[j] = toks[j], toks[i]
    elif kind == "truncate":
        toks = toks[:i]  # at least the closing brace of the kernel is gone
    elif kind == "replace":
        for j in rng.sample(code, rng.randrange(2, 6)):
            toks[j] = " " + rng.choice(INSERTS) + " "
    elif kind == "deep-nesting":
        depth = rng.choice([250, 1000, 5000])
        left, right = rng.choice([("(", ")"), ("[", "]"), ("{", "}")])
        toks.insert(i, left * depth + "1" + right * rng.choice([depth, depth - 1]))
    elif kind == "huge-literal":
        ints = [j for j in code if toks[j].isdigit()]
        if not ints:
            return None
        toks[rng.choice(ints)] = rng.choice(HUGE)
    elif kind == "non-utf8":
        data = "".join(toks).encode()
        k = rng.randrange(len(data))
        bad = bytes([rng.choice([0xFF, 0xFE, 0xC0, 0x80])])
        return kind, name, data[:k] + bad + data[k:], defines
    else:  # bad-define: a define the kernel uses gets broken token text
        used = [k for k in defines if k in toks]
        if not used:
            return None
        key = rng.choice(used)
        value = rng.choice([v for v in BAD_DEFINES if v != str(defines[key])])
        defines[key] = value
    return kind, name, "".join(toks), defines


def mutants(rng: random.Random, count: int) -> list[Mutant]:
    out: list[Mutant] = []
    while len(out) < count:
        m = mutate(rng)
        if m is not None:
            out.append(m)
    return out


def test_fuzzed_kernels_only_raise_compile_errors(capfd: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(20260122)
    cases = mutants(rng, 1150)
    deadline = time.monotonic() + 60.0
    diagnosed: collections.Counter[str] = collections.Counter()
    valid: list[tuple[str, str]] = []
    header = re.compile(r"^.+:\d+:\d+: error\[E0[1-5]\d\d\]: .+")
    for kind, name, src, defines in cases:
        try:
            tc_lang.frontend(src, defines, filename=name)
        except TcCompileError as e:
            diagnosed[kind] += 1
            assert all(d.code != "E0499" for d in e.diagnostics), (kind, src, e.render())
            text = str(e)
            assert header.match(text), text
            assert "Traceback" not in text
        else:
            valid.append((kind, name))
        assert time.monotonic() < deadline, "fuzzing took too long"
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")  # diagnostics are exceptions, never prints
    assert sum(diagnosed.values()) >= 1000
    assert set(diagnosed) == set(KINDS)
    # mutations that leave valid C (swapped names, a deleted unary '-') are rare
    assert len(valid) < len(cases) // 20, collections.Counter(k for k, _ in valid)
    for kind in ("truncate", "deep-nesting", "huge-literal", "non-utf8"):
        assert kind not in {k for k, _ in valid}, kind


def test_deep_nesting_and_long_chains() -> None:
    deep = "__global__ void k() { int x = " + "(" * 20000 + "1" + ")" * 20000 + "; }"
    chain = "__global__ void k(int n) { int x = " + " + ".join(["n"] * 5000) + "; }"
    for src in (deep, chain):
        try:
            tc_lang.frontend(src)
        except TcCompileError as e:
            assert e.first.code in ("E0211",), e.render()


def test_random_bytes() -> None:
    rng = random.Random(7)
    for _ in range(200):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
        try:
            tc_lang.frontend(data)
        except TcCompileError as e:
            assert all(d.code != "E0499" for d in e.diagnostics), e.render()


def test_a_flat_chain_too_deep_to_check_is_reported_at_its_statement() -> None:
    """A chain of 60,000 additions is a 60,000-deep tree: E0211 at the statement (it was 1:1).
    (Chains of a few thousand terms are checked: tc_lang.deep; parse + check, as the
    preprocessor's map of a line this long is slow.)"""
    chain = " + ".join(["x"] * 60_000)
    src = f"__global__ void k(int* o, int x) {{\n  int a = 1;\n  *o = {chain};\n}}\n"
    with pytest.raises(TcCompileError) as info:
        tc_lang.check(tc_lang.parse(src, filename="d.tc"))
    assert [d.code for d in info.value.diagnostics] == ["E0211"]
    assert (info.value.first.location.file, info.value.first.location.line) == ("d.tc", 3)
