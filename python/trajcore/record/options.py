"""The recorder's options as the core's config JSON (shared by the single-env and vector wrappers)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

import numpy as np
from gymnasium import spaces

from trajcore import _core
from trajcore.errors import InvalidArgumentError
from trajcore.record.frames import CODEC_KEYS as FRAME_CODEC_KEYS
from trajcore.record.frames import default_frame_codec
from trajcore.spaces import ColumnDict, space_bounds, space_columns, space_to_json

__all__ = [
    "Codec",
    "EpisodeInfo",
    "EpisodeMetadataFn",
    "RecordedEnv",
    "RecordingOptions",
    "build_config",
    "resolve_options",
    "to_json",
]

DURABILITY = ("flush", "fsync_close", "fsync_chunk", "fsync_interval")
AUTORESET_MODES = ("next_step", "same_step", "disabled")


class Codec(TypedDict, total=False):
    """How a column is stored: `delta` (byte-wise difference to the previous row, for image-like
    data) then zstd at `zstd_level` (`None` stores the column raw, read back without a copy), in
    chunks of about `chunk_bytes` raw bytes per sub-env (default: the recorder's `chunk_bytes`;
    small chunks read faster at random, large ones compress better). Frame stacks (rows of two or
    more axes that repeat the previous row shifted by one along axis 0, as
    `FrameStackObservation` makes them) store each frame once unless `frame_stack` is False; in
    chunks where they do, `delta` is not applied, and `chunk_bytes` counts the bytes stored (each
    frame once), so a chunk of stacks of 4 holds about 4x the steps."""

    delta: bool
    zstd_level: int | None
    chunk_bytes: int
    frame_stack: bool


class EpisodeInfo(TypedDict):
    """What an `episode_metadata` callback receives when an episode ends."""

    env_index: int
    length: int
    episode_return: float
    terminated: bool
    truncated: bool
    observation: Any  # the final observation
    info: dict[str, Any]  # the final info


EpisodeMetadataFn = Callable[[EpisodeInfo], Mapping[str, Any] | None]

# An episode the core's `step` ended: (env_index, length, episode_return, terminated, truncated).
EndedEpisode = tuple[int, int, float, bool, bool]


class RecordingOptions(TypedDict, total=False):
    """Options of `RecordEpisodes` and `RecordVectorEpisodes` (keyword arguments).

    Attributes:
        episode_metadata: called when an episode ends with an `EpisodeInfo`; the mapping it
            returns is merged into that episode's metadata.
        step_data: called after every env step with (action, obs, reward, terminated, truncated,
            info); the mapping it returns is recorded as custom per-step data (like `record`;
            arrays over the sub-envs for vector envs).
        max_shard_bytes: a new shard file starts past this size (default 1 GiB).
        chunk_bytes: target size of a column chunk before it is sealed (None: the core's default).
        flush_interval: seconds within which every step is written even if a chunk is not
            full, running episodes listed as parts (flushed twice per interval): another process
            sees, and a killed process keeps, every step at least this old (default 1.0).
        durability: "flush" (write to the OS per chunk, the default), "fsync_close",
            "fsync_chunk" or "fsync_interval" (with `fsync_interval` seconds).
        fsync_interval: seconds between fsyncs with durability "fsync_interval".
        zstd_level: default zstd level of every column (default 3); None stores columns raw.
        codecs: per-column storage, keyed by column name or name prefix ("obs", "obs/image",
            "action"), "info" (info entries), "data" (custom data) or "default", e.g.
            ``{"obs": {"zstd_level": 3}}``.
        block_when_full: when the ring is full, wait (GIL released) for the writer (default);
            if False, raise `RecorderError` instead (the episodes that step touched end there,
            incomplete).
        ring_bytes: size of the ring buffer between the caller and the writer thread (None:
            8192 steps within 1 to 2 MiB, or 64 steps when steps are larger).
        index_interval_bytes: an index checkpoint is written after this many bytes (default 16
            MiB), so a reader recovering a file whose writer was killed reads indexes, not data.
        allow_mixed_spaces: record into a directory whose recordings have other observation or
            action columns (a different env): refused by default, since such a dataset cannot be
            sampled as one; with True, a `TrajcoreWarning` instead.
        render_frames: also record what ``env.render()`` returns after each reset and step
            (the env needs ``render_mode="rgb_array"``), one frame per observation row, read back
            as `Episode.frames`; stored losslessly (delta filter then zstd) unless
            ``codecs={"render": ...}`` says otherwise. Unless `ring_bytes` is given, the recorder
            then starts (creates its first shard) at the first ``reset``, whose frames size the
            ring.
        timelog: store the writer's timelog (`stats` ``["timelog"]``, a sample per second) in
            the files as the recording goes, read back by `Dataset.timelog` and plotted by
            ``trajcore plot`` (default True; about 150 bytes per second of recording).
        compact_shards: when a shard file is closed (at `close`, or when the next one starts),
            rewrite it without the small chunks the flush timer cut, if that saves at least 1%
            of it: a slow env's recording then takes the same bytes as the same steps recorded
            fast (default True). `stats` reports ``shards_compacted``, ``bytes_compacted`` and
            ``compaction_error`` (a shard that could not be rewritten stays as it was).
        capacity_steps: keep at most this many transitions in the directory's closed shards
            (plus the shard being written), deleting the oldest closed shards first: a replay
            buffer on disk (docs/replay-buffer.md). Shards then roll over at a tenth of it. A
            recording started on a directory counts the transitions already there. A store
            prefix (``s3://...``) is bounded the same way, several recorders at once included
            (each holds a lease there while it records). `stats` reports ``evicted_steps``; `Dataset.evicted_steps` and
            ``trajcore info`` the directory's total (default None: keep everything).
        storage_options: recording to a store URL (``s3://...``): its client's options, over the
            environment's, as `trajcore.open` takes them (docs/object-storage.md).
        lease_renew_interval: recording to a store URL, the recorder renews its lease in the
            prefix this often, in seconds (default None: 10), so that bounded recorders sharing
            the prefix leave its shards alone (docs/replay-buffer.md).
        lease_ttl: its lease is stale this long after its last renewal, in seconds (default
            None: 60): a bounded recorder started on the prefix later than that after a
            ``kill -9`` counts the killed recording's shards. At least 3 renewal intervals, and
            2 s more than one.
        provenance: where the recording came from, gathered once at the start and stored in it
            (`Dataset.provenance`, `Episode.provenance`; docs/provenance.md): True (the default)
            for every part, False for none, or a list of parts among "env", "vector", "seeds",
            "host", "versions", "command" and "git".
    """

    episode_metadata: EpisodeMetadataFn | None
    step_data: Callable[..., Mapping[str, Any]] | None
    max_shard_bytes: int
    chunk_bytes: int | None
    flush_interval: float
    durability: str
    fsync_interval: float | None
    zstd_level: int | None
    codecs: Mapping[str, Codec] | None
    block_when_full: bool
    ring_bytes: int | None
    index_interval_bytes: int | None
    allow_mixed_spaces: bool
    render_frames: bool
    timelog: bool
    compact_shards: bool
    capacity_steps: int | None
    storage_options: Mapping[str, str] | None
    lease_renew_interval: float | None
    lease_ttl: float | None
    provenance: bool | Sequence[str]


_DEFAULTS: RecordingOptions = {
    "episode_metadata": None,
    "step_data": None,
    "max_shard_bytes": 1 << 30,
    "chunk_bytes": None,
    "flush_interval": 1.0,
    "durability": "flush",
    "fsync_interval": None,
    "zstd_level": 3,
    "codecs": None,
    "block_when_full": True,
    "ring_bytes": None,
    "index_interval_bytes": None,
    "allow_mixed_spaces": False,
    "render_frames": False,
    "timelog": True,
    "compact_shards": True,
    "capacity_steps": None,
    "storage_options": None,
    "lease_renew_interval": None,
    "lease_ttl": None,
    "provenance": True,
}


def resolve_options(options: RecordingOptions) -> RecordingOptions:
    """`options` with every option not given at its default.

    Raises:
        InvalidArgumentError: an option is unknown.
    """
    unknown = sorted(set(options) - set(_DEFAULTS))
    if unknown:
        raise InvalidArgumentError(f"unknown recording option(s) {unknown} (known: {', '.join(sorted(_DEFAULTS))})")
    return {**_DEFAULTS, **options}


def _json_default(value: Any) -> Any:
    # numpy scalars and arrays are what RL code puts in metadata; write them as plain JSON.
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON-serializable")


def to_json(value: Any, what: str) -> str:
    """Strict JSON (no NaN/inf, which the core's parser refuses) with numpy values converted.

    Raises:
        InvalidArgumentError: `value` cannot be written as JSON; the message says which argument.
    """
    try:
        return json.dumps(value, default=_json_default, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError(f"{what} must be JSON-serializable (no NaN or inf): {e}") from e


def _check_codec(key: str, codec: Mapping[str, Any]) -> dict[str, Any]:
    unknown = set(codec) - {"delta", "zstd_level", "chunk_bytes", "frame_stack"}
    if unknown:
        raise InvalidArgumentError(
            f"codecs[{key!r}]: unknown option(s) {sorted(unknown)} (known: delta, zstd_level, chunk_bytes, frame_stack)"
        )
    level = codec.get("zstd_level", 3)
    if level is not None and not isinstance(level, int | np.integer):
        raise InvalidArgumentError(f"codecs[{key!r}]: zstd_level must be an int or None, got {level!r}")
    frame_stack = codec.get("frame_stack", True)
    if not isinstance(frame_stack, bool | np.bool_):
        raise InvalidArgumentError(f"codecs[{key!r}]: frame_stack must be True or False, got {frame_stack!r}")
    out: dict[str, Any] = {
        "delta": bool(codec.get("delta", False)),
        "zstd_level": None if level is None else int(level),
        "frame_stack": bool(frame_stack),
    }
    chunk = codec.get("chunk_bytes")
    if chunk is not None:
        if not isinstance(chunk, int | np.integer) or chunk <= 0:
            raise InvalidArgumentError(f"codecs[{key!r}]: chunk_bytes must be a positive int, got {chunk!r}")
        out["chunk_bytes"] = int(chunk)
    return out


def _codec_for(name: str, codecs: Mapping[str, dict[str, Any]], default: dict[str, Any]) -> dict[str, Any]:
    # The longest key that is the column name or a '/'-bounded prefix of it wins.
    best: str | None = None
    for key in codecs:
        if (name == key or name.startswith(key + "/")) and (best is None or len(key) > len(best)):
            best = key
    return default if best is None else codecs[best]


@dataclass(frozen=True)
class RecordedEnv:
    """What is recorded, as the wrappers see it: the spaces of one sub-env, the number of
    sub-envs, whether values carry a leading env axis (`batched`), how episodes split, the
    recording's metadata and the env's id."""

    observation_space: spaces.Space[Any]
    action_space: spaces.Space[Any]
    num_envs: int
    batched: bool
    autoreset_mode: str
    metadata: Any
    env_id: str | None
    agent: str | None = None  # the agent whose episodes these are (multi-agent recordings)
    provenance: Mapping[str, Any] | None = None  # where the recording came from (record.provenance)


def build_config(
    env: RecordedEnv,
    *,
    render_fps: float | None = None,
    frame_bytes: int = 0,
    upload_to: str | None = None,
    prior_shards: list[tuple[str, int]] | None = None,
    **options: Unpack[RecordingOptions],
) -> str:
    """The config JSON `_core.Recorder` takes (see `_core.pyi`) for the recording `options`
    (those not given at their defaults). `frame_bytes`: bytes of one sub-env's rendered frame,
    which the default ring size counts in a step. `upload_to`: the store prefix the shards go
    up to (the recorder's path is then a local staging directory). `prior_shards`: with
    `capacity_steps`, the closed shards the directory holds, oldest first, with their
    transitions (see `trajcore.record.capacity`).

    Raises:
        SchemaError: a space cannot be recorded.
        InvalidArgumentError: metadata is not JSON, or an option (codec, durability) is invalid.
    """
    o = resolve_options(options)
    autoreset_mode, num_envs, metadata = env.autoreset_mode, env.num_envs, env.metadata
    durability, flush_interval, zstd_level = o["durability"], o["flush_interval"], o["zstd_level"]
    if durability not in DURABILITY:
        raise InvalidArgumentError(f"durability must be one of {', '.join(DURABILITY)}, got {durability!r}")
    if autoreset_mode not in AUTORESET_MODES:
        raise InvalidArgumentError(
            f"autoreset_mode must be one of {', '.join(AUTORESET_MODES)}, got {autoreset_mode!r}"
        )
    if not (flush_interval > 0 and math.isfinite(flush_interval)):
        raise InvalidArgumentError(f"flush_interval must be a positive number of seconds, got {flush_interval!r}")
    for name in ("lease_renew_interval", "lease_ttl"):  # their rule is the core's (`leases::LeaseTimes`)
        value = o[name]
        number = not isinstance(value, bool) and isinstance(value, int | float | np.number)
        if value is not None and not (number and math.isfinite(value)):
            raise InvalidArgumentError(f"{name} must be a finite number of seconds, got {value!r}")

    obs_columns, obs_tree = space_columns(env.observation_space, "obs", "obs")
    action_columns, action_tree = space_columns(env.action_space, "action", "step")
    columns: list[ColumnDict] = obs_columns + action_columns

    default = _check_codec("default", {"zstd_level": zstd_level})
    checked = {k: _check_codec(k, v) for k, v in (o["codecs"] or {}).items()}
    if "default" in checked:
        default = checked.pop("default")
    names = [c["name"] for c in columns]
    for key in checked:
        if key in ("info", "data", "reward", "terminated", "truncated", *FRAME_CODEC_KEYS):
            continue
        if not any(n == key or n.startswith(key + "/") for n in names):
            raise InvalidArgumentError(
                f"codecs key {key!r} names no column (columns: {', '.join(names)}; "
                "also 'info', 'data', 'reward', 'render' and 'default')"
            )
    for i, column in enumerate(columns):
        column["id"] = i  # provisional: the core numbers its columns itself
        codec = _codec_for(column["name"], checked, default)
        if column["dtype"] == "str" and codec["delta"]:
            # Strings have no fixed row size to subtract; zstd alone is the right default.
            codec = {**codec, "delta": False}
        column["codec"] = codec

    ring = o["ring_bytes"]
    config: dict[str, Any] = {
        "num_envs": int(num_envs),
        "batched": bool(env.batched),
        "autoreset_mode": autoreset_mode,
        "columns": columns,
        "observation": obs_tree,
        "action": action_tree,
        "metadata": metadata if metadata is not None else {},
        "user": {
            "observation_space": space_to_json(env.observation_space),
            "action_space": space_to_json(env.action_space),
            "env_id": env.env_id,
            "trajcore_version": _core.__version__,
        },
        "max_shard_bytes": int(o["max_shard_bytes"]),
        "ring_bytes": default_ring_bytes(columns, num_envs, frame_bytes) if ring is None else int(ring),
        "flush_interval_s": float(flush_interval),
        "durability": durability,
        "block_when_full": bool(o["block_when_full"]),
        "timelog": bool(o["timelog"]),
        "compact_shards": bool(o["compact_shards"]),
        # Info and custom data columns are made by the core on first sight, with these codecs.
        "info_codec": checked.get("info", default),
        "data_codec": checked.get("data", checked.get("info", default)),
        "flags_codec": _codec_for("reward", checked, default),
        # Values a discrete space does not take are refused by name (an action 7 of a Discrete(3)).
        "value_bounds": {**space_bounds(env.observation_space, "obs"), **space_bounds(env.action_space, "action")},
    }
    if upload_to is not None:
        config["upload_to"] = upload_to
    capacity = o["capacity_steps"]
    if capacity is not None:
        if isinstance(capacity, bool) or not isinstance(capacity, int | np.integer) or capacity < 1:
            raise InvalidArgumentError(f"capacity_steps must be a positive number of transitions, got {capacity!r}")
        config["capacity_steps"] = int(capacity)
        config["prior_shards"] = [[path, int(steps)] for path, steps in prior_shards or []]
    # Rendered frames (if the recorder is given any): the longest codecs key wins, as for columns.
    frames = [checked[k] for k in FRAME_CODEC_KEYS if k in checked]
    config["frame_codec"] = frames[-1] if frames else _check_codec("render", default_frame_codec(default["zstd_level"]))
    if render_fps is not None:
        config["user"]["render_fps"] = render_fps  # the viewer plays frames at this speed
    if env.agent is not None:
        config["user"]["agent"] = env.agent  # Episode.agent, Dataset.select(agent=...)
    if env.provenance:
        config["user"]["provenance"] = env.provenance  # Dataset.provenance
    # Left out when not given: the core's defaults apply.
    for key, name, cast in (
        ("chunk_bytes", "chunk_bytes", int),
        ("fsync_interval", "fsync_interval_s", float),
        ("index_interval_bytes", "index_interval_bytes", int),
        ("lease_renew_interval", "lease_renew_interval_s", float),
        ("lease_ttl", "lease_ttl_s", float),
    ):
        value = o[key]  # type: ignore[literal-required]
        if value is not None:
            config[name] = cast(value)
    return to_json(config, "metadata")


_STR_ROW_GUESS = 256  # bytes a Text value is assumed to take when sizing the ring
DEFAULT_RING_BYTES = 2 << 20  # the largest default ring of small steps (see `default_ring_bytes`)
SMALL_RING_BYTES = 1 << 20  # the smallest default ring
RING_STEPS = 8192  # steps a default ring of small steps holds, within those two


def default_ring_bytes(columns: list[ColumnDict], num_envs: int, frame_bytes: int = 0) -> int:
    """A ring that holds many steps (so the env loop rarely waits for the writer) without holding
    memory for nothing: 8192 steps within 1 to 2 MiB, or 64 steps when a step is larger, at most
    1 GiB. A step counts each sub-env's columns and its rendered frame (`frame_bytes`).

    The whole ring becomes resident once data has gone round it. 2 MiB: a larger one made the
    loop wait no less (CartPole, 16 sub-envs) while it took 14 MB more memory. 1 MiB for small
    steps (one CartPole env): 1.5 MB less growth than 2 MiB and still no waits, where 512 and
    256 KiB made the loop wait now and then on a loaded machine (docs/BENCHMARKS.md, issue 14)."""
    step = 64 + frame_bytes  # reward and done flags, with room
    for column in columns:
        size = _STR_ROW_GUESS if column["dtype"] == "str" else np.dtype(column["dtype"]).itemsize
        step += size * math.prod(column["shape"])
    small = min(DEFAULT_RING_BYTES, max(SMALL_RING_BYTES, RING_STEPS * step * num_envs))
    return int(min(1 << 30, max(small, 64 * step * num_envs)))


def env_id_of(env: Any) -> str | None:
    """The registered id the env was made from, if any (stored so `trajcore info` can show it)."""
    spec = getattr(env, "spec", None)
    return getattr(spec, "id", None) if spec is not None else None
