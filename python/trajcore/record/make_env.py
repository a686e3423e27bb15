"""An env from what a user names: a registered gymnasium id, ``"module:callable"`` or a
callable, alone or as a vector env (``trajcore bench --env``, `trajcore.ray.collect`)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, Literal

import gymnasium as gym
from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv

from trajcore.errors import InvalidArgumentError

__all__ = ["Vectorization", "make_env"]

Vectorization = Literal["sync", "async"] | None


def _factory(env: str | Callable[[], gym.Env[Any, Any]]) -> Callable[[], gym.Env[Any, Any]] | None:
    """The env factory of `env` ("module:callable" or a callable), or None for a registered id."""
    if callable(env):
        return env
    module_name, sep, attr = env.partition(":")
    if not sep:
        return None
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as e:
        raise InvalidArgumentError(f"env {env!r}: cannot import module {module_name!r}: {e}") from e
    for part in attr.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            # gymnasium's own "module:EnvId-v0" form: importing the module registered the id.
            return None
    if not callable(obj):
        raise InvalidArgumentError(f"env {env!r} is not callable")
    factory: Callable[[], gym.Env[Any, Any]] = obj
    return factory


def make_env(env: str | Callable[[], gym.Env[Any, Any]], num_envs: int = 1, vectorization: Vectorization = None) -> Any:
    """A single env (`vectorization` None and `num_envs` 1) or a gymnasium vector env.

    Args:
        env: a registered gymnasium id, "module:callable" (a function returning a `gym.Env`),
            or such a callable.
        num_envs: sub-envs of the vector env.
        vectorization: "sync", "async", or None (a single env; "sync" when `num_envs` > 1).

    Raises:
        InvalidArgumentError: an argument is invalid or the callable cannot be imported.
    """
    if num_envs < 1:
        raise InvalidArgumentError(f"num_envs must be >= 1, got {num_envs}")
    if vectorization not in ("sync", "async", None):
        raise InvalidArgumentError(f"vectorization must be 'sync', 'async' or None, got {vectorization!r}")
    factory = _factory(env)
    if vectorization is None and num_envs == 1:
        return factory() if factory is not None else gym.make(str(env))
    mode = vectorization or "sync"
    if factory is None:
        return gym.make_vec(str(env), num_envs=num_envs, vectorization_mode=mode)
    cls = SyncVectorEnv if mode == "sync" else AsyncVectorEnv
    return cls([factory] * num_envs)
