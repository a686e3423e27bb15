"""Training reads: steps numbered over a dataset's episodes (or a selection of them) and
read back one at a time, by batch, in blocks or as windows of consecutive steps.

`_Sampling` is what a `Dataset` and an `Episodes` share (they say which reader and which of
its selections: the core's reads are methods of a selection); `Transitions` and `Sequences`
are views by step and by window number. Batches are gathered in Rust with the GIL released.
"""

from __future__ import annotations

import secrets
import warnings
from collections.abc import Iterator, Sequence
from typing import Any, Literal, overload

import numpy as np
import numpy.typing as npt

from trajcore import _core
from trajcore.errors import CorruptFileError, InvalidArgumentError, TrajcoreWarning

__all__ = ["Batch", "Sequences", "Transitions"]

Batch = dict[str, Any]
"""A batch: ``observations``, ``actions``, ``rewards``, ``next_observations``, ``terminations``,
``truncations`` (nested like the spaces, batched along axis 0, dtypes as recorded; str leaves as
lists of str), ``episode_index`` and ``step_index`` (int64), and ``mask`` for padded sequences."""


def _seed(seed: int | None) -> int:
    """A 64-bit seed: `seed` wrapped to 64 bits, or a random one."""
    return secrets.randbits(64) if seed is None else int(seed) & 0xFFFF_FFFF_FFFF_FFFF


def keys_of(keys: Sequence[str] | None) -> list[str] | None:
    """The keys a read asks for, as the core takes them (None: the default keys)."""
    return None if keys is None else [str(k) for k in keys]


def int64(indices: Any) -> npt.NDArray[np.int64]:
    """Indexes (an int, a list, an array) as the flat contiguous int64 array the core takes."""
    return np.ascontiguousarray(np.asarray(indices, dtype=np.int64).reshape(-1))


class _Sampling:
    """Training reads shared by a `Dataset` (all its episodes) and `Episodes` (a subset, e.g. a
    `select`): steps are numbered 0 .. `num_steps` - 1 over the episodes in order, windows of a
    given length likewise. Batches are gathered in Rust with the GIL released."""

    def _reader(self) -> _core.Dataset:
        raise NotImplementedError

    def _selection(self) -> _core.Selection:
        raise NotImplementedError

    @property
    def num_steps(self) -> int:
        """Transitions over these episodes (the sum of their lengths)."""
        return self._selection().num_steps

    def sample_transitions(self, n: int, seed: int | None = None, *, keys: Sequence[str] | None = None) -> Batch:
        """`n` transitions drawn uniformly, with replacement, from every step of these episodes.

        Args:
            n: batch size.
            seed: the same seed draws the same batch from the same episodes (None: random).
            keys: the keys wanted (default: observations, actions, rewards, next_observations,
                terminations, truncations); column names (``"info/<key>"``, ``"data/<name>"``,
                their masks ``"info/_<key>"``) add those columns.

        Returns:
            A `Batch` of `n` transitions. ``next_observations`` of an episode's last step is its
            final observation.

        Without `strict`, an episode found damaged (a chunk of it fails its checksum or does
        not decode; every chunk of an episode is checked before its first row is used) is left
        out of the population with a `TrajcoreWarning` naming the file, offset and episodes,
        and the transitions drawn in it are drawn again: the batch for a seed stays the same.

        Raises:
            InvalidArgumentError: the episodes hold no step.
            SchemaError: a key names no column.
            CorruptFileError: with `strict`, damage; without, too few intact episodes left.
        """
        return self._selection().sample(int(n), _seed(seed), None, False, keys_of(keys))

    @property
    def transitions(self) -> Transitions:
        """The transitions by step number: ``transitions[i]`` (one step), ``transitions[idx]``
        (an int array, list or slice: a batch), iteration. Without `strict`, a step of a
        damaged episode raises `CorruptFileError` when asked for alone; in a batch it is
        replaced by a step drawn from the intact episodes (from its number, so the same batch
        comes back; ``episode_index`` and ``step_index`` say what was read), with a warning;
        iteration skips damaged episodes."""
        return Transitions(self)

    def sample_sequences(
        self,
        n: int,
        length: int,
        seed: int | None = None,
        *,
        pad: bool = False,
        keys: Sequence[str] | None = None,
    ) -> Batch:
        """`n` windows of `length` consecutive steps, each inside one episode, drawn uniformly
        (with replacement) from all such windows: a `Batch` with arrays ``[n, length, ...]``,
        ``episode_index`` ``[n]`` and ``step_index`` ``[n, length]``.

        Args:
            pad: keep episodes shorter than `length` (one window each, from their first step),
                padded with zeros past their end; the batch then has ``mask`` ``[n, length]``,
                True on real steps. Without it, shorter episodes are never drawn.

        Damaged episodes are left out as in `sample_transitions`.

        Raises:
            InvalidArgumentError: no episode holds a window (length too large, and no `pad`).
            CorruptFileError: with `strict`, damage; without, too few intact episodes left.
        """
        return self._selection().sample(int(n), _seed(seed), int(length), pad, keys_of(keys))

    def sequences(self, length: int, *, pad: bool = False) -> Sequences:
        """The windows of `length` steps by number (see `sample_sequences`): ``len()`` and
        indexing by an int array, list or slice."""
        return Sequences(self, int(length), pad)

    def num_windows(self, length: int, *, pad: bool = False) -> int:
        """How many windows of `length` steps lie inside single episodes."""
        return self._selection().num_windows(int(length), pad)


_INTEGER = (int, np.integer)
# Steps an iteration over transitions reads at once (bounds its memory on long pixel episodes).
_ITER_BLOCK = 1024


