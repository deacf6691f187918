"""The C preprocessor of Triton-C (pcpp underneath), with a map from its output back to the user.

Kernels are parameterised by macros (`TYPE`, `TM`, `SHAPE_A` ...), so almost every diagnostic
points into macro-expanded text. `Preprocessed` remembers, for every run of output characters, the
file, line and column it came from and, for expanded text, the macro invocation that produced it;
the parser maps each token through `Preprocessed.locate`, so messages name the user's own line.

Defines from Python become object-like macros. Their values are C token text: `1024`, `half`,
`newaxis,:` or `TM,TK` are all fine; bools become 1/0.
"""

from __future__ import annotations

import ast
import bisect
import io
import math
import os
import re
import stat
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NoReturn

import attrs
from pcpp import Preprocessor as _PcppBase  # type: ignore[attr-defined]
from pcpp import evaluator as _pcpp_evaluator  # type: ignore[attr-defined]
from pcpp import parser as _pcpp_parser
from pcpp.parser import Action, OutputDirective

from .diagnostics import (Category, Diagnostic, Location, TcCompileError, TcPreprocessorError,
                          error_for)

DefineValue = str | int | float | bool | object

_LEXER: Any = None
MAX_INCLUDE_DEPTH = 40
#: The largest file an #include reads (a header is a few KB; this stops an endless file).
MAX_INCLUDE_BYTES = 16 * 1024 * 1024
#: The most tokens the macro expansions of one stretch of source text may produce, counting the
#: tokens every level of a nested expansion hands back: a real kernel makes a few thousand; a
#: macro that doubles itself level after level (`#define A2 (A1+A1)` ...) made 2^30 and ran
#: out of memory.
MAX_EXPANSION_TOKENS = 1_000_000


def _bounded_left_shifts() -> None:
    """pcpp's #if evaluator shifts in Python's unbounded integers and wraps the result to 64
    bits afterwards, so `#if 1 << 99999999999` built a number of gigabytes and ran out of memory.
    A shift by the width or more wraps to 0 anyway: give that at once (the rest unchanged)."""
    value = _pcpp_evaluator.Value
    original = value.__lshift__
    if getattr(original, "tc_bounded", False):
        return
    bits = int(_pcpp_evaluator.INTMAXBITS)

    def lshift(self: Any, other: Any) -> Any:
        if self.exception is None:
            count = value(other)
            if count.exception is None:
                n = int(count) & value.UINT_MAX if self.unsigned else int(count)
                if n >= bits:
                    return value(0, self.unsigned)
        return original(self, other)

    lshift.tc_bounded = True  # type: ignore[attr-defined]
    value.__lshift__ = lshift


_bounded_left_shifts()


def _lexer() -> Any:
    """pcpp's PLY lexer, built once per process and cloned for each run."""
    global _LEXER
    if _LEXER is None:
        # Built here (not with pcpp's default_lexer) so that PLY never writes a lextab file.
        from .lexer import build_lexer

        _LEXER = build_lexer(_pcpp_parser.lex, _pcpp_parser)
    return _LEXER.clone()


@attrs.frozen
class Segment:
    """Output columns from `out_col` on (to the next segment) come from `origin`.

    For text produced by a macro, `expanded` is True and every column maps to the whole
    invocation range `origin`; otherwise columns map one to one.
    """

    out_col: int
    origin: Location
    expanded: bool = False


def _out_col(seg: Segment) -> int:
    return seg.out_col


