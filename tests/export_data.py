"""Datasets the export tests read back, and what every export must hold, derived from the
`trajcore.open` reader API alone (not from trajcore.formats), step by step.

The four datasets: CartPole (one env), pixels (Box uint8 images, 32x32x3), nested (Dict, Tuple
and Text observations, a Tuple action, infos of every kind) and a vector recording (3 sub-envs,
NEXT_STEP autoreset, infos that come and go, custom data recorded at some steps, episode
metadata).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import trajcore
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from helpers import SpaceEnv
from trajcore.spaces import escape_key

NESTED_OBS = spaces.Dict(
    {
        "pos": spaces.Box(-1, 1, (2,), np.float32),
        "grid": spaces.Box(0, 255, (2, 3), np.uint8),
        "t": spaces.Tuple([spaces.Discrete(4), spaces.MultiBinary(2)]),
        "name": spaces.Text(5),
        "a%b": spaces.Discrete(3),  # a key that needs escaping in column names
    }
)
NESTED_ACTION = spaces.Tuple([spaces.Discrete(3), spaces.Box(-1, 1, (2,), np.float32)])
PIXELS = spaces.Box(0, 255, (32, 32, 3), np.uint8)

NAMES = ("cartpole", "pixels", "nested", "vector")


def record_cartpole(path: Path) -> None:
    env = trajcore.RecordEpisodes(
        gym.make("CartPole-v1"), path, {"env": "cartpole"}, episode_metadata=lambda e: {"len": e["length"]}
    )
    env.action_space.seed(1)
    env.reset(seed=1)
    for _ in range(150):  # the last episode is still running at close: incomplete
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            env.reset()
    env.close()


def record_single(path: Path, obs: spaces.Space[Any], action: spaces.Space[Any], infos: bool, episodes: int) -> None:
    env = trajcore.RecordEpisodes(SpaceEnv(obs, action, max_steps=6, infos=infos), path, {"kind": str(obs)[:20]})
    env.action_space.seed(2)
    env.reset(seed=2)
    done = 0
    while done < episodes:
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            done += 1
            env.reset()
    env.close()


def record_vector(path: Path) -> None:
    fns = [
        functools.partial(
            SpaceEnv,
            None,
            None,
            max_steps=4 + 3 * i,
            p_terminate=0.12,
            extra_info=lambda t: {"only5": 1.5, "flag": True} if t == 5 else {},
        )
        for i in range(3)
    ]
    venv = SyncVectorEnv(fns, autoreset_mode=AutoresetMode.NEXT_STEP)
    rec = trajcore.RecordVectorEpisodes(
        venv,
        path,
        {"algo": "random", "cfg": {"n": 3}},
        episode_metadata=lambda e: {"ret": e["episode_return"], "env": e["env_index"]},
    )
    rec.action_space.seed(3)
    rec.reset(seed=3)
    for t in range(40):
        if t % 2 == 0:
            rec.record(logp=np.full(3, -0.5 * t, dtype=np.float32))
        rec.record(count=np.arange(3, dtype=np.int64) + t)
        rec.step(rec.action_space.sample())
    rec.close()


def build(name: str, path: Path) -> None:
    if name == "cartpole":
        record_cartpole(path)
    elif name == "pixels":
        record_single(path, PIXELS, spaces.Discrete(4), infos=False, episodes=3)
    elif name == "nested":
        record_single(path, NESTED_OBS, NESTED_ACTION, infos=True, episodes=5)
    else:
        record_vector(path)


# --- what exports must hold ------------------------------------------------------------------


def row(tree: Any, t: int) -> Any:
    """Row t of a (nested) column sequence as the reader returns it."""
    if isinstance(tree, Mapping):
        return {k: row(v, t) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(row(v, t) for v in tree)
    return tree[t]


def present(fields: Mapping[str, Any], t: int) -> dict[str, Any]:
    """The entries of `ep.infos` / `ep.data` given at row t (their `_key` mask true), nested."""
    out: dict[str, Any] = {}
    for key, value in fields.items():
        if key.startswith("_") and key[1:] in fields:
            continue
        mask = fields.get("_" + key)
        if mask is not None and not mask[t]:
            continue
        out[key] = present(value, t) if isinstance(value, Mapping) else value[t]
    return out


def steps(ds: trajcore.Dataset) -> Iterator[dict[str, Any]]:
    """Every step of the dataset, in order, as the step-table rule says: obs before, next_obs,
    reward, flags and the given infos after, the given custom data of the step."""
    for ep in ds.episodes:
        for t in range(ep.length):
            yield {
                "episode": ep.index,
                "env_index": ep.env_index,
                "step": t,
                "obs": row(ep.observations, t),
                "next_obs": row(ep.observations, t + 1),
                "action": row(ep.actions, t),
                "reward": ep.rewards[t],
                "terminated": ep.terminations[t],
                "truncated": ep.truncations[t],
                "info": present(ep.infos, t + 1),
                "data": present(ep.data, t),
            }


def _scalar(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def flatten(prefix: str, value: Any, out: dict[str, Any], split_arrays: bool = True) -> None:
    """The flat-table naming rule, written out independently: '/'-joined paths (Dict keys
    escaped, Tuple items by position), arrays one column per element in C order (or, without
    `split_arrays`, whole and as they are: the Ray Data columns)."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            flatten(f"{prefix}/{escape_key(k)}", v, out, split_arrays)
    elif isinstance(value, tuple):
        for i, v in enumerate(value):
            flatten(f"{prefix}/{i}", v, out, split_arrays)
    elif not split_arrays:
        out[prefix] = value
    elif isinstance(value, np.ndarray) and value.ndim > 0:
        for k, v in enumerate(value.reshape(-1)):
            out[f"{prefix}_{k}"] = _scalar(v)
    else:
        out[prefix] = _scalar(value)


