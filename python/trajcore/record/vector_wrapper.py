"""`RecordVectorEpisodes`: records every sub-env episode of a vector env, one core call per step.

The whole batch goes to the core in one call; the core's writer thread splits it into per-env
episodes following the env's autoreset mode:

- ``NEXT_STEP`` (gymnasium's default): the step after sub-env i ends is its reset; that step's
  action is ignored and its observation starts i's next episode (it is not a transition).
- ``SAME_STEP``: a sub-env that ends is reset inside the same step; its final observation and
  info are taken from ``infos["final_obs"]`` / ``infos["final_info"]`` and the step's observation
  starts the next episode.
- ``DISABLED``: a sub-env that ends stays ended until ``reset(options={"reset_mask": mask})``
  restarts it; only masked sub-envs start new episodes.

With ``render_frames=True`` the frames of every sub-env (``envs.render()``, sync or async) go to
the core in the same call; in ``SAME_STEP`` mode an ended sub-env's final row has no frame (see
`trajcore.record.frames`).
"""

from __future__ import annotations

import enum
import os
import warnings
from collections.abc import Mapping
from typing import Any, Unpack

from gymnasium import spaces
from gymnasium.vector import VectorEnv, VectorWrapper

from trajcore.errors import InvalidArgumentError, TrajcoreWarning
from trajcore.record.options import RecordedEnv, env_id_of
from trajcore.record.session import Recording, RecordingOptions

__all__ = ["RecordVectorEpisodes", "autoreset_mode_of"]

_MODES = {"nextstep": "next_step", "samestep": "same_step", "disabled": "disabled"}


def autoreset_mode_of(env: Any) -> str:
    """The autoreset mode a vector env declares in ``metadata["autoreset_mode"]`` (a
    `gymnasium.vector.AutoresetMode` or its string value), as the core names it.

    Raises:
        InvalidArgumentError: the mode is not one trajcore knows.
    """
    raw = (getattr(env, "metadata", None) or {}).get("autoreset_mode")
    if raw is None:
        warnings.warn(
            f"{type(env).__name__} declares no metadata['autoreset_mode']; assuming NEXT_STEP "
            "(gymnasium's default). Set it to a gymnasium.vector.AutoresetMode to silence this.",
            TrajcoreWarning,
            stacklevel=3,
        )
        return "next_step"
    value = raw.value if isinstance(raw, enum.Enum) else raw
    mode = _MODES.get(value.replace("_", "").replace("-", "").lower()) if isinstance(value, str) else None
    if mode is None:
        raise InvalidArgumentError(
            f"unknown autoreset mode {raw!r} in {type(env).__name__}.metadata['autoreset_mode'] "
            "(trajcore records NEXT_STEP, SAME_STEP and DISABLED)"
        )
    return mode


class _ForeignVectorEnv(VectorEnv[Any, Any, Any]):
    """Presents an object that follows the `VectorEnv` API without deriving from it (envs not
    built by gymnasium) as a `VectorEnv`, so `VectorWrapper` accepts it."""

    def __init__(self, env: Any) -> None:
        self._env = env
        self.num_envs = int(env.num_envs)
        self.observation_space = env.observation_space
        self.action_space = env.action_space
        self.single_observation_space = env.single_observation_space
        self.single_action_space = env.single_action_space
        self.metadata = dict(getattr(env, "metadata", None) or {})
        self.spec = getattr(env, "spec", None)
        self.render_mode = getattr(env, "render_mode", None)

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        result: tuple[Any, dict[str, Any]] = self._env.reset(seed=seed, options=options)
        return result

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        result: tuple[Any, Any, Any, Any, dict[str, Any]] = self._env.step(actions)
        return result

    def render(self) -> Any:
        return self._env.render()

    def close_extras(self, **kwargs: Any) -> None:
        self._env.close(**kwargs)


