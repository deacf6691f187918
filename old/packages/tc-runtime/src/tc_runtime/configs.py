"""The auto-tuning space of a kernel: its configurations and the arguments that key the choice.

A define whose value is a list is an axis (the spec's `-DSIZE=[32, 64, 128, 256]`); the axes are
crossed with each other and with `autotune_configs` (each config's defines are merged over the
kernel's, as in the original runtime).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

from .options import Config
from .signature import Signature


def expand_configs(fixed: dict[str, str], axes: dict[str, list[str]], num_warps: int,
                   num_stages: int, autotune_configs: Sequence[Config] | None) -> list[Config]:
    """Every configuration of the tuning space: the Cartesian product of the list-valued
    defines, crossed with the autotune configs (whose defines win over the axes)."""
    if autotune_configs is not None and not isinstance(autotune_configs, (list, tuple)):
        raise TypeError(f"autotune_configs must be a list of tc.config(...) objects, got "
                        f"{type(autotune_configs).__name__}")
    for c in autotune_configs or ():
        if not isinstance(c, Config):
            raise TypeError(f"autotune_configs must hold tc.config(...) objects, got "
                            f"{type(c).__name__}")
    names = list(axes)
    points = [dict(zip(names, values)) for values in itertools.product(*(axes[n] for n in names))]
    out: list[Config] = []
    seen: set[object] = set()
    for point in points:
        if autotune_configs:
            candidates = [Config({**fixed, **point, **c.defines}, c.num_warps, c.num_stages, c.options)
                          for c in autotune_configs]
        else:
            candidates = [Config({**fixed, **point}, num_warps, num_stages)]
        for c in candidates:
            if c.key() not in seen:  # an axis overridden by every config gives duplicates
                seen.add(c.key())
                out.append(c)
    return out


def check_key(key: Sequence[str] | None) -> list[str]:
    """autotune_key as a list of argument names."""
    if key is None:
        return []
    if isinstance(key, str):
        raise TypeError(f"autotune_key must be a list of argument names, got the str {key!r}")
    if not isinstance(key, Iterable):
        raise TypeError(f"autotune_key must be a list of argument names, got "
                        f"{type(key).__name__} {key!r}")
    out = []
    for k in key:
        if not isinstance(k, str):
            raise TypeError(f"autotune_key entries must be argument names, got {k!r}")
        out.append(k)
    return out


def key_indices(key: Sequence[str], sig: Signature, n_configs: int) -> list[int]:
    """The argument positions whose values key the auto-tuner's choice. Without an explicit
    autotune_key, a kernel with several configurations re-tunes for each new value of its
    integer arguments (the spec: "every time a new value of N is encountered")."""
    for k in key:
        if k not in sig.names:
            raise ValueError(f"autotune_key: '{k}' is not a valid argument name of "
                             f"{sig.describe()}")
    if n_configs <= 1:
        return []
    if key:
        return [sig.names.index(k) for k in key]
    return list(sig.int_indices)