@attrs.frozen(eq=False)
class Preprocessed:
    """The preprocessed text of a kernel source and the map back to the user's files."""

    text: str
    filename: str
    lines: tuple[tuple[Segment, ...], ...] = ()
    sources: Mapping[str, str] = attrs.field(factory=dict)
    identity: bool = False
    #: the text of lines that a `#line` directive renamed, by the (file, line) it gave them
    renamed_lines: Mapping[tuple[str, int], str] = attrs.field(factory=dict)

    @classmethod
    def plain(cls, text: str, filename: str = "<source>") -> Preprocessed:
        """Text that was not preprocessed: output positions are the user's positions."""
        return cls(text=text, filename=filename, sources={filename: text}, identity=True)

    def locate(self, line: int, col: int, length: int = 1) -> Location:
        """The user's location of `length` output characters starting at 1-based (line, col)."""
        if self.identity or not (1 <= line <= len(self.lines)):
            return Location(self.filename, line, col, line, col + max(length, 1) - 1)
        segs = self.lines[line - 1]
        # the last segment starting at or before `col` (segments run left to right): a binary
        # search, as the parser locates every token and a long line has a segment per token
        if not segs:
            return Location(self.filename, line, col)
        chosen = segs[max(bisect.bisect_right(segs, col, key=_out_col) - 1, 0)]
        o = chosen.origin
        if chosen.expanded:
            return o
        start = o.col + (col - chosen.out_col)
        return Location(o.file, o.line, start, o.line, start + max(length, 1) - 1)

    def source_line(self, file: str, line: int) -> str | None:
        """The text of a line of one of the user's files (for the caret display)."""
        renamed = self.renamed_lines.get((file, line))
        if renamed is not None:
            return renamed
        text = self.sources.get(file)
        if text is None or line < 1:
            return None
        lines = text.splitlines()
        return lines[line - 1] if line <= len(lines) else None


