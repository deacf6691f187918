"""The runtime's own record of a compiled kernel (what the disk cache stores and the driver loads).

It mirrors the fields of `tc_nvptx.CompiledKernel` but belongs to the runtime, so that loading a
kernel from the cache (or a precompiled file) never imports a compiler package.

Precompiled kernel files (what `tcc ... -o OUT` writes and `tc_runtime.load` reads):
  - OUT.ptx or OUT.cubin, with the metadata next to it in OUT.ptx.json / OUT.cubin.json: the dict
    of `tc_nvptx.CompiledKernel.to_json()` (name, arch, signature, arg_names, num_warps, ...);
  - or one OUT.json holding everything: that metadata plus "ptx" (text) and "cubin" (base64), the
    text of `CompiledKernel.dumps()`.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from pathlib import Path
from typing import Any

import attrs

#: The metadata versions this runtime understands (`tc_nvptx.compiler.METADATA_VERSION`).
METADATA_VERSIONS = (1,)


@attrs.frozen
class KernelBinary:
    """A compiled kernel as the runtime keeps and loads it: the PTX, the cubin when ptxas ran, and the
    metadata a launch needs."""

    name: str
    arch: str
    ptx: str
    cubin: bytes | None
    signature: tuple[str, ...]
    arg_names: tuple[str, ...]
    num_warps: int
    shared_bytes: int = 0
    registers: int | None = None
    spills: int | None = None
    num_stages: int = 3
    #: text of each compilation stage ("ir", "llvm", "ptx", ...), for k.asm(stage)
    asm: dict[str, str] = attrs.field(factory=dict, hash=False)
    #: The tensor maps of TMA copies, passed after the user's arguments (tc_runtime.tensor_maps)
    tensor_maps: tuple[dict[str, Any], ...] = attrs.field(default=(), hash=False)
    #: A persistent kernel (tc_opt's CompileOptions.persistent): launched on at most one program
    #: per SM, each looping over the grid's programs, which it takes as three hidden i32
    #: parameters (x, y, z) after the user's arguments, before the tensor maps (kernel.py)
    persistent: bool = False
    #: CTAs per cluster (tc_opt's CompileOptions.cluster_multicast: 2): its PTX requires clusters
    #: of that shape, so a persistent launch is a multiple of it (kernel.launch_persistently)
    cluster: int = 1
    #: A stream-K kernel (tc_opt's CompileOptions.stream_k): the bytes of one partial sum. It
    #: takes two pointers after the grid's extents, its workspace (kernel.launch_persistently)
    stream_k: int = 0
    #: The indices of the unsigned integer parameters (Signature checks each value's range);
    #: None for metadata older than the field (either range accepted)
    unsigned_args: tuple[int, ...] | None = None

    @classmethod
    def from_compiled(cls, ck: Any) -> KernelBinary:
        """From a tc_nvptx.CompiledKernel (duck-typed: read by attribute)."""
        asm = dict(getattr(ck, "asm", None) or {})
        ptx = str(ck.ptx)
        asm.setdefault("ptx", ptx)
        return cls(
            name=str(ck.name), arch=str(ck.arch), ptx=ptx,
            cubin=bytes(ck.cubin) if getattr(ck, "cubin", None) else None,
            signature=tuple(str(s) for s in ck.signature),
            arg_names=tuple(str(a) for a in getattr(ck, "arg_names", ()) or ()),
            num_warps=int(ck.num_warps), shared_bytes=int(getattr(ck, "shared_bytes", 0) or 0),
            registers=_opt_int(getattr(ck, "registers", None)),
            spills=_opt_int(getattr(ck, "spills", None)),
            num_stages=int(getattr(ck, "num_stages", 3) or 3),
            tensor_maps=tuple(dict(m) for m in getattr(ck, "tensor_maps", None) or ()),
            persistent=bool(getattr(ck, "persistent", False)),
            cluster=int(getattr(ck, "cluster", 1) or 1),
            stream_k=int(getattr(ck, "stream_k", 0) or 0),
            unsigned_args=_opt_indices(getattr(ck, "unsigned_args", None)),
            asm={str(k): str(v) for k, v in asm.items() if isinstance(v, (str, bytes))
                 and not isinstance(v, bytes)},
        )

    def metadata(self) -> dict[str, Any]:
        """Everything except the PTX, cubin and stage texts (those are separate cache files)."""
        return {
            "name": self.name, "arch": self.arch, "signature": list(self.signature),
            "arg_names": list(self.arg_names), "num_warps": self.num_warps,
            "shared_bytes": self.shared_bytes, "registers": self.registers, "spills": self.spills,
            "num_stages": self.num_stages,
            **({"tensor_maps": [dict(m) for m in self.tensor_maps]} if self.tensor_maps else {}),
            **({"persistent": True} if self.persistent else {}),
            **({"cluster": self.cluster} if self.cluster > 1 else {}),
            **({"stream_k": self.stream_k} if self.stream_k else {}),
            **({"unsigned_args": list(self.unsigned_args)} if self.unsigned_args is not None else {}),
        }

    @classmethod
    def from_parts(cls, meta: dict[str, Any], ptx: str, cubin: bytes | None,
                   asm: dict[str, str]) -> KernelBinary:
        try:
            return cls(
                name=str(meta["name"]), arch=str(meta["arch"]), ptx=ptx, cubin=cubin,
                signature=tuple(str(s) for s in meta["signature"]),
                arg_names=tuple(str(a) for a in meta.get("arg_names", [])),
                num_warps=int(meta["num_warps"]), shared_bytes=int(meta.get("shared_bytes", 0)),
                registers=_opt_int(meta.get("registers")), spills=_opt_int(meta.get("spills")),
                num_stages=int(meta.get("num_stages", 3)), asm=dict(asm),
                tensor_maps=tuple(dict(m) for m in meta.get("tensor_maps", [])),
                persistent=meta.get("persistent", False) is True,
                cluster=int(meta.get("cluster", 1)),
                stream_k=int(meta.get("stream_k", 0)),
                unsigned_args=_opt_indices(meta.get("unsigned_args")),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"malformed kernel metadata: {exc}") from None

    def info(self) -> dict[str, Any]:
        """The kernel's metadata (name, arch, signature, num_warps, registers, ...), as `metadata()`."""
        return self.metadata()

    def to_json(self) -> str:
        """The metadata as versioned JSON text: the sidecar file of a precompiled PTX or cubin."""
        return json.dumps({"version": METADATA_VERSIONS[-1], **self.metadata()}, sort_keys=True)

    def dumps(self) -> str:
        """Everything in one JSON text (the format of `CompiledKernel.dumps()`)."""
        data: dict[str, Any] = {"version": METADATA_VERSIONS[-1], **self.metadata()}
        data["ptx"] = self.ptx
        data["cubin"] = base64.b64encode(self.cubin).decode() if self.cubin else None
        return json.dumps(data, sort_keys=True)


