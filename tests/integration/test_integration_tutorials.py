"""The kernels of the four tutorials, loaded from tutorials/*.py and run through their own torch
bindings: each tutorial's correctness check, plus a few more shapes (interpreter everywhere, GPU
with the `gpu` marker)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
DEVICES = [pytest.param("cpu", id="cpu")]
if torch.cuda.is_available():
    DEVICES.append(pytest.param("cuda", id="cuda", marks=pytest.mark.gpu))


def load(name: str, device: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """Import tutorials/<name>.py as a fresh module running on `device`."""
    monkeypatch.setenv("TC_TUTORIAL_DEVICE", device)
    path = ROOT / "tutorials" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"tutorial_{name.replace('-', '_')}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.DEVICE == device
    return module


@pytest.mark.parametrize("device", DEVICES)
def test_tutorial_01_vector_add(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    t = load("01-vector-add", device, monkeypatch)
    t.check()
    x = torch.rand(1025, device=device)
    y = torch.rand(1025, device=device)
    assert torch.equal(t.add(x, y), x + y)


@pytest.mark.parametrize("device", DEVICES)
def test_tutorial_02_fused_softmax(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    t = load("02-fused-softmax", device, monkeypatch)
    t.check()
    for m, n in ((3, 1), (5, 64), (7, 1000)):
        x = torch.randn(m, n, device=device)
        torch.testing.assert_close(t.softmax(x), torch.softmax(x, 1), atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(t.naive_softmax(x), torch.softmax(x, 1), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_tutorial_03_matrix_multiplication(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    t = load("03-matrix-multiplication", device, monkeypatch)
    t.check()
    a = torch.randn(128, 64, device=device)  # float32 through the same kernel
    b = torch.randn(64, 96, device=device)
    torch.testing.assert_close(t.dot(a, b), a @ b, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_tutorial_04_matrix_transposition(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    t = load("04-matrix-transposition", device, monkeypatch)
    t.check()
    for m, n in ((1, 1), (33, 65), (64, 32)):
        x = torch.randn(m, n, device=device, dtype=torch.bfloat16)
        assert torch.equal(t.transpose(x), x.t())


#: Each tutorial's plot name and a line of its correctness check.
SCRIPTS = {"vector-add": "The maximum difference between torch and tc is 0.0",
           "softmax": "tc matches torch: True", "matmul": "tc matches torch: True",
           "transpose": "tc matches torch: True"}


@pytest.mark.slow
def test_run_tutorials_as_scripts_on_the_interpreter(tmp_path: Path) -> None:
    """What `hatch run tutorials` runs: all four tutorials as scripts (here on the interpreter);
    each prints its check and its benchmark table and writes the plot as PNG (and the table)."""
    out = tmp_path / "tutorials"
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "run_tutorials.py"), "--device",
                           "cpu", "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log
    assert "4/4 tutorials passed" in log
    sections = log.split("=== ")
    for name, check_line in SCRIPTS.items():
        (section,) = [s for s in sections if f"{name}-performance:\n" in s]
        assert "running on cpu" in section and check_line in section
        printed = section.split(f"{name}-performance:\n", 1)[1].splitlines()
        assert "tc" in printed[0].split() and len(printed) >= 3  # the table's header and rows
        png = out / f"{name}-performance.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        table = (out / f"{name}-performance.csv").read_text().splitlines()
        assert len(table) >= 3 and "tc" in table[0]  # a header with tc's column, rows of numbers
