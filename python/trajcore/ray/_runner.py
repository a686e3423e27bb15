"""What the RLlib recorders (single- and multi-agent) learn from, and do to, an EnvRunner."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["close_on_stop", "in_evaluation", "runner_metadata"]


def in_evaluation(env_runner: Any) -> bool:
    return bool(getattr(getattr(env_runner, "config", None), "in_evaluation", False))


def runner_metadata(env_runner: Any) -> dict[str, Any]:
    config = getattr(env_runner, "config", None)
    algo = getattr(config, "algo_class", None)
    env = getattr(config, "env", None)
    return {
        "env_runner": getattr(env_runner, "worker_index", None),
        "evaluation": in_evaluation(env_runner),
        "num_envs": getattr(env_runner, "num_envs", None),
        "algorithm": getattr(algo, "__name__", None),
        "env": env if isinstance(env, str) else getattr(env, "__name__", None),
    }


def close_on_stop(env_runner: Any, close: Callable[[], None]) -> None:
    """Makes the EnvRunner's ``stop()`` (which ``algo.stop()`` calls before its actor goes)
    close the recorder first: RLlib has no callback for it."""
    stop = getattr(env_runner, "stop", None)
    if stop is None:
        return

    def stop_closing_recorder(*args: Any, **kwargs: Any) -> Any:
        try:
            close()
        finally:  # the EnvRunner stops even if closing failed (whose error is then raised)
            result = stop(*args, **kwargs)
        return result

    env_runner.stop = stop_closing_recorder