def sidecar(path: Path) -> Path:
    """Where the metadata of a kernel file lives: OUT.ptx -> OUT.ptx.json."""
    return path.with_name(path.name + ".json")


def save(binary: KernelBinary, path: str | os.PathLike[str]) -> Path:
    """Write a precompiled kernel: PATH.json (everything in one file), PATH.cubin (+ sidecar
    metadata) or any other name as PTX (+ sidecar). Returns the path written."""
    if not isinstance(binary, KernelBinary):
        raise TypeError(f"save writes a KernelBinary (from tc_runtime.build), got "
                        f"{type(binary).__name__}")
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"save writes to a path (str or os.PathLike), got {type(path).__name__}")
    out = Path(path)
    if out.is_dir():
        raise IsADirectoryError(f"{out} is a directory; give the path of the file to write "
                                f"(e.g. {out / (binary.name + '.json')})")
    if out.suffix == ".json":
        _write_atomic(out, binary.dumps().encode())
        return out
    if out.suffix == ".cubin":
        if not binary.cubin:
            raise ValueError(f"kernel '{binary.name}' has no cubin (ptxas did not run); write "
                             f"PTX instead")
        _write_atomic(out, binary.cubin)
    else:
        _write_atomic(out, binary.ptx.encode())
    _write_atomic(sidecar(out), binary.to_json().encode())
    return out


