"""Random Triton-C kernels for differential testing: the GPU against the CPU interpreter.

`generate(seed)` writes one valid kernel, with its launch, from a seed. Each kernel loads a
masked 2-D tile and two vectors, derives new tiles from them through a random mix of the
language's operations (element-wise arithmetic of several types, casts, broadcasts, reductions,
transposes, reshapes, selects, a loop with loads, an `if` on the program id, dot products,
integer atomics), and stores what it derived: the [M, N] result, one [TM] and one [TN] vector and
a scalar per program, the tile flattened by a reshape. Tile shapes, warps and the matrix extent
(never a multiple of the tile) vary with the seed.

The interpreter is the oracle: its arithmetic is property-tested against numpy
(tc-ir/tests/test_ir_interpreter_property.py), so a difference points at the code generator.
Integer results must match bit for bit, and so must float results computed only by exactly
rounded operations (+ - * of loaded values, min, max, abs, selects and max/min reductions);
other float results (division, exp, log, sqrt, sums in another order, dots) within a tolerance
(half precision's where the kernel computes in half), all but one element in a hundred: a half
sum that cancels and is then divided by is ill-conditioned, and an overflowing sum gives +inf,
-inf or NaN as its order has it.

Not a test module: test_nvptx_random_kernels.py (compile and interpret, CPU),
tests/integration/test_integration_random_kernels_gpu.py and tools/fuzz_kernels.py use it."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

Array = np.ndarray[Any, Any]

#: C spelling -> numpy dtype of the element types the kernels compute in.
DTYPES: dict[str, Any] = {
    "float": np.float32, "half": np.float16, "int": np.int32, "uint32": np.uint32,
    "long": np.int64, "short": np.int16, "char": np.int8,
}
FLOATS = ("float", "half")
INTS = ("int", "uint32", "long", "short", "char")
#: (TM, TN) pairs: powers of two, multiples of 16 that are not, a dimension of 1, flat and tall.
SHAPES = [(1, 32), (2, 16), (4, 4), (8, 8), (16, 16), (16, 32), (32, 16), (32, 32), (64, 32),
          (32, 64), (64, 64), (128, 16), (16, 128), (128, 64), (48, 32), (32, 48), (96, 16),
          (64, 80), (1, 256), (256, 1), (8, 128), (128, 128), (2, 512), (512, 4)]


@attrs.frozen
class Var:
    """A value the kernel has named: its shape kind ("mn" [TM, TN], "nm" [TN, TM], "m" [TM],
    "n" [TN], "s" scalar), its element type and whether it is exactly rounded (see the module
    docstring)."""

    name: str
    kind: str
    ty: str
    exact: bool


@attrs.frozen
class Expr:
    """Source text of a value, its C type (after promotion) and whether it is exactly rounded."""

    text: str
    ty: str
    exact: bool


@attrs.frozen
class Output:
    """An output array: its argument index, whether its values must match bit for bit, and what it
    holds (for messages)."""

    index: int
    exact: bool
    what: str


@attrs.frozen
class Program:
    """One random kernel and its launch: arguments (numpy arrays are device buffers), grid,
    warps, and the outputs to compare."""

    seed: int
    source: str
    num_warps: int
    grid: tuple[int, int]
    make_args: Callable[[], list[Any]]
    outputs: tuple[Output, ...]
    features: tuple[str, ...]


def _promote(a: str, b: str) -> str:
    """C's usual arithmetic conversions over DTYPES (the front end's rules, simplified)."""
    order = ["char", "short", "int", "uint32", "long", "half", "float"]
    ra, rb = order.index(a), order.index(b)
    t = order[max(ra, rb)]
    return "int" if t in ("char", "short") else t


#: The declarator of each shape kind (see Var).
DIMS = {"mn": "[TM, TN]", "nm": "[TN, TM]", "m": "[TM]", "n": "[TN]", "s": ""}


class _Generator:
    """The state of one kernel being written: the values it has named and its statements."""

    def __init__(self, seed: int, wide: bool = False) -> None:
        self.rng = random.Random(seed)
        self.wide = wide
        self.helpers: list[str] = []
        self.vars: list[Var] = []
        self.lines: list[str] = []
        self.features: set[str] = set()
        self.counter = 0
        self.flat: Var | None = None

    # ----------------------------------------------------------------------------- helpers
    def fresh(self) -> str:
        self.counter += 1
        return f"v{self.counter}"

    def pick(self, kinds: tuple[str, ...]) -> Var | None:
        pool = [v for v in self.vars if v.kind in kinds]
        return self.rng.choice(pool) if pool else None

    def literal(self, ty: str) -> Expr:
        if ty in FLOATS:
            value = self.rng.choice(["0.5f", "1.5f", "2.0f", "(-0.75f)", "3.0f"])
            return Expr(value, "float", True)
        return Expr(self.rng.choice(["1", "2", "3", "5", "7", "(-3)", "100"]), "int", True)

    # ------------------------------------------------------------------------- expressions
    def leaf(self, kind: str) -> Expr:
        """A value of shape `kind` from a variable (broadcast where needed) or a literal."""
        r = self.rng.random()
        if kind == "mn":
            if r < 0.55 and (v := self.pick(("mn",))):
                return Expr(v.name, v.ty, v.exact)
            if r < 0.7 and (v := self.pick(("m",))):
                return Expr(f"{v.name}[:, newaxis]", v.ty, v.exact)
            if r < 0.85 and (v := self.pick(("n",))):
                return Expr(f"{v.name}[newaxis, :]", v.ty, v.exact)
        elif kind in ("m", "n"):
            if r < 0.7 and (v := self.pick((kind,))):
                return Expr(v.name, v.ty, v.exact)
            if r < 0.85 and (v := self.pick(("mn",))):
                return self.reduce(v, axis=1 if kind == "m" else 0)
        if r < 0.95 and (v := self.pick(("s",))):
            return Expr(v.name, v.ty, v.exact)
        return self.literal(self.rng.choice(list(DTYPES)))

    def reduce(self, v: Var, axis: int) -> Expr:
        op = self.rng.choice(["+", "max", "min"])
        self.features.add("reduce")
        text = f"{v.name}[{op}, :]" if axis == 0 else f"{v.name}[:, {op}]"
        ty = v.ty if op != "+" or v.ty not in ("char", "short") else "int"
        exact = v.exact and (op != "+" or v.ty in INTS)
        return Expr(text, ty, exact)

    def expr(self, kind: str, depth: int) -> Expr:
        if depth <= 0 or self.rng.random() < 0.25:
            return self.leaf(kind)
        r = self.rng.random()
        a = self.expr(kind, depth - 1)
        if r < 0.45:
            b = self.expr(kind, depth - 1)
            return self.binary(a, b)
        if r < 0.6:
            return self.unary(a)
        if r < 0.75:
            b, c = self.expr(kind, depth - 1), self.expr(kind, depth - 1)
            cond = self.condition(kind, depth - 1)
            self.features.add("select")
            form = "{c} ? {a} : {b}" if self.rng.random() < 0.5 else "select({c}, {a}, {b})"
            return Expr("(" + form.format(c=cond, a=b.text, b=c.text) + ")", _promote(b.ty, c.ty),
                        b.exact and c.exact)
        if r < 0.9:
            return self.cast(a)
        b = self.expr(kind, depth - 1)
        fn = self.rng.choice(["min", "max"])
        return Expr(f"{fn}({a.text}, {b.text})", _promote(a.ty, b.ty), a.exact and b.exact)

    def binary(self, a: Expr, b: Expr) -> Expr:
        ty = _promote(a.ty, b.ty)
        if ty in INTS and self.rng.random() < 0.5:
            op = self.rng.choice(["&", "|", "^", "<<", ">>", "/", "%"])
            self.features.add("int-" + {"<<": "shift", ">>": "shift", "/": "div", "%": "div"}.get(op, "bits"))
            if op in ("<<", ">>"):
                return Expr(f"({a.text} {op} ({b.text} & 7))", _promote(a.ty, "int"), True)
            if op in ("/", "%"):
                return Expr(f"({a.text} {op} (({b.text} & 7) + 1))", ty, True)
            return Expr(f"({a.text} {op} {b.text})", ty, True)
        op = self.rng.choice(["+", "-", "*", "*", "/"] if ty in FLOATS else ["+", "-", "*"])
        if op == "/":
            return Expr(f"({a.text} / (abs({b.text}) + 1.0f))", _promote(ty, "float"), False)
        return Expr(f"({a.text} {op} {b.text})", ty, a.exact and b.exact)

    def unary(self, a: Expr) -> Expr:
        if a.ty in INTS:
            form = self.rng.choice(["-{x}", "abs({x})", "~{x}", "!{x}"])
            ty = _promote(a.ty, "int") if form != "!{x}" else "int"
            return Expr("(" + form.format(x=a.text) + ")", ty, True)
        self.features.add("math")
        # bounded arguments: exp and sin of large values would turn rounding into large errors
        form = self.rng.choice(["-{x}", "abs({x})", "exp(min({x}, 8.0f))", "log(abs({x}) + 1.0f)",
                                "sqrt(abs({x}))", "sin(min(max({x}, -8.0f), 8.0f))",
                                "cos(min(max({x}, -8.0f), 8.0f))", "exp2(min({x}, 8.0f))",
                                "rsqrt(abs({x}) + 1.0f)"])
        exact = a.exact and form in ("-{x}", "abs({x})")
        ty = a.ty if exact else _promote(a.ty, "float") if "f)" in form else a.ty
        return Expr("(" + form.format(x=a.text) + ")", ty, exact)

    def cast(self, a: Expr) -> Expr:
        self.features.add("cast")
        if a.ty in FLOATS:
            to = self.rng.choice(["float", "half", "int", "short"])
            if to in INTS:  # in range, never NaN: floor of a clamped value
                return Expr(f"(({to}) floor(max(min({a.text}, 100.0f), -100.0f)))", to,
                            True) if a.exact else Expr(f"(({to}) 3)", to, True)
            return Expr(f"(({to}) {a.text})", to, a.exact and not (to == "half" and a.ty == "float"))
        to = self.rng.choice(list(DTYPES))
        if to == "half":  # ints of up to 2048 convert to half exactly
            return Expr(f"((half) ({a.text} & 1023))", "half", True)
        return Expr(f"(({to}) {a.text})", to, True)

    def condition(self, kind: str, depth: int) -> str:
        """A bool tile of shape `kind` from exact values only (rounding cannot flip it)."""
        r = self.rng.random()
        if r < 0.3:
            index = {"mn": "(rm[:, newaxis] + 2 * rn[newaxis, :])", "m": "rm", "n": "rn"}.get(kind, "pm")
            return f"({index} % {self.rng.choice([2, 3, 5])} == 0)"
        a, b = self.expr(kind, depth), self.expr(kind, depth)
        if not (a.exact and b.exact):
            a, b = self.leaf(kind), self.leaf(kind)
            if not (a.exact and b.exact):
                return "(pn % 2 == 1)"
        op = self.rng.choice(["<", "<=", ">", ">=", "==", "!="])
        joiner = self.rng.choice(["", " && (pm != 1)", " || (pn == 2)"])
        return f"(({a.text} {op} {b.text}){joiner})"

    # -------------------------------------------------------------------------- statements
    def define(self, kind: str, depth: int) -> Var:
        e = self.expr(kind, depth)
        ty = e.ty if self.rng.random() < 0.7 else self.rng.choice(list(DTYPES))
        exact = e.exact and not (ty == "half" and e.ty != "half") and not (ty in INTS and e.ty in FLOATS)
        if ty in INTS and e.ty in FLOATS:  # a float converted to an int must be in its range
            lo, hi = {"char": (-100, 100), "short": (-100, 100), "uint32": (0, 1000)}.get(ty, (-1000, 1000))
            text = f"floor(max(min({e.text}, {hi}.0f), {lo}.0f))" if e.exact else "7"
            e = Expr(text, e.ty, e.exact)
            exact = e.exact
        if ty == "half" and e.ty in INTS:
            e = Expr(f"(({e.text}) & 1023)", e.ty, True)
        v = Var(self.fresh(), kind, ty, exact)
        self.lines.append(f"  {ty} {v.name}{DIMS[kind]} = {e.text};")
        self.vars.append(v)
        return v

    def statement(self) -> None:
        if self.wide and self.rng.random() < 0.3:
            self.wide_statement()
            return
        r = self.rng.random()
        if r < 0.5:
            self.define(self.rng.choice(["mn", "mn", "m", "n", "s"]), self.rng.randint(1, 3))
        elif r < 0.6 and (v := self.pick(("mn",))):
            self.transpose(v)
        elif r < 0.7:
            self.loop()
        elif r < 0.78:
            self.branch()
        elif r < 0.86 and (v := self.pick(("mn",))):
            self.reshape(v)
        else:
            self.define("mn", self.rng.randint(1, 3))

    def transpose(self, v: Var) -> None:
        """`^v` to [TN, TM], and back, combined with v itself."""
        self.features.add("transpose")
        t = Var(self.fresh(), "nm", v.ty, v.exact)
        self.lines.append(f"  {v.ty} {t.name}[TN, TM] = ^{v.name};")
        back = Var(self.fresh(), "mn", v.ty, v.exact)
        op = self.rng.choice(["+", "*", "-"]) if v.ty not in ("char", "short") else "+"
        self.lines.append(f"  {v.ty} {back.name}[TM, TN] = ^{t.name} {op} {v.name};")
        self.vars.append(back)

    def reshape(self, v: Var) -> None:
        """A reshape to [TN, TM] (row-major order, not a transpose), summed along its first axis,
        and a reshape to one dimension that the kernel stores whole (once per kernel)."""
        if self.flat is not None:
            return
        self.features.add("reshape")
        r = Var(self.fresh(), "nm", v.ty, v.exact)
        self.lines.append(f"  {v.ty} {r.name}[TN, TM] = ({v.ty}[TN, TM]) {v.name};")
        exact = v.exact and v.ty in INTS
        m = Var(self.fresh(), "m", _promote(v.ty, "int") if v.ty in INTS else v.ty, exact)
        self.lines.append(f"  {m.ty} {m.name}[TM] = {r.name}[+, :];")
        self.vars.append(m)
        self.lines.append(f"  {v.ty} flat[TM * TN] = ({v.ty}[TM * TN]) {r.name};")
        self.flat = Var("flat", "flat", v.ty, v.exact)

    def loop(self) -> None:
        """An accumulation over rows of A that wrap around: loads in a loop, a loop-carried tile."""
        self.features.add("loop")
        ty = self.rng.choice(["float", "int", "long", "half"])
        acc = Var(self.fresh(), "mn", ty, ty in INTS)
        trips = self.rng.choice(["3", "min(M, 5)", "4 + (pm % 3)"])
        step = self.rng.choice(["i++", "i += 2"])
        self.lines.append(f"  {ty} {acc.name}[TM, TN] = 0;")
        self.lines.append(f"  for (int i = 0; i < {trips}; {step}) {{")
        self.lines.append("    int rw[TM] = (rm + i) % M;")
        self.lines.append("    TA x[TM, TN] = *?(mask)(a + rw[:, newaxis] * N + rn[newaxis, :]);")
        e = self.expr("mn", 1)
        if ty in INTS:
            upd = f"{acc.name} = ({acc.name} ^ ({acc.name} << 3)) + (({ty}) x) * i + ({ty}) ({e.text} & 255)" \
                if e.ty in INTS else f"{acc.name} = {acc.name} * 3 + (({ty}) x) * i"
        else:
            upd = f"{acc.name} = {acc.name} * 0.5f + (({ty}) x) * ({ty}) i"
            if e.ty in FLOATS:
                upd += f" + ({ty}) ({e.text})"
            acc = Var(acc.name, "mn", ty, False)
        self.lines.append(f"    {upd};")
        self.lines.append("  }")
        self.vars.append(acc)

    def branch(self) -> None:
        """A tile assigned on both sides of an `if` on the program id."""
        self.features.add("if")
        kind = self.rng.choice(["mn", "m", "n"])
        v = self.define(kind, 1)
        a, b = self.expr(kind, 2), self.expr(kind, 2)
        if (v.ty in INTS) != (a.ty in INTS) or (v.ty in INTS) != (b.ty in INTS):
            a = b = Expr(f"{v.name} + 1", v.ty, True)  # no float -> int or int -> half conversions
        cond = self.rng.choice(["pm % 2 == 0", "pn > 0", "(pm + pn) % 3 == 1"])
        self.lines.append(f"  if ({cond}) {{ {v.name} = {a.text}; }} else {{ {v.name} = {b.text}; }}")
        exact = v.exact and a.exact and b.exact and (v.ty != "half" or a.ty == b.ty == "half")
        self.vars[-1] = Var(v.name, v.kind, v.ty, exact)

    # ------------------------------------------------------------ the wide kernels' statements
    def wide_statement(self) -> None:
        """One of the constructs only wide kernels have (see `generate`)."""
        if self.rng.random() < 0.5 and (v := self.pick(("mn",))):
            self.helper(v)
        else:
            self.while_loop()

    def helper(self, v: Var) -> None:
        """A `__device__` function of a tile and a row vector, called once (inlined)."""
        self.features.add("helper")
        rows = [u for u in self.vars if u.kind == "n" and (u.ty in INTS) == (v.ty in INTS)]
        u = self.rng.choice(rows) if rows else Var("y0", "n", v.ty, v.exact)
        if (u.ty in INTS) != (v.ty in INTS):  # (no float -> int conversion of a sum out of range)
            u = Var(f"(({v.ty}[TN]) 1)", "n", v.ty, True)
        name = f"h{len(self.helpers)}"
        op = self.rng.choice(["+", "-", "*"])
        self.helpers.append(f"__device__ {v.ty}[TM, TN] {name}({v.ty} x[TM, TN], {u.ty} y[TN]) {{\n"
                            f"  return ({v.ty}) (x {op} y[newaxis, :]);\n}}")
        out = Var(self.fresh(), "mn", v.ty, v.exact and u.exact and not (v.ty == "half" and u.ty != "half"))
        self.lines.append(f"  {v.ty} {out.name}[TM, TN] = {name}({v.name}, {u.name});")
        self.vars.append(out)

    def while_loop(self) -> None:
        """A tile updated in `while (1)` with `continue` and `break` on a counter."""
        self.features.add("while")
        v = self.define("mn", 1)
        w = f"w{self.counter}"
        limit = self.rng.choice(["3", "2 + (pm % 3)", "N % 4"])
        update = (f"{v.name} = ({v.name} ^ ({v.name} << 1)) + {w}" if v.ty in INTS else
                  f"{v.name} = {v.name} * 0.5f + {w}")
        self.lines += [f"  int {w} = 0;", "  while (1) {", f"    {w}++;", f"    if ({w} % 3 == 0) continue;",
                       f"    {update};", f"    if ({w} > {limit}) break;", "  }"]

    def dot_wide(self) -> None:
        """C = X @ Y as `dot`, of char operands into int (exact), or half ones into half or float."""
        self.features.add("dot")
        ty = self.rng.choice(["char", "half"])
        acc = "int" if ty == "char" else self.rng.choice(["float", "half"])
        self.lines.append("  int rk[TK] = 0 ... TK;")
        self.lines.append(f"  {ty} dx[TM, TK] = ({ty}) *?((rm[:, newaxis] < M) && (rk[newaxis, :] < N))"
                          "(a + rm[:, newaxis] * N + rk[newaxis, :]);")
        self.lines.append(f"  {ty} dy[TK, TN] = ({ty}) *?((rk[:, newaxis] < M) && (rn[newaxis, :] < N))"
                          "(a + rk[:, newaxis] * N + rn[newaxis, :]);")
        v = Var(self.fresh(), "mn", acc, ty == "char")
        self.lines.append(f"  {acc} {v.name}[TM, TN] = dx @ dy;")
        self.vars.append(v)

    def dot(self) -> None:
        """C = X @ Y with X [TM, TK] from A's rows and Y [TK, TN] from A's columns."""
        self.features.add("dot")
        ty = self.rng.choice(["half", "half", "float"])
        self.lines.append("  int rk[TK] = 0 ... TK;")
        self.lines.append(f"  {ty} dx[TM, TK] = ({ty}) *?((rm[:, newaxis] < M) && (rk[newaxis, :] < N))"
                          "(a + rm[:, newaxis] * N + rk[newaxis, :]);")
        self.lines.append(f"  {ty} dy[TK, TN] = ({ty}) *?((rk[:, newaxis] < M) && (rn[newaxis, :] < N))"
                          "(a + rk[:, newaxis] * N + rn[newaxis, :]);")
        v = Var(self.fresh(), "mn", "float", False)
        self.lines.append(f"  float {v.name}[TM, TN] = dx @ dy;")
        self.vars.append(v)


def generate(seed: int, wide: bool = False) -> Program:
    """The random kernel of `seed` (the same program on every machine and Python). `wide` kernels
    also have `__device__` helpers, `while` loops with `continue` and `break`, an early
    `return`, atomic max and min, and dots of char operands into int or of half ones into half,
    with K up to 64 (the plain kernels of a seed stay as they were)."""
    g = _Generator(seed, wide)
    rng = g.rng
    tm, tn = rng.choice(SHAPES)
    num_warps = rng.choice([1, 2, 4, 4, 8])
    while tm * tn > 256 * 32 * num_warps and rng.random() < 0.9:  # spills are rare, not the rule
        num_warps *= 2
    use_dot = tm >= 16 and tn >= 16 and tm * tn <= 128 * 128 and rng.random() < 0.25
    tk = rng.choice([16, 32]) if use_dot else 16
    ta, tb, tc = (rng.choice(list(DTYPES)) for _ in range(3))
    ts = rng.choice(["int", "float"])
    M = rng.randint(1, 3 * tm - 1) if rng.random() < 0.8 else 3 * tm + 1
    N = rng.randint(1, 3 * tn - 1) if rng.random() < 0.8 else tn + 3
    wide_dot = wide and not use_dot and tm >= 16 and tn >= 16 and tm * tn <= 128 * 128 and rng.random() < 0.3
    if wide_dot:
        tk = rng.choice([16, 32, 64])
    if use_dot or wide_dot:
        M, N = max(M, tk), max(N, tk)  # the dot's K extent (TK) reads within A
    grid = (math.ceil(M / tm), math.ceil(N / tn))
    g.vars = [Var("x0", "mn", ta, True), Var("y0", "n", tb, True), Var("z0", "m", tc, True),
              Var("s", "s", ts, True), Var("pm", "s", "int", True), Var("pn", "s", "int", True)]
    if use_dot:
        g.dot()
    if wide_dot:
        g.dot_wide()
    for _ in range(rng.randint(2, 7)):
        g.statement()
    if wide and rng.random() < 0.3:  # one program stores nothing (its outputs stay 0 on both sides)
        g.features.add("return")
        g.lines.append("  if (pm == 1 && pn == 0) return;")
    result = g.define("mn", 2)
    vec_m = g.define("m", 2)
    vec_n = g.define("n", 2)
    scalar_src = g.pick(("mn",))
    assert scalar_src is not None
    red = rng.choice(["max", "min", "+"])
    scalar_exact = scalar_src.exact and (red != "+" or scalar_src.ty in INTS)
    scalar_ty = _promote(scalar_src.ty, "int") if scalar_src.ty in INTS and red == "+" else scalar_src.ty
    body = list(g.lines)
    body.append(f"  {scalar_ty} total = {scalar_src.name}[{red}, {red}];")
    atomic = result.ty == "int" and rng.random() < 0.5
    atomic_op = rng.choice(["add", "max", "min"]) if wide and atomic else "add"
    flat = g.flat
    out_types = {"out": result.ty, "outm": vec_m.ty, "outn": vec_n.ty, "outs": scalar_ty,
                 "outf": flat.ty if flat else "int", "outa": "int"}
    params = ", ".join(f"{t}* {n}" for n, t in out_types.items())
    source_lines = [
        f"#define TM {tm}", f"#define TN {tn}", f"#define TK {tk}", f"#define TA {ta}", *g.helpers,
        f"__global__ void fuzz({params}, {ta}* a, {tb}* b, {tc}* c, int M, int N, int GN, {ts} s) {{",
        "  int pm = get_program_id(0);",
        "  int pn = get_program_id(1);",
        "  int rm[TM] = pm * TM + 0 ... TM;",
        "  int rn[TN] = pn * TN + 0 ... TN;",
        "  bool mask[TM, TN] = (rm[:, newaxis] < M) && (rn[newaxis, :] < N);",
        f"  {ta} x0[TM, TN] = *?(mask)(a + rm[:, newaxis] * N + rn[newaxis, :]);",
        f"  {tb} y0[TN] = *?(rn < N)(b + rn);",
        f"  {tc} z0[TM] = *?(rm < M)(c + rm);",
        *body,
        "  int prog = pm * GN + pn;",
        f"  *?(mask)(out + rm[:, newaxis] * N + rn[newaxis, :]) = {result.name};",
        f"  *?(rm < M)(outm + pn * M + rm) = {vec_m.name};",
        f"  *?(rn < N)(outn + pm * N + rn) = {vec_n.name};",
        "  *(outs + prog) = total;",
    ]
    if flat:
        source_lines.append("  *(outf + prog * (TM * TN) + (0 ... (TM * TN))) = flat;")
    if atomic:
        g.features.add("atomic")
        red_op = {"add": "+"}.get(atomic_op, atomic_op)
        source_lines.append(f"  atomic_{atomic_op}(outa + rn, {result.name}[{red_op}, :], rn < N);")
    source_lines.append("}")
    source = "\n".join(source_lines) + "\n"

    programs = grid[0] * grid[1]

    def make_args() -> list[Any]:
        data = np.random.default_rng(seed)

        def values(shape: tuple[int, ...], ty: str) -> Array:
            dtype = DTYPES[ty]
            if ty in FLOATS:
                return data.uniform(-3, 3, shape).astype(dtype)
            lo, hi = (-100, 100) if ty in ("char", "short") else (-1000, 1000)
            return data.integers(0 if ty == "uint32" else lo, hi, shape).astype(dtype)

        return [np.zeros((M, N), DTYPES[result.ty]), np.zeros((grid[1], M), DTYPES[vec_m.ty]),
                np.zeros((grid[0], N), DTYPES[vec_n.ty]), np.zeros(programs, DTYPES[scalar_ty]),
                np.zeros((programs, tm * tn), DTYPES[flat.ty if flat else "int"]),
                np.zeros(N, np.int32),
                values((M, N), ta), values((N,), tb), values((M,), tc), M, N, grid[1],
                float(data.uniform(-2, 2)) if ts == "float" else int(data.integers(-50, 50))]

    outputs = [Output(0, result.exact, "result"), Output(1, vec_m.exact, "[TM] vector"),
               Output(2, vec_n.exact, "[TN] vector"), Output(3, scalar_exact, "scalar")]
    if flat:
        outputs.append(Output(4, flat.exact, "reshaped tile"))
    if atomic:
        outputs.append(Output(5, True, "atomic sums"))
    return Program(seed, source, num_warps, grid, make_args, tuple(outputs), tuple(sorted(g.features)))


def tolerance(program: Program, dtype: Any) -> tuple[float, float]:
    """(rtol, atol relative to the output's largest magnitude) for inexact float outputs: half
    precision's where the kernel computes in half anywhere (a half sum rounds at every step on
    one side and may not on the other), single precision's otherwise."""
    return (2e-2, 2e-2) if dtype == np.float16 or "half" in program.source else (2e-4, 2e-4)


