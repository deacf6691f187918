"""Malformed variants of the spec kernels give a TcCompileError and nothing else: no other
exception, no hang, no RecursionError, no internal compiler error."""

from __future__ import annotations

import json
import random
import re
import time
from pathlib import Path

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


def mutants(rng: random.Random, count: int) -> list[tuple[str, bytes | str, dict[str, str | int]]]:
    sources = [(name, (KERNELS / name).read_text(), next(iter(v.values())))
               for name, v in DEFINES.items()]
    out: list[tuple[str, bytes | str, dict[str, str | int]]] = []
    while len(out) < count:
        name, src, defines = rng.choice(sources)
        toks = [t for t in TOKEN.findall(src)]
        kind = rng.randrange(9)
        i = rng.randrange(len(toks))
        if kind == 0:
            del toks[i]
        elif kind == 1:
            toks.insert(i, " " + rng.choice(INSERTS) + " ")
        elif kind == 2:
            j = rng.randrange(len(toks))
            toks[i], toks[j] = toks[j], toks[i]
        elif kind == 3:
            toks = toks[:i]
        elif kind == 4:
            for _ in range(rng.randrange(2, 6)):
                toks[rng.randrange(len(toks))] = " " + rng.choice(INSERTS) + " "
        elif kind == 5:
            depth = rng.choice([250, 1000])
            toks.insert(i, "(" * depth + "1" + ")" * rng.choice([depth, depth - 1]))
        elif kind == 6:
            toks.insert(i, " " + "9" * rng.randrange(20, 400) + " ")
        elif kind == 7:
            data = "".join(toks).encode()
            k = rng.randrange(len(data))
            out.append((name, data[:k] + bytes([rng.choice([0xFF, 0xC3, 0x80, 0x00])]) + data[k:],
                        defines))
            continue
        else:
            # a define with broken token text
            bad = dict(defines)
            key = rng.choice(list(bad) or ["X"])
            bad[key] = rng.choice(["(", "]", "0 ... 3", "", "1e999", "a b c", "newaxis,:", "-1"])
            out.append((name, "".join(toks), bad))
            continue
        out.append((name, "".join(toks), defines))
    return out


def test_fuzzed_kernels_only_raise_compile_errors() -> None:
    rng = random.Random(20260122)
    cases = mutants(rng, 1100)
    deadline = time.monotonic() + 30.0
    errors = 0
    for name, src, defines in cases:
        try:
            tc_lang.frontend(src, defines, filename=name)
        except TcCompileError as e:
            errors += 1
            assert all(d.code != "E0499" for d in e.diagnostics), (src, e.render())
            assert str(e)  # renders without failing
        assert time.monotonic() < deadline, "fuzzing took too long"
    assert errors > len(cases) // 2


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
