"""`tcc ... -o OUT` writes a kernel that `tc_runtime` reads without any compiler package."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tc_nvptx.cli import main as tcc

ADD = """
__global__ void add(TYPE* z, TYPE* x, TYPE* y, int N) {
  int pid = get_program_id(0);
  int off[BLOCK] = pid * BLOCK + 0 ... BLOCK;
  bool check[BLOCK] = off < N;
  *?(check)(z + off) = *?(check)(x + off) + *?(check)(y + off);
}
"""

READ_ALONE = """
import sys
from tc_runtime import binary
b = binary.read(sys.argv[1])
loaded = sorted(m for m in sys.modules if m.split('.')[0] in
                ('tc_lang', 'tc_ir', 'tc_opt', 'tc_nvptx', 'llvmlite', 'torch'))
print(b.name, list(b.signature), b.num_warps, loaded)
"""


@pytest.mark.parametrize("emit", ["ptx", "cubin"])
def test_tcc_output_is_read_by_the_runtime_alone(tmp_path: Path, emit: str) -> None:
    src = tmp_path / "add.tc"
    src.write_text(ADD)
    out = tmp_path / f"add.{emit}"
    status = tcc([str(src), "-D", "TYPE=half", "-D", "BLOCK=512", f"--emit={emit}",
                  "--num-warps", "2", "-o", str(out)])
    assert status == 0
    assert out.stat().st_size > 0 and Path(str(out) + ".json").is_file()
    run = subprocess.run([sys.executable, "-c", READ_ALONE, str(out)], capture_output=True,
                         text=True, check=True)
    assert run.stdout.strip() == "add ['ptr<f16>', 'ptr<f16>', 'ptr<f16>', 'i32'] 2 []"
