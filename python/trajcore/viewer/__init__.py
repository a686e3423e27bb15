"""The episode viewer: one self-contained HTML page per episode (frame or image observation,
slider, play/pause, speed, arrow keys; the step's values beside it; plots with a cursor).

    trajcore.viewer.write_html(ds.episodes[3], "ep3.html")
    trajcore.viewer.view(ds.episodes[3])                        # a temporary file, in the browser
    ds.episodes[3]                                              # in Jupyter: the same page, size-capped
    trajcore.viewer.write_html(ds.env_episodes[0], "joint.html")  # every agent of an env episode

A multi-agent dataset's episode is one agent's part of an env episode (its page says whose); the
page of an env episode shows every agent's values, images and plots aligned on the env's steps,
one agent after the other, with a picker to show one of them.

The page needs nothing but a browser: no network, no CDN, no other file. Modules: `_episode`
reads an episode, `_env_episode` the agents of an env episode, `_content` decides what the page
shows (plain values), `_frames` packs the frames, `_page` fills the template (``template.html``,
``viewer.css``, ``viewer.js``).
"""

from __future__ import annotations

import html
import os
import tempfile
import webbrowser
from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np

from trajcore.errors import InvalidArgumentError
from trajcore.tools.output import staged
from trajcore.video import av_module, episode_tags, video_available, write_mp4
from trajcore.viewer._content import EpisodeArrays, PageContent, env_page_content, image_sources, page_content
from trajcore.viewer._env_episode import read_env_episode
from trajcore.viewer._episode import read_episode
from trajcore.viewer._page import page_overhead, render_page

if TYPE_CHECKING:
    from trajcore.read.episode import Episode
    from trajcore.read.multiagent.env_episodes import EnvEpisode

__all__ = ["NOTEBOOK_MAX_BYTES", "episode_html", "notebook_html", "view", "write_html"]

NOTEBOOK_MAX_BYTES = 8 << 20
"""Size cap of the page `Episode._repr_html_` puts in a notebook (frames are thinned to fit)."""


def _env_episode(episode: Episode | EnvEpisode) -> EnvEpisode | None:
    """`episode` if it is an `EnvEpisode` (its agents' episodes by name), else None; told apart
    without importing its module: `trajcore.read.episode` imports this package, and
    `trajcore.read.multiagent.env_episodes` imports that."""
    return cast("EnvEpisode", episode) if isinstance(getattr(episode, "episodes", None), dict) else None


def _content(episode: Episode | EnvEpisode, max_bytes: int | None, arrays: EpisodeArrays | None = None) -> PageContent:
    """What the page of `episode` (read already: `arrays`) shows, its data fitted to a page of at
    most `max_bytes`."""
    data_bytes = None if max_bytes is None else max_bytes - page_overhead()
    joint = _env_episode(episode)
    if joint is not None:
        parts, title, summary = read_env_episode(joint)
        return env_page_content(parts, title, summary, max_bytes=data_bytes)
    return page_content(arrays or read_episode(cast("Episode", episode)), max_bytes=data_bytes)


def episode_html(episode: Episode | EnvEpisode, *, max_bytes: int | None = None) -> str:
    """The viewer page of an episode, or of every agent of an env episode, as HTML text.

    Args:
        episode: the episode to show (``ds.episodes[3]``), or an env episode
            (``ds.env_episodes[0]``): its agents aligned on the env's steps.
        max_bytes: bound of the page's size: frames are thinned (every k-th kept) to fit, and the
            page says so. None: every frame.
    """
    return render_page(_content(episode, max_bytes))


def write_html(
    episode: Episode | EnvEpisode,
    path: str | os.PathLike[str],
    *,
    max_bytes: int | None = None,
    video: bool | None = None,
) -> str:
    """Writes the viewer page of an episode (or env episode) to `path` (replacing it; written beside it and
    renamed into place, so a half-written page never shows). Returns the path.

    Args:
        video: also write the episode's frames (its rendered frames, else its first image
            observation) as an MP4 beside the page, ``<page name>.mp4``, and link to it from the
            page ("save as video"). None: when PyAV is installed (``pip install "trajcore[video]"``)
            and the episode has an image; never for an env episode.

    Raises:
        MissingDependencyError: `video` is True and PyAV is not installed.
    """
    out = os.fspath(path)
    if video and _env_episode(episode) is not None:
        raise InvalidArgumentError("video=True: an env episode's page has no video (write each agent's episode)")
    if video:
        av_module("the viewer's video")
    link = arrays = None
    if video or (video is None and _env_episode(episode) is None and video_available()):
        arrays = read_episode(cast("Episode", episode))
        link = _write_video(arrays, out)
    page = render_page(_content(episode, max_bytes, arrays), video=link)
    with staged(out, force=True) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(page)
    return out


def _write_video(arrays: EpisodeArrays, page: str) -> str | None:
    """Writes the image the page shows large (every row, as the page shows it) as an MP4 beside
    `page`; its file name, or None when the page shows no image."""
    sources = image_sources(arrays)
    if not sources:
        return None
    _, what, rows, present = sources[0]
    name = os.path.splitext(os.path.basename(page))[0] + ".mp4"
    s = arrays.summary
    shown = np.ones(len(rows), dtype=np.bool_) if present is None else present
    tags = episode_tags(arrays.title, s["episode"], s["env_index"], s["length"], s["return"], what, shown)
    with staged(os.path.join(os.path.dirname(page), name), force=True) as tmp:
        write_mp4(tmp, rows, shown, fps=arrays.fps, tags=tags)
    return name


def view(
    episode: Episode | EnvEpisode,
    out: str | os.PathLike[str] | None = None,
    *,
    open_browser: bool | None = None,
    max_bytes: int | None = None,
    video: bool | None = None,
) -> str:
    """Writes the viewer page of `episode` (``ds.episodes[3]``, or ``ds.env_episodes[0]``);
    without `out`, into a temporary file opened in the default browser.

    Args:
        open_browser: open the page with `webbrowser` (default: only when `out` is None).
        max_bytes, video: as `write_html`'s.

    Returns:
        The page's path.
    """
    temporary = out is None
    if out is None:
        joint = _env_episode(episode)
        name = f"episode-{cast('Episode', episode).index}" if joint is None else f"env-episode-{joint.id}"
        fd, out = tempfile.mkstemp(prefix=f"trajcore-{name}-", suffix=".html")
        os.close(fd)
    written = write_html(episode, out, max_bytes=max_bytes, video=video)
    if temporary if open_browser is None else open_browser:
        webbrowser.open(Path(written).resolve().as_uri())
    return written


def notebook_html(episode: Episode | EnvEpisode, max_bytes: int = NOTEBOOK_MAX_BYTES) -> str:
    """The page for a notebook cell: inside an iframe (its script and styles kept apart from the
    notebook's), capped at `max_bytes`, with what was left out said above it."""
    content = _content(episode, max_bytes)
    page = render_page(content)
    notes = "".join(f"<div>trajcore viewer: {html.escape(n)}</div>" for n in content.notes)
    return (
        f'<div style="font-size:12px;color:#8a4b00">{notes}</div>'
        f'<iframe srcdoc="{html.escape(page, quote=True)}" style="width:100%;height:760px;border:0" '
        'title="trajcore episode viewer"></iframe>'
    )