def command_line_defines(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """The macros of repeated `-D NAME=VALUE` options. A name given twice must have one value:
    a C compiler warns that the macro is redefined and keeps the last, which hides a typo in a
    build script; tcc and tc-lint say so instead (ValueError)."""
    out: dict[str, object] = {}
    for name, value in pairs:
        if name in out and out[name] != value:
            raise ValueError(f"-D {name} given twice with different values ({out[name]} and {value})")
        out[name] = value
    return out


def list_define_notes(error: TcCompileError, defines: Mapping[str, object]) -> list[str]:
    """Notes for a compile error inside a command-line macro whose value is a list (`-D
    BLOCK=[64,128]`): such a list is an auto-tuning axis in tc_runtime's `kernel(defines=...)`, but
    tcc and tc-lint compile one configuration, where `[` is only text and the error it causes
    says nothing of that."""
    names = {d.location.macro for d in error.diagnostics}
    notes = []
    for name, value in defines.items():
        if name in names and isinstance(value, str) and value.strip().startswith("[") \
                and value.strip().endswith("]"):
            notes.append(f"note: -D {name}={value} is a list of values: an auto-tuning axis of "
                         f"tc_runtime.kernel(defines={{{name!r}: [...]}}); this tool compiles one "
                         f"configuration, so give {name} one value")
    return notes


def define_text(value: DefineValue) -> str:
    """The macro body for a Python define value (bool becomes 1/0)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float) and not math.isfinite(value):
        # C has no literal for them (repr gives `nan`, `inf`): the built-in float constants
        return "F32_NAN" if math.isnan(value) else "F32_INFINITY" if value > 0 else "(-F32_INFINITY)"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return value
    # A dtype object (numpy's has .name; torch's prints as torch.float16) becomes its name.
    name = getattr(value, "name", None)
    text = name if isinstance(name, str) else str(value).removeprefix("torch.")
    if text in _DTYPE_NAMES:
        return _DTYPE_NAMES[text]
    raise TypeError(f"define values must be str, int, float or bool, not {type(value).__name__}")


_DTYPE_NAMES = {
    "float16": "half", "half": "half", "bfloat16": "bf16", "float32": "float", "float": "float",
    "float64": "double", "double": "double", "int8": "int8", "int16": "int16", "int32": "int32",
    "int64": "int64", "uint8": "uint8", "uint16": "uint16", "uint32": "uint32",
    "uint64": "uint64", "bool": "bool",
}


class ArgumentTypeError(TypeError):
    """The caller passed a Python value of the wrong type (a programming error, not a source
    error): raised as is, never turned into a diagnostic."""


def decode_source(source: str | bytes, filename: str) -> str:
    """The source as text; undecodable bytes are a preprocessor error at their position."""
    if isinstance(source, str):
        return source
    if not isinstance(source, (bytes, bytearray)):
        raise ArgumentTypeError(f"kernel source must be str or bytes, not {type(source).__name__}")
    try:
        return source.decode("utf-8")
    except UnicodeDecodeError as e:
        before = source[: e.start]
        line = before.count(b"\n") + 1
        col = e.start - (before.rfind(b"\n") + 1) + 1
        text = source.decode("utf-8", errors="replace")
        lines = text.splitlines()
        raise TcPreprocessorError(
            [
                Diagnostic(
                    Category.PREPROCESSOR,
                    "E0102",
                    f"source is not valid UTF-8 (byte 0x{source[e.start]:02x})",
                    Location(filename, line, col),
                    source_line=lines[line - 1] if line <= len(lines) else None,
                )
            ]
        ) from None


def read_source_file(path: str, limit: int = MAX_INCLUDE_BYTES) -> bytes:
    """The bytes of the source file `path`; an OSError whose strerror says why not for anything
    but a regular file of at most `limit` bytes (reading /dev/zero or a FIFO never ended)."""
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        folder = " (a directory)" if stat.S_ISDIR(info.st_mode) else ""
        raise OSError(0, "not a regular file" + folder)
    if info.st_size > limit:
        raise OSError(0, f"{info.st_size} bytes, more than the {limit} a source file may have")
    with open(path, "rb") as fh:
        data = fh.read(limit + 1)  # (a file that grows while it is read)
    if len(data) > limit:
        raise OSError(0, f"more than the {limit} bytes a source file may have")
    return data


_COMMENT_OR_LITERAL = re.compile(
    r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|//[^\n]*|/\*.*?\*/|(?P<open>/\*)', re.S)


def unterminated_comment(text: str) -> int | None:
    """The offset of a `/*` that no `*/` closes (outside literals and other comments), if any:
    the lexers would otherwise read it as `/` and `*` and report an unexpected '/'."""
    for m in _COMMENT_OR_LITERAL.finditer(text):
        if m.group("open"):
            return m.start()
    return None


def _line_col(text: str, offset: int) -> tuple[int, int, str]:
    """1-based line and column of `offset` in `text`, and the text of that line."""
    line_start = text.rfind("\n", 0, offset) + 1
    line_end = text.find("\n", offset)
    return (text.count("\n", 0, offset) + 1, offset - line_start + 1,
            text[line_start: line_end if line_end >= 0 else len(text)])


def unterminated_comment_error(text: str, filename: str) -> Diagnostic | None:
    """E0201 at the start of an unterminated block comment of `text`, if it has one."""
    at = unterminated_comment(text)
    if at is None:
        return None
    line, col, src = _line_col(text, at)
    return Diagnostic(Category.SYNTAX, "E0201", "unterminated comment",
                      Location(filename, line, col, line, col + 1), source_line=src,
                      hint="a '/*' comment ends at the next '*/'")


class _ExpansionTooLarge(Exception):
    """Raised inside pcpp's expansion when it passes MAX_EXPANSION_TOKENS (caught at the top)."""

    def __init__(self, macros: list[str]) -> None:
        super().__init__(macros)
        self.macros = macros


def _if_expression_message(msg: str) -> str | None:
    """pcpp's "Could not evaluate expression due to SyntaxError('at EOF') (passed to evaluator:
    '1 +')" as what went wrong, without Python's exception names; None for other messages."""
    m = re.fullmatch(r"Could not evaluate expression due to (\w+)\((.*)\) "
                     r"\(passed to evaluator: '(.*)'\)", msg, re.S)
    if m is None:
        return None
    kind, arg, expr = m.groups()
    try:
        detail = ast.literal_eval(arg) if arg else ""
    except (ValueError, SyntaxError):
        detail = ""
    detail = detail if isinstance(detail, str) else ""
    around = re.match(r"around token '(.*)' type", detail)
    if kind == "SyntaxError" and detail == "at EOF":
        why = "it ends too early"
    elif kind == "SyntaxError" and around:
        why = f"unexpected '{around.group(1)}'"
    elif kind == "ZeroDivisionError":
        why = "division by zero"
    elif kind == "ValueError" and detail:
        why = detail
    else:
        why = "it is not an integer constant expression"
    return f"could not evaluate expression '{expr}' of #if: {why}"


class _Pcpp(_PcppBase):  # type: ignore[misc]
    """pcpp with its hooks turned into diagnostics and a record of macro invocation sites."""

    def __init__(self, filename: str) -> None:
        super().__init__(lexer=_lexer())
        self.tc_filename = filename
        self.tc_files: dict[str, str] = {}
        self.tc_diags: list[Diagnostic] = []
        self.tc_depth = 0
        self.tc_last: tuple[str, int] = (filename, 1)
        self.tc_include_at: tuple[str, int] = (filename, 1)
        self.line_directive = None
        #: `#line` directives by file: (the directive's own line, the number it gives the next
        #: line, the file name it gives them), in source order
        self.tc_line_maps: dict[str, list[tuple[int, int, str]]] = {}
        #: the last directive seen, whether it had anything after its name, and where it is
        self.tc_directive: tuple[str, bool, str, int] = ("", False, filename, 1)
        #: the open #if groups of each file: the line of the group's #else, or 0 before it
        self.tc_groups: dict[str, list[int]] = {}
        #: tokens the expansions of the current stretch of text have produced so far
        self.tc_expanded = 0
        #: the function-like macros whose arguments are being expanded, innermost last
        self.tc_arg_macros: list[Any] = []

    # -- diagnostics -------------------------------------------------------------------------

    def tc_error(self, code: str, file: str | None, line: int, col: int, msg: str) -> None:
        f = file or self.tc_filename
        text = self.tc_files.get(f)
        src = None
        if text is not None:
            ls = text.splitlines()
            if 1 <= line <= len(ls):
                src = ls[line - 1]
                if col <= 0:
                    col = len(src) - len(src.lstrip()) + 1
        f, line = self.tc_renamed(f, line)
        self.tc_diags.append(
            Diagnostic(
                Category.PREPROCESSOR,
                code,
                msg,
                Location(f, line, max(col, 1)),
                source_line=src,
            )
        )

    # -- #line -------------------------------------------------------------------------------

    def tc_renamed(self, file: str, line: int) -> tuple[str, int]:
        """The (file, line) the user's `#line` directives give line `line` of `file`."""
        for at, number, name in reversed(self.tc_line_maps.get(file, ())):
            if at < line:
                return name, number + line - at - 1
        return file, line

    def tc_renamed_location(self, loc: Location) -> Location:
        if loc.file not in self.tc_line_maps:
            return loc
        file, line = self.tc_renamed(loc.file, loc.line)
        end_file, end_line = self.tc_renamed(loc.file, loc.end_line)
        if end_file != file or end_line < line:
            end_line, end_col = line, loc.col
        else:
            end_col = loc.end_col
        return Location(file, line, loc.col, end_line, end_col, loc.macro)

    def tc_line_directive(self, directive: Any, toks: Any) -> None:
        """`#line N` or `#line N "file"`: the next line is line N (of that file); diagnostics
        name those (a generator of kernel source points them at its own input)."""
        words = [t for t in toks if t.type not in self.t_WS]
        file = directive.source or self.tc_filename
        number = words[0].value if words else ""
        name = words[1].value if len(words) > 1 else None
        if (len(words) > 2 or not re.fullmatch(r"[0-9]+", number)
                or not 0 < int(number) <= 2147483647
                or name is not None and not re.fullmatch(r'"(?:[^"\\\n]|\\.)*"', name)):
            self.tc_error("E0101", file, directive.lineno, self._col(directive) - 1,
                          "malformed #line directive: expected #line <number> [\"file\"] with a "
                          "number from 1 to 2147483647")
            return
        current = self.tc_renamed(file, directive.lineno)[0]
        new_name = current if name is None else re.sub(r"\\(.)", r"\1", name[1:-1])
        self.tc_line_maps.setdefault(file, []).append((directive.lineno, int(number), new_name))

    def tc_renamed_lines(self) -> dict[tuple[str, int], str]:
        """The text of every renamed line, by its new (file, line)."""
        out: dict[tuple[str, int], str] = {}
        for file, maps in self.tc_line_maps.items():
            lines = self.tc_files.get(file, "").splitlines()
            for physical in range(maps[0][0] + 1, len(lines) + 1):
                out.setdefault(self.tc_renamed(file, physical), lines[physical - 1])
        return out

    def on_error(self, file: str, line: int, msg: str) -> None:
        code, col = "E0101", 0
        if file == "unknown" or line <= 0:  # (pcpp's "Empty expression" knows no place)
            file, line = self.tc_last
        msg = _if_expression_message(msg) or " ".join(msg.split())
        if msg.startswith("Macro ") and "argument" in msg:
            code = "E0106"
            col = self._call_col(file, line, msg.split()[1])
        elif msg.startswith("Unterminated"):
            code = "E0107"
        elif msg == "Empty expression":
            msg = f"#{self.tc_directive[0] or 'if'} needs an expression"
        self.tc_error(code, file, line, col, msg[0].lower() + msg[1:] if msg else msg)

    def _call_col(self, file: str | None, line: int, name: str) -> int:
        """1-based column of the invocation `name(` on a line of a user file (0 if not found)."""
        lines = self.tc_files.get(file or self.tc_filename, "").splitlines()
        if not 1 <= line <= len(lines):
            return 0
        m = re.search(rf"\b{re.escape(name)}\s*\(", lines[line - 1])
        return m.start() + 1 if m else 0

    def on_unknown_macro_function_in_expr(self, ident: str) -> Any:
        """A call of an undefined macro in #if has no value in C (GCC: "missing binary operator
        before token '('"); pcpp would read it as 0 and silently take the other branch."""
        file, line = self.tc_last
        self.tc_error("E0101", file, line, self._call_col(file, line, ident),
                      f"function-like macro '{ident}' is not defined (in an #if expression)")
        return lambda *args: 0

    def on_include_not_found(
        self, is_malformed: bool, is_system_include: bool, curdir: str, includepath: str
    ) -> None:
        from pcpp.parser import OutputDirective, Action

        file, line = self.tc_include_at
        if is_malformed:
            self.tc_error("E0104", file, line, 0, f"malformed #include {includepath}")
        else:
            self.tc_error("E0104", file, line, 0, f"cannot find include file '{includepath}'")
        raise OutputDirective(Action.IgnoreAndRemove)

    def include(self, tokens: Any, original_line: Any) -> Any:
        """pcpp's #include, but one that names no file is an error (pcpp ignored it)."""
        if not tokens:
            file, line = self.tc_include_at
            self.tc_error("E0104", file, line, 0, "#include needs a file name (\"file\" or <file>)")
            return iter(())
        return super().include(tokens, original_line)

    def tc_include_error(self, msg: str) -> NoReturn:
        """E0110 at the #include being read; the directive is dropped."""
        file, line = self.tc_include_at
        self.tc_error("E0110", file, line, 0, msg)
        raise OutputDirective(Action.IgnoreAndRemove)

    def on_file_open(self, is_system_include: bool, includepath: str) -> Any:
        """Read an included file: a regular file of at most MAX_INCLUDE_BYTES of UTF-8 (pcpp read
        anything, `#include "/dev/zero"` until memory ran out). A path that does not exist raises
        OSError, which lets pcpp look in the next include folder."""
        if not os.path.exists(includepath):
            raise FileNotFoundError(includepath)
        try:
            data = read_source_file(includepath, MAX_INCLUDE_BYTES)
        except OSError as e:
            self.tc_include_error(f"cannot read include file '{includepath}': {e.strerror}")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            self.tc_include_error(f"include file '{includepath}' is not valid UTF-8 (byte "
                                  f"0x{data[e.start]:02x} at offset {e.start})")
        # as pcpp's text-mode read did: universal newlines, no byte-order mark
        text = text.replace("\r\n", "\n").replace("\r", "\n").removeprefix("\ufeff")
        comment = unterminated_comment_error(text, includepath)
        if comment is not None:
            self.tc_diags.append(comment)
            raise error_for(self.tc_diags)
        self.tc_files[includepath] = text
        return io.StringIO(text)

    def on_directive_handle(
        self, directive: Any, toks: Any, ifpassthru: bool, precedingtoks: Any
    ) -> bool:
        self.tc_last = (directive.source, directive.lineno)
        name = directive.value
        self.tc_directive = (name, bool(toks), directive.source, directive.lineno)
        if name == "include":
            self.tc_include_at = self.tc_last
            if self.include_depth >= MAX_INCLUDE_DEPTH:
                if not any(d.code == "E0109" for d in self.tc_diags):
                    self.tc_error("E0109", directive.source, directive.lineno,
                                  self._col(precedingtoks[0]),
                                  f"#include nested more than {MAX_INCLUDE_DEPTH} deep "
                                  "(does a file include itself?)")
                raise OutputDirective(Action.IgnoreAndRemove)
        elif name == "pragma" and not toks:  # (an empty #pragma does nothing in C; pcpp failed)
            raise OutputDirective(Action.IgnoreAndRemove)
        elif name in ("if", "ifdef", "ifndef", "elif", "else", "endif"):
            self.tc_if_group(directive, precedingtoks)
        return True

    def tc_if_group(self, directive: Any, precedingtoks: Any) -> None:
        """Follow the #if groups of each file: an #elif or a second #else after a group's #else
        is an error, as in C (pcpp accepted both silently)."""
        groups = self.tc_groups.setdefault(directive.source, [])
        name = directive.value
        if name in ("if", "ifdef", "ifndef"):
            groups.append(0)
        elif name == "endif":
            if groups:
                groups.pop()
        elif groups and groups[-1]:
            self.tc_error("E0101", directive.source, directive.lineno, self._col(precedingtoks[0]),
                          f"#{name} after #else (the #else of this #if group is at line "
                          f"{self.tc_renamed(directive.source, groups[-1])[1]})")
        elif groups and name == "else":
            groups[-1] = directive.lineno

    def on_directive_unknown(
        self, directive: Any, toks: Any, ifpassthru: bool, precedingtoks: Any
    ) -> bool:
        name = directive.value
        col = self._col(directive)
        if name == "error":
            msg = "".join(t.value for t in toks).strip()
            self.tc_error("E0103", directive.source, directive.lineno, col - 1,
                          f"#error {msg}".rstrip())
        elif name == "line":
            self.tc_line_directive(directive, toks)
        elif name in ("warning", "pragma"):
            pass
        else:
            self.tc_error(
                "E0105", directive.source, directive.lineno, col, f"unknown directive '#{name}'"
            )
        return True

    def on_comment(self, tok: Any) -> bool:
        return False

    # -- positions ---------------------------------------------------------------------------

    def _col(self, tok: Any) -> int:
        """1-based column of a token of a user file (from its absolute lexpos)."""
        starts = self._starts(tok.source)
        if starts is None:
            return 1
        line = tok.lineno
        if 1 <= line <= len(starts):
            col: int = int(tok.lexpos) - starts[line - 1] + 1
            return col
        return 1

    _starts_cache: dict[str, list[int]]

    def _starts(self, source: str | None) -> list[int] | None:
        if source is None or source not in self.tc_files:
            return None
        cache = self.__dict__.setdefault("_starts_cache", {})
        if source not in cache:
            text = "\n".join(x.rstrip() for x in self.tc_files[source].splitlines())
            starts = [0]
            for i, ch in enumerate(text):
                if ch == "\n":
                    starts.append(i + 1)
            cache[source] = starts
        result: list[int] = cache[source]
        return result

    def _mark_sites(self, orig: list[Any], result: list[Any]) -> None:
        """Give every token an expansion produced (macro arguments included) the location of the
        whole invocation it came from, named after its macro."""
        calls = _invocations(self, orig, {id(t) for t in result})
        if not calls:
            return
        index = {id(t): i for i, t in enumerate(orig)}
        last_plain = -1
        for t in result:
            i = index.get(id(t))
            if i is not None and not any(a <= i <= b for a, b in calls):
                last_plain = i
                continue
            call = next(((a, b) for a, b in calls if (i is not None and a <= i <= b)
                         or (i is None and a > last_plain)), None)
            if call is None:
                continue
            first, last = orig[call[0]], orig[call[1]]
            if not (hasattr(first, "tc_pos") and hasattr(last, "tc_pos")):
                continue
            f, ln, c, _ = first.tc_pos
            _, lln, lc, llen = last.tc_pos
            end = (lln, lc + llen - 1) if lln == ln else (ln, c + len(str(first.value)) - 1)
            t.tc_site = Location(f, ln, c, end[0], end[1], str(first.value))

    def tc_count(self, produced: int, macros: list[str]) -> None:
        """Add tokens an expansion produced to the budget of this stretch of text."""
        self.tc_expanded += produced
        if self.tc_expanded > MAX_EXPANSION_TOKENS:
            raise _ExpansionTooLarge(macros)

    def macro_expand_args(self, macro: Any, args: list[Any]) -> Any:
        """pcpp's substitution of a function-like macro's arguments; the macro is remembered so
        that an argument's expansion counts once for every place the body uses it."""
        self.tc_arg_macros.append(macro)
        try:
            return super().macro_expand_args(macro, args)
        finally:
            self.tc_arg_macros.pop()

    def expand_macros(self, tokens: list[Any], expanding_from: list[str] | None = None) -> Any:
        """pcpp's expansion, plus: every expanded token learns its invocation site (`tc_site`),
        and the tokens expansions produce are counted, so that a macro that grows exponentially
        (`#define A2 (A1+A1)` ...) is an error at its use before it exhausts time and memory."""
        if expanding_from:
            result = super().expand_macros(tokens, expanding_from)
            self.tc_count(len(result), list(expanding_from))
            return result
        if self.tc_depth > 0:  # an argument of a function-like macro, expanded before substitution
            result = super().expand_macros(tokens, [])
            macro = self.tc_arg_macros[-1] if self.tc_arg_macros else None
            uses = max(1, len(macro.patch)) if macro is not None else 1
            self.tc_count(len(result) * uses, [macro.name] if macro is not None else [])
            return result
        orig = list(tokens)
        for t in orig:
            if t.type not in self.t_WS:
                t.tc_pos = (t.source, t.lineno, self._col(t), len(str(t.value)))
        self.tc_depth += 1
        self.tc_expanded = 0
        try:
            result = super().expand_macros(tokens, [])
        except _ExpansionTooLarge as e:
            self.tc_expansion_error(orig, e.macros)
        finally:
            self.tc_depth -= 1
            self.tc_arg_macros.clear()
        self._mark_sites(orig, result)
        return result

    def tc_expansion_error(self, orig: list[Any], macros: list[str]) -> NoReturn:
        """E0111 at the first use in `orig` of a macro whose expansion grew too large."""
        uses = [t for t in orig if t.type == "CPP_ID" and hasattr(t, "tc_pos")]
        at = next((t for t in uses if t.value in macros), None) \
            or next((t for t in uses if t.value in self.macros), None)
        if at is not None:
            file, line, col, _ = at.tc_pos
            name = str(at.value)
        else:
            (file, line), col, name = self.tc_last, 0, macros[0] if macros else "?"
        self.tc_error("E0111", file, line, col,
                      f"the expansion of macro '{name}' is too large (more than "
                      f"{MAX_EXPANSION_TOKENS} tokens)")
        raise error_for(self.tc_diags)


def _invocations(pp: Any, orig: list[Any], survivors: set[int]) -> list[tuple[int, int]]:
    """(first, last) indexes in `orig` of each macro invocation that was expanded: the name, and
    for a function-like macro everything up to its closing parenthesis."""
    found: list[tuple[int, int]] = []
    k = 0
    while k < len(orig):
        t = orig[k]
        macro = pp.macros.get(t.value) if t.type == "CPP_ID" else None
        if macro is None or id(t) in survivors:
            k += 1
            continue
        last = k
        if getattr(macro, "arglist", None) is not None:
            n = k + 1
            while n < len(orig) and orig[n].type in pp.t_WS:
                n += 1
            if n < len(orig) and orig[n].value == "(":
                depth = 0
                while n < len(orig):
                    depth += {"(": 1, ")": -1}.get(orig[n].value, 0)
                    if depth == 0:
                        break
                    n += 1
                last = min(n, len(orig) - 1)
        found.append((k, last))
        k = last + 1
    return found


def include_folders(include_dirs: object) -> list[str]:
    """The include folders of a list or tuple of str or os.PathLike; a single str was read
    character by character, as folders "/", "t", "m", "p" ..."""
    if not isinstance(include_dirs, (list, tuple)):
        raise ArgumentTypeError(f"include_dirs must be a list or tuple of folders, not "
                                f"{type(include_dirs).__name__} {include_dirs!r}")
    out = []
    for d in include_dirs:
        folder = os.fspath(d) if isinstance(d, (str, os.PathLike)) else None
        if not isinstance(folder, str):
            raise ArgumentTypeError(f"include_dirs must hold folders (str or os.PathLike), not "
                                    f"{type(d).__name__} {d!r}")
        out.append(folder)
    return out


def preprocess(
    source: str | bytes,
    defines: Mapping[str, DefineValue] | None = None,
    *,
    filename: str = "<source>",
    include_dirs: Sequence[str | os.PathLike[str]] = (),
) -> Preprocessed:
    """Run the C preprocessor over a kernel source with `defines` as object-like macros.

    Raises `TcPreprocessorError` (all problems of the source at once) for #error, bad
    directives, missing includes, malformed macro calls and unterminated conditionals.
    """
    if not isinstance(filename, str):
        raise ArgumentTypeError(f"filename must be a str (the name diagnostics show), not "
                                f"{type(filename).__name__} {filename!r}")
    if defines is not None and not isinstance(defines, Mapping):
        raise ArgumentTypeError(f"defines must be a mapping of macro names to values, not "
                                f"{type(defines).__name__} {defines!r}")
    folders = include_folders(include_dirs)
    text = decode_source(source, filename)
    if text.startswith("\ufeff"):  # a UTF-8 byte-order mark (some editors write one), as C compilers do
        text = text[1:]
    comment = unterminated_comment_error(text, filename)
    if comment is not None:
        raise error_for([comment])
    pp = _Pcpp(filename)
    pp.tc_files[filename] = text
    for name, value in (defines or {}).items():
        if not isinstance(name, str) or not name.isidentifier():
            pp.tc_error("E0108", filename, 0, 0, f"invalid define name {name!r}")
            continue
        try:
            body = define_text(value)
        except TypeError as e:
            pp.tc_error("E0108", filename, 0, 0, f"define {name}: {e}")
            continue
        if "\n" in body:
            pp.tc_error("E0108", filename, 0, 0, f"define {name}: value must be on one line")
            continue
        pp.define(f"{name} {body}")
    for d in folders:
        pp.add_path(d)
    # pcpp names files below the working directory by relative paths, which are then not the
    # names their text is kept under (no source line or column for them): keep every name
    pp.rewrite_paths = []
    if filename and not filename.startswith("<"):
        pp.temp_path.insert(0, os.path.dirname(os.path.abspath(filename)))
    if pp.tc_diags:
        raise TcPreprocessorError(pp.tc_diags)
    pp.ignore = {}
    pp.parser = pp.parsegen(text, filename, filename)
    out: list[str] = []
    lines: list[list[Segment]] = [[]]
    col = 1
    for tok in _tokens(pp):
        value = str(tok.value)
        if tok.type in pp.t_WS or value.isspace():
            for ch in value:
                if ch == "\n":
                    out.append("\n")
                    lines.append([])
                    col = 1
                else:
                    out.append(ch)
                    col += 1
            continue
        site = getattr(tok, "tc_site", None)
        pos = getattr(tok, "tc_pos", None)
        if site is not None:
            seg = Segment(col, site, True)
        elif pos is not None:
            f, ln, c, n = pos
            seg = Segment(col, Location(f, ln, c, ln, c + n - 1))
        else:
            seg = Segment(col, Location(tok.source or filename, tok.lineno, 1))
        if pp.tc_line_maps:
            seg = attrs.evolve(seg, origin=pp.tc_renamed_location(seg.origin))
        cur = lines[-1]
        if not cur or cur[-1].origin != seg.origin or cur[-1].expanded != seg.expanded or (
            not seg.expanded
        ):
            cur.append(seg)
        # Multi-line tokens (block comments are whitespace already) cannot occur; strings may.
        for ch in value:
            if ch == "\n":
                out.append("\n")
                lines.append([])
                col = 1
            else:
                out.append(ch)
                col += 1
    if pp.tc_diags:
        raise TcPreprocessorError(pp.tc_diags)
    return Preprocessed(
        text="".join(out),
        filename=filename,
        lines=tuple(tuple(x) for x in lines),
        sources=dict(pp.tc_files),
        renamed_lines=pp.tc_renamed_lines(),
    )


def _tokens(pp: _Pcpp) -> Iterator[Any]:
    """pcpp's output tokens; an internal pcpp failure becomes a diagnostic at the last directive."""
    while True:
        try:
            tok = pp.token()
        except TcCompileError:
            raise
        except Exception:  # pcpp raises raw exceptions on some malformed directives
            name, has_operand, file, line = pp.tc_directive
            pp.tc_error("E0101", file, line, 0, _directive_problem(name, has_operand))
            raise TcPreprocessorError(pp.tc_diags) from None
        if tok is None:
            return
        if tok.type not in pp.t_WS:
            pp.tc_last = (tok.source or pp.tc_filename, tok.lineno)
        yield tok


def _directive_problem(name: str, has_operand: bool) -> str:
    """What is wrong with the directive `name` that pcpp failed on (it raised IndexError and the
    like where an operand was missing)."""
    if not has_operand and name in ("define", "undef", "ifdef", "ifndef"):
        return f"#{name} needs a macro name"
    if not has_operand and name in ("if", "elif"):
        return f"#{name} needs an expression"
    return f"malformed #{name} directive" if name else "malformed preprocessor directive"
