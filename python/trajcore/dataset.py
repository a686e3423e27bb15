"""Reading recordings back: `trajcore.open` -> `Dataset` -> `Episode`."""

from __future__ import annotations

import json
import os
import secrets
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict, Unpack, overload

import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from trajcore import _core
from trajcore._frames import FRAME_COLUMN, FRAME_MASK
from trajcore._meta import layout_problem, rebuild_space
from trajcore._metrics import metric_keep
from trajcore.errors import CorruptFileError, InvalidArgumentError, TrajcoreError, TrajcoreWarning
from trajcore.spaces import unescape_key

MAX_INFO_DEPTH: int = _core.MAX_INFO_DEPTH

__all__ = ["Batch", "Dataset", "Episode", "Episodes", "Sequences", "Transitions", "open"]

Batch = dict[str, Any]
"""A batch: ``observations``, ``actions``, ``rewards``, ``next_observations``, ``terminations``,
``truncations`` (nested like the spaces, batched along axis 0, dtypes as recorded; str leaves as
lists of str), ``episode_index`` and ``step_index`` (int64), and ``mask`` for padded sequences."""

DEFAULT_CACHE_BYTES = 256 << 20

# Aliases for annotations inside `Dataset`, whose `_core` property shadows the module there.
_CoreDataset = _core.Dataset
_CoreSelection = _core.Selection


def open(
    path: str | os.PathLike[str],
    strict: bool = False,
    cache_bytes: int = DEFAULT_CACHE_BYTES,
    verify: bool = False,
    mmap: bool = True,
) -> Dataset:
    """Opens a directory of shards (every recording in it) or one shard file.

    Opening reads the index, not the data: damage inside chunk data is found by the first read
    that needs it (or by `verify`). Without `strict`, a read that finds it leaves the damaged
    episodes out of sampling and goes on, with a `TrajcoreWarning`.

    Args:
        path: the directory a recorder wrote, or one shard file.
        strict: raise `CorruptFileError` on any damage instead of warning and reading what is
            intact.
        cache_bytes: bound of the cache of decompressed chunks (frame stacks are held as
            their frames, each frame once: a stack of 4 frames costs a quarter of its bytes).
        verify: check every checksum and decode every chunk now (as `trajcore verify` does):
            damaged episodes are left out of the listing and the damage is in `problems`
            (with `strict`, it raises). A data-loader worker that unpickles the dataset gets
            the same listing without verifying again. Episodes `refresh` adds are not verified
            (reads still leave damaged ones out of sampling).
        mmap: read the files through memory maps (the default: raw columns come back as views
            without a copy). With False, reads are positioned reads through the cache: use it
            where another process may truncate or rewrite files in place while you read (a
            `cp` or `rsync --inplace` over a shard), which through a map kills the process with
            SIGBUS; without a map such a file gives `CorruptFileError` instead.

    Raises:
        TrajcoreFileNotFoundError: `path` does not exist.
        CorruptFileError: a file is not a trajcore file (or, with `strict`, any damage).
    """
    return Dataset(path, strict=strict, cache_bytes=cache_bytes, verify=verify, mmap=mmap)


@dataclass
class _Field:
    """A recorded value column (info entry or custom data) and where it goes in the nested dict."""

    path: tuple[str, ...]
    column: str
    mask: str | None


@dataclass
class _Recording:
    """What a reader needs from one recording's Meta record and column specs."""

    meta: dict[str, Any]
    observation: Any  # layout tree
    action: Any
    infos: list[_Field] = field(default_factory=list)
    data: list[_Field] = field(default_factory=list)
    column_names: frozenset[str] = frozenset()


def _column_fields(columns: list[dict[str, Any]], prefix: str) -> list[_Field]:
    by_id = {c["id"]: c["name"] for c in columns if "id" in c}

    def name_of(ref: Any) -> str | None:
        if ref is None:
            return None
        return ref if isinstance(ref, str) else by_id.get(ref)

    out = []
    for c in columns:
        name = c["name"]
        if not name.startswith(prefix) or c.get("mask_of") is not None:
            continue
        path = tuple(unescape_key(p) for p in name[len(prefix) :].split("/"))
        out.append(_Field(path, name, name_of(c.get("mask"))))
    return out


def _seed(seed: int | None) -> int:
    """A 64-bit seed: `seed` wrapped to 64 bits, or a random one."""
    return secrets.randbits(64) if seed is None else int(seed) & 0xFFFF_FFFF_FFFF_FFFF


def _keys(keys: Sequence[str] | None) -> list[str] | None:
    return None if keys is None else [str(k) for k in keys]


def _int64(indices: Any) -> npt.NDArray[np.int64]:
    return np.ascontiguousarray(np.asarray(indices, dtype=np.int64).reshape(-1))