def _write_atomic(path: Path, data: bytes) -> None:
    if not path.parent.is_dir():  # (else the error would name the temporary file)
        raise FileNotFoundError(f"cannot write {path}: the directory {path.parent} does not exist")
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def read(path: str | os.PathLike[str]) -> KernelBinary:
    """A precompiled kernel file (see the module docstring); ValueError/FileNotFoundError with the
    path and the reason when it is not one."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such precompiled kernel file")
    try:
        if p.suffix == ".json" and not p.name.endswith((".ptx.json", ".cubin.json")):
            data = _json_object(p.read_text(), p)
            ptx = data.get("ptx") or ""
            if not isinstance(ptx, str):
                raise ValueError("'ptx' is not a text")
            cubin_text = data.get("cubin")
            if cubin_text is not None and not isinstance(cubin_text, str):
                raise ValueError("'cubin' is not a base64 text")
            cubin = base64.b64decode(cubin_text, validate=True) if cubin_text else None
            if not ptx and not cubin:
                raise ValueError("it holds neither 'ptx' nor 'cubin'")
            return KernelBinary.from_parts(_metadata(data), ptx, cubin, {"ptx": ptx} if ptx else {})
        meta_path = p if p.name.endswith((".ptx.json", ".cubin.json")) else sidecar(p)
        if meta_path is p:
            p = p.with_name(p.name[:-len(".json")])
        if not meta_path.is_file():
            raise FileNotFoundError(f"{p}: the metadata file {meta_path.name} is missing (write "
                                    f"kernels with `tcc ... -o {p.name}` or tc_runtime.binary.save)")
        meta = _metadata(_json_object(meta_path.read_text(), meta_path))
        raw = p.read_bytes()
        if raw[:4] == b"\x7fELF":
            return KernelBinary.from_parts(meta, "", raw, {})
        ptx = raw.decode()
        return KernelBinary.from_parts(meta, ptx, None, {"ptx": ptx})
    except (UnicodeDecodeError, binascii.Error, json.JSONDecodeError) as exc:
        raise ValueError(f"{p} is not a valid tc kernel file: {exc}") from None
    except ValueError as exc:
        raise ValueError(f"{p} is not a valid tc kernel file: {exc}") from None


def _json_object(text: str, path: Path) -> dict[str, Any]:
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"{path.name} does not hold a JSON object")
    return data


def _metadata(data: dict[str, Any]) -> dict[str, Any]:
    version = data.get("version", 1)
    if version not in METADATA_VERSIONS:
        raise ValueError(f"metadata version {version!r} is not one this tc_runtime reads "
                         f"({', '.join(map(str, METADATA_VERSIONS))})")
    missing = [k for k in ("name", "arch", "signature", "num_warps") if k not in data]
    if missing:
        raise ValueError(f"the metadata lacks {', '.join(missing)}")
    if not isinstance(data["signature"], list):
        raise ValueError("'signature' is not a list")
    return data


def _opt_int(v: object) -> int | None:
    if v is None:
        return None
    try:
        return int(v)  # type: ignore[call-overload, no-any-return]
    except (TypeError, ValueError):
        return None


def _opt_indices(v: object) -> tuple[int, ...] | None:
    """A list of parameter indices from metadata (None: the field is absent)."""
    if v is None:
        return None
    if not isinstance(v, (list, tuple)) or not all(isinstance(i, int) for i in v):
        raise ValueError(f"'unsigned_args' must be a list of ints, got {v!r}")
    return tuple(v)
