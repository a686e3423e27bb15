"""Frames to an MP4 file: H.264 through PyAV (``pip install "trajcore[video]"``; its wheels carry
FFmpeg with libx264). The mp4 export (`trajcore.formats.to_mp4`) and the viewer's "save as video"
(`trajcore.viewer`) both write through `write_mp4`.

- yuv420p needs an even width and height: an odd side gets its last row or column repeated once
  (the video is then one pixel taller or wider than the image);
- a frame marked absent is written black;
- tags are MP4 metadata (``av.open(path).metadata`` reads them back): custom names are kept
  (the muxer's ``use_metadata_tags``).

Plain values in, a file out: nothing here reads a dataset.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np
import numpy.typing as npt

from trajcore._deps import require
from trajcore.errors import InvalidArgumentError

__all__ = ["CODECS", "CRF", "av_module", "episode_tags", "video_available", "write_mp4"]

CODECS = ("libx264", "h264", "libopenh264", "mpeg4")
"""Encoders tried in order: the first one the installed FFmpeg has (PyAV's wheels have libx264)."""

CRF = 18
"""libx264's constant rate factor: visually lossless on rendered frames (smooth images keep more
than 35 dB PSNR)."""


def av_module(purpose: str) -> Any:
    """PyAV (``import av``).

    Raises:
        MissingDependencyError: it is not installed; the message names ``pip install "trajcore[video]"``.
    """
    return require("av", purpose, pip='"trajcore[video]"')


def video_available() -> bool:
    """Whether PyAV is installed (videos can be written)."""
    return importlib.util.find_spec("av") is not None


def episode_tags(
    title: str, index: int, env_index: int, length: int, episode_return: float, key: str, present: npt.NDArray[np.bool_]
) -> dict[str, str]:
    """The tags of one episode's video: ``title``, ``comment`` (the episode in words) and
    ``trajcore_episode``, ``trajcore_env_index``, ``trajcore_length``, ``trajcore_return``
    (``repr`` of the float64), ``trajcore_key``, ``trajcore_frames``, ``trajcore_frames_missing``."""
    return {
        "title": title,
        "comment": f"trajcore episode {index} (env {env_index}): {length} steps, return {episode_return!r}",
        "trajcore_episode": str(index),
        "trajcore_env_index": str(env_index),
        "trajcore_length": str(length),
        "trajcore_return": repr(float(episode_return)),
        "trajcore_key": key,
        "trajcore_frames": str(len(present)),
        "trajcore_frames_missing": str(int((~present).sum())),
    }


def _even(n: int) -> int:
    return n + (n & 1)


class Encoder:
    """One MP4 file being written: (H, W, 1 or 3) uint8 frames of one size in, H.264 out."""

    def __init__(
        self,
        path: str,
        height: int,
        width: int,
        fps: float,
        tags: dict[str, str] | None = None,
        threads: int = 0,
        *,
        crf: int = CRF,
        gop: int | None = None,
        pix_fmt: str = "yuv420p",
        tune: str | None = None,
    ) -> None:
        """
        Args:
            fps: frames per second (a positive number).
            tags: container metadata.
            threads: encoder threads (0: FFmpeg's choice; 1: one core).
            crf: libx264's constant rate factor (lower: larger files, closer to the frames).
            gop: frames between keyframes (None: the encoder's choice); a short one makes a
                read of any frame decode few others (LeRobot's loader seeks per frame).
            pix_fmt: ``yuv420p`` (plays everywhere; colour at half resolution) or ``yuv444p``
                (colour at full resolution: closer to the frames; not every browser plays it).
            tune: libx264's tune (``psnr``: spend the bits on fidelity rather than looks).

        Raises:
            MissingDependencyError: PyAV is not installed.
            InvalidArgumentError: `fps` is not a positive number, or FFmpeg has none of `CODECS`.
        """
        if not (isinstance(fps, int | float) and np.isfinite(fps) and fps > 0):
            raise InvalidArgumentError(f"fps must be a positive number, got {fps!r}")
        av = self.av = av_module("writing mp4 video")
        codec = next((c for c in CODECS if c in av.codecs_available), None)
        if codec is None:
            raise InvalidArgumentError(f"this FFmpeg (PyAV {av.__version__}) has none of the encoders {CODECS}")
        self.container = av.open(path, "w", format="mp4", options={"movflags": "use_metadata_tags"})
        self.container.metadata.update(tags or {})
        from fractions import Fraction  # here: it imports `decimal`, which only encoding needs

        self.stream = self.container.add_stream(codec, rate=Fraction(fps).limit_denominator(1001))
        # Only 4:2:0 halves the colour planes, so only it needs an even width and height.
        self.pad = pix_fmt == "yuv420p"
        self.stream.width, self.stream.height = (_even(width), _even(height)) if self.pad else (width, height)
        self.stream.pix_fmt = pix_fmt
        self.stream.thread_count = threads
        if gop is not None:
            self.stream.codec_context.gop_size = gop
        if codec == "libx264":
            self.stream.options = {"crf": str(crf), "preset": "veryfast", **({"tune": tune} if tune else {})}
        self.height, self.width = height, width
        self.frames = 0

    def add(self, picture: npt.NDArray[np.uint8]) -> None:
        """Encodes one frame of the file's size."""
        if self.pad and (self.height & 1 or self.width & 1):
            picture = np.pad(picture, ((0, self.height & 1), (0, self.width & 1), (0, 0)), mode="edge")
        grey = picture.shape[2] == 1
        frame = self.av.VideoFrame.from_ndarray(
            np.ascontiguousarray(picture[..., 0] if grey else picture), format="gray" if grey else "rgb24"
        )
        self.container.mux(self.stream.encode(frame))
        self.frames += 1

    def close(self) -> None:
        """Flushes the encoder and writes the file's index."""
        self.container.mux(self.stream.encode(None))
        self.container.close()


def write_mp4(
    path: str,
    frames: npt.NDArray[np.uint8],
    present: npt.NDArray[np.bool_] | None = None,
    *,
    fps: float = 30.0,
    tags: dict[str, str] | None = None,
    threads: int = 0,
) -> int:
    """Writes frames as one H.264 MP4 at `path`.

    Args:
        frames: (N, H, W, 1 or 3) uint8.
        present: per frame, whether it is one (False: written black); None: all are.
        fps, tags, threads: see `Encoder`.

    Returns:
        The number of frames written.

    Raises:
        MissingDependencyError: PyAV is not installed.
        InvalidArgumentError: a bad `fps`.
    """
    n, height, width, _ = frames.shape
    enc = Encoder(path, height, width, fps, tags, threads)
    try:
        black = np.zeros(frames.shape[1:], dtype=np.uint8)
        for i in range(n):
            enc.add(frames[i] if present is None or present[i] else black)
    finally:
        enc.close()
    return enc.frames
