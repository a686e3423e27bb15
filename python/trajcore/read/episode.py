"""One episode of a dataset (`Episode`): its summary from the index, its arrays read on first
access, all through the `DatasetReads` its dataset hands it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from trajcore.read.multiagent.agents import ENV_EPISODE_KEY
from trajcore.read.reads import EpisodeSource
from trajcore.read.records.infos import with_masks
from trajcore.read.records.provenance import episode_provenance
from trajcore.record.frames import FRAME_COLUMN, FRAME_MASK

__all__ = ["Episode"]


class Episode:
    """One episode of one (sub-)env. Summary fields come from the index; the arrays are read and
    decompressed on first access, then cached on the episode.

    An episode of T steps has T+1 observations and infos (the reset's first, the final last) and
    T actions, rewards, terminations, truncations and custom data rows.

    Columns stored raw (``zstd_level=None``, or `trajcore.convert` ed) come back as read-only
    views of the memory map, without a copy; they keep the file mapped while they live, even
    after the dataset is closed. Copy one (``a.copy()``) to modify it.
    """

    def __init__(self, dataset: EpisodeSource, index: int) -> None:
        self._dataset = dataset
        self._reads = dataset._reads
        self.index = index
        """Position of the episode in its dataset."""
        self._cache: dict[str, Any] = {}
        # The shards it reads stay open while it lives, even once a bounded recording deleted
        # them: it reads the values it was listed with (the dataset lets go of them otherwise).
        self._pin = self._reads.pin(index)

    def __reduce__(self) -> tuple[Any, ...]:
        # As its dataset (path and options) and its index: the unpickled episode reads through
        # the reopened dataset's reads, not a second reader of its own.
        return (Episode, (self._dataset, self.index))

    def _s(self, name: str) -> Any:
        return self._reads.summary()[name][self.index]

    @property
    def recording(self) -> int:
        return int(self._s("recording"))

    @property
    def env_index(self) -> int:
        """Sub-env the episode ran in (0 for a single env)."""
        return int(self._s("env_index"))

    @property
    def length(self) -> int:
        """Number of steps T."""
        return int(self._s("length"))

    def __len__(self) -> int:
        return self.length

    @property
    def complete(self) -> bool:
        """False for an episode still running when its recorder closed or stopped on an error."""
        return bool(self._s("complete"))

    @property
    def terminated(self) -> bool:
        return bool(self._s("terminated"))

    @property
    def truncated(self) -> bool:
        return bool(self._s("truncated"))

    @property
    def episode_return(self) -> float:
        """The sum of the rewards (float64, summed in step order)."""
        return float(self._s("episode_return"))

    @property
    def start_ns(self) -> int:
        """Wall-clock time of the episode's reset, in ns since the Unix epoch."""
        return int(self._s("start_ns"))

    @property
    def end_ns(self) -> int:
        return int(self._s("end_ns"))

    @property
    def start_time(self) -> float:
        """Wall-clock time of the episode's reset, in seconds since the Unix epoch."""
        return self.start_ns / 1e9

    @property
    def episode_id(self) -> int:
        """The episode's number in its recording, in the order episodes started (the parts of
        an episode listed separately share it)."""
        return int(self._s("episode_id"))

    @property
    def continued(self) -> bool:
        """The episode began before these rows, in a shard this dataset does not hold (so the
        first observation here is not its reset observation)."""
        return bool(self._s("continued"))

    @property
    def continues(self) -> bool:
        """The episode goes on after these rows, in a shard this dataset does not hold (yet)."""
        return bool(self._s("continues"))

    @property
    def is_part(self) -> bool:
        """These are not all of the episode's rows: it ran over a shard rollover and this
        dataset holds only some of its shards (a shard opened alone, or old shards deleted).
        A part is never `complete`; with all the shards, the episode is listed whole."""
        return self.continued or self.continues

    @property
    def metrics(self) -> dict[str, dict[str, float]]:
        """The episode's metrics (see `Dataset.metrics`): ``{name: {"count", "mean", "sum",
        "min", "max"}}`` for the columns with a value in it. From the index: nothing is read."""
        out: dict[str, dict[str, float]] = {}
        for name, stats in self._reads.metric_arrays().items():
            if stats["count"][self.index] > 0:
                out[name] = {k: (int if k == "count" else float)(a[self.index]) for k, a in stats.items()}
        return out

    def _cached(self, key: str, make: Callable[[], Any]) -> Any:
        try:
            return self._cache[key]
        except KeyError:
            value = self._cache[key] = make()
            return value

    @property
    def metadata(self) -> dict[str, Any]:
        """The episode's metadata (callback results and `set_episode_metadata` values)."""
        return self._cached("metadata", lambda: self._reads.episode_metadata(self.index))  # type: ignore[no-any-return]

    @property
    def provenance(self) -> dict[str, Any]:
        """Where the episode came from: its recording's provenance (`Dataset.provenance`), with
        the seed and options of the reset that started it (``reset_seed``, ``reset_options``)
        and the policy behind it (``policy``, see `set_policy`) where they were recorded."""
        return episode_provenance(self._reads, self.index, self.recording)

    @property
    def observations(self) -> Any:
        """T+1 observations, nested like the observation space (dicts/tuples of arrays; a Text
        leaf is a list of str)."""
        return self._cached("observations", lambda: self._reads.tree(self.index, "observation"))

    @property
    def actions(self) -> Any:
        """T actions, nested like the action space."""
        return self._cached("actions", lambda: self._reads.tree(self.index, "action"))

    @property
    def rewards(self) -> npt.NDArray[np.float64]:
        """T rewards, float64, exactly as the env returned them."""
        return self._cached("rewards", lambda: self._reads.column(self.index, "reward"))  # type: ignore[no-any-return]

    @property
    def terminations(self) -> npt.NDArray[np.bool_]:
        return self._cached("terminations", lambda: self._reads.column(self.index, "terminated"))  # type: ignore[no-any-return]

    @property
    def truncations(self) -> npt.NDArray[np.bool_]:
        return self._cached("truncations", lambda: self._reads.column(self.index, "truncated"))  # type: ignore[no-any-return]

    def _values_and_masks(self, which: str) -> tuple[dict[str, Any], dict[str, Any]]:
        return self._cached(  # type: ignore[no-any-return]
            "fields:" + which, lambda: self._reads.fields(self.index, self.recording, which)
        )

    @property
    def infos(self) -> dict[str, Any]:
        """Info entries, aligned with the observations (T+1 rows, the reset's info first). Each
        key comes with a boolean mask ``infos["_key"]`` saying at which rows the env gave it;
        where it did not, the row reads as zeros (empty string for str). Nested dict infos come
        back nested (``infos["episode"]["r"]`` with ``infos["episode"]["_r"]``, and
        ``infos["_episode"]`` true where any entry below was given). Keys the env never gave in
        this episode are left out. An info key of its own named ``_key`` beside a key ``key``
        (ALE's ``lives`` and a wrapper's ``_lives``) keeps its name: ``key``'s mask is then in
        `info_masks` only."""
        return self._cached("infos", lambda: with_masks(*self._values_and_masks("infos")))  # type: ignore[no-any-return]

    @property
    def info_masks(self) -> dict[str, Any]:
        """The masks of `infos` alone, nested like the keys (no ``_`` prefixes): where the env
        gave each entry."""
        return self._values_and_masks("infos")[1]

    @property
    def data(self) -> dict[str, Any]:
        """Custom per-step data (`record` / `step_data`): ``name`` -> T rows, ``_name`` -> mask."""
        return self._cached("data", lambda: with_masks(*self._values_and_masks("data")))  # type: ignore[no-any-return]

    @property
    def data_masks(self) -> dict[str, Any]:
        """The masks of `data` alone, keyed by name: at which steps each was recorded."""
        return self._values_and_masks("data")[1]

    @property
    def frames(self) -> npt.NDArray[Any] | None:
        """T+1 rendered frames (``render_frames=True``): what ``env.render()`` returned after the
        reset and after each step, aligned with the observations, e.g. ``(T+1, H, W, 3)`` uint8.
        Rows without a frame (see `frame_mask`) read as zeros. None when the episode's recorder
        did not record frames."""
        return self._cached(  # type: ignore[no-any-return]
            "frames", lambda: self._reads.optional_column(self.index, self.recording, FRAME_COLUMN)
        )

    @property
    def frame_mask(self) -> npt.NDArray[np.bool_] | None:
        """T+1 bools: True where `frames` holds a frame. A row has none when the env was not
        rendered for it; under ``SAME_STEP`` vector autoreset, the final row of an episode that
        ended inside a step never has one (the sub-env was already reset when it could be
        rendered). None when frames were not recorded."""
        return self._cached(  # type: ignore[no-any-return]
            "frame_mask", lambda: self._reads.optional_column(self.index, self.recording, FRAME_MASK)
        )

    @property
    def agent(self) -> str | None:
        """The agent whose part of an env episode this is (multi-agent recordings), else None."""
        return self._reads.agent_of_recording(self.recording)

    @property
    def env_episode(self) -> Any:
        """The id shared by the episodes of every agent of one env episode (multi-agent
        recordings: episode metadata ``"env_episode"``), else None."""
        return self.metadata.get(ENV_EPISODE_KEY)

    def _repr_html_(self) -> str:
        """The episode viewer in a notebook cell (`trajcore.viewer`): the frames, a slider and
        the values of each step; at most `trajcore.viewer.NOTEBOOK_MAX_BYTES` (frames are
        thinned to fit, and it says so). ``trajcore view`` writes every frame."""
        # The one way from an episode up to the viewer: a notebook asks the object for its HTML.
        from trajcore.viewer import notebook_html

        return notebook_html(self)

    def __repr__(self) -> str:
        state = "complete" if self.complete else "incomplete"
        return (
            f"<trajcore.Episode {self.index}: env {self.env_index}, {self.length} steps, "
            f"return {self.episode_return:g}, {state}>"
        )
