"""Property test of the default ring's size: 8192 steps within 1 to 2 MiB, at least 64 steps,
at most 1 GiB."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from trajcore.record.options import DEFAULT_RING_BYTES, RING_STEPS, SMALL_RING_BYTES, default_ring_bytes

columns = st.lists(
    st.fixed_dictionaries(
        {
            "dtype": st.sampled_from(["uint8", "float32", "float64", "int64", "bool", "str"]),
            "shape": st.lists(st.integers(1, 300), max_size=3),
        }
    ),
    max_size=5,
)


@given(columns=columns, num_envs=st.integers(1, 64), frame_bytes=st.sampled_from([0, 3 * 64 * 64, 3 * 400 * 600]))
def test_default_ring_holds_its_steps_within_bounds(columns: list[Any], num_envs: int, frame_bytes: int) -> None:
    ring = default_ring_bytes(columns, num_envs, frame_bytes)
    step = (
        64
        + frame_bytes
        + sum(
            (256 if c["dtype"] == "str" else {"uint8": 1, "bool": 1, "float32": 4}.get(c["dtype"], 8))
            * _prod(c["shape"])
            for c in columns
        )
    )
    step *= num_envs
    assert SMALL_RING_BYTES <= ring <= 1 << 30
    assert ring >= min(64 * step, 1 << 30)  # a step always fits, many times
    if 64 * step <= DEFAULT_RING_BYTES:
        # Small steps: as many as RING_STEPS hold, within 1 to 2 MiB.
        assert ring == min(DEFAULT_RING_BYTES, max(SMALL_RING_BYTES, RING_STEPS * step))
    else:
        assert ring == min(64 * step, 1 << 30)


def _prod(shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
