"""What users write today to record a vector env, as small recorder wrappers, and the peers
(EnvLogger, Minari) when they are installed.

The hand-written recorders follow gymnasium's NEXT_STEP autoreset as a careful user would: a
sub-env whose episode ended at the previous step starts a new episode with this step's
observation. They do none of trajcore's other work (no checksums, no index, no crash safety).
"""

from __future__ import annotations

import csv
import json
import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium.vector import VectorWrapper

__all__ = ["BASELINES", "envlogger_env", "envlogger_list", "minari_list", "peer_missing"]


class _Baseline(VectorWrapper[Any, Any, Any, Any, Any]):
    def __init__(self, env: Any, path: str | os.PathLike[str]) -> None:
        super().__init__(env)
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.ended = np.zeros(self.num_envs, dtype=np.bool_)

    def reset(self, *, seed: Any = None, options: Any = None) -> tuple[Any, dict[str, Any]]:
        obs, infos = self.env.reset(seed=seed, options=options)
        for i in range(self.num_envs):
            self.begin(i, obs[i])
        self.ended[:] = False
        return obs, infos

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        obs, rewards, terms, truncs, infos = self.env.step(actions)
        for i in range(self.num_envs):
            if self.ended[i]:
                self.begin(i, obs[i])  # the autoreset step: a new episode, not a transition
            else:
                self.transition(i, actions[i], obs[i], rewards[i], terms[i], truncs[i])
        self.ended = terms | truncs
        return obs, rewards, terms, truncs, infos

    def begin(self, i: int, obs: Any) -> None:
        raise NotImplementedError

    def transition(self, i: int, action: Any, obs: Any, reward: Any, term: Any, trunc: Any) -> None:
        raise NotImplementedError


class _PerEpisode(_Baseline):
    """Keeps each sub-env's episode in Python lists and writes one file when it ends."""

    def __init__(self, env: Any, path: str | os.PathLike[str]) -> None:
        super().__init__(env, path)
        self.episodes: list[dict[str, list[Any]] | None] = [None] * self.num_envs
        self.count = 0

    def begin(self, i: int, obs: Any) -> None:
        if self.episodes[i] is not None:
            self._end(i)
        self.episodes[i] = {"obs": [obs], "actions": [], "rewards": [], "terminations": [], "truncations": []}

    def transition(self, i: int, action: Any, obs: Any, reward: Any, term: Any, trunc: Any) -> None:
        ep = self.episodes[i]
        assert ep is not None
        ep["obs"].append(obs)
        ep["actions"].append(action)
        ep["rewards"].append(reward)
        ep["terminations"].append(term)
        ep["truncations"].append(trunc)
        if term or trunc:
            self._end(i)

    def _end(self, i: int) -> None:
        ep = self.episodes[i]
        self.episodes[i] = None
        if ep is None or not ep["actions"]:
            return
        arrays = {k: np.asarray(v) for k, v in ep.items()}
        self.write(self.path / f"ep{self.count:07d}_env{i}", arrays)
        self.count += 1

    def write(self, stem: Path, arrays: dict[str, np.ndarray]) -> None:
        raise NotImplementedError

    def close(self, **kwargs: Any) -> None:
        for i in range(self.num_envs):
            self._end(i)  # running episodes too, as trajcore keeps them
        super().close(**kwargs)


class PickleEpisodes(_PerEpisode):
    """One pickle (of a dict of numpy arrays) per episode."""

    def write(self, stem: Path, arrays: dict[str, np.ndarray]) -> None:
        with open(stem.with_suffix(".pkl"), "wb") as f:
            pickle.dump(arrays, f, protocol=pickle.HIGHEST_PROTOCOL)


class NpzEpisodes(_PerEpisode):
    """`np.savez_compressed` per episode."""

    def write(self, stem: Path, arrays: dict[str, np.ndarray]) -> None:
        np.savez_compressed(stem.with_suffix(".npz"), **arrays)  # type: ignore[arg-type]


class JsonLines(_Baseline):
    """One JSON line per sub-env step (the reset observations as lines with "reset": true)."""

    def __init__(self, env: Any, path: str | os.PathLike[str]) -> None:
        super().__init__(env, path)
        self.file = open(self.path / "steps.jsonl", "w")  # noqa: SIM115 (closed in close())

    def begin(self, i: int, obs: Any) -> None:
        self.file.write(json.dumps({"env": i, "reset": True, "obs": obs.tolist()}) + "\n")

    def transition(self, i: int, action: Any, obs: Any, reward: Any, term: Any, trunc: Any) -> None:
        row = {
            "env": i,
            "obs": obs.tolist(),
            "action": action.tolist(),
            "reward": float(reward),
            "terminated": bool(term),
            "truncated": bool(trunc),
        }
        self.file.write(json.dumps(row) + "\n")

    def close(self, **kwargs: Any) -> None:
        self.file.close()
        super().close(**kwargs)


