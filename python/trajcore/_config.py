"""The recorder's options as the core's config JSON (shared by the single-env and vector wrappers)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, TypedDict

import numpy as np
from gymnasium import spaces

from trajcore import _core
from trajcore._frames import CODEC_KEYS as FRAME_CODEC_KEYS
from trajcore._frames import default_frame_codec
from trajcore.errors import InvalidArgumentError
from trajcore.spaces import ColumnDict, space_columns, space_to_json

__all__ = ["Codec", "build_config", "to_json"]

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


def build_config(
    observation_space: spaces.Space[Any],
    action_space: spaces.Space[Any],
    *,
    num_envs: int,
    batched: bool,
    autoreset_mode: str,
    metadata: Any,
    env_id: str | None,
    max_shard_bytes: int,
    chunk_bytes: int | None,
    flush_interval: float,
    durability: str,
    fsync_interval: float | None,
    zstd_level: int | None,
    codecs: Mapping[str, Codec] | None,
    block_when_full: bool,
    ring_bytes: int | None,
    index_interval_bytes: int | None = None,
    timelog: bool = True,
    compact_shards: bool = True,
    render_fps: float | None = None,
    frame_bytes: int = 0,
) -> str:
    """The config JSON `_core.Recorder` takes (see `_core.pyi`). `frame_bytes`: bytes of one
    sub-env's rendered frame, which the default ring size counts in a step.

    Raises:
        SchemaError: a space cannot be recorded.
        InvalidArgumentError: metadata is not JSON, or an option (codec, durability) is invalid.
    """
    if durability not in DURABILITY:
        raise InvalidArgumentError(f"durability must be one of {', '.join(DURABILITY)}, got {durability!r}")
    if autoreset_mode not in AUTORESET_MODES:
        raise InvalidArgumentError(
            f"autoreset_mode must be one of {', '.join(AUTORESET_MODES)}, got {autoreset_mode!r}"
        )
    if not (flush_interval > 0 and math.isfinite(flush_interval)):
        raise InvalidArgumentError(f"flush_interval must be a positive number of seconds, got {flush_interval!r}")

    obs_columns, obs_tree = space_columns(observation_space, "obs", "obs")
    action_columns, action_tree = space_columns(action_space, "action", "step")
    columns: list[ColumnDict] = obs_columns + action_columns

    default = _check_codec("default", {"zstd_level": zstd_level})
    checked = {k: _check_codec(k, v) for k, v in (codecs or {}).items()}
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

    config: dict[str, Any] = {
        "num_envs": int(num_envs),
        "batched": bool(batched),
        "autoreset_mode": autoreset_mode,
        "columns": columns,
        "observation": obs_tree,
        "action": action_tree,
        "metadata": metadata if metadata is not None else {},
        "user": {
            "observation_space": space_to_json(observation_space),
            "action_space": space_to_json(action_space),
            "env_id": env_id,
            "trajcore_version": _core.__version__,
        },
        "max_shard_bytes": int(max_shard_bytes),
        "ring_bytes": int(ring_bytes) if ring_bytes is not None else default_ring_bytes(columns, num_envs, frame_bytes),
        "flush_interval_s": float(flush_interval),
        "durability": durability,
        "block_when_full": bool(block_when_full),
        "timelog": bool(timelog),
        "compact_shards": bool(compact_shards),
        # Info and custom data columns are made by the core on first sight, with these codecs.
        "info_codec": checked.get("info", default),
        "data_codec": checked.get("data", checked.get("info", default)),
        "flags_codec": _codec_for("reward", checked, default),
    }
    # Rendered frames (if the recorder is given any): the longest codecs key wins, as for columns.
    frames = [checked[k] for k in FRAME_CODEC_KEYS if k in checked]
    config["frame_codec"] = frames[-1] if frames else _check_codec("render", default_frame_codec(default["zstd_level"]))
    if render_fps is not None:
        config["user"]["render_fps"] = render_fps  # the viewer plays frames at this speed
    if chunk_bytes is not None:
        config["chunk_bytes"] = int(chunk_bytes)
    if fsync_interval is not None:
        config["fsync_interval_s"] = float(fsync_interval)
    if index_interval_bytes is not None:
        config["index_interval_bytes"] = int(index_interval_bytes)
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
