"""How the page's data is written into its HTML: the model as JSON inside a <script> element and
each frame block as a text <script>. `_page` writes them, `_content` measures them (the size cap
counts the bytes the page will really hold)."""

from __future__ import annotations

import json
from collections.abc import Sequence

__all__ = ["block_tags", "script_json"]


def script_json(value: object) -> str:
    """JSON that is safe inside a <script> element: no '<', '>' or '&' outside an escape (so no
    string can close the element or open a comment)."""
    text = json.dumps(value, separators=(",", ":"), allow_nan=False, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def block_tags(blocks: Sequence[str]) -> str:
    """The frame blocks (base64 text, which never holds '<'), one element each."""
    return "\n".join(f'<script type="text/plain" id="trajcore-block-{i}">{b}</script>' for i, b in enumerate(blocks))