class Transitions:
    """Transitions by step number (of a dataset or of a selection of its episodes). A view
    holds the files open (memory-mapped) while it lives."""

    def __init__(self, owner: _Sampling) -> None:
        self._owner = owner
        self._reader = owner._reader()
        self._sel = owner._selection()
        self._step = self._sel.step

    def __len__(self) -> int:
        return self._owner.num_steps

    @overload
    def __getitem__(self, index: int | np.integer[Any]) -> Batch: ...
    @overload
    def __getitem__(self, index: slice | Sequence[int] | npt.NDArray[np.integer[Any]]) -> Batch: ...
    def __getitem__(self, index: Any) -> Batch:
        """One step (int, negative from the end: arrays of the row shape, numpy scalars) or a
        batch (int array, list or slice).

        Raises:
            IndexError: a step number out of range.
            CorruptFileError: one step of a damaged episode (a batch draws its rows again).
        """
        if type(index) is int:  # the hot path: one step
            return self._step(index)
        if isinstance(index, _INTEGER):
            return self._step(int(index))
        if isinstance(index, slice):
            return self._slice(index, None)
        return self._sel.gather(int64(index))

    def _slice(self, index: slice, keys: list[str] | None) -> Batch:
        start, stop, step = index.indices(len(self))
        if step == 1:  # consecutive steps: read in bulk, a run per episode
            return self._sel.gather(range(start, max(start, stop)), None, False, keys)
        return self._sel.gather(np.arange(start, stop, step, dtype=np.int64), keys=keys)

    def gather(self, index: Any, *, keys: Sequence[str] | None = None) -> Batch:
        """Like indexing with an array or slice, with the keys wanted."""
        if isinstance(index, slice):
            return self._slice(index, keys_of(keys))
        return self._sel.gather(int64(index), keys=keys_of(keys))

    def blocks(
        self, size: int = 65_536, *, keys: Sequence[str] | None = None, order: Literal["steps", "file"] = "steps"
    ) -> Iterator[Batch]:
        """Every transition once, as batches of `size` steps (the last one shorter): a full scan
        at memory speed. Each block is one bulk read: a run of rows per episode copied straight
        into numpy, chunks decoded in parallel, memory bounded by the block. Damage is handled
        as in any batch (steps of a damaged episode are redrawn from their numbers, with a
        warning; `strict` raises).

        Args:
            order: ``"steps"``: in step-number order (``transitions[a:b]`` block by block).
                ``"file"``: in the order the file stores them, faster: grouped by recording,
                then by sub-env, each sub-env's episodes in the order recorded (one episode's
                steps stay consecutive and in order). The same transitions, each once;
                ``episode_index`` and ``step_index`` say which is which.

        Raises:
            InvalidArgumentError: `size` < 1, or an unknown `order`.
            CorruptFileError: with `strict`, damage.
        """
        if size < 1:
            raise InvalidArgumentError(f"a block holds at least one step (got {size})")
        if order not in ("steps", "file"):
            raise InvalidArgumentError(f"order is 'steps' or 'file' (got {order!r})")
        wanted = keys_of(keys)
        n = len(self)
        sel = self._sel.file_order() if order == "file" else self._sel
        for start in range(0, n, size):
            yield sel.gather(range(start, min(n, start + size)), None, False, wanted)

    def __iter__(self) -> Iterator[Batch]:
        """Every step in order, as ``transitions[i]`` gives it, read an episode (or a block of
        one) at a time. Without `strict`, an episode found damaged is skipped whole (its
        checksums are checked before its first step is given), with a `TrajcoreWarning`.

        Raises:
            CorruptFileError: with `strict`, at a damaged episode.
        """
        reader, every = self._reader, self._reader.all_episodes()
        lengths = reader.summaries()["length"]
        for episode in self._sel.episodes().tolist():
            n = int(lengths[episode])
            for start in range(0, n, _ITER_BLOCK):
                steps = np.arange(start, min(n, start + _ITER_BLOCK), dtype=np.int64)
                try:
                    batch = every.gather((np.full(len(steps), episode, dtype=np.int64), steps))
                except CorruptFileError as e:
                    if reader.strict:
                        raise
                    message = f"{e}; episode {episode} ({n} steps) is left out of the iteration"
                    warnings.warn(message, TrajcoreWarning, stacklevel=2)
                    break
                for t in range(len(steps)):
                    yield _row(batch, t)

    def __repr__(self) -> str:
        return f"<trajcore.Transitions: {len(self)} steps>"


class Sequences:
    """Windows of a fixed length inside single episodes, by window number."""

    def __init__(self, owner: _Sampling, length: int, pad: bool) -> None:
        self._owner = owner
        self.length = length
        self.pad = pad

    def __len__(self) -> int:
        return self._owner.num_windows(self.length, pad=self.pad)

    def __getitem__(self, index: Any) -> Batch:
        """A batch ``[B, length, ...]`` of windows (int array, list or slice; an int gives B=1).

        Raises:
            IndexError: a window number out of range.
        """
        if isinstance(index, slice):
            index = np.arange(*index.indices(len(self)), dtype=np.int64)
        return self._owner._selection().gather(int64(index), self.length, self.pad)

    def __repr__(self) -> str:
        return f"<trajcore.Sequences: {len(self)} windows of {self.length} steps>"


def _row(batch: Any, t: int) -> Any:
    """Row `t` of a batch, without the batch axis (as one step reads)."""
    if isinstance(batch, dict):
        return {k: int(v[t]) if k in ("episode_index", "step_index") else _row(v, t) for k, v in batch.items()}
    if isinstance(batch, tuple):
        return tuple(_row(v, t) for v in batch)
    return batch[t]
