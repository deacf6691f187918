"""tools/bench_matmul_shapes.py's parts that need no GPU: its shapes, padded operands and
configurations."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import bench_matmul_shapes as shapes  # noqa: E402


def test_a_shape_names_its_extents_and_the_operands_it_pads() -> None:
    assert shapes.parse_shape("4104x4096x4096") == (4104, 4096, 4096, "")
    assert shapes.parse_shape("4104x4104x4104ab") == (4104, 4104, 4104, "ab")
    for bad in ("4104x4104", "4104x4104x4104c", "ax1x1"):
        with pytest.raises(ValueError, match="MxNxK"):
            shapes.parse_shape(bad)


def test_a_padded_operand_holds_the_same_shape_in_rows_of_64() -> None:
    plain = shapes.operand(5, 4104, False, torch.float16, "cpu")
    padded = shapes.operand(5, 4104, True, torch.float16, "cpu")
    assert plain.shape == padded.shape == (5, 4104)
    assert plain.stride() == (4104, 1) and padded.stride() == (4160, 1)
    assert shapes.operand(3, 128, True, torch.float16, "cpu").stride() == (128, 1)  # (already whole rows)


def test_a_final_t_turns_tma_off() -> None:
    cfg = shapes.parse_spec("128,256,64,8,4,p,s,T")
    assert cfg.options is not None and cfg.options["tma"] is False
    assert cfg.options["persistent"] and cfg.options["tma_store"]
    assert cfg.defines == {"MB": "128", "NB": "256", "KB": "64"} and cfg.num_stages == 4
    assert shapes.parse_spec("256,192,64,8,3").options in (None, {})