class EpisodeFilters(TypedDict, total=False):
    """What `select` filters on (bounds are inclusive); summaries and metrics only, except
    `where`, which is called with each remaining episode's metadata dict and keeps it if true.
    An episode whose return is NaN (a NaN reward) passes neither `min_return` nor `max_return`,
    with a warning that says how many were left out. `metrics` bounds episode metrics (see
    `Dataset.metrics`): ``{"data/logp": {"mean": (-1.0, None)}, "info/lives": {"min": (1, 1)}}``
    (inclusive, None for an open end); an episode without a value in the column passes none."""

    env_index: int | Sequence[int] | None
    complete: bool | None
    terminated: bool | None
    truncated: bool | None
    min_return: float | None
    max_return: float | None
    min_length: int | None
    max_length: int | None
    metrics: Mapping[str, Mapping[str, tuple[float | None, float | None]]] | None
    where: Callable[[dict[str, Any]], bool] | None


class _Sampling:
    """Training reads shared by a `Dataset` (all its episodes) and `Episodes` (a subset, e.g. a
    `select`): steps are numbered 0 .. `num_steps` - 1 over the episodes in order, windows of a
    given length likewise. Batches are gathered in Rust with the GIL released."""

    def _reader(self) -> _core.Dataset:
        raise NotImplementedError

    def _selection(self) -> _core.Selection | None:
        raise NotImplementedError

    @property
    def num_steps(self) -> int:
        """Transitions over these episodes (the sum of their lengths)."""
        sel = self._selection()
        return self._reader().num_steps if sel is None else sel.num_steps

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
        return self._reader().sample_transitions(int(n), _seed(seed), _keys(keys), self._selection())

    @property
    def transitions(self) -> Transitions:
        """The transitions by step number: ``transitions[i]`` (one step), ``transitions[idx]``
        (an int array, list or slice: a batch), iteration. Without `strict`, a step of a
        damaged episode raises `CorruptFileError` when asked for alone; in a batch it is
        replaced by a step drawn from the intact episodes (from its number, so the same batch
        comes back; ``episode_index`` and ``step_index`` say what was read), with a warning;
        iteration skips damaged episodes."""
        return Transitions(self)

    @property
    def steps(self) -> Transitions:
        """The same as `transitions`: ``steps[i]`` is step i (arrays, numpy scalars, no batch axis)."""
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
        return self._reader().sample_sequences(int(n), int(length), _seed(seed), pad, _keys(keys), self._selection())

    def sequences(self, length: int, *, pad: bool = False) -> Sequences:
        """The windows of `length` steps by number (see `sample_sequences`): ``len()`` and
        indexing by an int array, list or slice."""
        return Sequences(self, int(length), pad)

    def num_windows(self, length: int, *, pad: bool = False) -> int:
        """How many windows of `length` steps lie inside single episodes."""
        return self._reader().num_windows(int(length), pad, self._selection())


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
        self._step = self._reader.step

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
            return self._step(index, None, self._sel)
        if isinstance(index, _INTEGER):
            return self._step(int(index), None, self._sel)
        if isinstance(index, slice):
            return self._slice(index, None)
        try:
            return self._reader.gather_transitions(_int64(index), None, self._sel)
        except InvalidArgumentError as e:
            if "out of range" in str(e):
                raise IndexError(str(e)) from None
            raise

    def _slice(self, index: slice, keys: list[str] | None) -> Batch:
        start, stop, step = index.indices(len(self))
        if step == 1:  # consecutive steps: read in bulk, a run per episode
            return self._reader.read_transitions(start, max(start, stop), keys, self._sel)
        return self._reader.gather_transitions(np.arange(start, stop, step, dtype=np.int64), keys, self._sel)

    def gather(self, index: Any, *, keys: Sequence[str] | None = None) -> Batch:
        """Like indexing with an array or slice, with the keys wanted."""
        if isinstance(index, slice):
            return self._slice(index, _keys(keys))
        return self._reader.gather_transitions(_int64(index), _keys(keys), self._sel)

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
        wanted = _keys(keys)
        n = len(self)
        sel = self._reader.file_order(self._sel) if order == "file" else self._sel
        for start in range(0, n, size):
            yield self._reader.read_transitions(start, min(n, start + size), wanted, sel)

    def __iter__(self) -> Iterator[Batch]:
        """Every step in order, as ``transitions[i]`` gives it, read an episode (or a block of
        one) at a time. Without `strict`, an episode found damaged is skipped whole (its
        checksums are checked before its first step is given), with a `TrajcoreWarning`.

        Raises:
            CorruptFileError: with `strict`, at a damaged episode.
        """
        reader, sel = self._reader, self._sel
        members = range(reader.num_episodes) if sel is None else sel.episodes().tolist()
        lengths = reader.summaries()["length"]
        for episode in members:
            n = int(lengths[episode])
            for start in range(0, n, _ITER_BLOCK):
                steps = np.arange(start, min(n, start + _ITER_BLOCK), dtype=np.int64)
                try:
                    batch = reader.gather_windows(np.full(len(steps), episode, dtype=np.int64), steps)
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
        owner = self._owner
        try:
            return owner._reader().gather_sequences(_int64(index), self.length, self.pad, None, owner._selection())
        except InvalidArgumentError as e:
            if "out of range" in str(e):
                raise IndexError(str(e)) from None
            raise

    def __repr__(self) -> str:
        return f"<trajcore.Sequences: {len(self)} windows of {self.length} steps>"