class CsvRows(_Baseline):
    """A CSV row per sub-env step: env, reset flag, action, reward, flags, then the flattened obs."""

    def __init__(self, env: Any, path: str | os.PathLike[str]) -> None:
        super().__init__(env, path)
        self.file = open(self.path / "steps.csv", "w", newline="")  # noqa: SIM115 (closed in close())
        self.writer = csv.writer(self.file)

    def begin(self, i: int, obs: Any) -> None:
        self.writer.writerow([i, 1, "", "", "", "", *obs.ravel().tolist()])

    def transition(self, i: int, action: Any, obs: Any, reward: Any, term: Any, trunc: Any) -> None:
        self.writer.writerow([i, 0, action, float(reward), int(term), int(trunc), *obs.ravel().tolist()])

    def close(self, **kwargs: Any) -> None:
        self.file.close()
        super().close(**kwargs)


BASELINES: dict[str, type[_Baseline]] = {
    "pickle per episode": PickleEpisodes,
    "np.savez_compressed per episode": NpzEpisodes,
    "JSON line per step": JsonLines,
    "CSV row per step": CsvRows,
}


def peer_missing(name: str) -> str | None:
    """Why peer `name` ("envlogger" or "minari") cannot run here, or None when it can."""
    try:
        if name == "envlogger":
            _numpy2_alias()
            import dm_env  # noqa: F401
            import envlogger  # noqa: F401
        else:
            import h5py  # noqa: F401
            import minari  # noqa: F401
            from minari import DataCollector  # noqa: F401
    except Exception as e:  # any import failure (missing, a glibc too old, a numpy 2 break)
        how = (
            "pip install envlogger==1.2 dm-env (1.3 needs a newer glibc than Debian 12)"
            if name == "envlogger"
            else 'pip install "minari[create]" pillow h5py'
        )
        return f"{name} is not installed or does not import ({type(e).__name__}: {e}); to measure it: {how}"
    return None


def _numpy2_alias() -> None:
    # EnvLogger's C++ side logs every flush at INFO to stderr; keep warnings and errors.
    os.environ.setdefault("GLOG_minloglevel", "1")
    # envlogger 1.2 still names np.unicode_, removed in numpy 2; np.str_ is the same type.
    if not hasattr(np, "unicode_"):
        setattr(np, "unicode_", np.str_)  # noqa: B010 (the name is gone from numpy 2's stubs)


def _dm_adapter(env: Any) -> Any:
    """A gymnasium env as a dm_env.Environment (EnvLogger wraps dm_env envs)."""
    import dm_env
    from dm_env import specs

    class DmEnv(dm_env.Environment):  # type: ignore[misc]
        def reset(self) -> Any:
            obs, _ = env.reset()
            return dm_env.restart(obs)

        def step(self, action: Any) -> Any:
            obs, reward, term, trunc, _ = env.step(action)
            if term:
                return dm_env.termination(reward, obs)
            if trunc:
                return dm_env.truncation(reward, obs)
            return dm_env.transition(reward, obs)

        def observation_spec(self) -> Any:
            space = env.observation_space
            return specs.Array(space.shape, space.dtype)

        def action_spec(self) -> Any:
            return specs.DiscreteArray(int(env.action_space.n))

        def close(self) -> None:
            env.close()

    return DmEnv()


def envlogger_list(make: Any, num_envs: int, path: Path | None) -> Any:
    """`num_envs` envs as dm_env envs, each wrapped by its own EnvLogger writing under `path`
    (None: the same envs unwrapped, the loop to compare with)."""
    _numpy2_alias()
    from workloads import ListVectorEnv

    if path is None:
        envs = [_dm_adapter(make()) for _ in range(num_envs)]
    else:
        envs = [envlogger_env(make(), path / f"env{i}") for i in range(num_envs)]
    for e in envs:
        e.reset()
    return ListVectorEnv(envs, lambda ts: bool(ts.last()), lambda e: e.reset())


def envlogger_env(env: Any, path: Path) -> Any:
    """A gymnasium env as a dm_env env wrapped by EnvLogger (its defaults), writing under `path`."""
    _numpy2_alias()
    import envlogger

    return envlogger.EnvLogger(_dm_adapter(env), data_directory=str(_mkdir(path)))


def minari_list(make: Any, num_envs: int, path: Path | None) -> Any:
    """`num_envs` gymnasium envs, each wrapped by its own Minari DataCollector (HDF5, its default)
    keeping its episode cache under `path` (None: the same envs unwrapped)."""
    from workloads import gym_list

    if path is None:
        return gym_list(make, num_envs)
    os.environ["MINARI_DATASETS_PATH"] = str(_mkdir(path))
    from minari import DataCollector

    return gym_list(make, num_envs, lambda e, i: DataCollector(e, record_infos=False))


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
