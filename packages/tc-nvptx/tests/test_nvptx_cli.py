"""The tcc command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tc_nvptx.cli import main

ADD = """
__global__ void add(TYPE* z, TYPE* x, TYPE* y, int N) {
  int pid = get_program_id(0);
  int off[BLOCK] = pid * BLOCK + 0 ... BLOCK;
  bool check[BLOCK] = off < N;
  *?(check)(z + off) = *?(check)(x + off) + *?(check)(y + off);
}
"""


@pytest.fixture()
def add_file(tmp_path: Path) -> Path:
    p = tmp_path / "add.tc"
    p.write_text(ADD)
    return p


@pytest.mark.parametrize("emit,needle", [("ir", "tc.load"), ("ir-gpu", "#blocked"), ("llvm", "ptx_kernel"), ("ptx", ".entry add")])
def test_emit_stages(add_file: Path, emit: str, needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main([str(add_file), "-D", "TYPE=float", "-D", "BLOCK=1024", f"--emit={emit}"])
    assert rc == 0
    assert needle in capsys.readouterr().out


def test_cubin_to_file(add_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "add.cubin"
    rc = main([str(add_file), "-D", "TYPE=half", "-D", "BLOCK=512", "--emit=cubin", "--arch=sm_80", "-o", str(out)])
    assert rc == 0 and out.read_bytes()[:4] == b"\x7fELF"


def test_after_pass_and_num_warps(add_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main([str(add_file), "-D", "TYPE=float", "-D", "BLOCK=1024", "--num-warps", "8", "--after=assign-layouts"])
    assert rc == 0
    assert "wpc=[8]" in capsys.readouterr().out


def test_unknown_pass(add_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main([str(add_file), "-D", "TYPE=float", "-D", "BLOCK=1024", "--after=nope"])
    err = capsys.readouterr().err
    assert rc == 1 and "no pass named 'nope'" in err
    assert "canonicalize" in err and "pipeline-loops" in err and "allocate-shared" in err


def test_user_error_is_a_diagnostic_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tc"
    bad.write_text("__global__ void k(float* x) {\n  int a[4] = 0 ... 8;\n}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "tc_nvptx.cli", str(bad), "--emit=ptx"], capture_output=True, text=True
    )
    assert proc.returncode == 1
    assert "bad.tc:" in proc.stderr and "error" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_missing_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["/nonexistent/x.tc"]) == 1
    assert "cannot read" in capsys.readouterr().err


def test_only_regular_files_are_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # (before: `tcc /dev/zero` read until memory ran out)
    import os

    if os.path.exists("/dev/zero"):
        assert main(["/dev/zero"]) == 1
        assert "cannot read /dev/zero: not a regular file" in capsys.readouterr().err
    assert main([str(tmp_path)]) == 1
    assert "not a regular file (a directory)" in capsys.readouterr().err


def test_output_over_the_source_is_refused(add_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # (before: `tcc add.tc -o add.tc` replaced the source with its PTX)
    assert main([str(add_file), "-D", "TYPE=float", "-D", "BLOCK=1024", "-o", str(add_file)]) == 1
    assert "is the source file itself" in capsys.readouterr().err
    assert add_file.read_text() == ADD


def test_warnings_are_printed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the spec's vector add misses a ';': it compiles, and tcc says where it inserted one
    src = tmp_path / "semi.tc"
    src.write_text("__global__ void k(float* z) {\n  int off[64] = 0 ... 64\n  *(z + off) = 1.0;\n}\n")
    assert main([str(src), "--emit=ptx"]) == 0
    captured = capsys.readouterr()
    assert "semi.tc:2:" in captured.err and "warning[W0201]" in captured.err and ".entry k" in captured.out


WGMMA = """__global__ void k(half* a, half* b, float* c) {
  int m[64] = 0 ... 64;
  int n[64] = 0 ... 64;
  int kk[64] = 0 ... 64;
  half x[64, 64] = *(a + m[:, newaxis] * 64 + kk[newaxis, :]);
  half y[64, 64] = *(b + kk[:, newaxis] * 64 + n[newaxis, :]);
  float acc[64, 64] = 0;
  for (int i = 0; i < 4; i++) { acc += x @ y; }
  *(c + m[:, newaxis] * 64 + n[newaxis, :]) = acc;
}
"""


def test_cubin_of_a_wgmma_kernel_for_sm_90(tmp_path: Path) -> None:
    # (before: ptxas was asked for sm_90 while the PTX targets sm_90a: "cannot be compiled")
    src, out = tmp_path / "mm.tc", tmp_path / "mm.cubin"
    src.write_text(WGMMA)
    assert main([str(src), "--emit=cubin", "--arch=sm_90", "-o", str(out)]) == 0
    assert out.read_bytes()[:4] == b"\x7fELF"


def test_cubin_with_too_many_parameters_is_located(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "many.tc"
    src.write_text("__global__ void k(" + ", ".join(f"float* p{i}" for i in range(560)) + ") {\n  *p0 = 1.0;\n}\n")
    assert main([str(src), "--emit=cubin", "--arch=sm_90", "-o", str(tmp_path / "many.cubin")]) == 1
    err = capsys.readouterr().err
    assert "many.tc:1:1: error[E0703]: the kernel needs 4480 bytes of parameter space" in err
    assert "ptxas" not in err


def test_code_generator_errors_quote_their_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An error of the code generator (here: a pointer loaded from memory) prints the user's line
    and a caret under tcc too, as the front end's errors do."""
    bad = tmp_path / "pp.tc"
    bad.write_text("__global__ void k(int** x, int* o) {\n  int* y = *x;\n  *o = *y + 1;\n}\n")
    assert main([str(bad), "--emit=ptx"]) == 1
    err = capsys.readouterr().err.splitlines()
    at = next(i for i, line in enumerate(err) if "pp.tc:2:" in line and "E0690" in line)
    assert err[at + 1].strip() == "int* y = *x;" and err[at + 2].strip().startswith("^")