class Dataset(_Sampling):
    """Every episode of a directory of shards (or of one shard file), memory-mapped.

    Use as a context manager or call `close`. Pickles as its path and options: a data-loader
    worker that unpickles it opens the files itself.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        strict: bool = False,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        verify: bool = False,
        mmap: bool = True,
        _exclusions: str | None = None,
    ) -> None:
        self._path = os.fspath(path)
        self._strict = strict
        self._cache_bytes = cache_bytes
        self._mmap = mmap
        self._ds: _core.Dataset | None = _core.Dataset(self._path, strict, cache_bytes, verify, _exclusions, mmap)
        self._warned = len(self._ds.problems)
        self._notices = 0
        self._recordings: dict[int, _Recording] = {}
        #: (recording, "observation"|"action") -> why its layout tree was refused
        self._layout_problems: dict[tuple[int, str], str] = {}
        self._summaries: dict[str, npt.NDArray[Any]] | None = None
        self._metrics: dict[str, dict[str, npt.NDArray[Any]]] | None = None
        for file, offset, why in self._ds.problems:
            warnings.warn(
                f"{file}: damaged at byte offset {offset} ({why}); what is intact is read",
                TrajcoreWarning,
                stacklevel=3,
            )

    # --- plumbing -------------------------------------------------------------------------

    @property
    def _core(self) -> _core.Dataset:
        if self._ds is None:
            raise TrajcoreError(f"{self._path}: the dataset is closed")
        return self._ds

    def _recording(self, index: int) -> _Recording:
        rec = self._recordings.get(index)
        if rec is None:
            meta = json.loads(self._core.meta_json(index))
            meta = meta if isinstance(meta, dict) else {}
            columns = self._core.columns(index)
            layout = meta.get("layout")
            layout = layout if isinstance(layout, dict) else {}
            names = {c["name"] for c in columns}
            trees = {}
            for which in ("observation", "action"):
                tree = layout.get(which)
                why = layout_problem(tree, names) if tree is not None else None
                trees[which] = None if why else tree
                if why:
                    self._layout_problems[(index, which)] = why
            rec = _Recording(
                meta=meta,
                observation=trees["observation"],
                action=trees["action"],
                infos=_column_fields(columns, "info/"),
                data=_column_fields(columns, "data/"),
                column_names=frozenset(c["name"] for c in columns),
            )
            self._recordings[index] = rec
        return rec

    def _summary(self) -> dict[str, npt.NDArray[Any]]:
        if self._summaries is None:
            s = self._core.summaries()
            for a in s.values():
                a.flags.writeable = False
            self._summaries = s
        return self._summaries

    def _metric_arrays(self) -> dict[str, dict[str, npt.NDArray[Any]]]:
        if self._metrics is None:
            m = self._core.metrics()
            for stats in m.values():
                for a in stats.values():
                    a.flags.writeable = False
            self._metrics = m
        return self._metrics

    def __reduce__(self) -> tuple[Any, ...]:
        return (_reopen, (self._path, self._strict, self._cache_bytes, self._core.exclusions_json(), self._mmap))

    def _reader(self) -> _CoreDataset:
        return self._core

    def _selection(self) -> _CoreSelection | None:
        return None

    # --- the dataset ----------------------------------------------------------------------

    @property
    def path(self) -> str:
        return self._path

    @property
    def shards(self) -> list[str]:
        """The shard files, in recording order."""
        return self._core.shards

    @property
    def problems(self) -> list[tuple[str, int, str]]:
        """Damage found when opening (and by ``verify=True``, with the episodes left out for
        it): (file, byte offset, what was wrong)."""
        return self._core.problems

    def timelog(self, recording: int = 0) -> list[dict[str, Any]]:
        """The writer's timelog stored in the files of `recording` (see `num_recordings`): one
        dict per second of recording, oldest first, with the fields of a recorder's
        ``stats()["timelog"]`` (seconds per stage on the writer thread: copy, encode, compress,
        write, fsync, idle; ring fill; producer waits; steps and bytes). Empty for recordings
        made with ``timelog=False`` or by a version that did not store it.

        Raises:
            InvalidArgumentError: no such recording.
            CorruptFileError: with ``strict=True``, a damaged timelog record (otherwise its
                samples are left out with a `TrajcoreWarning`).
        """
        if not 0 <= recording < self.num_recordings:
            raise InvalidArgumentError(f"no recording {recording} (the dataset has {self.num_recordings})")
        text, problems = self._core.timelog_json(recording)
        for file, offset, why in problems:
            if self._strict:
                raise CorruptFileError(f"{file}: byte offset {offset}: {why}")
            why = f"{file}: byte offset {offset}: {why}; its timelog samples are left out"
            warnings.warn(why, TrajcoreWarning, stacklevel=2)
        samples: list[dict[str, Any]] = json.loads(text)
        return samples

    @property
    def damaged_episodes(self) -> list[int]:
        """Episodes reads found damaged since opening (without `strict`): left out of sampling
        (each was announced by a `TrajcoreWarning`, or by the `CorruptFileError` of a read of
        it)."""
        return [int(e) for e in self._core.damaged_episodes()]

    @property
    def num_episodes(self) -> int:
        return self._core.num_episodes

    @property
    def num_recordings(self) -> int:
        return self._core.num_recordings

    def meta(self, recording: int = 0) -> dict[str, Any]:
        """The Meta record of a recording: metadata, layout, num_envs, autoreset_mode, user, ..."""
        return self._recording(recording).meta

    @property
    def metadata(self) -> Any:
        """The dataset metadata given to the (first) recorder; None for an empty dataset."""
        return self.meta(0).get("metadata") if self.num_recordings else None

    def _space(self, key: str) -> spaces.Space[Any] | None:
        if not self.num_recordings:
            return None
        user = self.meta(0).get("user")
        desc = user.get(key) if isinstance(user, dict) else None
        if desc is None:
            return None
        prefix, timeline = ("obs", "obs") if key == "observation_space" else ("action", "step")
        where = f"{self._path}: recording 0's Meta record"
        return rebuild_space(desc, self._core.columns(0), prefix, timeline, where)

    @property
    def observation_space(self) -> spaces.Space[Any] | None:
        """The (per-env) observation space of the first recording, rebuilt from the file."""
        return self._space("observation_space")

    @property
    def action_space(self) -> spaces.Space[Any] | None:
        """The (per-env) action space of the first recording, rebuilt from the file."""
        return self._space("action_space")

    @property
    def episodes(self) -> Episodes:
        """Every episode, in the order they ended (shards in recording order; episodes still
        running when a recorder closed come last in their shard)."""
        return Episodes(self, range(self.num_episodes))

    def __len__(self) -> int:
        return self.num_episodes

    def summaries(self) -> dict[str, npt.NDArray[Any]]:
        """One read-only array per field over all episodes, in dataset order: recording,
        env_index, length, episode_return, complete, terminated, truncated, start_ns, end_ns,
        episode_id, shard, continued, continues (see `Episode.is_part`). Read from the index:
        nothing is decompressed."""
        return dict(self._summary())

    def metrics(self) -> dict[str, dict[str, npt.NDArray[Any]]]:
        """Episode metrics: for every numeric scalar info entry and custom-data column, its
        statistics over each episode's steps, computed by the writer as it recorded (RLlib's
        per-episode ``_avg``/``_sum`` custom metrics without a callback). Read from the index:
        nothing is decompressed.

        Returns ``{name: {"count", "mean", "sum", "min", "max": array}}``, one entry per episode
        in dataset order, float64 in recording order (``count`` int64: the rows with a value).
        An episode without a value has count 0 and NaN statistics; so does a part of an episode
        that began in a shard this dataset does not hold (its stored metrics cover rows it does
        not list). A NaN value makes the sum and mean NaN; min and max skip it.

        The info columns hold the infos of the steps and of the reset, so an info entry's
        metrics count the reset's value too.
        """
        return {name: dict(stats) for name, stats in self._metric_arrays().items()}

    def select(self, **filters: Unpack[EpisodeFilters]) -> Episodes:
        """The episodes that pass every given filter (bounds are inclusive), in dataset order.

        Filters read episode summaries (and, for `where`, episode metadata) from the index only:
        no observation is decompressed. The result samples like the dataset
        (``sample_transitions``, ``sample_sequences``, ``transitions``, ``steps``) over its
        episodes only.

        Args:
            metrics: bounds on episode metrics, ``{"data/logp": {"mean": (-1.0, None)}}``
                (inclusive; None for an open end; statistics: count, mean, sum, min, max).
            where: called with each remaining episode's metadata dict; keeps it if true.

        Raises:
            InvalidArgumentError: a metric name the dataset does not have (the message lists
                those it has), an unknown statistic, or bounds that are not a pair.
        """
        return Episodes(
            self,
            self._filter(range(self.num_episodes), **filters),
        )

    def to_pandas(self, columns: Sequence[str] | None = None, *, max_values: int | None = None) -> Any:
        """Every step as a pandas DataFrame: one row per step (a transition), see
        `Episodes.to_pandas`.

        Raises:
            MissingDependencyError: pandas is not installed (an `ImportError`).
            InvalidArgumentError: a name in `columns` matches no value.
        """
        return self.episodes.to_pandas(columns, max_values=max_values)

    def summaries_frame(self) -> Any:
        """One row per episode as a pandas DataFrame, see `Episodes.summaries_frame`.

        Raises:
            MissingDependencyError: pandas is not installed (an `ImportError`).
        """
        return self.episodes.summaries_frame()

    def plot_returns(self, *, window: int | None = None) -> Any:
        """A matplotlib figure: the return of every episode, see `Episodes.plot_returns`."""
        return self.episodes.plot_returns(window=window)

    def plot_lengths(self, *, window: int | None = None) -> Any:
        """A matplotlib figure: the length of every episode, see `Episodes.plot_lengths`."""
        return self.episodes.plot_lengths(window=window)

    def plot_histograms(self) -> Any:
        """A matplotlib figure: histograms of return and length, see `Episodes.plot_histograms`."""
        return self.episodes.plot_histograms()

    def plot_metrics(self) -> Any:
        """A matplotlib figure: duration and steps per second, see `Episodes.plot_metrics`."""
        return self.episodes.plot_metrics()

    def plot_metadata(self) -> Any:
        """A matplotlib figure: numeric episode metadata, see `Episodes.plot_metadata`."""
        return self.episodes.plot_metadata()

    def _filter(
        self,
        candidates: Sequence[int],
        *,
        env_index: int | Sequence[int] | None = None,
        complete: bool | None = None,
        terminated: bool | None = None,
        truncated: bool | None = None,
        min_return: float | None = None,
        max_return: float | None = None,
        min_length: int | None = None,
        max_length: int | None = None,
        metrics: Mapping[str, Mapping[str, tuple[float | None, float | None]]] | None = None,
        where: Callable[[dict[str, Any]], bool] | None = None,
    ) -> list[int]:
        """The candidates (dataset indexes, order kept) passing every filter."""
        s = self._summary()
        keep = np.ones(self.num_episodes, dtype=np.bool_)
        if env_index is not None:
            keep &= np.isin(s["env_index"], np.atleast_1d(np.asarray(env_index)))
        for name, value in (("complete", complete), ("terminated", terminated), ("truncated", truncated)):
            if value is not None:
                keep &= s[name] == bool(value)
        if min_return is not None or max_return is not None:
            returns = s["episode_return"]
            if min_return is not None:
                keep &= returns >= min_return
            if max_return is not None:
                keep &= returns <= max_return
            # A NaN return (a NaN reward: what the env gave) passes no bound; say so.
            nan = int(np.count_nonzero(np.isnan(returns[np.asarray(candidates, dtype=np.int64)])))
            if nan:
                warnings.warn(
                    f"trajcore: {nan} episode(s) with a NaN return are left out by min_return/max_return",
                    TrajcoreWarning,
                    stacklevel=3,
                )
        if min_length is not None:
            keep &= s["length"] >= min_length
        if max_length is not None:
            keep &= s["length"] <= max_length
        chosen = np.asarray(candidates, dtype=np.int64)
        if metrics is not None:
            keep &= metric_keep(self._metric_arrays(), metrics, chosen, stacklevel=4)
        indices = chosen[keep[chosen]].tolist() if len(chosen) else []
        if where is not None:
            indices = [i for i in indices if where(self._episode_metadata(i))]
        return indices

    def refresh(self) -> int:
        """Picks up shards that grew or appeared since opening (a recorder still writing);
        returns the number of new episodes. They come after the episodes already listed, so
        episode and step numbers handed out stay valid (selections made before keep their
        episodes).

        It also checks the files already open: one truncated in place since opening is damage
        (its episodes can no longer be read: a `TrajcoreWarning`, or `CorruptFileError` with
        `strict`); one replaced (renamed over) or deleted is said with a `TrajcoreWarning`, and
        the dataset goes on reading the file it opened."""
        added = self._core.refresh()
        self._summaries = None
        self._metrics = None
        problems, notices = self._core.problems, self._core.notices
        for file, offset, why in problems[self._warned :]:
            warnings.warn(f"{file}: byte offset {offset}: {why}", TrajcoreWarning, stacklevel=2)
        for file, _, why in notices[self._notices :]:
            warnings.warn(f"{file}: {why}", TrajcoreWarning, stacklevel=2)
        self._warned, self._notices = len(problems), len(notices)
        return added

    def close(self) -> None:
        """Lets go of the memory maps (once no array read from them is alive)."""
        self._ds = None
        self._recordings.clear()
        self._summaries = None
        self._metrics = None

    def __enter__(self) -> Dataset:
        return self

    def __exit__(self, *args: object) -> None:
        self.close()

    def __repr__(self) -> str:
        if self._ds is None:
            return f"<trajcore.Dataset {self._path!r} (closed)>"
        return f"<trajcore.Dataset {self._path!r}: {self.num_episodes} episodes, {self.num_steps} steps>"

    # --- per-episode reads (used by Episode) ----------------------------------------------

    def _episode_metadata(self, index: int) -> dict[str, Any]:
        text = self._core.episode_metadata_json(index)
        value = json.loads(text) if text else {}
        return value if isinstance(value, dict) else {"value": value}

    def _read(self, index: int, column: str) -> Any:
        return self._core.read_column(index, column)

    def _optional(self, index: int, recording: int, column: str) -> Any:
        """A column of the episode, or None when its recording has no such column."""
        if column not in self._recording(recording).column_names:
            return None
        return self._read(index, column)

    def _tree(self, index: int, recording: int, which: str) -> Any:
        rec = self._recording(recording)
        tree = rec.observation if which == "observation" else rec.action
        if tree is None:
            why = self._layout_problems.get((recording, which), "it is damaged or missing")
            raise CorruptFileError(
                f"{self._path}: the {which} layout in the Meta record of recording {recording} is invalid ({why}): "
                f"episode {index}'s {which}s cannot be rebuilt"
            )
        return self._walk(index, tree)

    def _walk(self, index: int, tree: Any) -> Any:
        if "leaf" in tree:
            return self._read(index, tree["leaf"])
        if "dict" in tree:
            return {k: self._walk(index, sub) for k, sub in tree["dict"]}
        return tuple(self._walk(index, sub) for sub in tree["tuple"])

    def _fields(self, index: int, recording: int, which: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """(values, masks) of the info or custom-data columns, nested like the keys. A key never
        present in this episode is left out of both.

        Raises:
            CorruptFileError: a column name nests deeper than the recorder allows, or damage lost
                column descriptions of the recording.
        """
        rec = self._recording(recording)
        lost = self._core.schema_damage(recording)
        if lost is not None:
            # Some info or data columns (or their masks) may be among those lost: what reads
            # would be incomplete or unmasked.
            file, offset, why = lost
            raise CorruptFileError(f"{file}: corrupt at byte offset {offset}: episode {index}'s {which}: {why}")
        values: dict[str, Any] = {}
        masks: dict[str, Any] = {}
        for f in rec.infos if which == "infos" else rec.data:
            if len(f.path) > MAX_INFO_DEPTH:
                raise CorruptFileError(
                    f"{self._path}: column '{f.column}' nests {len(f.path)} levels deep; recorders write at most "
                    f"{MAX_INFO_DEPTH}"
                )
            mask = self._read(index, f.mask) if f.mask is not None else None
            if mask is not None and not np.any(mask):
                continue
            node, mask_node = values, masks
            for part in f.path[:-1]:
                child = node.setdefault(part, {})
                if not isinstance(child, dict):
                    break  # the key held a plain value at some steps and a dict at others
                node, mask_node = child, mask_node.setdefault(part, {})
            else:
                node[f.path[-1]] = self._read(index, f.column)
                if mask is not None:
                    mask_node[f.path[-1]] = mask
        return values, masks


def _row(batch: Any, t: int) -> Any:
    """Row `t` of a batch, without the batch axis (as one step reads)."""
    if isinstance(batch, dict):
        return {k: int(v[t]) if k in ("episode_index", "step_index") else _row(v, t) for k, v in batch.items()}
    if isinstance(batch, tuple):
        return tuple(_row(v, t) for v in batch)
    return batch[t]


def _with_masks(values: dict[str, Any], masks: dict[str, Any]) -> dict[str, Any]:
    """gymnasium's shape of vector infos: each key's values with its mask beside it as
    ``_key``, a nested dict with an any-present ``_key``. A recorded key named ``_key`` keeps its
    name; that mask is then only in the masks tree (`Episode.info_masks`)."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        out[key] = _with_masks(value, masks.get(key, {})) if isinstance(value, dict) else value
    for key, value in values.items():
        mask = _any_present(masks.get(key, {})) if isinstance(value, dict) else masks.get(key)
        if mask is not None and "_" + key not in values:
            out["_" + key] = mask
    return out


