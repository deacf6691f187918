"""The runtime's own record of a compiled kernel (what the disk cache stores and the driver loads).

It mirrors the fields of `tc_nvptx.CompiledKernel` but belongs to the runtime, so that loading a
kernel from the cache (or a precompiled file) never imports a compiler package.
"""

from __future__ import annotations

import json
from typing import Any

import attrs


@attrs.frozen
class KernelBinary:
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
    #: text of each compilation stage ("ir", "llvm", "ptx", ...), for k.asm(stage)
    asm: dict[str, str] = attrs.field(factory=dict, hash=False)

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
            asm={str(k): str(v) for k, v in asm.items() if isinstance(v, (str, bytes))
                 and not isinstance(v, bytes)},
        )

    def metadata(self) -> dict[str, Any]:
        """Everything except the PTX, cubin and stage texts (those are separate cache files)."""
        return {
            "name": self.name, "arch": self.arch, "signature": list(self.signature),
            "arg_names": list(self.arg_names), "num_warps": self.num_warps,
            "shared_bytes": self.shared_bytes, "registers": self.registers, "spills": self.spills,
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
                asm=dict(asm),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed kernel metadata: {exc}") from None

    def info(self) -> dict[str, Any]:
        return self.metadata()

    def to_json(self) -> str:
        return json.dumps(self.metadata(), sort_keys=True)


def _opt_int(v: object) -> int | None:
    if v is None:
        return None
    try:
        return int(v)  # type: ignore[call-overload, no-any-return]
    except (TypeError, ValueError):
        return None
