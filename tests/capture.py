"""An independent model of what a vector recording should hold, built from what the env returned.

`Capture` keeps every (vector) reset and step exactly as the wrapped env returned it, and splits
them into per-sub-env episodes following gymnasium's autoreset modes and trajcore's documented
info rules, without any trajcore code. `assert_matches` then compares a dataset with it, value by
value: observations, actions, rewards, flags, every info entry and its presence.

The info rules (docs/recording.md, "Infos"):
- vector infos are split per sub-env with gymnasium's masks: ``_key`` masks ``key``; a nested
  dict's mask applies to everything below it; ``_key`` is a value of its own when no ``key`` is
  beside it or it has its own ``__key`` mask;
- SAME_STEP: for a sub-env that ended, ``final_obs``/``final_info`` are the ended episode's last
  row; of the top-level entries, those the env gives at reset (seen in a reset's infos) start
  the new episode, the others (what wrappers add about the step) go to the ended episode's last
  row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import trajcore
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from helpers import assert_tree_equal, stack


def env_item(tree: Any, i: int, space: spaces.Space[Any]) -> Any:
    """Sub-env i of a batched value of (per-env) `space`."""
    if isinstance(space, spaces.Dict):
        return {k: env_item(tree[k], i, sub) for k, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(env_item(v, i, sub) for v, sub in zip(tree, space.spaces, strict=True))
    return tree[i]


def flat_env_info(infos: Mapping[Any, Any], i: int, top: bool = True, prefix: str = "") -> dict[str, Any]:
    """Sub-env i's info entries as {"a/b": value}, following gymnasium's masks."""
    out: dict[str, Any] = {}
    for key, value in infos.items():
        name = str(key)
        if isinstance(key, str) and key.startswith("_") and key[1:] in infos and "_" + key not in infos:
            continue  # a mask
        if top and key in ("final_obs", "final_info"):
            continue
        mask = infos.get("_" + name)
        if mask is not None and not mask[i]:
            continue
        path = prefix + name
        if isinstance(value, Mapping):
            out.update(flat_env_info(value, i, False, path + "/"))
        else:
            out[path] = value[i]
    return out


def flat_info(info: Mapping[Any, Any], prefix: str = "") -> dict[str, Any]:
    """A single env's info as {"a/b": value}."""
    out: dict[str, Any] = {}
    for key, value in info.items():
        path = prefix + str(key)
        if isinstance(value, Mapping):
            out.update(flat_info(value, path + "/"))
        else:
            out[path] = value
    return out


@dataclass
class Expected:
    env_index: int
    observations: list[Any]
    infos: list[dict[str, Any]]
    actions: list[Any] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    terminations: list[bool] = field(default_factory=list)
    truncations: list[bool] = field(default_factory=list)
    complete: bool = False


class Capture:
    """What a vector env returned, split into the episodes trajcore should list."""

    def __init__(self, mode: AutoresetMode, num_envs: int, obs_space: spaces.Space[Any], act_space: spaces.Space[Any]):
        self.mode = mode
        self.n = num_envs
        self.obs_space = obs_space
        self.act_space = act_space
        self.running: list[Expected | None] = [None] * num_envs
        self.waiting = [False] * num_envs  # NEXT_STEP: the next step is an autoreset
        self.done: list[Expected] = []
        self.reset_paths: set[str] = set()

    def _begin(self, i: int, obs: Any, info: dict[str, Any]) -> None:
        self.running[i] = Expected(i, [obs], [info])

    def _end(self, i: int, complete: bool) -> None:
        ep = self.running[i]
        self.running[i] = None
        if ep is not None and ep.actions:
            ep.complete = complete
            self.done.append(ep)

    def reset(self, obs: Any, infos: Mapping[str, Any], mask: Any = None) -> None:
        for i in range(self.n):
            info = flat_env_info(infos, i)
            self.reset_paths |= set(info)
            if mask is not None and not mask[i]:
                continue
            self._end(i, False)
            self._begin(i, env_item(obs, i, self.obs_space), info)
            self.waiting[i] = False

    def step(self, actions: Any, obs: Any, rewards: Any, terms: Any, truncs: Any, infos: Mapping[str, Any]) -> None:
        for i in range(self.n):
            ep = self.running[i]
            info = flat_env_info(infos, i)
            o = env_item(obs, i, self.obs_space)
            if self.waiting[i]:
                self.waiting[i] = False
                self._begin(i, o, info)
                continue
            if ep is None:
                continue
            ep.actions.append(env_item(actions, i, self.act_space))
            ep.rewards.append(float(rewards[i]))
            ep.terminations.append(bool(terms[i]))
            ep.truncations.append(bool(truncs[i]))
            ended = bool(terms[i] or truncs[i])
            if ended and self.mode is AutoresetMode.SAME_STEP:
                final_info = flat_env_info(infos["final_info"], i, top=False) if "final_info" in infos else {}
                step_info = {p: v for p, v in info.items() if p not in self.reset_paths}
                ep.observations.append(infos["final_obs"][i])
                ep.infos.append({**step_info, **final_info})
                self._end(i, True)
                self._begin(i, o, {p: v for p, v in info.items() if p in self.reset_paths})
                continue
            ep.observations.append(o)
            ep.infos.append(info)
            if ended:
                self._end(i, True)
                self.waiting[i] = self.mode is AutoresetMode.NEXT_STEP

    def close(self) -> list[Expected]:
        for i in range(self.n):
            self._end(i, False)
        return self.done


