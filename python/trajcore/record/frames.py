"""Rendered frames (``render_frames=True``): the column they are recorded in, how it is stored by
default, and the check that an env renders frames at all.

A frame is what ``env.render()`` returns (``render_mode="rgb_array"``: an ``(H, W, 3)`` uint8
array) after each reset and step: one per observation row, in the observation-timeline column
``render/frame`` (mask ``render/_frame``). The core makes the column at the first frame, like an
info entry, and copies each frame once into its ring on the step call, beside the observation.

Which frame a row gets follows from when the recorder can call ``render``: after the env's
``reset``/``step`` returned. For a single env and for vector envs in ``NEXT_STEP`` and ``DISABLED``
autoreset, that is the state the row's observation shows. In ``SAME_STEP`` autoreset a sub-env
that ended has already been reset inside the step, so its frame shows the next episode's start:
it is that episode's first frame, and the ended episode's final row has no frame (masked;
``Episode.frame_mask`` is False there), rather than a frame of the wrong episode.
"""

from __future__ import annotations

from typing import Any

from trajcore.errors import InvalidArgumentError

__all__ = ["CODEC_KEYS", "FRAME_COLUMN", "FRAME_MASK", "check_renders_frames", "default_frame_codec"]

FRAME_COLUMN = "render/frame"
"""The column of rendered frames (made by the core, see rust/python/src/frames.rs)."""

FRAME_MASK = "render/_frame"
"""Its mask: True at the rows that have a frame."""

CODEC_KEYS = ("render", FRAME_COLUMN)
"""The ``codecs`` keys that set how frames are stored."""

FRAME_CHUNK_BYTES = 4 << 20
"""Frames are sealed in chunks of about 4 MiB per sub-env (not the 1 MiB of other columns): a
600x400 RGB frame is 720 KB, and with one frame per chunk the delta filter has no previous row to
subtract (docs/BENCHMARKS.md, "Rendered frames")."""


def default_frame_codec(zstd_level: int | None) -> dict[str, Any]:
    """How frames are stored unless ``codecs={"render": ...}`` says otherwise: lossless, the
    delta filter (consecutive frames differ in few pixels) then zstd at the recorder's level,
    raw when `zstd_level` is None."""
    return {"delta": True, "zstd_level": zstd_level, "chunk_bytes": FRAME_CHUNK_BYTES}


def check_renders_frames(env: Any, what: str) -> None:
    """Refuses `render_frames=True` for an env that does not render RGB arrays.

    Args:
        env: the env or vector env (its ``render_mode``).
        what: how the env is named in the message.

    Raises:
        InvalidArgumentError: ``env.render_mode`` is not ``"rgb_array"``.
    """
    mode = getattr(env, "render_mode", None)
    if mode != "rgb_array":
        raise InvalidArgumentError(
            f"render_frames=True records what env.render() returns as an RGB array, but {what} has "
            f"render_mode={mode!r}: make it with render_mode='rgb_array' (gym.make(id, render_mode='rgb_array'), "
            "gym.make_vec(id, n, render_mode='rgb_array')), or leave render_frames off"
        )
