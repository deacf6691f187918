"""Small integer helpers the grid callables of the tutorials use."""

from __future__ import annotations

import operator


def cdiv(a: int, b: int) -> int:
    """Ceiling division: the number of blocks of size `b` that cover `a` elements."""
    if type(a) is int and type(b) is int and b > 0:  # grid lambdas call this on every launch
        return -(-a // b)
    a, b = operator.index(a), operator.index(b)
    if b <= 0:
        raise ValueError(f"cdiv: the divisor must be positive, got {b}")
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    n = operator.index(n)
    if n <= 1:
        return 1
    return 1 << (n - 1).bit_length()
