"""Property tests of how info keys find their columns on the step path: a str key is found by its
object when it is the one seen before (interned keys), else by its text (a new str each step, as
an f-string makes, or a str subclass), and a key of another type by str(key). Every way, and
every dict whether it matches a plan of its shape or not, must record what the model of the
infos says, value for value."""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any
from unittest.mock import patch

import gymnasium as gym
import numpy as np
import trajcore
from gymnasium import spaces
from gymnasium.vector import VectorEnv
from gymnasium.vector.utils import batch_space
from helpers import assert_infos_equal, expected_infos
from hypothesis import given, settings
from hypothesis import strategies as st
from trajcore import _core
from trajcore.record.vector_wrapper import _env_info

N = 3
# "_x" is a value of its own (no "x" beside it); masks are drawn separately.
KEYS = ["ab", "cd", "e/f", "%gh", "episode", "_x"]
NESTED = ["r", "len", "t_"]


class Key(str):
    """A str subclass: the same text and hash, another type and object."""


def render(key: Any, how: str) -> Any:
    """The key as an env might build it: the same object, a new str of the same text, a subclass."""
    if not isinstance(key, str):
        return key
    if how == "fresh":
        return "".join([key[:1], key[1:]]) if len(key) > 1 else Key(key)
    if how == "subclass":
        return Key(key)
    return key


def rendered(info: dict[Any, Any], how: str) -> dict[Any, Any]:
    return {render(k, how): rendered(v, how) if isinstance(v, dict) else v for k, v in info.items()}


