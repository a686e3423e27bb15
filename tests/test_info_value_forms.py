"""Property tests of the step path's quick check: a numpy array that is exactly what its column
takes (numpy's own type, the column's dtype, C-contiguous, the column's shape) is borrowed after
a few reads of its C struct; every other form of a value goes the general way (casts, copies,
scalars). The same values in forms the quick check never takes (strided views, a subclass,
swapped byte order) must record the same, value for value, as must the walk without plans (every
dict walked key by key, as a dict that matches no plan of its shape): dtypes that change mid-run,
keys that come and go, masks of every form, rows of two shapes."""

from __future__ import annotations

import tempfile
import warnings
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import trajcore
from helpers import assert_infos_equal
from hypothesis import given, settings
from hypothesis import strategies as st
from test_info_keys import InfosEnv, InfosVectorEnv, N, without_plans

DTYPES = [np.float64, np.float32, np.int64, np.int32, np.uint8, np.bool_]
# Keys and the per-env shape of their values ("episode" holds a nested dict, masked as a whole).
KEYS = {"a": (), "b": (2,), "_c": (), "episode": ()}
NESTED = ["r", "l"]


class Sub(np.ndarray):
    """An ndarray subclass: numpy's layout, another type (the quick check leaves it alone)."""


def strided(a: np.ndarray) -> np.ndarray:
    """The same values as a view that is not C-contiguous."""
    return np.repeat(a, 2, axis=0)[::2]


def in_form(a: np.ndarray, form: str) -> Any:
    if form == "strided":
        return strided(a)
    if form == "subclass":
        return a.view(Sub)
    if form == "swapped":
        return a.astype(a.dtype.newbyteorder())
    if form == "fortran":
        return np.asfortranarray(a) if a.ndim > 1 else strided(a)
    return a


forms = st.sampled_from(["exact", "exact", "strided", "subclass", "swapped", "fortran"])


@st.composite
def arrays(draw: st.DrawFn, row_shape: tuple[int, ...]) -> np.ndarray:
    dtype = draw(st.sampled_from(DTYPES))
    values = draw(st.lists(st.integers(0, 3), min_size=N * max(1, int(np.prod(row_shape))), max_size=16))
    return np.array(values[: N * int(np.prod(row_shape))]).reshape((N, *row_shape)).astype(dtype)


@st.composite
def masks(draw: st.DrawFn) -> Any:
    mask = np.array(draw(st.lists(st.booleans(), min_size=N, max_size=N)))
    form = draw(st.sampled_from(["bool", "bool", "int8", "strided", "list"]))
    if form == "int8":
        return mask.astype(np.int8)
    if form == "strided":
        return strided(mask)
    return mask.tolist() if form == "list" else mask


@st.composite
def vector_infos(draw: st.DrawFn) -> dict[str, Any]:
    info: dict[str, Any] = {}
    for key in draw(st.lists(st.sampled_from(list(KEYS)), unique=True)):
        if key == "episode":
            inner = draw(st.lists(st.sampled_from(NESTED), unique=True, min_size=1))
            info[key] = {k: in_form(draw(arrays(())), draw(forms)) for k in inner}
            # A nested key's own mask, under the nested dict's (two masks to combine).
            for k in inner:
                if draw(st.integers(0, 3)) == 0:
                    info[key]["_" + k] = draw(masks())
        else:
            info[key] = in_form(draw(arrays(KEYS[key])), draw(forms))
        if draw(st.booleans()):
            info["_" + key] = draw(masks())
    return info


def general(value: Any) -> Any:
    """`value` in a form the quick check never takes: arrays as strided views (0-d ones as a
    subclass), nested dicts alike; masks and other values as they are."""
    if isinstance(value, dict):
        return {k: general(v) if not k.startswith("_") or k[1:] not in value else v for k, v in value.items()}
    if isinstance(value, np.ndarray | np.generic):
        a = np.asarray(value)
        return a.view(Sub) if a.ndim == 0 else strided(a)
    return value


def record(env: Any, tmp: Path, steps: int, walk: str = "any") -> dict[str, int]:
    """Records `steps` steps of `env`; returns the counts of values not recorded. `walk` is
    "any" (as in use: by the plan of a dict's shape, else key by key) or "unplanned" (every
    dict walked key by key)."""
    vector = isinstance(env, InfosVectorEnv)
    plans = nullcontext() if walk == "any" else without_plans()
    with plans, warnings.catch_warnings():
        # Values that do not fit their column are left out with a warning, in every run alike.
        warnings.simplefilter("ignore", trajcore.TrajcoreWarning)
        rec = trajcore.RecordVectorEpisodes(env, tmp) if vector else trajcore.RecordEpisodes(env, tmp)
        rec.reset(seed=0)
        for _ in range(steps):
            rec.step(np.zeros(N, dtype=np.int64) if vector else 0)
        not_recorded: dict[str, int] = rec.stats()["values_not_recorded"]
        rec.close()
    return not_recorded


