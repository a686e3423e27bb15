"""The core's reader (`_core.Dataset`) with what its reports hold unpacked: the extension serves
column specs, column storage, shard contents, the recordings' count and the exclusions through one
call, `report`, and the names the package and its tools use are read from it here."""

from __future__ import annotations

import json
from typing import Any, cast

from trajcore import _core

__all__ = ["CoreReader"]


class CoreReader(_core.Dataset):
    """A `_core.Dataset` (same constructor), with its reports of columns and shards by name."""

    def columns(self, recording: int) -> list[dict[str, Any]]:
        """Column specs of a recording: name, dtype, shape, timeline, mask, mask_of, role, codec."""
        return cast(list[dict[str, Any]], self.report("columns", recording))

    def column_stats(self) -> list[dict[str, Any]]:
        """Storage per column of each recording, from the index (nothing is decoded):
        recording, name, chunks, raw_bytes, stored_bytes."""
        return cast(list[dict[str, Any]], self.report("column_stats"))

    @property
    def shard_steps(self) -> list[tuple[int, int]]:
        """(recording, transitions) of each shard, in `shards` order."""
        return [(int(r), int(n)) for r, n in self.report("shard_steps")]

    @property
    def num_recordings(self) -> int:
        """How many recordings the dataset holds."""
        return int(self.report("num_recordings"))

    def exclusions_json(self) -> str | None:
        """What a verification at open left out, as JSON the constructor takes back (None when
        nothing was)."""
        left_out = self.report("exclusions")
        return None if left_out is None else json.dumps(left_out)
