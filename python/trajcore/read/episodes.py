"""A sequence of a dataset's episodes (`Episodes`): every episode, or a selection of them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Unpack, overload

from trajcore import _core
from trajcore.errors import TrajcoreIndexError
from trajcore.read.episode import Episode
from trajcore.read.reads import EpisodeSource
from trajcore.read.select.filters import EpisodeFilters, select_indices
from trajcore.read.train.transitions import _Sampling

__all__ = ["Episodes"]


class Episodes(_Sampling, Sequence["Episode"]):
    """A sequence of episodes of a dataset: ``len``, iteration, int (also negative) and slice
    indexing (a slice is an `Episodes` too). It samples like a dataset, over its episodes only
    (``sample_transitions``, ``sample_sequences``, ``transitions``, ``num_steps``),
    and pickles as its dataset (path and options) plus the episode indexes."""

    def __init__(self, dataset: EpisodeSource, indices: Sequence[int]) -> None:
        self._dataset = dataset
        self._indices = indices

    def _reader(self) -> _core.Dataset:
        return self._dataset._reads.core

    def _selection(self) -> _core.Selection:
        reads = self._dataset._reads
        if isinstance(self._indices, range) and self._indices == range(reads.num_episodes):
            return reads.every  # every episode, in order: the dataset's own (growing) step index
        return reads.selection(self, self._indices)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Episodes, (self._dataset, [int(i) for i in self._indices]))

    def select(self, **filters: Unpack[EpisodeFilters]) -> Episodes:
        """Those of these episodes passing the filters (see `Dataset.select`), order kept."""
        return Episodes(self._dataset, select_indices(self._dataset._reads, self._indices, filters))

    def __len__(self) -> int:
        return len(self._indices)

    @overload
    def __getitem__(self, i: int) -> Episode: ...
    @overload
    def __getitem__(self, i: slice) -> Episodes: ...
    def __getitem__(self, i: int | slice) -> Episode | Episodes:
        if isinstance(i, slice):
            return Episodes(self._dataset, self._indices[i])
        try:
            index = self._indices[i]
        except IndexError:
            raise TrajcoreIndexError(f"episode index {i} out of range ({len(self._indices)} episodes)") from None
        return Episode(self._dataset, int(index))

    def __iter__(self) -> Iterator[Episode]:
        for index in self._indices:
            yield Episode(self._dataset, int(index))

    @property
    def indices(self) -> list[int]:
        """The dataset indexes of these episodes."""
        return [int(i) for i in self._indices]

    def __repr__(self) -> str:
        return f"<trajcore.Episodes: {len(self)} episodes>"