def test_a_file_that_is_not_utf8_is_a_located_diagnostic(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """tcc read the file as text: a Latin-1 byte in a comment was a UnicodeDecodeError traceback;
    the front end now reads the bytes and says where (E0102), as tc-lint does."""
    bad = tmp_path / "latin1.tc"
    bad.write_bytes(b"__global__ void k(float* x) {\n  *x = 1.0f; // caf\xe9\n}\n")
    assert main([str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{bad}:2:20: error[E0102]: source is not valid UTF-8 (byte 0xe9)")
    assert "Traceback" not in err


def test_an_output_that_cannot_be_written_is_a_plain_error(add_file: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """-o into a missing folder (or onto a directory) was reported as an internal compiler error."""
    defines = ["-D", "TYPE=float", "-D", "BLOCK=128"]
    missing = tmp_path / "no" / "such" / "dir" / "add.ptx"
    assert main([str(add_file), *defines, "-o", str(missing)]) == 1
    assert capsys.readouterr().err == f"tcc: error: cannot write {missing}: No such file or directory\n"
    assert main([str(add_file), *defines, "--emit=cubin", "-o", str(tmp_path)]) == 1
    assert capsys.readouterr().err == f"tcc: error: cannot write {tmp_path}: Is a directory\n"


def test_a_define_given_twice_must_keep_its_value(add_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`-D BLOCK=128 -D BLOCK=256` compiled with the last value silently (a C compiler warns)."""
    assert main([str(add_file), "-D", "TYPE=float", "-D", "BLOCK=128", "-D", "BLOCK=128", "--emit=ir"]) == 0
    capsys.readouterr()
    assert main([str(add_file), "-D", "TYPE=float", "-D", "BLOCK=128", "-D", "BLOCK=256", "--emit=ir"]) == 1
    assert capsys.readouterr().err == "tcc: error: -D BLOCK given twice with different values (128 and 256)\n"


def test_a_list_define_is_named_as_an_auto_tuning_axis(add_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`-D BLOCK=[128,256]` (the runtime's auto-tuning notation) failed at the macro's use with a
    syntax error that did not say why; the error now ends with a note naming the list."""
    assert main([str(add_file), "-D", "TYPE=float", "-D", "BLOCK=[128,256]", "--emit=ir"]) == 1
    err = capsys.readouterr().err
    assert "(in expansion of macro 'BLOCK')" in err
    assert err.rstrip().splitlines()[-1].startswith("note: -D BLOCK=[128,256] is a list of values: an auto-tuning axis")
    # a plain bad value gets no such note
    assert main([str(add_file), "-D", "TYPE=float", "-D", "BLOCK=(", "--emit=ir"]) == 1
    assert "note:" not in capsys.readouterr().err
