"""The kernels of the four tutorials, loaded from tutorials/*.py and run through their own torch
bindings: each tutorial's correctness check, plus a few more shapes (interpreter everywhere, GPU
with the `gpu` marker)."""

from __future__ import annotations

import importlib.util
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
