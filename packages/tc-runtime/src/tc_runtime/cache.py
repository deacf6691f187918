"""Content-addressed disk cache of compiled kernels.

One directory per key (`<root>/<key[:2]>/<key>/`) with `meta.json` (the kernel's metadata and the
sha256 of every other file), `kernel.ptx`, `kernel.cubin` (when ptxas ran) and `asm.json` (stage
texts). An entry is written into a temporary directory and published with one `rename`, so readers
see a whole entry or none; an entry whose files do not match their checksums (a crash, a full disk,
a hand edit) is removed and rebuilt. A cache that cannot be written never fails a launch: it warns
once and the kernel runs from memory.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import knobs
from .binary import KernelBinary

FORMAT = 1
#: The files of a cache entry besides meta.json (which lists those present with their sha256).
ENTRY_FILES = ("kernel.ptx", "asm.json", "kernel.cubin")
_warned = False


def cache_key(components: Mapping[str, Any]) -> str:
    """sha256 (hex) of the components as canonical JSON (sorted keys, no whitespace)."""
    text = json.dumps(components, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _warn(message: str) -> None:
    global _warned
    if not _warned:
        _warned = True
        warnings.warn(f"tc kernel cache disabled for this process: {message}", RuntimeWarning,
                      stacklevel=3)


def _read_entry(path: Path, key: str | None) -> KernelBinary:
    meta = json.loads((path / "meta.json").read_text())
    if not isinstance(meta, dict):
        raise ValueError("meta.json is not an object")
    if meta.get("format") != FORMAT or (key is not None and meta.get("key") != key):
        raise ValueError("cache entry of another format or key")
    files: dict[str, str] = meta["files"]
    if not isinstance(files, dict):
        raise ValueError("meta.json's files is not an object")
    blobs: dict[str, bytes] = {}
    for name, digest in files.items():
        if name not in ENTRY_FILES:  # (an entry reads its own files only, never a path elsewhere)
            raise ValueError(f"meta.json names {name!r}, not one of the entry's files ({', '.join(ENTRY_FILES)})")
        data = (path / name).read_bytes()
        if _sha(data) != digest:
            raise ValueError(f"checksum mismatch in {name}")
        blobs[name] = data
    asm = json.loads(blobs["asm.json"]) if "asm.json" in blobs else {}
    return KernelBinary.from_parts(meta["kernel"], blobs["kernel.ptx"].decode(),
                                   blobs.get("kernel.cubin"), asm)


def read_entry(path: Path) -> KernelBinary:
    """A kernel directory in the cache's format (e.g. copied out of the cache), verified."""
    try:
        return _read_entry(path, None)
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"{path} is not a tc kernel directory: {exc}") from None
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not a valid tc kernel directory: {exc}") from None


class KernelCache:
    """The kernel cache under `root` (default: TC_CACHE_DIR or the user cache directory)."""

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        if root is not None and not isinstance(root, (str, os.PathLike)):
            raise TypeError(f"KernelCache root must be a directory path (str or os.PathLike), got "
                            f"{type(root).__name__}")
        self.root = Path(root) if root is not None else knobs.cache_dir()

    def entry_dir(self, key: str) -> Path:
        """The directory of the entry for `key` (whether or not it exists)."""
        return self.root / key[:2] / key

    # ------------------------------------------------------------------------------------ read

    def get(self, key: str) -> KernelBinary | None:
        """The cached kernel, or None on a miss or a corrupt entry (which is removed)."""
        path = self.entry_dir(key)
        if not path.is_dir():
            return None
        try:
            return self._read(path, key)
        except (OSError, ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
            self._discard(path)
            return None

    def _read(self, path: Path, key: str) -> KernelBinary:
        return _read_entry(path, key)

    # ----------------------------------------------------------------------------------- write

    def put(self, key: str, binary: KernelBinary) -> Path | None:
        """Store atomically; returns the entry directory (None if the cache is not writable)."""
        final = self.entry_dir(key)
        blobs = {"kernel.ptx": binary.ptx.encode(),
                 "asm.json": json.dumps(binary.asm, sort_keys=True).encode()}
        if binary.cubin:
            blobs["kernel.cubin"] = binary.cubin
        meta = {"format": FORMAT, "key": key, "kernel": binary.metadata(),
                "files": {name: _sha(data) for name, data in blobs.items()}}
        tmp = self.root / f".tmp-{os.getpid()}-{uuid.uuid4().hex}"
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            tmp.mkdir(parents=True)
            for name, data in blobs.items():
                (tmp / name).write_bytes(data)
            (tmp / "meta.json").write_text(json.dumps(meta, sort_keys=True, indent=1))
            if final.exists():
                if self.get(key) is not None:  # another process was first: keep its entry
                    shutil.rmtree(tmp, ignore_errors=True)
                    return final
                # get() removed the corrupt leftover
            try:
                os.rename(tmp, final)
            except OSError:
                if not final.is_dir():  # not a lost race with another writer: a real failure
                    raise
                shutil.rmtree(tmp, ignore_errors=True)
            return final
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            _warn(f"cannot write {self.root}: {exc}")
            return None

    # --------------------------------------------------------------- small JSON records

    def record_path(self, key: str) -> Path:
        """The file of the small JSON record for `key` (whether or not it exists)."""
        return self.root / key[:2] / f"{key}.json"

    def get_record(self, key: str) -> dict[str, Any] | None:
        """A small JSON record (kernel signatures, later auto-tuning results); None if missing or
        corrupt (a corrupt one is removed)."""
        path = self.record_path(key)
        try:
            wrapper = json.loads(path.read_text())
            body = wrapper["body"]
            if wrapper.get("key") != key or wrapper.get("sha256") != _sha(
                    json.dumps(body, sort_keys=True).encode()):
                raise ValueError("checksum mismatch")
            return dict(body)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError):
            try:
                path.unlink()
            except OSError:
                pass
            return None

    def put_record(self, key: str, body: Mapping[str, Any]) -> None:
        """Write a record atomically (temp file + os.replace)."""
        path = self.record_path(key)
        data = {"key": key, "body": dict(body),
                "sha256": _sha(json.dumps(dict(body), sort_keys=True).encode())}
        tmp = path.with_name(f".tmp-{os.getpid()}-{uuid.uuid4().hex}.json")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(data, sort_keys=True))
            os.replace(tmp, path)
        except OSError as exc:
            try:
                tmp.unlink()
            except OSError:
                pass
            _warn(f"cannot write {self.root}: {exc}")

    def _discard(self, path: Path) -> None:
        """Remove an entry so that nobody reads it half-deleted: rename first, then delete."""
        trash = self.root / f".trash-{uuid.uuid4().hex}"
        try:
            os.rename(path, trash)
        except OSError:
            trash = path
        shutil.rmtree(trash, ignore_errors=True)

    def clear(self) -> None:
        """Delete every entry (tests, `tc cache clear`)."""
        if self.root.is_dir():
            for child in self.root.iterdir():
                shutil.rmtree(child, ignore_errors=True) if child.is_dir() else child.unlink()