def assert_same_recordings(tmp: Path, names: list[str], counts: list[dict[str, int]]) -> None:
    for name, count in zip(names[1:], counts[1:], strict=True):
        assert count == counts[0], f"{name}: values not recorded {count} != {counts[0]}"
    with trajcore.open(tmp / names[0]) as first:
        want = [(ep.env_index, ep.infos) for ep in first.episodes]
    for name in names[1:]:
        with trajcore.open(tmp / name) as ds:
            got = [(ep.env_index, ep.infos) for ep in ds.episodes]
        assert [e for e, _ in got] == [e for e, _ in want]
        for (env, g), (_, w) in zip(got, want, strict=True):
            assert_infos_equal(g, w, f"{name}, env {env}")
            for key, value in w.items():
                if isinstance(value, np.ndarray):
                    assert g[key].dtype == value.dtype, f"{name}, env {env}: dtype of {key}"


@settings(max_examples=60, deadline=None)
@given(
    shapes=st.lists(vector_infos(), min_size=1, max_size=3),
    order=st.lists(st.integers(0, 2), min_size=1, max_size=8),
)
def test_vector_values_record_the_same_in_every_form(shapes: list[dict[str, Any]], order: list[int]) -> None:
    # A few dict shapes in turn (their plans made, then used), each step's arrays drawn anew
    # in dtype and form: a column's dtype is its first value's, later ones cast or left out.
    steps = [shapes[i % len(shapes)] for i in order]
    with tempfile.TemporaryDirectory() as tmp:
        names = ["drawn", "general", "unplanned"]
        counts = [
            record(InfosVectorEnv(steps), Path(tmp) / "drawn", len(steps)),
            record(InfosVectorEnv([general(s) for s in steps]), Path(tmp) / "general", len(steps)),
            record(InfosVectorEnv(steps), Path(tmp) / "unplanned", len(steps), walk="unplanned"),
        ]
        assert_same_recordings(Path(tmp), names, counts)


scalar_forms = st.sampled_from(["python", "numpy scalar", "0-d array", "0-d swapped"])


@st.composite
def single_values(draw: st.DrawFn) -> Any:
    dtype = draw(st.sampled_from(DTYPES))
    x = np.array(draw(st.integers(0, 3))).astype(dtype)
    form = draw(scalar_forms)
    if form == "python":
        return x.item()
    if form == "numpy scalar":
        return x[()]
    return x.astype(x.dtype.newbyteorder()) if form == "0-d swapped" else x


@st.composite
def single_infos(draw: st.DrawFn) -> dict[str, Any]:
    info: dict[str, Any] = {}
    for key in draw(st.lists(st.sampled_from(["a", "_c", "episode"]), unique=True)):
        if key == "episode":
            inner = draw(st.lists(st.sampled_from(NESTED), unique=True, min_size=1))
            info[key] = {k: draw(single_values()) for k in inner}
        else:
            info[key] = draw(single_values())
    return info


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(single_infos(), min_size=2, max_size=8))
def test_single_env_values_record_the_same_in_every_form(rows: list[dict[str, Any]]) -> None:
    # numpy scalars and 0-d arrays against the same values as 0-d arrays of a subclass.
    with tempfile.TemporaryDirectory() as tmp:
        counts = [
            record(InfosEnv(rows), Path(tmp) / "drawn", len(rows) - 1),
            record(InfosEnv([general(r) for r in rows]), Path(tmp) / "general", len(rows) - 1),
            record(InfosEnv(rows), Path(tmp) / "unplanned", len(rows) - 1, walk="unplanned"),
        ]
        assert_same_recordings(Path(tmp), ["drawn", "general", "unplanned"], counts)


def test_a_key_that_needs_converting_for_a_while_records_the_same_after() -> None:
    # The fast walk leaves a dict whose values need converting to the planned walk, and after
    # 16 such steps in a row tries it once in 256 (here at step 275, left again, and at step
    # 531, taken):
    # the values before, during and after record the same whichever walk took them.
    steps = []
    for t in range(600):
        r = np.arange(N, dtype=np.float64) + t
        episode = {"r": strided(r) if 20 <= t < 300 else r, "l": np.full(N, t, np.int64)}
        steps.append({"episode": episode, "_episode": np.arange(N) % 2 == t % 2, "x": r * 2})
    with tempfile.TemporaryDirectory() as tmp:
        names = ["any", "planned", "unplanned"]
        counts = [record(InfosVectorEnv(steps), Path(tmp) / n, len(steps), walk=n) for n in names]
        assert counts[0] == {}
        assert_same_recordings(Path(tmp), names, counts)
        with trajcore.open(Path(tmp) / "any") as ds:
            (episode,) = [ep for ep in ds.episodes if ep.env_index == 1]
            infos = episode.infos
    # Env 1 has the statistics at odd steps; step t is row t + 1 (row 0 is the reset's).
    t = np.arange(600)
    r, mask = infos["episode"]["r"], infos["episode"]["_r"]
    np.testing.assert_array_equal(mask[1:], t % 2 == 1)
    np.testing.assert_array_equal(r[1:][t % 2 == 1], (1.0 + t)[t % 2 == 1])
    np.testing.assert_array_equal(infos["x"][1:], 2.0 * (1 + t))
