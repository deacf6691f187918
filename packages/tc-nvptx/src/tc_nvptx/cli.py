"""`tcc`: compile a Triton-C file and print or write one stage (IR, laid-out IR, LLVM, PTX, cubin).

Errors in the user's program are printed as diagnostics on stderr with exit code 1, never as a
Python traceback (set TC_DEBUG=1 to see the traceback of an internal error).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from collections.abc import Sequence

from tc_lang.diagnostics import TcCompileError
from tc_lang.preprocessor import command_line_defines, list_define_notes, read_source_file
from tc_opt import gpu_pipeline
from tc_opt.options import ARCHS, CompileOptions

from .compiler import CompiledKernel, assemble_at, compile_module, frontend, located_errors
from .ptxas import PtxasError

EMITS = ("ir", "ir-gpu", "llvm", "ptx", "cubin")


def _define(text: str) -> tuple[str, object]:
    name, sep, value = text.partition("=")
    if not name or not name.replace("_", "a").isalnum():
        raise argparse.ArgumentTypeError(f"bad define {text!r} (expected NAME or NAME=VALUE)")
    if not sep:
        return name, 1
    for conv in (int, float):
        try:
            return name, conv(value)
        except ValueError:
            pass
    return name, value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tcc", description="Compile a Triton-C kernel for NVIDIA GPUs.")
    p.add_argument("file", help="the .tc source file ('-' for stdin)")
    p.add_argument("-D", dest="defines", action="append", type=_define, default=[], metavar="NAME=VALUE")
    p.add_argument("--kernel", help="the kernel to compile (when the file has several)")
    p.add_argument("--emit", choices=EMITS, default="ptx")
    p.add_argument("--arch", choices=ARCHS, default="sm_90")
    p.add_argument("--num-warps", type=int, default=4)
    p.add_argument("--num-stages", type=int, default=3)
    p.add_argument("-o", dest="output", help="write here instead of stdout (required for cubin)")
    p.add_argument("--print-after-all", action="store_true", help="print the IR after every pass")
    p.add_argument("--after", metavar="PASS", help="emit the IR after this pass instead")
    p.add_argument("--time-passes", action="store_true",
                   help="print the time of every compiler stage and pass on stderr")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="print ptxas's resource report (registers, spills, shared memory) on stderr")
    return p


def _overwrites(output: str | None, source: str) -> bool:
    """Whether -o names the source file itself (`tcc x.tc -o x.tc` replaced the source)."""
    if not output or source == "-" or not os.path.exists(output):
        return False
    try:
        return os.path.samefile(output, source)
    except OSError:
        return False


def _fail(message: str) -> int:
    sys.stderr.write(message.rstrip("\n") + "\n")
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        defines = command_line_defines(args.defines)
    except ValueError as exc:
        return _fail(f"tcc: error: {exc}")
    try:
        options = CompileOptions(
            arch=args.arch,
            num_warps=args.num_warps,
            num_stages=args.num_stages,
            print_after_all=args.print_after_all,
        )
    except ValueError as exc:
        return _fail(f"tcc: error: {exc}")
    try:
        # bytes: the front end reports text that is not UTF-8 at its line (E0102)
        source: bytes
        if args.file == "-":
            source, filename = sys.stdin.buffer.read(), "<stdin>"
        else:
            source, filename = read_source_file(args.file), args.file  # (regular files only)
    except OSError as exc:
        return _fail(f"tcc: error: cannot read {args.file}: {exc.strerror}")
    if _overwrites(args.output, args.file):
        return _fail(f"tcc: error: -o {args.output} is the source file itself; write the output elsewhere")
    try:
        start = time.perf_counter()
        unit, module = frontend(source, defines, args.kernel, filename)
        front = time.perf_counter() - start
        for warning in unit.warnings:  # (e.g. W0201: a ';' inserted at a line's end)
            sys.stderr.write(warning.render().rstrip("\n") + "\n")
        if args.emit == "ir" and not args.after:
            from tc_opt.pass_manager import module_text

            return _write(args.output, module_text(module))
        if args.emit == "cubin" and not args.output:
            return _fail("tcc: error: --emit=cubin needs -o FILE")
        wants_cubin = args.emit == "cubin" or args.verbose
        with located_errors(unit):
            kernel = compile_module(module, options, assemble_cubin=False, stop_after=args.after)
        kernel.timings = {"front end (preprocess, parse, check, lower)": front, **kernel.timings}
        if wants_cubin:
            start = time.perf_counter()
            with located_errors(unit):  # (the kernel's own target: sm_90a where it uses wgmma)
                cubin, info = assemble_at(kernel.ptx, kernel.arch, module.functions[0].loc)
            kernel.timings["ptxas"] = time.perf_counter() - start
            if args.verbose:
                sys.stderr.write(info.log.strip() + "\n")
        if args.time_passes:
            sys.stderr.write(kernel.timing_report())
        if args.after:
            if "after" not in kernel.asm:
                names = list(dict.fromkeys(ps.name for ps in gpu_pipeline(options).passes))
                return _fail(f"tcc: error: no pass named {args.after!r} in the pipeline; its passes "
                             f"are: {', '.join(names)}")
            return _write(args.output, kernel.asm["after"])
        if args.emit == "cubin":
            kernel.registers, kernel.spills = info.registers, info.spill_stores + info.spill_loads
            _write(args.output, cubin)
            return _write_metadata(args.output, kernel)
        status = _write(args.output, kernel.asm[args.emit])
        if args.output and args.emit == "ptx":
            return _write_metadata(args.output, kernel)
        return status
    except TcCompileError as exc:
        return _fail("\n".join([str(exc), *list_define_notes(exc, defines)]))
    except _WriteError as exc:
        return _fail(f"tcc: error: cannot write {exc.path}: {exc.strerror}")
    except PtxasError as exc:
        return _fail(f"tcc: error: {exc}")
    except KeyError as exc:  # an unknown kernel name
        return _fail(f"tcc: error: no kernel named {exc}")
    except Exception as exc:  # an internal error: say so plainly
        if os.environ.get("TC_DEBUG"):
            traceback.print_exc()
        return _fail(f"tcc: internal compiler error: {type(exc).__name__}: {exc}")


def _write_metadata(output: str, kernel: CompiledKernel) -> int:
    """Beside a precompiled kernel, its metadata: what `tc_runtime.load(OUT)` needs to launch it."""
    return _write(output + ".json", json.dumps(kernel.to_json(), indent=1) + "\n")


class _WriteError(Exception):
    """An output file that cannot be written (a missing folder, a directory, no permission): the
    user's mistake, reported as such rather than as an internal compiler error."""

    def __init__(self, path: str, strerror: str) -> None:
        super().__init__(path, strerror)
        self.path, self.strerror = path, strerror


def _write(path: str | None, text: str | bytes) -> int:
    if path:
        try:
            if isinstance(text, bytes):
                with open(path, "wb") as fh:
                    fh.write(text)
            else:
                with open(path, "w", encoding="utf-8") as fh:
                    fh.write(text)
        except OSError as exc:
            raise _WriteError(path, exc.strerror or str(exc)) from None
    elif isinstance(text, bytes):
        sys.stdout.buffer.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
