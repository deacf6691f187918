"""The tc-lint command: diagnostics on stderr, exit status, --show-types, --kernel."""

from __future__ import annotations

from pathlib import Path

import pytest

from tc_lang.lint import main

KERNELS = Path(__file__).parent / "kernels"


def test_show_types(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main([str(KERNELS / "vector_add.tc"), "-D", "TYPE=half", "-D", "SIZE=256",
               "--show-types"])
    out, err = capsys.readouterr()
    assert rc == 0
    assert "param a: half*" in out
    assert "off: int tile, shape [256]" in out
    assert "warning[W0201]" in err


def test_error_exit_status_and_message(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main([str(KERNELS / "softmax.tc"), "-D", "BLOCK=24"])
    _, err = capsys.readouterr()
    assert rc == 1
    assert "softmax.tc:3:1: error[E0502]: tile 'n' has 24 elements" in err


def test_kernel_selection(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "two.tc"
    src.write_text("__device__ float sq(float x) { return x * x; }\n"
                   "__global__ void k(float* p) { *p = sq(*p); }\n")
    assert main([str(src), "--kernel", "k", "--show-types"]) == 0
    out, _ = capsys.readouterr()
    assert "global k -> void" in out and "sq" not in out
    assert main([str(src), "--kernel", "nope"]) == 1
    _, err = capsys.readouterr()
    assert "no function 'nope'" in err and "sq, k" in err


def test_missing_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["/nonexistent/k.tc"]) == 1
    assert "cannot read" in capsys.readouterr().err


def test_define_without_value_is_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "k.tc"
    src.write_text("#if !FLAG\n#error FLAG needed\n#endif\n__global__ void k() {}\n")
    assert main([str(src), "-D", "FLAG"]) == 0
    assert main([str(src)]) == 1
    assert "#error FLAG needed" in capsys.readouterr().err


def test_define_given_twice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the same value twice is one define; two values are an error, not the last one silently
    src = tmp_path / "k.tc"
    src.write_text("#if N != 4\n#error N must be 4\n#endif\n__global__ void k() {}\n")
    assert main([str(src), "-D", "N=4", "-D", "N=4"]) == 0
    assert main([str(src), "-D", "N=4", "-D", "N=5"]) == 1
    assert "-D N given twice with different values (4 and 5)" in capsys.readouterr().err


def test_a_list_define_gets_a_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # `-D N=[4,8]` is the runtime's auto-tuning notation; tc-lint checks one configuration
    src = tmp_path / "k.tc"
    src.write_text("__global__ void k(float* x) { float y[N] = 0; *(x + 0) = y[0]; }\n")
    assert main([str(src), "-D", "N=[4,8]"]) == 1
    err = capsys.readouterr().err
    assert "in expansion of macro 'N'" in err
    assert "note: -D N=[4,8] is a list of values: an auto-tuning axis" in err


def test_runs_with_only_tc_lang(tmp_path: Path) -> None:
    # The other tc packages are made unimportable: tc-lint must not need them.
    import subprocess
    import sys

    code = (
        "import sys\n"
        "for name in ('tc_ir', 'tc_opt', 'tc_nvptx', 'tc_runtime', 'tc_torch', 'numpy', 'torch'):\n"
        "    sys.modules[name] = None\n"
        "from tc_lang.lint import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    good = [str(KERNELS / "matmul.tc"), "-D", "TYPE=half", "-D", "TM=64", "-D", "TN=64",
            "-D", "TK=32", "--show-types"]
    ok = subprocess.run([sys.executable, "-c", code, *good], capture_output=True, text=True,
                        cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert "c: float tile, shape [64, 64]" in ok.stdout and ok.stderr == ""
    bad = subprocess.run([sys.executable, "-c", code, *good[:-3], "-D", "TK=24"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode == 1 and bad.stdout == ""
    assert "matmul.tc:" in bad.stderr and "error[E0502]" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_every_error_is_printed_with_its_location(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "k.tc"
    src.write_text("__global__ void k(float* p) {\n  int a = y;\n  float x[24] = 0;\n}\n")
    assert main([str(src)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert f"{src}:2:11: error[E0301]: use of undeclared identifier 'y'" in err
    assert f"{src}:3:3: error[E0502]: tile 'x' has 24 elements" in err
    assert "hint: tile dimensions must be powers of two or multiples of 16" in err


def test_dash_reads_the_source_from_stdin(monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """`tc-lint -` tried to open a file named '-' (tcc reads stdin)."""
    import io
    import sys

    def stdin(data: bytes) -> None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))

    stdin(b"__global__ void k(float* p) { float x[N] = 0; *(p + 0 ... N) = x; }\n")
    assert main(["-", "-D", "N=64", "--show-types"]) == 0
    out, err = capsys.readouterr()
    assert "<stdin>:1:37: x: float tile, shape [64]" in out and err == ""
    stdin(b"__global__ void k(float* p) {\n  *p = y;\n}\n")
    assert main(["-"]) == 1
    assert "<stdin>:2:8: error[E0301]: use of undeclared identifier 'y'" in capsys.readouterr().err


def test_a_file_that_is_not_regular_is_refused(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """tc-lint reads only regular files, as tcc does (`tc-lint /dev/zero` read until memory ran
    out: a folder stands for it here, which fails without filling the memory)."""
    assert main([str(tmp_path)]) == 1
    assert capsys.readouterr().err == \
        f"tc-lint: cannot read {tmp_path}: not a regular file (a directory)\n"