def flat_steps(ds: trajcore.Dataset) -> list[dict[str, Any]]:
    """`steps` flattened: one dict per row, column name -> Python value; a column missing from
    a row's dict is a value not given there."""
    rows = []
    for s in steps(ds):
        out: dict[str, Any] = {"episode": s["episode"], "env_index": s["env_index"], "step": s["step"]}
        for group in ("obs", "next_obs", "action", "reward", "terminated", "truncated", "info", "data"):
            value = s[group]
            if group in ("info", "data"):
                for k, v in value.items():
                    flatten(f"{group}/{escape_key(k)}", v, out)
            else:
                flatten(group, value, out)
        rows.append(out)
    return rows


def leaf_dtypes(ds: trajcore.Dataset) -> dict[str, np.dtype[Any] | None]:
    """numpy dtype of each flat column (None for str), from the first episode that has it."""
    dtypes: dict[str, Any] = {}
    for s in steps(ds):
        tmp: dict[str, Any] = {}
        for group in ("obs", "next_obs", "action", "info", "data"):
            value = s[group]
            typed: dict[str, Any] = {}
            _typed(group, value, typed)
            tmp.update(typed)
        for k, v in tmp.items():
            dtypes.setdefault(k, v)
    dtypes.update(reward=np.dtype(np.float64), terminated=np.dtype(np.bool_), truncated=np.dtype(np.bool_))
    return dtypes


def _typed(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        for k, v in value.items():
            _typed(f"{prefix}/{escape_key(k)}", v, out)
    elif isinstance(value, tuple):
        for i, v in enumerate(value):
            _typed(f"{prefix}/{i}", v, out)
    elif isinstance(value, str):
        out[prefix] = None
    else:
        arr = np.asarray(value)
        if arr.ndim == 0:
            out[prefix] = arr.dtype
        else:
            for k in range(arr.size):
                out[f"{prefix}_{k}"] = arr.dtype
