"""What `RecordEpisodes` and `RecordVectorEpisodes` share: the options, the core recorder's
life cycle (start, custom data, flush, stats, close) and the checks made before recording into a
directory that already holds recordings."""

from __future__ import annotations

import dataclasses
import functools
import os
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np
from gymnasium import spaces

from trajcore import _core, _live
from trajcore._store import StoreStaging, is_store_url
from trajcore.errors import InvalidArgumentError, TrajcoreError, TrajcoreWarning
from trajcore.record import provenance
from trajcore.record.capacity import prior_shards
from trajcore.record.frames import check_renders_frames
from trajcore.record.options import (
    EndedEpisode,
    EpisodeInfo,
    EpisodeMetadataFn,
    RecordedEnv,
    RecordingOptions,
    build_config,
    resolve_options,
    to_json,
)
from trajcore.spaces import space_columns, space_from_json, space_from_json_text, space_to_json

__all__ = ["EpisodeInfo", "EpisodeMetadataFn", "RecordingOptions"]

# What a wrapper's env step returned: (observation, reward, terminated, truncated, info), each
# batched for a vector env.
StepResult = TypeVar("StepResult", bound=tuple[Any, Any, Any, Any, dict[str, Any]])


class Recording:
    """The recorder side of both wrappers. Subclasses call `_start_recording` from their
    constructor, `_record_reset` in `reset` and `_close_all` from `close`; until the constructor
    succeeded, closing does nothing (a constructor that fails leaves the user's env as it was)."""

    _native: _core.Recorder | None = None
    # With render_frames (and no ring_bytes): makes the core recorder at the first reset, given
    # the bytes of one sub-env's frame.
    _deferred: Callable[[int], _core.Recorder] | None = None
    _constructed = False
    _closed_all = False
    _episode_metadata: EpisodeMetadataFn | None = None
    _step_data: Callable[..., Mapping[str, Any]] | None = None
    _render_frames = False
    # Recording to a store (a URL): the local staging directory the core uploads from.
    _staging: StoreStaging | None = None
    # Whether each reset's seed and options go to the episodes it starts (provenance "seeds").
    _record_seeds = False
    # What `set_policy` gave before a deferred recorder started (sent when it starts).
    _pending_defaults: str | None = None
    _live_path = ""

    def _start_recording(
        self,
        path: str | os.PathLike[str],
        env: RecordedEnv,
        *,
        options: RecordingOptions,
        renderer: Any,
        source: Any = None,
        check_existing: bool = True,
    ) -> None:
        """Checks the options and starts the core recorder; `renderer` is the env whose
        ``render()`` gives the frames (checked only with ``render_frames=True``), `source` the
        env recorded as the user made it (its spec and wrappers go to the provenance; None for
        the `Writer`). Without `check_existing`, the caller compared the recordings already in
        `path` itself, and for a store prefix made the segments a killed recorder left there
        into shards (the caller's other recorders may be writing segments there now)."""
        o = resolve_options(options)
        storage_options = o.pop("storage_options")
        parts = provenance.resolve_parts(o.pop("provenance"))
        self._record_seeds = "seeds" in parts
        env = dataclasses.replace(
            env,
            provenance=provenance.gather(
                parts,
                source,
                num_envs=env.num_envs,
                autoreset_mode=env.autoreset_mode if env.batched else None,
            ),
        )
        metadata = env.metadata
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InvalidArgumentError(
                f"metadata must be a mapping (a dict of JSON-able values), got {type(metadata).__name__}: "
                f"{_short(metadata)}"
            )
        for name in ("episode_metadata", "step_data"):
            if o[name] is not None and not callable(o[name]):
                raise InvalidArgumentError(f"{name} must be callable, got {type(o[name]).__name__}")
        if o["render_frames"]:
            check_renders_frames(renderer, env.env_id or type(renderer).__name__)
        base_config = functools.partial(
            build_config,
            dataclasses.replace(env, metadata=dict(metadata) if metadata is not None else None),
            render_fps=_render_fps(renderer),
            **o,
        )
        base_config()  # checks every option now, before a staging directory is made
        # What the core's config takes beyond the options: where it uploads, what it holds already.
        placement: dict[str, Any] = {}
        # The core hands out the episodes a step ended only for the callback that reads them.
        report_ended = o["episode_metadata"] is not None
        allow_mixed = bool(o["allow_mixed_spaces"])
        if storage_options and not is_store_url(path):
            raise InvalidArgumentError(f"storage_options are for a store URL (s3://...), not the path {path}")
        if is_store_url(path):
            # Recorded into a local staging directory; the core's writer puts the shards up.
            self._staging = StoreStaging(os.fspath(path), storage_options)
            placement["upload_to"] = self._staging.url
            path = self._staging.staging
        if o["capacity_steps"] is not None:
            if self._staging is not None:  # the prefix's shards, named as files of the staging directory
                try:
                    placement["prior_shards"] = prior_shards(
                        self._staging.url, env.agent, staging=os.fspath(path), recover=check_existing
                    )
                except BaseException:
                    self._staging.done()  # nothing was recorded into it
                    raise
            else:
                placement["prior_shards"] = prior_shards(path, env.agent)
        make_config = functools.partial(base_config, **placement)
        if check_existing:
            check_existing_recordings(
                path, env.observation_space, env.action_space, allow_mixed=allow_mixed, agent=env.agent
            )
        if o["render_frames"] and o["ring_bytes"] is None:
            # The ring holds whole steps, frames included: its size waits for the first frames.
            self._deferred = lambda frame_bytes: _core.Recorder(
                os.fspath(path), make_config(frame_bytes=frame_bytes), report_ended=report_ended
            )
        else:
            try:
                self._native = _core.Recorder(os.fspath(path), make_config(), report_ended=report_ended)
            except BaseException:
                if self._staging is not None:
                    self._staging.done()  # refused (an option the core checks): nothing recorded into it
                raise
        # A refresh of this directory in this process flushes this recorder first (`_live`).
        self._live_path = os.fspath(path)
        _live.register(self._live_path, self)
        self._episode_metadata = o["episode_metadata"]
        self._step_data = o["step_data"]
        self._render_frames = bool(o["render_frames"])
        self._renderer = renderer
        self._constructed = True

    def _frame(self) -> Any:
        """What the env renders now (one frame, or a tuple of one per sub-env), or None when
        frames are not recorded. Handed to the core as is: it copies each frame once."""
        return self._renderer.render() if self._render_frames else None

    def _record_reset(
        self,
        reset: tuple[Any, dict[str, Any]],
        mask: Any,
        seed: Any = None,
        options: Mapping[str, Any] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Records what the env's reset returned (`mask`: the sub-envs it started, None for all)
        with the frame(s) rendered after it (see `_frame`), and returns it; the `seed` and
        `options` that reset was given go to the metadata of the episodes it started. The first
        reset starts a deferred recorder."""
        frame = self._frame()
        if self._native is None and self._deferred is not None:
            self._native = self._deferred(_frame_bytes(frame))
            self._deferred = None
            if self._pending_defaults is not None:
                self._native.set_episode_defaults(self._pending_defaults)
                self._pending_defaults = None
        self._recorder.reset(*reset, mask, frame)
        if self._record_seeds and (seed is not None or options):
            n = self._recorder.num_envs
            started = range(n) if mask is None else np.flatnonzero(np.asarray(mask)).tolist()
            for i in started:
                extra = provenance.reset_metadata(seed, options, i, n)
                if extra:
                    self._recorder.set_episode_metadata(i, to_json(extra, "reset seed and options"))
        return reset

    def set_policy(
        self, name: str | None = None, step: int | None = None, checkpoint: Any = None, **extra: Any
    ) -> None:
        """Names the policy acting from now on: every episode that starts after this call carries
        it in its metadata (``ep.metadata["policy"]``, ``ep.provenance["policy"]``), with the
        values given (a name, a training step, a checkpoint path, and any JSON-able `extra`);
        episodes already running keep theirs. ``Dataset.select(policy=..., policy_step=(a, b))``
        filters on it.

        Raises:
            InvalidArgumentError: `name` is not a str, `step` not an int, `checkpoint` not a str
                or path, or an `extra` value is not JSON.
            RecorderError: the recorder is closed, or its writer thread failed.
        """
        policy = to_json(provenance.policy_metadata(name, step, checkpoint, extra), "set_policy")
        if self._native is None and self._deferred is not None:
            self._pending_defaults = policy  # the recorder starts at the first reset
            return
        self._recorder.set_episode_defaults(policy)

    @property
    def _recorder(self) -> _core.Recorder:
        if self._native is None:
            if self._deferred is not None:
                raise InvalidArgumentError(
                    "the recorder starts at the first reset (with render_frames=True its buffer is sized for the "
                    "frames): call reset() first"
                )
            raise InvalidArgumentError("this recorder was not constructed")
        return self._native

    def _record_step(self, action: Any, result: StepResult) -> StepResult:
        """Records what the env's step returned with one call into the core (after the step's
        custom data), then hands the episodes it ended to `episode_metadata`; returns `result`."""
        obs, reward, terminated, truncated, info = result
        # The hot path of both wrappers (a call per env step): no Python call that does nothing.
        if self._step_data is not None:
            self._record_step_data(action, obs, reward, terminated, truncated, info)
        recorder = self._native if self._native is not None else self._recorder
        frame = self._frame() if self._render_frames else None
        ended = recorder.step(action, obs, reward, terminated, truncated, info, frame)
        # After the step: the episodes it ended are the ones metadata reaches now.
        if ended is not None:
            self._report_ended(ended, obs, info)
        return result

    def _record_step_data(self, *step: Any) -> None:
        """Runs the `step_data` callback and records what it returns, for the step being taken.
        Called after the env stepped: if the callback or a value fails, the step cannot be
        recorded whole, so the running episodes end there (incomplete) before the error is raised."""
        if self._step_data is None:
            return
        try:
            extra = self._step_data(*step)
            for name, value in (extra or {}).items():
                self._recorder.record(name, value)
        except BaseException:
            self._recorder.abort()
            raise

    def _set_metadata(self, env_index: int, metadata: Mapping[str, Any] | None, kv: Mapping[str, Any]) -> None:
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InvalidArgumentError(
                f"episode metadata must be a mapping, got {type(metadata).__name__}: {_short(metadata)}"
            )
        merged = {**(metadata or {}), **kv}
        self._recorder.set_episode_metadata(int(env_index), to_json(merged, "episode metadata"))

    def _final(self, i: int, obs: Any, info: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """The final observation and info of the episode env `i` ended at the step that
        returned `obs` and `info` (each wrapper's own)."""
        raise NotImplementedError

    def _report_ended(self, ended: list[EndedEpisode] | None, obs: Any, info: dict[str, Any]) -> None:
        """Calls `episode_metadata` for each episode the step ended, as the core's `step` told
        them (env index, length, return, terminated, truncated: what the file holds), and merges
        what it returns into that episode. `obs` and `info` are what the step returned (see
        `_final`): passed as they are, since a closure over them would cost every step."""
        if ended is None or self._episode_metadata is None:
            return
        for env_index, length, episode_return, terminated, truncated in ended:
            observation, final_info = self._final(env_index, obs, info)
            episode: EpisodeInfo = {
                "env_index": env_index,
                "length": length,
                "episode_return": episode_return,
                "terminated": terminated,
                "truncated": truncated,
                "observation": observation,
                "info": final_info,
            }
            extra = self._episode_metadata(episode)
            if not extra:
                continue
            if not isinstance(extra, Mapping):
                raise InvalidArgumentError(
                    f"episode_metadata must return a mapping or None, got {type(extra).__name__}: {_short(extra)}"
                )
            self._recorder.set_episode_metadata(env_index, to_json(dict(extra), "episode metadata"))

    def record(self, **values: Any) -> None:
        """Custom per-step data for the next `step` (column ``data/<name>``, T rows an episode;
        for vector envs, one array over the sub-envs per name).

        A name not given at some step reads back masked (``ep.data["_<name>"]`` is False there).

        Raises:
            SchemaError: a value cannot be recorded (unsupported type, or it does not fit the
                column its first value made); it is not kept, nothing else changes.
            RecorderError: the recorder is closed, or its writer thread failed.
        """
        for name, value in values.items():
            self._recorder.record(name, value)

    def flush(self) -> None:
        """Waits until everything recorded so far is in the file (readable by `trajcore.open`).

        Episodes that ended at the last step are written too: after `flush`, `discard` and
        `set_episode_metadata` can no longer reach them (they raise `InvalidArgumentError`).
        """
        self._recorder.flush()

    def _flush_for_readers(self) -> None:
        """The flush a refresh of this directory in this process needs (`trajcore._live`), which
        seldom waits; nothing before the recorder started (a deferred one) or after it closed."""
        if self._native is not None and not self._closed_all:
            self._native.flush(True)  # for_readers (positional: called at every refresh)

    def stats(self) -> dict[str, Any]:
        """Counters of the core: steps, episodes, bytes_raw, bytes_written, ring_capacity,
        ring_waits, backlog_waits, steps_not_recorded (steps of envs with no running episode),
        values_not_recorded ({column: count} of info, custom-data and frame values left out) and
        timelog: the writer thread's timings, one dict per second of recording (oldest first; at
        most 3600, neighbours merged beyond) with the seconds spent in each stage (copy_s,
        encode_s, compress_s, write_s, fsync_s, idle_s), the counts of that second (messages,
        steps, bytes_raw, bytes_written, ring_waits, backlog_waits), the producer's waiting time
        (producer_wait_s) and the ring's fill (ring_fill, ring_fill_max, fractions). It is also
        stored in the files (unless ``timelog=False``): `Dataset.timelog` reads it back.
        Recording to a store, also bytes_uploaded: bytes put so far (segments and whole shards)."""
        return self._recorder.stats()

    @property
    def shard_paths(self) -> list[str]:
        """The shard files this recorder wrote so far."""
        paths: list[str] = self._recorder.shard_paths
        return paths

    @property
    def closed(self) -> bool:
        """Whether the recorder is closed (by `close`, or never constructed); the same for both
        wrappers, whatever the env says (a vector env's own flag is ``wrapper.env.closed``)."""
        if self._native is None:
            return self._deferred is None  # closed, or never constructed
        return self._native.closed

    @closed.setter
    def closed(self, value: bool) -> None:
        # gymnasium's wrappers let `closed` be set (a vector wrapper passes it to its env); here
        # it says what the recorder did, so only `close` changes it.
        raise AttributeError("closed says whether the recorder is closed: call close() to close it")

    def _close_all(self, close_env: Callable[[], None]) -> None:
        """Closes the core recorder (if it started), then the env (even if the recorder's close
        raised). Once only; and not at all if the constructor failed: that leaves the user's env
        to the user."""
        if not self._constructed or self._closed_all:
            return
        self._closed_all = True
        self._deferred = None
        _live.unregister(self._live_path, self)
        try:
            if self._native is not None:
                self._native.close()  # the core's uploads finish here (an error names the staging)
            if self._staging is not None:
                self._staging.done()
        finally:
            close_env()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *args: object) -> Literal[False]:
        self.close()  # type: ignore[attr-defined]  # both wrappers define it (over their env's)
        return False


