"""Defines, configs, the `opt` object of grid callables, and grid validation.

A kernel's defines are the -D values of the preprocessor. The grid callable receives them back as
attributes of `opt` (so `opt.BLOCK` is the int 1024 whether the user wrote 1024 or "1024"), which is
how the launch grid follows a tuned block size.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, Union

DefineValue = Union[str, int, float, bool]

#: Limits of the CUDA grid (x, y, z) used where no device is known (the CPU interpreter).
DEFAULT_MAX_GRID = (2**31 - 1, 65535, 65535)

_DTYPE_NAMES = {
    "torch.float32": "float", "torch.float": "float", "torch.float16": "half",
    "torch.half": "half", "torch.bfloat16": "bf16", "torch.float64": "double",
    "torch.int32": "int", "torch.int64": "long", "torch.int16": "short", "torch.int8": "char",
    "torch.bool": "bool", "float32": "float", "float16": "half", "bfloat16": "bf16",
    "float64": "double", "int32": "int", "int64": "long", "int16": "short", "int8": "char",
}


#: Float values C has no literal for, as tc's built-in constants (tc_lang's define_text agrees).
_NONFINITE = {"F32_INFINITY": math.inf, "(-F32_INFINITY)": -math.inf, "F32_NAN": math.nan}


def define_text(name: str, value: object) -> str:
    """The preprocessor text of one define value (bool -> 1/0, dtypes -> C type names, inf and
    nan -> the built-in constants: Python's repr `inf` would be an undeclared name)."""
    if isinstance(value, bool) or (type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_")):
        return "1" if value else "0"  # (numpy's bool is not a Python bool)
    if isinstance(value, float) and not math.isfinite(value):
        return "F32_NAN" if math.isnan(value) else "F32_INFINITY" if value > 0 else "(-F32_INFINITY)"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return _DTYPE_NAMES.get(value, value)
    if hasattr(type(value), "__index__"):  # numpy and torch integers (np.int64(8))
        return repr(operator.index(value))  # type: ignore[arg-type]
    if isinstance(value, numbers.Real):  # numpy floats that are not Python floats (np.float32)
        return define_text(name, float(value))
    text = str(value)  # a torch/numpy dtype object
    if text in _DTYPE_NAMES:
        return _DTYPE_NAMES[text]
    raise TypeError(f"define {name!r}: value {value!r} of type {type(value).__name__} is not a "
                    f"str, int, float, bool or dtype")


def normalize_defines(defines: Mapping[str, object] | None) -> tuple[dict[str, str],
                                                                      dict[str, list[str]]]:
    """Split user defines into fixed values and auto-tuning axes (list values), both as text."""
    fixed: dict[str, str] = {}
    axes: dict[str, list[str]] = {}
    if defines is None:
        return fixed, axes
    if not isinstance(defines, Mapping):
        raise TypeError(f"defines must be a dict of name -> value, got {type(defines).__name__}")
    for name, value in defines.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise TypeError(f"define name {name!r} is not a C identifier")
        if isinstance(value, (list, tuple)):
            if not value:
                raise ValueError(f"define {name!r}: an auto-tuning list must not be empty")
            axes[name] = [define_text(name, v) for v in value]
        else:
            fixed[name] = define_text(name, value)
    return fixed, axes


def _value(text: str) -> int | float | str:
    if text in _NONFINITE:
        return _NONFINITE[text]
    try:
        return int(text, 0)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


class Config:
    """One point of an auto-tuning space: defines merged over the kernel's, plus launch options
    and compiler options of its own (`schedule_options`: how a Hopper matmul is scheduled),
    merged over the kernel's."""

    def __init__(self, defines: Mapping[str, object] | None = None, num_warps: int = 4,
                 num_stages: int = 3, options: Mapping[str, object] | None = None) -> None:
        fixed, axes = normalize_defines(defines)
        if axes:
            raise TypeError(f"config defines must be single values, got lists for {sorted(axes)}")
        self.defines = fixed
        self.num_warps = check_num_warps(num_warps)
        self.num_stages = check_num_stages(num_stages)
        self.options = schedule_options(options)

    def __repr__(self) -> str:
        extra = f", options={self.options!r}" if self.options else ""
        return (f"config(defines={self.defines!r}, num_warps={self.num_warps}, "
                f"num_stages={self.num_stages}{extra})")

    def key(self) -> tuple[object, ...]:
        """The configuration as a hashable tuple, equal for equal configurations (to drop duplicates)."""
        base = (tuple(sorted(self.defines.items())), self.num_warps, self.num_stages)
        return (*base, tuple(sorted(self.options.items()))) if self.options else base


def config(defines: Mapping[str, object] | None = None, num_warps: int = 4,
           num_stages: int = 3, options: Mapping[str, object] | None = None) -> Config:
    """tc.config(defines, num_warps, num_stages, options=None): one auto-tuning configuration;
    `options` (see `schedule_options`) lets the auto-tuner compare schedules of a Hopper matmul,
    e.g. options={"persistent": True, "tma_store": True}."""
    return Config(defines, num_warps, num_stages, options)


#: The compiler options a configuration may set (tc_opt.CompileOptions fields): TMA operand copies,
#: TMA bulk-store epilogues, a producer warp (warp specialization), a persistent grid (one
#: program per SM looping over the programs; with a producer warp unless warp_specialize=False
#: is given, and without one where the compiler refuses it), in a persistent grid with a
#: producer, each program's first dot issued before the previous program's stores, with a
#: producer, a producer warpgroup that hands its registers to the consumers and, persistent with a
#: producer, clusters of 2 CTAs that multicast the operand tiles they share (of 4, 2 x 2 tiles
#: sharing both operands, with cluster_2x2) and, persistent without a producer, stream-K
#: sharing of the last waves of programs (tc_opt.stream_k).
SCHEDULE_OPTIONS = ("tma", "tma_store", "warp_specialize", "persistent", "overlap_epilogue", "producer_warpgroup",
                    "cluster_multicast", "cluster_2x2", "stream_k")


def schedule_options(options: Mapping[str, object] | None) -> dict[str, object]:
    """A configuration's compiler options, checked: booleans among SCHEDULE_OPTIONS (persistent
    adds warp_specialize where it is not given)."""
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise TypeError(f"config options must be a dict, got {type(options).__name__}")
    out: dict[str, object] = {}
    for name, value in options.items():
        if name not in SCHEDULE_OPTIONS:
            raise ValueError(f"config option {name!r} is not one of {', '.join(SCHEDULE_OPTIONS)}")
        if not isinstance(value, bool):
            raise TypeError(f"config option {name!r} must be True or False, got {value!r}")
        out[name] = value
    if out.get("persistent"):
        out.setdefault("warp_specialize", True)
    if out.get("cluster_multicast") and not (out.get("persistent") and out.get("warp_specialize")):
        raise ValueError("config option 'cluster_multicast' needs 'persistent' (with its producer warp): "
                         "only a persistent warp-specialized kernel runs in clusters")
    if out.get("cluster_2x2") and not out.get("cluster_multicast"):
        raise ValueError("config option 'cluster_2x2' needs 'cluster_multicast': it makes that option's "
                         "clusters of 2 clusters of 4")
    if out.get("stream_k") and not out.get("persistent"):
        raise ValueError("config option 'stream_k' needs 'persistent': stream-K shares the programs of a "
                         "persistent grid")
    return out


def check_name_and_filename(name: object, filename: object) -> None:
    """The kernel's `name` (None or a C identifier) and `filename` (a str, shown in errors)."""
    if name is not None and (not isinstance(name, str) or not name.isidentifier()):
        raise ValueError(f"name must be the identifier of a __global__ kernel, got {name!r}")
    if not isinstance(filename, str):
        raise TypeError(f"filename must be a str (the name errors show for the source), got "
                        f"{type(filename).__name__} {filename!r}")


#: The warps a program may have: powers of two, and 12 (three warpgroups). tc_opt.options'
#: NUM_WARPS says the same to the compiler (this package does not depend on it).
NUM_WARPS = (1, 2, 4, 8, 12, 16, 32)


def check_num_warps(n: object) -> int:
    """`n` when it is a number of warps a program may have (a ValueError names the choices)."""
    if isinstance(n, bool) or not isinstance(n, int) or n not in NUM_WARPS:
        raise ValueError(f"num_warps must be one of {', '.join(map(str, NUM_WARPS))} (at most 1024 threads "
                         f"per block; 12: three warpgroups), got {n!r}")
    return n


def check_num_stages(n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 16:
        raise ValueError(f"num_stages must be an int from 1 to 16, got {n!r}")
    return n


class Options:
    """The `opt` given to grid callables: the effective defines as attributes, plus num_warps.

    The defines are plain instance attributes (set once), so `opt.BLOCK` in a grid lambda is an
    ordinary attribute read on the launch path; `__getattr__` only runs for unknown names."""

    defines: dict[str, str]
    num_warps: int
    num_stages: int

    def __init__(self, defines: Mapping[str, str], num_warps: int, num_stages: int) -> None:
        values = {k: _value(v) for k, v in defines.items()}
        self.__dict__.update(values)
        self.defines = dict(defines)
        self.num_warps = num_warps
        self.num_stages = num_stages
        self._values = values

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_values":
            raise AttributeError(name)
        known = ", ".join(sorted(self.defines)) or "none"
        raise AttributeError(f"opt has no attribute {name!r}: the kernel's defines are "
                             f"{known} (also num_warps, num_stages)")

    def d(self, name: str) -> Any:
        """The 2020 spelling, opt.d('BLOCK')."""
        return getattr(self, name)

    def __repr__(self) -> str:
        return (f"opt({', '.join(f'{k}={v!r}' for k, v in self._values.items())}, "
                f"num_warps={self.num_warps}, num_stages={self.num_stages})")


GridSpec = Union[Sequence[int], int, Callable[[Options], Any]]


def normalize_grid(grid: object, opt: Options, max_grid: Sequence[int] = DEFAULT_MAX_GRID,
                   kernel: str = "kernel") -> tuple[int, int, int]:
    """A grid tuple or callable -> (x, y, z), checked against the CUDA limits."""
    if grid is None:
        raise TypeError(f"launching '{kernel}' needs a grid: k(*args, grid=lambda opt: (...,))")
    if callable(grid):
        grid = grid(opt)
    if isinstance(grid, int) and not isinstance(grid, bool):
        dims: list[object] = [grid]
    elif isinstance(grid, (tuple, list)):
        dims = list(grid)
    elif isinstance(grid, (Mapping, AbstractSet, str, bytes, bytearray, memoryview)):
        # (iterable, but not an ordered x, y, z; bytes would iterate as small ints)
        raise TypeError(f"grid of '{kernel}' must be a tuple of 1 to 3 ints (or a callable "
                        f"returning one), got {type(grid).__name__}")
    else:
        try:
            dims = list(grid)  # type: ignore[call-overload]
        except TypeError:
            raise TypeError(f"grid of '{kernel}' must be a tuple of 1 to 3 ints (or a callable "
                            f"returning one), got {type(grid).__name__}") from None
    if not 1 <= len(dims) <= 3:
        raise ValueError(f"grid of '{kernel}' must have 1 to 3 dimensions, got {len(dims)}: "
                         f"{tuple(dims)}")
    out = [1, 1, 1]
    for i, d in enumerate(dims):
        if isinstance(d, (bool, float)):
            raise TypeError(f"grid dimension {'xyz'[i]} of '{kernel}' must be an int, got {d!r}")
        try:
            v = operator.index(d)  # type: ignore[arg-type]
        except TypeError:
            raise TypeError(f"grid dimension {'xyz'[i]} of '{kernel}' must be an int, got "
                            f"{type(d).__name__}") from None
        if v < 0:
            raise ValueError(f"grid dimension {'xyz'[i]} of '{kernel}' is negative: {v}")
        if v > max_grid[i]:
            raise ValueError(f"grid dimension {'xyz'[i]} of '{kernel}' is {v}, above the CUDA "
                             f"limit of {max_grid[i]}")
        out[i] = v
    return out[0], out[1], out[2]


#: fp32_dot values: the float32 product of `@` (exact by default, tf32 tensor cores on request).
FP32_DOT = ("ieee", "tf32")


def compile_options(fp32_dot: object = "ieee", precise_math: object = False,
                    tma: object = True, tma_store: object = False) -> dict[str, object]:
    """The compiler options a kernel asks for beyond the defaults, checked: `fp32_dot` ("ieee" or
    "tf32"), `precise_math` (accurate exp, log, sin, ... and IEEE division instead of the fast
    approximate versions the language has by default) and `tma` (False keeps Hopper's dot
    operands on cp.async copies instead of TMA: tc_opt.tma), `tma_store` (True: whole-tile
    stores such as a matmul's epilogue become TMA bulk stores: tc_opt.tma_store). Only non-default values are kept,
    so that kernels without options share their cache entries with earlier versions."""
    if fp32_dot not in FP32_DOT:
        raise ValueError(f"fp32_dot must be 'ieee' or 'tf32', got {fp32_dot!r}")
    if not isinstance(precise_math, bool):
        raise TypeError(f"precise_math must be True or False, got {precise_math!r}")
    if not isinstance(tma, bool):
        raise TypeError(f"tma must be True or False, got {tma!r}")
    if not isinstance(tma_store, bool):
        raise TypeError(f"tma_store must be True or False, got {tma_store!r}")
    out: dict[str, object] = {}
    if not tma:
        out["tma"] = False
    if tma_store:
        out["tma_store"] = True
    if fp32_dot != "ieee":
        out["fp32_dot"] = fp32_dot
    if precise_math:
        out["precise_math"] = True
    return out
