"""CompileOptions refuses values of the wrong type by name: an option that is not an int, a flag
that is not a bool, a specialization that is not a sequence (they used to reach the generated
code, e.g. num_warps=4.0 as an LLVM parse error, or to raise a bare TypeError from a comparison)."""

from __future__ import annotations

from typing import Any

import pytest
from tc_opt import CompileOptions


@pytest.mark.parametrize("field, value", [
    ("num_warps", 4.0), ("num_warps", True), ("num_warps", "4"),
    ("num_stages", "3"), ("num_stages", 2.5), ("num_stages", True),
])
def test_int_options_of_another_type_are_refused_by_name(field: str, value: Any) -> None:
    with pytest.raises(TypeError, match=f"{field} must be an int, not {type(value).__name__}"):
        CompileOptions(**{field: value})


@pytest.mark.parametrize("field, value, message", [
    ("num_warps", 3, "num_warps must be a power of two from 1 to 32, or 12, not 3"),
    ("num_warps", 6, "num_warps must be a power of two from 1 to 32, or 12, not 6"),
    ("num_stages", 0, "num_stages must be at least 1, not 0"),
    ("arch", "sm_100", "unknown GPU architecture 'sm_100'"),
    ("fp32_dot", "fast", "fp32_dot must be 'ieee' or 'tf32', not 'fast'"),
])
def test_out_of_range_options_say_what_is_accepted(field: str, value: Any, message: str) -> None:
    with pytest.raises(ValueError) as info:
        CompileOptions(**{field: value})
    assert str(info.value).startswith(message)  # (the whole text, no attrs internals after it)


@pytest.mark.parametrize("field", ["persistent", "tma", "precise_math", "cluster_multicast", "cluster_2x2", "verify"])
def test_flags_must_be_bools(field: str) -> None:
    # "False" is truthy: it would have switched the schedule on silently
    wrong: dict[str, Any] = {field: "False"}
    with pytest.raises(TypeError, match=f"{field} must be True or False, not str 'False'"):
        CompileOptions(**wrong)
    right: dict[str, Any] = {field: True}
    assert getattr(CompileOptions(**right), field) is True


@pytest.mark.parametrize("value", [5, "16", b"16"])
def test_a_specialization_must_be_a_sequence_of_entries(value: Any) -> None:
    with pytest.raises(TypeError, match="specialization must be a sequence with one entry per kernel argument"):
        CompileOptions(specialization=value)
    assert CompileOptions(specialization=["16", None, 1]).specialization == (
        "divisible_by_16", None, "equal_to_1")