class InfosVectorEnv(VectorEnv[Any, Any, Any]):
    """N sub-envs that never end, whose step infos are the given dicts (reset infos: {})."""

    def __init__(self, infos: list[dict[str, Any]]) -> None:
        self.metadata = {"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}
        self.num_envs = N
        self.single_observation_space = spaces.Box(-1, 1, (2,), np.float32)
        self.single_action_space = spaces.Discrete(2)
        self.observation_space = batch_space(self.single_observation_space, N)
        self.action_space = batch_space(self.single_action_space, N)
        self.infos, self.t = infos, 0

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        self.t = 0
        return np.zeros((N, 2), np.float32), {}

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        info = self.infos[self.t]
        self.t += 1
        flags = np.zeros(N, dtype=bool)
        return np.full((N, 2), self.t, np.float32), np.ones(N), flags, flags.copy(), info


masks = st.lists(st.booleans(), min_size=N, max_size=N).map(lambda m: np.array(m, dtype=bool))


@st.composite
def vector_infos(draw: st.DrawFn) -> dict[str, Any]:
    """Arrays over the sub-envs, each key with or without its `_key` mask; a nested dict (masked
    as a whole, like RecordEpisodeStatistics's `episode`) under some keys."""
    info: dict[str, Any] = {}
    for key in draw(st.lists(st.sampled_from(KEYS), unique=True, max_size=len(KEYS))):
        if key == "episode":
            inner = draw(st.lists(st.sampled_from(NESTED), unique=True, min_size=1))
            info[key] = {k: np.arange(N, dtype=np.int32) + draw(st.integers(0, 9)) for k in inner}
        else:
            info[key] = np.arange(N, dtype=np.float64) * draw(st.floats(-5, 5, allow_nan=False))
        if draw(st.booleans()):
            info["_" + key] = draw(masks)
    return info


@contextmanager
def without_plans() -> Iterator[None]:
    """Recorders made meanwhile walk every info dict key by key, as they do a dict that matches
    no plan of its shape (the bindings' test-only keyword `test_no_info_plans`)."""
    with patch.object(_core, "Recorder", functools.partial(_core.Recorder, test_no_info_plans=True)):
        yield


def record_vector(tmp: Path, infos: list[dict[str, Any]], plans: bool = True) -> None:
    """Records `infos` as the step infos of an `InfosVectorEnv`; `plans=False` walks every info
    dict key by key (see `without_plans`)."""
    with nullcontext() if plans else without_plans():
        rec = trajcore.RecordVectorEpisodes(InfosVectorEnv(infos), tmp)
    rec.reset(seed=0)
    for _ in infos:
        rec.step(np.zeros(N, dtype=np.int64))
    rec.close()


def with_new_masks(info: dict[str, Any], draw: st.DrawFn) -> dict[str, Any]:
    """The same keys in the same order (a dict of the same shape), with masks drawn anew."""
    return {k: draw(masks) if k.startswith("_") and k[1:] in info else v for k, v in info.items()}


@settings(max_examples=40, deadline=None)
@given(
    shapes=st.lists(vector_infos(), min_size=1, max_size=3),
    order=st.lists(st.integers(0, 2), min_size=1, max_size=8),
    how=st.sampled_from(["fresh", "subclass"]),
    data=st.data(),
)
def test_vector_info_keys_record_the_same_whatever_their_objects_and_plans(
    shapes: list[dict[str, Any]], order: list[int], how: str, data: Any
) -> None:
    # Steps of a few shapes in turn, as an env gives them: their plans are made, then used.
    steps = [with_new_masks(shapes[i % len(shapes)], data.draw) for i in order]
    with tempfile.TemporaryDirectory() as tmp:
        record_vector(Path(tmp) / "same", steps)
        record_vector(Path(tmp) / how, [rendered(info, how) for info in steps])
        record_vector(Path(tmp) / "unplanned", steps, plans=False)
        for name in ("same", how, "unplanned"):
            with trajcore.open(Path(tmp) / name) as ds:
                for ep in ds.episodes:
                    # The reset row has no infos; then one row per step, as the sub-env saw it.
                    want = expected_infos([{}] + [_env_info(info, ep.env_index) for info in steps])
                    assert_infos_equal(ep.infos, want, f"{name} keys, env {ep.env_index}")


scalars = st.floats(-1e6, 1e6, allow_nan=False)
# A float in the three forms an env may give it: all go into one float64 column.
float_forms = st.sampled_from([float, np.float64, lambda x: np.array(x, dtype=np.float64)])


@st.composite
def single_infos(draw: st.DrawFn) -> dict[Any, Any]:
    info: dict[Any, Any] = {}
    for key in draw(st.lists(st.sampled_from([*KEYS, 7]), unique=True, max_size=4)):
        form = draw(float_forms)
        if key == "episode":
            inner = draw(st.lists(st.sampled_from(NESTED), unique=True, min_size=1))
            info[key] = {k: form(draw(scalars)) for k in inner}
        else:
            info[key] = form(draw(scalars))
    return info


class InfosEnv(gym.Env[Any, Any]):
    observation_space = spaces.Box(-1, 1, (2,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self, infos: list[dict[Any, Any]]) -> None:
        self.infos, self.t = infos, 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        self.t = 0
        return np.zeros(2, np.float32), self.infos[0]

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[Any, Any]]:
        self.t += 1
        return np.zeros(2, np.float32), 0.0, False, self.t == len(self.infos) - 1, self.infos[self.t]


@settings(max_examples=40, deadline=None)
@given(rows=st.lists(single_infos(), min_size=2, max_size=6), how=st.sampled_from(["same", "fresh", "subclass"]))
def test_single_env_info_keys_and_scalar_forms_read_back(rows: list[dict[Any, Any]], how: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rec = trajcore.RecordEpisodes(InfosEnv([rendered(r, how) for r in rows]), Path(tmp) / "s")
        rec.reset(seed=0)
        for _ in rows[1:]:
            rec.step(0)
        rec.close()
        with trajcore.open(Path(tmp) / "s") as ds:
            # A key of another type (7) is named by str(key).
            plain = [{str(k): as_floats(v) for k, v in r.items()} for r in rows]
            assert_infos_equal(ds.episodes[0].infos, expected_infos(plain))


def as_floats(value: Any) -> Any:
    return {k: float(x) for k, x in value.items()} if isinstance(value, dict) else float(value)