def compare(program: Program, want: list[Any], got: list[Any]) -> list[str]:
    """The differences between the interpreter's outputs (`want`) and the GPU's (`got`)."""
    problems = []
    for out in program.outputs:
        w, g = np.asarray(want[out.index]), np.asarray(got[out.index]).reshape(np.shape(want[out.index]))
        if w.dtype.kind in "iub" or out.exact:
            same = np.array_equal(w, g, equal_nan=w.dtype.kind == "f")
            if not same:
                bad = np.argwhere(~((w == g) | (np.isnan(w) & np.isnan(g)) if w.dtype.kind == "f" else w == g))
                i = tuple(bad[0])
                problems.append(f"{out.what} (output {out.index}, exact): {len(bad)} of {w.size} differ; "
                                f"first at {i}: interpreter {w[i]!r}, GPU {g[i]!r}")
            continue
        wf, gf = w.astype(np.float64), g.astype(np.float64)
        rtol, atol = tolerance(program, w.dtype)
        finite = np.isfinite(wf)
        scale = float(np.abs(wf[finite]).max()) if finite.any() else 1.0
        close = np.isclose(gf, wf, rtol=rtol, atol=atol * max(1.0, scale), equal_nan=True)
        # a sum that overflows does so in any order, to +inf, -inf or NaN as the order has it,
        # and a half sum near the top of half's range overflows in one order and not in another
        huge = 3e4 if rtol > 1e-3 else 1e37
        overflow = ~np.isfinite(wf) | ~np.isfinite(gf)
        close |= overflow & (np.nan_to_num(np.maximum(np.abs(wf), np.abs(gf)), nan=np.inf) > huge)
        # one element in a hundred may be ill-conditioned (a half sum that cancels, then divides)
        if (~close).sum() > max(1, w.size // 100):
            bad = np.argwhere(~close)
            i = tuple(bad[0])
            problems.append(f"{out.what} (output {out.index}): {len(bad)} of {w.size} differ; first at {i}: "
                            f"interpreter {w[i]!r}, GPU {g[i]!r} (scale {scale:.3g})")
    return problems


def interpret(program: Program) -> list[Any]:
    """The kernel's arguments after a run on the CPU interpreter."""
    import tc_runtime as tc

    args = program.make_args()
    tc.kernel(program.source, device="cpu")(*args, grid=program.grid)
    return args


def run_gpu(program: Program) -> list[Any]:
    """The kernel's arguments (numpy arrays) after a run on the GPU."""
    import torch

    import tc_runtime as tc

    want = program.make_args()
    args = [to_device(a) if isinstance(a, np.ndarray) else a for a in want]
    tc.kernel(program.source, device="cuda", num_warps=program.num_warps)(*args, grid=program.grid)
    torch.cuda.synchronize()
    return [from_device(g, w) if isinstance(w, np.ndarray) else w for g, w in zip(args, want)]


def compile_for(program: Program, arch: str = "sm_90") -> None:
    """Compile and assemble the kernel as the GPU launch would (no GPU needed)."""
    import tc_nvptx
    from tc_opt.options import CompileOptions

    tc_nvptx.compile(program.source, options=CompileOptions(arch=arch, num_warps=program.num_warps))


def to_device(a: Array) -> Any:
    """A CUDA tensor of `a` (unsigned arrays travel as the signed type of their width: torch
    lacks most unsigned types)."""
    import torch

    view = a.view(np.dtype(f"i{a.dtype.itemsize}")) if a.dtype.kind == "u" and a.dtype.itemsize > 1 else a
    return torch.from_numpy(np.ascontiguousarray(view)).cuda()


def from_device(t: Any, like: Array) -> Array:
    """The numpy array of a tensor made by `to_device(like)`."""
    out: Array = np.asarray(t.cpu().numpy()).view(like.dtype)
    return out.reshape(like.shape)