def _trajcore_info_rows(ep: trajcore.Episode) -> dict[str, tuple[Any, np.ndarray]]:
    """{path: (values, mask)} of an episode's infos (the masks tree names every recorded key)."""
    out: dict[str, tuple[Any, np.ndarray]] = {}

    def walk(values: Mapping[str, Any], masks: Mapping[str, Any], prefix: str) -> None:
        for key, mask in masks.items():
            if isinstance(mask, Mapping):
                walk(values[key], mask, prefix + key + "/")
            else:
                out[prefix + key] = (values[key], np.asarray(mask))

    walk(ep.infos, ep.info_masks, "")
    return out


def assert_episode(ep: trajcore.Episode, want: Expected, obs_space: spaces.Space[Any], where: str) -> None:
    """One dataset episode against the model, value by value."""
    assert (ep.env_index, ep.length, ep.complete) == (want.env_index, len(want.actions), want.complete), where
    assert_tree_equal(ep.observations, stack(want.observations, obs_space), f"{where} observations")
    assert np.array_equal(ep.rewards, np.array(want.rewards, dtype=np.float64)), f"{where} rewards"
    assert ep.terminations.tolist() == want.terminations, f"{where} terminations"
    assert ep.truncations.tolist() == want.truncations, f"{where} truncations"
    got = _trajcore_info_rows(ep)
    paths = set().union(*(row.keys() for row in want.infos))
    assert set(got) == paths, f"{where}: info keys {sorted(got)} != {sorted(paths)}"
    for path in paths:
        values, mask = got[path]
        want_mask = [path in row for row in want.infos]
        assert mask.tolist() == want_mask, f"{where} info {path}: present at {mask.tolist()} != {want_mask}"
        for r, row in enumerate(want.infos):
            if path in row:
                w = row[path]
                g = values[r]
                if isinstance(w, str):
                    assert g == w, f"{where} info {path}[{r}]"
                else:
                    assert np.array_equal(np.asarray(g), np.asarray(w)), f"{where} info {path}[{r}]: {g!r} != {w!r}"


def assert_matches(ds: trajcore.Dataset, expected: list[Expected], obs_space: spaces.Space[Any]) -> None:
    """The dataset lists exactly the expected episodes, per sub-env in order, value by value."""
    for i in sorted({e.env_index for e in expected} | {ep.env_index for ep in ds.episodes}):
        got = [ep for ep in ds.episodes if ep.env_index == i]
        want = [e for e in expected if e.env_index == i]
        assert len(got) == len(want), f"sub-env {i}: {len(got)} episodes listed, {len(want)} expected"
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_episode(g, w, obs_space, f"sub-env {i} episode {k}")


def record_vector(rec: Any, steps: int, seed: int, policy: Any = None) -> tuple[Capture, list[Expected]]:
    """Drives a `RecordVectorEpisodes` for `steps` steps with a captured copy of every return value
    (resetting ended sub-envs with a mask in DISABLED mode), then closes it."""
    mode = {
        "next_step": AutoresetMode.NEXT_STEP,
        "same_step": AutoresetMode.SAME_STEP,
        "disabled": AutoresetMode.DISABLED,
    }[rec.autoreset_mode]
    cap = Capture(mode, rec.num_envs, rec.single_observation_space, rec.single_action_space)
    rec.action_space.seed(seed)
    obs, infos = rec.reset(seed=seed)
    cap.reset(obs, infos)
    for _ in range(steps):
        actions = policy(obs) if policy is not None else rec.action_space.sample()
        obs, rewards, terms, truncs, infos = rec.step(actions)
        cap.step(actions, obs, rewards, terms, truncs, infos)
        done = np.logical_or(terms, truncs)
        if mode is AutoresetMode.DISABLED and done.any():
            obs, infos = rec.reset(options={"reset_mask": done})
            cap.reset(obs, infos, done)
    rec.close()
    return cap, cap.close()