def _any_present(masks: dict[str, Any]) -> npt.NDArray[np.bool_] | None:
    """True where any mask below is (None without masks)."""
    combined: npt.NDArray[np.bool_] | None = None
    for mask in masks.values():
        sub = _any_present(mask) if isinstance(mask, dict) else mask
        if sub is not None:
            combined = sub.copy() if combined is None else combined | sub
    return combined


def _reopen(
    path: str, strict: bool, cache_bytes: int, exclusions: str | None = None, mmap: bool = True
) -> Dataset:
    """A pickled dataset, reopened (with the listing a verification at open left it)."""
    return Dataset(path, strict=strict, cache_bytes=cache_bytes, mmap=mmap, _exclusions=exclusions)


class Episodes(_Sampling, Sequence["Episode"]):
    """A sequence of episodes of a dataset: ``len``, iteration, int (also negative) and slice
    indexing (a slice is an `Episodes` too). It samples like a dataset, over its episodes only
    (``sample_transitions``, ``sample_sequences``, ``transitions``, ``steps``, ``num_steps``),
    and pickles as its dataset (path and options) plus the episode indexes."""

    def __init__(self, dataset: Dataset, indices: Sequence[int]) -> None:
        self._dataset = dataset
        self._indices = indices
        self._sel: _core.Selection | None = None

    def _reader(self) -> _core.Dataset:
        return self._dataset._core

    def _selection(self) -> _core.Selection | None:
        if isinstance(self._indices, range) and self._indices == range(self._dataset.num_episodes):
            return None  # every episode, in order: the dataset's own (growing) step index
        if self._sel is None:
            self._sel = self._reader().selection(_int64(self._indices))
        return self._sel

    def __reduce__(self) -> tuple[Any, ...]:
        return (Episodes, (self._dataset, [int(i) for i in self._indices]))

    def select(self, **filters: Unpack[EpisodeFilters]) -> Episodes:
        """Those of these episodes passing the filters (see `Dataset.select`), order kept."""
        return Episodes(
            self._dataset,
            self._dataset._filter(self._indices, **filters),
        )

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
            raise IndexError(f"episode index {i} out of range ({len(self._indices)} episodes)") from None
        return Episode(self._dataset, int(index))

    def __iter__(self) -> Iterator[Episode]:
        for index in self._indices:
            yield Episode(self._dataset, int(index))

    @property
    def indices(self) -> list[int]:
        """The dataset indexes of these episodes."""
        return [int(i) for i in self._indices]

    def to_pandas(self, columns: Sequence[str] | None = None, *, max_values: int | None = None) -> Any:
        """These episodes' steps as a pandas DataFrame, one row per step: ``episode`` (dataset
        index), ``env_index``, ``step`` (0 .. T-1 in its episode), then the observation before
        the step (``obs...``), the observation after it (``next_obs...``), ``action...``,
        ``reward``, ``terminated``, ``truncated``, the info the step returned (``info/...``; the
        reset's info is in no row) and the custom data recorded with it (``data/...``).

        Nested spaces and infos flatten to ``/``-joined names (``obs/pos``, ``info/episode/r``);
        an array flattens to one column per element in C order (``obs_0`` .. ``obs_3``). Values
        not given at a step (infos, custom data) are missing (``pd.NA``, nullable dtypes).

        Args:
            columns: the values wanted, by name or '/'-bounded prefix (``["obs", "reward",
                "info"]``); default: every value of at most `max_values` elements.
            max_values: arrays larger than this (default 256: images) are left out unless
                `columns` names them, with a `TrajcoreWarning` naming them (also in
                ``frame.attrs["trajcore"]["left_out"]``).

        Raises:
            MissingDependencyError: pandas is not installed (an `ImportError`).
            InvalidArgumentError: a name in `columns` matches no value.
        """
        from trajcore.formats.frames import steps_frame

        return steps_frame(self._dataset, self.indices, columns, max_values)

    def summaries_frame(self) -> Any:
        """One row per episode as a pandas DataFrame: ``episode`` (dataset index), recording,
        shard, env_index, episode_id, length, episode_return, complete, terminated, truncated,
        start_ns, end_ns, the episode metrics as ``metrics/<name>/<stat>`` (see
        `Dataset.metrics`), start_time, end_time, and the episode metadata flattened into
        ``metadata/<key>`` columns. Summaries and metrics come from the index: nothing is
        decompressed.

        Raises:
            MissingDependencyError: pandas is not installed (an `ImportError`).
        """
        from trajcore.formats.frames import summaries_frame

        return summaries_frame(self._dataset, self.indices)

    def plot_returns(self, *, window: int | None = None) -> Any:
        """A matplotlib `Figure`: each episode's return against the wall time it ended and
        against its index, one colour per sub-env (incomplete episodes as crosses), with the
        rolling mean of the complete ones over `window` episodes (default: a twentieth, 1 to 100).

        Raises:
            MissingDependencyError: matplotlib is not installed (an `ImportError`).
            InvalidArgumentError: there are no episodes.
        """
        from trajcore.plots import per_episode

        return per_episode(self, "return", window=window)

    def plot_lengths(self, *, window: int | None = None) -> Any:
        """As `plot_returns`, for the episodes' lengths."""
        from trajcore.plots import per_episode

        return per_episode(self, "length", window=window)

    def plot_histograms(self) -> Any:
        """A matplotlib `Figure`: histograms of the complete episodes' returns and lengths."""
        from trajcore.plots import histograms

        return histograms(self)

    def plot_metrics(self) -> Any:
        """A matplotlib `Figure`: each episode's duration and env steps per second."""
        from trajcore.plots import metrics

        return metrics(self)

    def plot_metadata(self) -> Any:
        """A matplotlib `Figure`: every numeric episode-metadata value against the episode
        index, one panel per key (nested keys as ``metadata/a/b``)."""
        from trajcore.plots import metadata

        return metadata(self)

    def __repr__(self) -> str:
        return f"<trajcore.Episodes: {len(self)} episodes>"


