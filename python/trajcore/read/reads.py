"""What a dataset's episodes read, and how (`DatasetReads`): the core's reader, what is decoded
once per dataset (the summaries, the metrics, each recording's Meta record and column specs) and
one episode's values. A `Dataset` makes one and hands it to each of its `Episodes` and `Episode`:
they read through it, never through the dataset's own methods, and this module imports none of
theirs."""

from __future__ import annotations

import json
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy.typing as npt

from trajcore import _core
from trajcore.errors import CorruptFileError, TrajcoreError
from trajcore.read.core_reader import CoreReader
from trajcore.read.records.infos import Field, column_fields, nest
from trajcore.read.records.provenance_keys import RESET_KEY
from trajcore.read.train.transitions import int64

if TYPE_CHECKING:
    from trajcore.read.multiagent.joint_plan import JointPlan

__all__ = ["DatasetReads", "EpisodeSource", "RecordingSpecs"]


@dataclass
class RecordingSpecs:
    """What a reader needs from one recording's Meta record and column specs."""

    meta: dict[str, Any]
    infos: list[Field] = field(default_factory=list)
    data: list[Field] = field(default_factory=list)
    column_names: frozenset[str] = frozenset()


class DatasetReads:
    """The reads of one open dataset. Summaries and metrics are read from the index once (until
    `forget`), each recording's specs once; episode values on every call (the episode caches)."""

    def __init__(self, path: str, core: CoreReader) -> None:
        self.path = path
        self._core: CoreReader | None = core
        self._recordings: dict[int, RecordingSpecs] = {}
        self._summaries: dict[str, npt.NDArray[Any]] | None = None
        self._metrics: dict[str, dict[str, npt.NDArray[Any]]] | None = None
        # Multi-agent env episodes' plans (`read.multiagent.joint_plan`), by the episodes they cover.
        self.joint_plans: dict[Any, JointPlan] = {}
        # The core's selections handed out (each holds the reader): let go of at `close`.
        self._every: _core.Selection | None = None
        self._selections: weakref.WeakKeyDictionary[object, _core.Selection] = weakref.WeakKeyDictionary()

    @property
    def core(self) -> CoreReader:
        """The core's reader.

        Raises:
            TrajcoreError: the dataset is closed.
        """
        if self._core is None:
            raise TrajcoreError(f"{self.path}: the dataset is closed")
        return self._core

    @property
    def closed(self) -> bool:
        return self._core is None

    def close(self) -> None:
        """Lets go of the core's reader (its memory maps, once no array read from them is alive)."""
        self._core = None
        self._every = None
        self._selections.clear()
        self._recordings.clear()
        self.forget()

    def forget(self) -> None:
        """Drops the summaries, metrics, column lists and env episode plans made so far (the
        listing grew, or columns appeared: an annotation; `Dataset.refresh`)."""
        self._recordings.clear()
        self._summaries = None
        self._metrics = None
        self.joint_plans.clear()

    def pin(self, index: int) -> object:
        """What keeps the shards episode `index` reads open while it is held (a shard a bounded
        recording deleted is let go of at the first refresh no pin holds it); None for a closed
        dataset or an index out of range."""
        core = self._core
        if core is None or not 0 <= index < core.num_episodes:
            return None
        return core.pin_episode(index)

    @property
    def num_episodes(self) -> int:
        return self.core.num_episodes

    @property
    def every(self) -> _core.Selection:
        """Every episode, as the dataset grows: the core's reads over all of them."""
        if self._every is None:
            self._every = self.core.all_episodes()
        return self._every

    def selection(self, owner: object, episodes: Sequence[int]) -> _core.Selection:
        """The core's selection of `episodes` (dataset indexes), made once for `owner` (an
        `Episodes`, which holds them) while it lives and the dataset is open."""
        sel = self._selections.get(owner)
        if sel is None:
            sel = self._selections[owner] = self.core.selection(int64(episodes))
        return sel

    @property
    def num_recordings(self) -> int:
        return self.core.num_recordings

    # --- once per dataset ------------------------------------------------------------------

    def recording(self, index: int) -> RecordingSpecs:
        rec = self._recordings.get(index)
        if rec is None:
            meta = self.core.report("meta", index)
            meta = meta if isinstance(meta, dict) else {}
            columns = self.core.columns(index)
            rec = RecordingSpecs(
                meta=meta,
                infos=column_fields(columns, "info/"),
                data=column_fields(columns, "data/"),
                column_names=frozenset(c["name"] for c in columns),
            )
            self._recordings[index] = rec
        return rec

    def meta(self, recording: int) -> dict[str, Any]:
        """The Meta record of a recording."""
        return self.recording(recording).meta

    def summary(self) -> dict[str, npt.NDArray[Any]]:
        """The episode summaries (read-only arrays, one per field, in dataset order)."""
        if self._summaries is None:
            s = self.core.summaries()
            for a in s.values():
                a.flags.writeable = False
            self._summaries = s
        return self._summaries

    def metric_arrays(self) -> dict[str, dict[str, npt.NDArray[Any]]]:
        """The episode metrics (read-only arrays: ``{name: {stat: array}}``)."""
        if self._metrics is None:
            m = self.core.metrics()
            for stats in m.values():
                for a in stats.values():
                    a.flags.writeable = False
            self._metrics = m
        return self._metrics

    def agent_of_recording(self, recording: int) -> str | None:
        """The agent whose episodes `recording` holds, or None for a single-agent recording."""
        user = self.meta(recording).get("user")
        agent = user.get("agent") if isinstance(user, dict) else None
        return agent if isinstance(agent, str) else None

    # --- one episode -----------------------------------------------------------------------

    def episode_metadata(self, index: int) -> dict[str, Any]:
        """The episode's metadata as the user set it (without the reset's provenance)."""
        value = self.stored_episode_metadata(index)
        value.pop(RESET_KEY, None)
        return value

    def stored_episode_metadata(self, index: int) -> dict[str, Any]:
        """The episode's metadata as stored, the reset's provenance (`RESET_KEY`) included."""
        text = self.core.episode_metadata_json(index)
        value = json.loads(text) if text else {}
        return value if isinstance(value, dict) else {"value": value}

    def column(self, index: int, column: str) -> Any:
        return self.core.read_column(index, column)

    def optional_column(self, index: int, recording: int, column: str) -> Any:
        """A column of the episode, or None when its recording has no such column."""
        if column not in self.recording(recording).column_names:
            return None
        return self.column(index, column)

    def tree(self, index: int, which: str) -> Any:
        """Episode `index`'s observations or actions, nested like the recorded space.

        Raises:
            CorruptFileError: the recording's layout of them is missing or invalid.
        """
        return self.core.read_layout(index, which)

    def fields(self, index: int, recording: int, which: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """(values, masks) of the info or custom-data columns, nested like the keys. A key never
        present in this episode is left out of both.

        Raises:
            CorruptFileError: a column name nests deeper than the recorder allows, or damage lost
                column descriptions of the recording.
        """
        rec = self.recording(recording)
        lost = self.core.report("schema_damage", recording)
        if lost is not None:
            # Some info or data columns (or their masks) may be among those lost: what reads
            # would be incomplete or unmasked.
            file, offset, why = lost
            raise CorruptFileError(f"{file}: corrupt at byte offset {offset}: episode {index}'s {which}: {why}")
        fields = rec.infos if which == "infos" else rec.data
        return nest(fields, lambda column: self.column(index, column), self.path)


class EpisodeSource(Protocol):
    """What `Episodes` and `Episode` hold of the dataset they come from: its reads. (The `Dataset`
    itself, typed by what they use of it, so that they need not import the module that makes
    them; `trajcore.read.dataset.members` gives it back as a `Dataset`.)"""

    @property
    def _reads(self) -> DatasetReads: ...
