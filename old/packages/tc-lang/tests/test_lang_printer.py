"""to_source prints every construct so that re-parsing gives the same tree."""

from __future__ import annotations

import tc_lang
from tc_lang import ast

SOURCE = """
__device__ float[BLOCK] twice(const float x[BLOCK]) { return x * 2.0f; }
__device__ inline float sq(float v) { return v * v; }
__global__ void k(float* X __noalias __readonly __aligned(16), int ld __multipleof(8),
                  float* restrict Y __writeonly __retune, int m __attribute__((frob(4))),
                  unsigned long u, bool flag) {
    int r[BLOCK] = 0 ... BLOCK, s = -ld, *q;
    float t[BLOCK, 2] = (float[BLOCK, 2]) r[:, newaxis] + - -1.5e-3f;
    float red = t[+, :][max] + t[:, -][min] + t[^1, ^0][^1, ^0][-, +];
    half h = bitcast<half>((int16) 0x7C00);
    long z = sizeof(float[4]) + sizeof r + sizeof(int*);
    *?(r < m && flag) (Y + r) = *?(r < m) (X + r * ld) ? 1 : (a, b);
    x = y = a ? b : c ? d : e;
    x += 1; x -= 1; x *= 2; x /= 2; x %= 3; x <<= 1; x >>= 1; x &= 1; x |= 2; x ^= 3;
    x = (a + b) * (c - d) / e % f << 1 >> 2 < 3 <= 4 > 5 >= 6 == 7 != 8 & 9 ^ 10 | 11 && 12 || 13;
    x = a - (b - c) + (a @ b) @ c + ^a @ ^b + !~x + &x + **p + x++ - ++x - x-- + --x;
    x = max(a, min(b, c)) + get_program_id(0) + (0 ... 4)[+] + 'a' + 017 + 0xFFu + 8l + 1ull;
    if (a) if (b) x = 1; else x = 2;
    if (a) { x = 1; } else if (b) { x = 2; } else ;
    for (int i = 0; i < 4; i++) { if (i) break; continue; }
    for (x = 0; ; ) {}
    for (;;) ;
    while (x) x--;
    do { x++; } while (x < 3);
    __debug_barrier();
    return;
}
"""


def test_round_trip_of_every_construct() -> None:
    unit = tc_lang.parse(SOURCE)
    text = tc_lang.to_source(unit)
    again = tc_lang.parse(text)
    assert again == unit
    assert tc_lang.to_source(again) == text


def test_printing_single_nodes() -> None:
    e = ast.Binary(op="*", left=ast.Binary(op="+", left=ast.Name(name="a"),
                                          right=ast.Name(name="b")),
                   right=ast.Range(start=ast.IntLiteral(value=0), end=ast.Name(name="N")))
    assert tc_lang.to_source(e) == "(a + b) * 0 ... N"
    neg = ast.Unary(op="-", operand=ast.Unary(op="-", operand=ast.Name(name="x")))
    assert tc_lang.to_source(neg) == "- -x"
    f = ast.FloatLiteral(value=2.0, suffix="f")
    assert tc_lang.to_source(f) == "2.0f"