class Episode:
    """One episode of one (sub-)env. Summary fields come from the index; the arrays are read and
    decompressed on first access, then cached on the episode.

    An episode of T steps has T+1 observations and infos (the reset's first, the final last) and
    T actions, rewards, terminations, truncations and custom data rows.

    Columns stored raw (``zstd_level=None``, or `trajcore.convert` ed) come back as read-only
    views of the memory map, without a copy; they keep the file mapped while they live, even
    after the dataset is closed. Copy one (``a.copy()``) to modify it.
    """

    def __init__(self, dataset: Dataset, index: int) -> None:
        self._dataset = dataset
        self.index = index
        """Position of the episode in its dataset."""
        self._cache: dict[str, Any] = {}

    def _s(self, name: str) -> Any:
        return self._dataset._summary()[name][self.index]

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
        for name, stats in self._dataset._metric_arrays().items():
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
        return self._cached("metadata", lambda: self._dataset._episode_metadata(self.index))  # type: ignore[no-any-return]

    @property
    def observations(self) -> Any:
        """T+1 observations, nested like the observation space (dicts/tuples of arrays; a Text
        leaf is a list of str)."""
        return self._cached("observations", lambda: self._dataset._tree(self.index, self.recording, "observation"))

    @property
    def actions(self) -> Any:
        """T actions, nested like the action space."""
        return self._cached("actions", lambda: self._dataset._tree(self.index, self.recording, "action"))

    @property
    def rewards(self) -> npt.NDArray[np.float64]:
        """T rewards, float64, exactly as the env returned them."""
        return self._cached("rewards", lambda: self._dataset._read(self.index, "reward"))  # type: ignore[no-any-return]

    @property
    def terminations(self) -> npt.NDArray[np.bool_]:
        return self._cached("terminations", lambda: self._dataset._read(self.index, "terminated"))  # type: ignore[no-any-return]

    @property
    def truncations(self) -> npt.NDArray[np.bool_]:
        return self._cached("truncations", lambda: self._dataset._read(self.index, "truncated"))  # type: ignore[no-any-return]

    def _values_and_masks(self, which: str) -> tuple[dict[str, Any], dict[str, Any]]:
        return self._cached(  # type: ignore[no-any-return]
            "fields:" + which, lambda: self._dataset._fields(self.index, self.recording, which)
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
        return self._cached("infos", lambda: _with_masks(*self._values_and_masks("infos")))  # type: ignore[no-any-return]

    @property
    def info_masks(self) -> dict[str, Any]:
        """The masks of `infos` alone, nested like the keys (no ``_`` prefixes): where the env
        gave each entry."""
        return self._values_and_masks("infos")[1]

    @property
    def data(self) -> dict[str, Any]:
        """Custom per-step data (`record` / `step_data`): ``name`` -> T rows, ``_name`` -> mask."""
        return self._cached("data", lambda: _with_masks(*self._values_and_masks("data")))  # type: ignore[no-any-return]

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
            "frames", lambda: self._dataset._optional(self.index, self.recording, FRAME_COLUMN)
        )

    @property
    def frame_mask(self) -> npt.NDArray[np.bool_] | None:
        """T+1 bools: True where `frames` holds a frame. A row has none when the env was not
        rendered for it; under ``SAME_STEP`` vector autoreset, the final row of an episode that
        ended inside a step never has one (the sub-env was already reset when it could be
        rendered). None when frames were not recorded."""
        return self._cached(  # type: ignore[no-any-return]
            "frame_mask", lambda: self._dataset._optional(self.index, self.recording, FRAME_MASK)
        )

    def to_pandas(self, columns: Sequence[str] | None = None, *, max_values: int | None = None) -> Any:
        """The episode's T steps as a pandas DataFrame (columns as in `Episodes.to_pandas`).

        Raises:
            MissingDependencyError: pandas is not installed (an `ImportError`).
            InvalidArgumentError: a name in `columns` matches no value.
        """
        from trajcore.formats.frames import steps_frame

        return steps_frame(self._dataset, [self.index], columns, max_values)

    def _repr_html_(self) -> str:
        """The episode viewer in a notebook cell (`trajcore.viewer`): the frames, a slider and
        the values of each step; at most `trajcore.viewer.NOTEBOOK_MAX_BYTES` (frames are
        thinned to fit, and it says so). ``trajcore view`` writes every frame."""
        from trajcore.viewer import notebook_html

        return notebook_html(self)

    def __repr__(self) -> str:
        state = "complete" if self.complete else "incomplete"
        return (
            f"<trajcore.Episode {self.index}: env {self.env_index}, {self.length} steps, "
            f"return {self.episode_return:g}, {state}>"
        )
