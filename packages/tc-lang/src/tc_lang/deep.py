"""Passes over deep syntax trees: run on a thread with a large stack under a raised recursion limit.

A flat sum `x0 + x1 + ... + x1999` is a left-deep tree 2000 levels deep, and the checker and the
IR lowering recurse once or more per level (the lowering four frames a level): Python's default
recursion limit of 1000 stopped them near 250 terms. `run_deep(tree, fn, ...)` runs `fn` where
the tree is deeper than `SHALLOW` on a worker thread with a stack of `STACK_BYTES` (reserved, not
committed) while the interpreter's recursion limit is at least `RECURSION_LIMIT`; shallower trees
(nearly every kernel) run in the calling thread as before. The limit is per interpreter: it is
raised while any such run is active and restored after the last. A tree deeper than that still
ends in the RecursionError each pass reports as a located error (E0211, E0601), and the stack is
large enough that it is an error, never a crash.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from typing import ParamSpec, TypeVar

import attrs

from . import ast

P = ParamSpec("P")
R = TypeVar("R")

#: Trees at most this deep run in the calling thread (the lowering takes 4 frames a level of an
#: expression, a few more for a statement: well under Python's default limit of 1000).
SHALLOW = 64
#: The recursion limit of deep runs: about 12,000 levels of a left-deep chain in the lowering.
RECURSION_LIMIT = 50_000
#: The worker's stack. Python-to-Python calls take none of it (CPython 3.11 and later); recursion
#: through C (attrs equality, repr, nested generators) took at most 1.6 KiB a level (64 MiB held
#: 40,000 levels): room for RECURSION_LIMIT such levels three times over.
STACK_BYTES = 256 << 20

_lock = threading.Lock()
_active = 0
_saved_limit = 0
_local = threading.local()


def children(node: ast.Node) -> Iterator[ast.Node]:
    """The direct child nodes of `node` (in its fields and tuples of nodes), in field order."""
    names = _CHILD_FIELDS.get(type(node))
    if names is None:
        names = _CHILD_FIELDS[type(node)] = _child_fields(type(node))
    for name in names:
        value = getattr(node, name)
        if isinstance(value, ast.Node):
            yield value
        elif isinstance(value, tuple):
            yield from (item for item in value if isinstance(item, ast.Node))


def tree_depth(root: ast.Node, limit: int | None = None) -> int:
    """The depth of the syntax tree under `root` (its nodes and tuples of nodes), counted without
    recursion; only up to a first level deeper than `limit` when one is given."""
    depth = 0
    stack: list[tuple[ast.Node, int]] = [(root, 1)]
    while stack:
        node, d = stack.pop()
        if d > depth:
            depth = d
            if limit is not None and depth > limit:
                break
        stack.extend((child, d + 1) for child in children(node))
    return depth


#: The fields of each node class that may hold nodes (its location and checked type never do).
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_fields(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in attrs.fields(cls)
                 if f.name not in ("loc", "ty", "const", "warnings", "source_map"))


def run_deep(tree: ast.Node, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """`fn(*args, **kwargs)`, a pass over `tree`: on a worker thread with a large stack and a
    raised recursion limit when the tree is deeper than SHALLOW (its result returned, its
    exception raised here), else (or already on such a worker) in this thread."""
    if getattr(_local, "deep", False) or tree_depth(tree, SHALLOW) <= SHALLOW:
        return fn(*args, **kwargs)
    result: list[R] = []
    error: list[BaseException] = []

    def work() -> None:
        _local.deep = True
        try:
            result.append(fn(*args, **kwargs))
        except BaseException as e:  # (raised again in the caller's thread)
            error.append(e)

    try:
        worker = _start(work)
    except (RuntimeError, ValueError, MemoryError):  # no thread or no such stack: as before
        return fn(*args, **kwargs)
    try:
        worker.join()
    finally:
        _lower_limit()
    if error:
        raise error[0]
    return result[0]


def _start(work: Callable[[], None]) -> threading.Thread:
    """`work` started on a daemon thread of STACK_BYTES under the raised recursion limit."""
    global _active, _saved_limit
    with _lock:
        if _active == 0:
            _saved_limit = sys.getrecursionlimit()
            sys.setrecursionlimit(max(_saved_limit, RECURSION_LIMIT))
        _active += 1
        try:
            old = threading.stack_size(STACK_BYTES)
            try:
                worker = threading.Thread(target=work, name="tc-deep-tree", daemon=True)
                worker.start()
            finally:
                threading.stack_size(old)
        except BaseException:
            _active -= 1
            _restore_limit()
            raise
    return worker


def _lower_limit() -> None:
    global _active
    with _lock:
        _active -= 1
        _restore_limit()


def _restore_limit() -> None:
    """Back to the limit from before the first active run (unless someone changed it since)."""
    if _active == 0 and sys.getrecursionlimit() == max(_saved_limit, RECURSION_LIMIT):
        sys.setrecursionlimit(_saved_limit)


__all__ = ["RECURSION_LIMIT", "SHALLOW", "STACK_BYTES", "children", "run_deep", "tree_depth"]
