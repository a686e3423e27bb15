"""The odd Python values a step can carry, each read once by the bindings and fitted by the core
(issue 32): an IntEnum or a Decimal into a column of scalars, numpy's str into a numeric column,
bool against int, big ints, 0-d and strided arrays, a str with a NUL. Each records as numpy
would read it, or is refused (a fixed column) or left out with a warning (an info key) by name."""

from __future__ import annotations

import enum
import re
import tempfile
import warnings
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trajcore
from gymnasium import spaces


class Level(enum.IntEnum):
    LOW = 2
    TOP = 2**63


SCALAR = spaces.Box(-5, 5, (), np.float32)


def _step(tmp_path: Path, space: spaces.Space[Any], obs: Any = None, action: Any = 0) -> Any:
    """Records one step with `obs` (or `space`'s sample) and `action` into a Discrete(3) action
    column; what the step recorded, read back."""
    with trajcore.Writer(tmp_path / "w", space, spaces.Discrete(3)) as w:
        first = space.sample()
        w.reset(first)
        w.step(action, first if obs is None else obs, 0.0, True, False)
    with trajcore.open(tmp_path / "w") as ds:
        ep = ds.episodes[0]
        return np.asarray(ep.observations)[1] if obs is not None else np.asarray(ep.actions)[0]


@pytest.mark.parametrize(
    ("space", "obs", "want"),
    [
        (SCALAR, Level.LOW, 2.0),
        (SCALAR, Decimal("1.5"), 1.5),  # read by its __float__
        (SCALAR, True, 1.0),
        (SCALAR, np.array(2.0), 2.0),  # a 0-d array
        (SCALAR, np.float64(1.5), 1.5),
        (SCALAR, 2**70, 2.0**70),
        (spaces.Box(0, 10, (2,), np.float32), np.arange(4.0)[::2], [0.0, 2.0]),  # strided
        (spaces.Box(0, 10, (2,), np.float32), np.array([1, 2], ">f4"), [1.0, 2.0]),  # swapped
        (spaces.Text(8), np.str_("ab"), "ab"),
        (spaces.Text(8), "a\x00", "a"),  # numpy's str drops the trailing NUL when read
    ],
)
def test_odd_values_record_into_fixed_columns(tmp_path: Path, space: spaces.Space[Any], obs: Any, want: Any) -> None:
    np.testing.assert_array_equal(_step(tmp_path, space, obs=obs), want)


@pytest.mark.parametrize(
    ("space", "obs", "action", "match"),
    [
        (SCALAR, np.str_("1"), 0, r"column 'obs': expected dtype float32, got <U1 which does not cast safely"),
        (SCALAR, "abc", 0, r"column 'obs': expected float32 \(a number\), got str 'abc'"),
        (SCALAR, 2**200, 0, r"column 'obs': value 1.6069380442589903e60 is out of range for float32"),
        (spaces.Box(0, 10, (2,), np.float32), Decimal(2), 0, r"column 'obs': expected numbers, got Decimal"),
        (spaces.Text(8), Level.LOW, 0, r"column 'obs': expected str, got Level"),
        (SCALAR, None, Decimal(2), r"column 'action': expected int64 \(a integer\), got Decimal Decimal\('2'\)"),
        (SCALAR, None, np.str_("1"), r"column 'action': expected dtype int64, got <U1 which does not cast safely"),
        (SCALAR, None, 1.5, r"column 'action': expected int64 \(a integer; floats do not cast safely"),
        (SCALAR, None, Level.TOP, r"column 'action': value 9223372036854775808 is out of range for int64"),
        (SCALAR, None, 2**70, r"column 'action': value 1180591620717411303424 is out of range for int64"),
    ],
)
def test_odd_values_that_do_not_fit_are_refused_by_name(
    tmp_path: Path, space: spaces.Space[Any], obs: Any, action: Any, match: str
) -> None:
    with pytest.raises(trajcore.SchemaError, match=match):
        _step(tmp_path, space, obs=obs, action=action)


def test_odd_actions_that_fit_record() -> None:
    for action, want in [(True, 1), (Level.LOW, 2), (np.int8(1), 1), (np.array(2), 2)]:
        with tempfile.TemporaryDirectory() as d:
            assert _step(Path(d), SCALAR, action=action) == want, action


def _info_key(tmp_path: Path, values: list[Any]) -> tuple[list[Any], list[str]]:
    """Records `values` as info key `x` of consecutive steps; its values read back (None where
    missing) and the warnings given."""
    with warnings.catch_warnings(record=True) as given:
        warnings.simplefilter("always")
        with trajcore.Writer(tmp_path / "i", SCALAR, spaces.Discrete(2)) as w:
            w.reset(np.float32(0))
            for v in values:
                w.step(0, np.float32(0), 0.0, False, False, {"x": v})
            w.step(0, np.float32(0), 0.0, True, False)
    with trajcore.open(tmp_path / "i") as ds:
        infos = ds.episodes[0].infos
        x, present = (infos["x"], infos["_x"]) if "x" in infos else ([], [])
        got = [v.item() if p else None for v, p in zip(np.asarray(x)[1:-1], np.asarray(present)[1:-1], strict=True)]
    return got, [str(w.message) for w in given if issubclass(w.category, trajcore.TrajcoreWarning)]


@pytest.mark.parametrize(
    ("values", "want", "dtype", "warned"),
    [
        ([Level.LOW, 1], [2, 1], "int64", None),  # an IntEnum makes an int64 key, as numpy would
        ([Level.TOP], [2**63], "uint64", None),
        ([True, 1], [1, 1], "int64", None),  # a bool key widens for an int
        ([1.5, Decimal("1.5")], [1.5, 1.5], "float64", None),  # a float key takes a Decimal
        ([Level.LOW, np.float32(1)], [2.0, 1.0], "float64", None),
        ([1, Decimal("1.5")], [1, None], "int64", r"column 'info/x': expected int64 \(a integer\), got Decimal"),
        ([1, np.str_("1")], [1, None], "int64", r"column 'info/x': expected dtype int64, got <U1 which does not"),
        ([1, 2**70], [1, None], "int64", r"column 'info/x': value 1180591620717411303424 is out of range for int64"),
        ([Decimal(1)], [], None, r"values of type Decimal are not supported"),
    ],
)
def test_odd_info_values_make_widen_or_miss_their_key(
    tmp_path: Path, values: list[Any], want: list[Any], dtype: str | None, warned: str | None
) -> None:
    got, warnings_given = _info_key(tmp_path, values)
    assert got == want
    if dtype is not None:
        with trajcore.open(tmp_path / "i") as ds:
            assert np.asarray(ds.episodes[0].infos["x"]).dtype == dtype
    if warned is None:
        assert warnings_given == []
    else:
        assert warnings_given and re.search(warned, warnings_given[0]), warnings_given