def _frame_bytes(frame: Any) -> int:
    """Bytes of one sub-env's frame: of the frame, or the largest of a sequence of them."""
    if isinstance(frame, np.ndarray):
        return int(frame.nbytes) if frame.dtype != object else max(map(_frame_bytes, frame), default=0)
    if isinstance(frame, list | tuple):
        return max(map(_frame_bytes, frame), default=0)
    return 0


def _render_fps(env: Any) -> float | None:
    """The frame rate an env declares for its rendering (``metadata["render_fps"]``), if any."""
    fps = (getattr(env, "metadata", None) or {}).get("render_fps")
    return float(fps) if isinstance(fps, int | float) and not isinstance(fps, bool) and fps > 0 else None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _column_schema(space_json: Any, prefix: str, timeline: str) -> list[tuple[str, str, tuple[int, ...]]]:
    columns, _ = space_columns(space_from_json(space_json), prefix, timeline)
    return [(c["name"], c["dtype"], tuple(c["shape"])) for c in columns]


def check_existing_recordings(
    path: str | os.PathLike[str],
    observation_space: spaces.Space[Any],
    action_space: spaces.Space[Any],
    *,
    allow_mixed: bool,
    agent: str | None = None,
) -> None:
    """Before recording into a directory that holds recordings: refuses (or with `allow_mixed`,
    warns about) recordings of other observation or action columns, and warns when only the
    spaces' bounds differ. With `agent`, only that agent's recordings are compared (agents of
    one env may have spaces of their own).

    Raises:
        InvalidArgumentError: the directory holds recordings of another env's columns.
    """
    directory = Path(path)
    if not directory.is_dir() or not any(directory.glob(f"*.{_core.SHARD_EXTENSION}")):
        return
    from trajcore.read.dataset import open as open_dataset

    ours = {"observation_space": space_to_json(observation_space), "action_space": space_to_json(action_space)}
    try:
        existing = open_dataset(directory)
    except TrajcoreError as e:
        warnings.warn(
            f"trajcore: cannot read the recordings already in {directory} to compare their spaces: {e}",
            TrajcoreWarning,
            stacklevel=4,
        )
        return
    seen: list[Any] = []  # each other space is reported once, however many recordings have it
    with existing:
        for r in range(existing.num_recordings):
            user = existing.meta(r).get("user") or {}
            if agent is not None and user.get("agent") != agent:
                continue
            for key, prefix, timeline in (("observation_space", "obs", "obs"), ("action_space", "action", "step")):
                theirs = user.get(key)
                if theirs is None or theirs == ours[key] or (key, theirs) in seen:
                    continue
                seen.append((key, theirs))
                try:
                    mine = _column_schema(ours[key], prefix, timeline)
                    same_columns = _column_schema(theirs, prefix, timeline) == mine
                except TrajcoreError:
                    same_columns = False
                what = key.replace("_", " ")
                message = (
                    f"{directory} holds recordings of another {what}: {space_from_json_text(theirs)} there, "
                    f"{space_from_json_text(ours[key])} here"
                )
                if same_columns:
                    warnings.warn(f"trajcore: {message} (same columns, other bounds)", TrajcoreWarning, stacklevel=4)
                elif allow_mixed:
                    warnings.warn(
                        f"trajcore: {message}; the dataset cannot be sampled as one", TrajcoreWarning, stacklevel=4
                    )
                else:
                    raise InvalidArgumentError(
                        f"{message}. A dataset of both cannot be sampled as one: record into another directory, "
                        "or pass allow_mixed_spaces=True"
                    )