def _env_item(tree: Any, i: int, space: spaces.Space[Any]) -> Any:
    """Sub-env i of a batched value of (per-env) `space`. The space decides the nesting: a
    batched Text is also a tuple (of str)."""
    if isinstance(space, spaces.Dict):
        return {k: _env_item(tree[k], i, sub) for k, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(_env_item(v, i, sub) for v, sub in zip(tree, space.spaces, strict=True))
    return tree[i]


def _env_info(infos: Mapping[str, Any], i: int) -> dict[str, Any]:
    """Sub-env i's entries of vector infos: keys whose ``_key`` mask is false at i are left out;
    ``_key`` is a mask when ``key`` is beside it (and it has no ``__key`` of its own)."""
    out: dict[str, Any] = {}
    for key, value in infos.items():
        if isinstance(key, str) and key.startswith("_") and key[1:] in infos and "_" + key not in infos:
            continue
        mask = infos.get("_" + key) if isinstance(key, str) else None
        if mask is not None and not mask[i]:
            continue
        out[key] = _env_info(value, i) if isinstance(value, Mapping) else value[i]
    return out


class RecordVectorEpisodes(Recording, VectorWrapper[Any, Any, Any, Any, Any]):
    """Records every sub-env episode of a vector env into the shard files of directory `path`.

    Episodes read back per sub-env (`Episode.env_index`), identical value for value to what the
    sub-env would have produced alone. Takes the arguments and options of
    `trajcore.RecordEpisodes`; here `episode_metadata` gets the `EpisodeInfo` of each sub-env
    whose episode ended, and `step_data` returns arrays over the sub-envs.

    Raises:
        SchemaError: a space cannot be recorded.
        InvalidArgumentError: the autoreset mode is unknown, an option is invalid, metadata is
            not a JSON mapping, `path` holds recordings of another env, or
            ``render_frames=True`` for a vector env whose ``render_mode`` is not ``"rgb_array"``.
        TrajcoreIOError: the directory cannot be created or written.
    """

    def __init__(
        self,
        env: Any,
        path: str | os.PathLike[str],
        metadata: Mapping[str, Any] | None = None,
        **options: Unpack[RecordingOptions],
    ) -> None:
        super().__init__(env if isinstance(env, VectorEnv) else _ForeignVectorEnv(env))
        self._mode = autoreset_mode_of(self.env)
        n = int(self.env.num_envs)
        recorded = RecordedEnv(
            self.env.single_observation_space,
            self.env.single_action_space,
            num_envs=n,
            batched=True,
            autoreset_mode=self._mode,
            metadata=metadata,
            env_id=env_id_of(self.env),
        )
        self._start_recording(
            path,
            recorded,
            options=options,
            renderer=self.env,
            source=env,
        )

    @property
    def autoreset_mode(self) -> str:
        """The mode episodes are split by: "next_step", "same_step" or "disabled"."""
        return self._mode

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Resets the sub-envs and starts their episodes (running ones are kept as incomplete).

        In DISABLED mode, ``options={"reset_mask": mask}`` resets and starts only the masked
        sub-envs.
        """
        mask = None
        if options is not None and self._mode == "disabled":
            # Read before the env's reset: gymnasium's vector envs pop it from the options.
            mask = options.get("reset_mask")
        return self._record_reset(self.env.reset(seed=seed, options=options), mask, seed, options)

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Steps the sub-envs and records the batch with one call into the core.

        Raises:
            SchemaError: a value does not fit its column. Running episodes are kept as
                incomplete; each sub-env resumes recording at its next reset.
            RecorderError: the recorder is closed, or its writer thread failed.
        """
        return self._record_step(actions, self.env.step(actions))

    def _final(self, i: int, obs: Any, infos: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """The final observation and info of the episode sub-env `i` ended at the step that
        returned `obs` and `infos`."""
        if self._mode == "same_step":
            final_info = infos["final_info"]
            info = _env_info(final_info, i) if isinstance(final_info, Mapping) else final_info[i]
            return infos["final_obs"][i], info  # gymnasium keeps final_obs unbatched
        return _env_item(obs, i, self.single_observation_space), _env_info(infos, i)

    def set_episode_metadata(self, env_index: int, metadata: Mapping[str, Any] | None = None, /, **kv: Any) -> None:
        """Merges JSON-able values into the metadata of an episode of sub-env `env_index`: the
        running one, or, between the step at which sub-env `env_index` ended an episode and the
        next `step` or `reset`, that episode (in every autoreset mode).

        Raises:
            InvalidArgumentError: a value is not JSON, `env_index` is out of range, the sub-env
                has no episode running or just ended, or `flush` already wrote the one that ended.
        """
        self._set_metadata(env_index, metadata, kv)

    def discard(self, env_index: int) -> None:
        """Drops an episode of sub-env `env_index` (the one `set_episode_metadata` would reach):
        it will not be listed. A running episode's later steps are ignored until it ends.

        Raises:
            InvalidArgumentError: `env_index` is out of range, the sub-env has no episode running
                or just ended, or `flush` already wrote the one that ended.
        """
        self._recorder.discard(int(env_index))

    def close(self, **kwargs: Any) -> None:
        """Writes running episodes (as incomplete), the index and the end record, then closes the
        env (its workers, for async envs). Idempotent."""
        self._close_all(lambda: self.env.close(**kwargs))
