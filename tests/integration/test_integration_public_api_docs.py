"""Every function and class a tc package exports has a docstring of its own, and so does every
public method defined on an exported class (one inherited from a base class, such as Pass.run's,
says nothing of what the subclass does).

Users learn the API from help() and their editor's hover text, which show nothing else: an
exported name without a docstring is an undocumented part of the API.
"""

from __future__ import annotations

import importlib
import inspect

PACKAGES = ["tc_lang", "tc_ir", "tc_opt", "tc_nvptx", "tc_runtime", "tc_torch"]


def _exported(package: str) -> list[tuple[str, object]]:
    """The package's `__all__` (or its public attributes) that are functions or classes."""
    module = importlib.import_module(package)
    names = getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")]
    return [(f"{package}.{n}", obj) for n in names
            if inspect.isfunction(obj := getattr(module, n)) or inspect.isclass(obj)]


def _documented(obj: object) -> bool:
    """Whether `obj` has a non-empty docstring of its own (inspect.getdoc would inherit one)."""
    return bool((getattr(obj, "__doc__", None) or "").strip())


def _undocumented() -> list[str]:
    missing = []
    for package in PACKAGES:
        for name, obj in _exported(package):
            if not _documented(obj):
                missing.append(name)
            if inspect.isclass(obj):
                missing += [f"{name}.{attr}" for attr, value in vars(obj).items()
                            if not attr.startswith("_") and inspect.isfunction(value) and not _documented(value)]
    return missing


def test_public_api_is_documented() -> None:
    missing = _undocumented()
    assert not missing, f"{len(missing)} public names without a docstring:\n  " + "\n  ".join(missing)
