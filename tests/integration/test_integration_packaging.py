"""Each package builds into its own wheel, and tc-lang installs and runs alone.

The stack's promise (DESIGN.md §2) is that a lower package never needs a higher one: tc-lang is
installed into a fresh virtual environment with only its own dependencies, imported, and its
`tc-lint` CLI run on a kernel; no other tc package may be importable there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ["tc-lang", "tc-ir", "tc-opt", "tc-nvptx", "tc-runtime", "tc-torch"]

KERNEL = """
__global__ void add(TYPE* z, TYPE* x, TYPE* y, int N) {
  int pid = get_program_id(0);
  int off[BLOCK] = pid * BLOCK + 0 ... BLOCK;
  bool check[BLOCK] = off < N;
  *?(check)(z + off) = *?(check)(x + off) + *?(check)(y + off);
}
"""


def _build_wheel(package: str, out: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out),
         str(ROOT / "packages" / package)],
        check=True, capture_output=True, text=True,
    )
    name = package.replace("-", "_")
    (wheel,) = out.glob(f"{name}-*.whl")
    return wheel


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("wheels")
    return {p: _build_wheel(p, out) for p in PACKAGES}


@pytest.mark.slow
def test_every_package_builds_its_own_wheel(wheels: dict[str, Path]) -> None:
    for package, wheel in wheels.items():
        name = package.replace("-", "_")
        files = zipfile.ZipFile(wheel).namelist()
        assert f"{name}/__init__.py" in files
        assert f"{name}/py.typed" in files
        # A wheel holds its own package only.
        others = {p.replace("-", "_") for p in PACKAGES} - {name}
        assert not [f for f in files if f.split("/")[0] in others], package


@pytest.mark.slow
def test_tc_lang_installs_and_runs_alone(wheels: dict[str, Path], tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, str(wheels["tc-lang"])], check=True, capture_output=True, text=True)
    listed = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=freeze"], check=True, capture_output=True,
        text=True,
    ).stdout.lower()
    for other in PACKAGES[1:]:
        assert other not in listed
    for heavy in ("numpy", "llvmlite", "torch", "cuda-bindings"):
        assert heavy not in listed, f"tc-lang pulled in {heavy}"

    probe = (
        "import sys, tc_lang\n"
        "u = tc_lang.frontend(open(sys.argv[1]).read(), {'TYPE': 'half', 'BLOCK': 256})\n"
        "print(u.functions[0].name)\n"
        "import importlib.util as iu\n"
        "print([m for m in ('tc_ir', 'numpy', 'torch') if iu.find_spec(m)])\n"
    )
    kernel = tmp_path / "add.tc"
    kernel.write_text(KERNEL)
    clean_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    run = subprocess.run(
        [str(python), "-c", probe, str(kernel)], check=True, capture_output=True, text=True,
        env=clean_env, cwd=tmp_path,
    )
    assert run.stdout.split("\n")[:2] == ["add", "[]"]

    lint = env_dir / "bin" / "tc-lint"
    ok = subprocess.run(
        [str(lint), str(kernel), "-D", "TYPE=float", "-D", "BLOCK=1024"], capture_output=True,
        text=True, env=clean_env, cwd=tmp_path,
    )
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run(
        [str(lint), str(kernel), "-D", "TYPE=float", "-D", "BLOCK=24"], capture_output=True,
        text=True, env=clean_env, cwd=tmp_path,
    )
    assert bad.returncode == 1
    assert "power" in (bad.stdout + bad.stderr)
