"""The viewer page: the HTML template, its stylesheet and script (package data beside this
module), filled with an episode's `PageContent` into one self-contained HTML file."""

from __future__ import annotations

import html
import re
import urllib.parse
from functools import cache
from importlib import resources

from trajcore import _core
from trajcore.viewer._content import PageContent
from trajcore.viewer._html import block_tags, script_json

__all__ = ["page_overhead", "render_page"]

_SLOT = re.compile(r"\{\{(VERSION|TITLE|CSS|JS|DATA|BLOCKS|VIDEO)\}\}")


@cache
def _asset(name: str) -> str:
    return resources.files("trajcore.viewer").joinpath(name).read_text(encoding="utf-8")


def page_overhead() -> int:
    """Bytes of a page before any episode data: the template, stylesheet and script."""
    return sum(len(_asset(name).encode("utf-8")) for name in ("template.html", "viewer.css", "viewer.js"))


def render_page(content: PageContent, video: str | None = None) -> str:
    """The page as one HTML document: no network, no external file (but the video it links to).

    Args:
        content: what to show (`trajcore.viewer._content.page_content`).
        video: the file name of the episode's video beside the page: the page links to it
            ("save as video"); None: no link.

    Returns:
        The HTML text.
    """
    parts = {
        "VERSION": html.escape(_core.__version__),
        "TITLE": html.escape(str(content.model.get("title", "trajcore episode"))),
        "CSS": _asset("viewer.css"),
        "JS": _asset("viewer.js"),
        "DATA": script_json(content.model),
        "BLOCKS": block_tags(content.blocks),
        "VIDEO": _video_link(video),
    }
    # One pass: text put into a slot is never searched for slots itself.
    return _SLOT.sub(lambda m: parts[m.group(1)], _asset("template.html"))


def _video_link(video: str | None) -> str:
    if video is None:
        return ""
    href = html.escape(urllib.parse.quote(video), quote=True)
    return f'<p id="video"><a href="{href}" download>save as video</a> (MP4, beside this page)</p>'
