"""Reading recordings back: `trajcore.open` -> `Dataset` (its `Episodes`, each an `Episode`;
its `transitions`). The dataset opens the core's reader and hands its `DatasetReads` to its
episodes; the episode, the episodes and the training reads live in their own modules."""

from __future__ import annotations

import inspect
import multiprocessing.context
import multiprocessing.reduction
import os
import warnings
from collections.abc import Callable, Mapping
from typing import Any, ParamSpec, Unpack, cast

import numpy.typing as npt
from gymnasium import spaces

from trajcore import _core, _live
from trajcore._store import configure
from trajcore.errors import CorruptFileError, InvalidArgumentError, TrajcoreFileNotFoundError, TrajcoreWarning
from trajcore.read.core_reader import CoreReader
from trajcore.read.episode import Episode
from trajcore.read.episodes import Episodes
from trajcore.read.multiagent.agents import agents_of
from trajcore.read.multiagent.env_episodes import EnvEpisodes
from trajcore.read.reads import DatasetReads
from trajcore.read.records.meta import rebuild_space
from trajcore.read.records.provenance import recording_provenance
from trajcore.read.select.filters import EpisodeFilters, select_indices
from trajcore.read.train.transitions import _Sampling

__all__ = ["Dataset", "members", "open"]

DEFAULT_CACHE_BYTES = None

# Aliases for annotations inside `Dataset`, whose `_core` property shadows the module there.
_CoreDataset = _core.Dataset
_CoreSelection = _core.Selection

P = ParamSpec("P")


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
        cache_bytes: int | None = DEFAULT_CACHE_BYTES,
        verify: bool = False,
        mmap: bool = True,
        storage_options: Mapping[str, str] | None = None,
        _exclusions: str | None = None,
        _shared_fd: int | None = None,
    ) -> None:
        self._path = os.fspath(path)
        self._strict = strict
        self._cache_bytes = cache_bytes
        self._mmap = mmap
        self._storage_options = dict(storage_options) if storage_options else None
        configure(self._path, self._storage_options)
        core = CoreReader(self._path, strict, cache_bytes, verify, _exclusions, mmap, _shared_fd)
        # What its episodes read through (see `trajcore.read.reads`).
        self._reads = DatasetReads(self._path, core)
        problems = core.report("listing")["problems"]
        self._warned = len(problems)
        self._notices = 0
        # Where this process's recorders writing into the directory are registered (`_live`).
        self._live_key = _live.key(self._path)
        for file, offset, why in problems:
            warnings.warn(
                f"{file}: damaged at byte offset {offset} ({why}); what is intact is read",
                TrajcoreWarning,
                stacklevel=3,
            )

    # --- plumbing -------------------------------------------------------------------------

    @property
    def _core(self) -> CoreReader:
        return self._reads.core

    @property
    def cache_info(self) -> dict[str, int]:
        """How decoded chunks are kept: ``lru_bytes`` (this process's cache bound),
        ``shared_bytes`` (the store every process reading this dataset shares; 0 when there is
        none) and ``decodes`` (chunks this process decompressed so far)."""
        stats = self._core.report("cache_stats")
        return {k: int(stats[k]) for k in ("lru_bytes", "shared_bytes", "decodes")}

    def __reduce__(self) -> tuple[Any, ...]:
        options = {
            "strict": self._strict,
            "cache_bytes": self._cache_bytes,
            "mmap": self._mmap,
            "storage_options": self._storage_options,
            "_exclusions": self._core.exclusions_json(),
        }
        fd = self._core.report("cache_stats")["shared_fd"]
        # Pickled for a process multiprocessing is starting (a spawned data-loader worker): the
        # shared decoded chunks go with it. Plain pickles reopen without them.
        spawning = fd is not None and multiprocessing.context.get_spawning_popen() is not None
        return (_reopen, (self._path, options, multiprocessing.reduction.DupFd(fd) if spawning else None))

    def _reader(self) -> _CoreDataset:
        return self._core

    def _selection(self) -> _CoreSelection:
        # The episodes sampling draws from: all, less those a bounded recording evicted.
        live = self._core.live_selection()
        return self._reads.every if live is None else live

    # --- the dataset ----------------------------------------------------------------------

    @property
    def path(self) -> str:
        return self._path

    @property
    def shards(self) -> list[str]:
        """The shard files, in recording order."""
        return cast(list[str], self._core.report("listing")["shards"])

    @property
    def shard_sizes(self) -> list[int]:
        """Each shard's size in bytes, in `shards` order (as its store lists it, for a URL)."""
        return cast(list[int], self._core.report("listing")["shard_sizes"])

    @property
    def evicted_steps(self) -> int:
        """Transitions the bounded recordings (``capacity_steps``) of this directory (or store
        prefix) deleted so far, read from their eviction log (``trajcore-evictions.json`` in the
        directory; under a prefix, each recording's own log object, added up) when asked:
        another process's recording counts too (docs/replay-buffer.md).

        Raises:
            TrajcoreIOError: for a prefix, the store failed (naming the URL); the next call asks again.
        """
        return int(self._core.report("evicted_steps"))

    @property
    def evicted_episodes(self) -> list[int]:
        """Episodes with steps in shards a bounded recording deleted since this dataset opened
        them (found by `refresh`), and episodes a refresh listed while they ran that were then
        discarded: still readable through `episodes` (the dataset reads the files it opened),
        but left out of sampling, `num_steps`, `transitions` and `select`."""
        return cast(list[int], self._core.report("listing")["evicted_episodes"])

    @property
    def problems(self) -> list[tuple[str, int, str]]:
        """Damage found when opening (and by ``verify=True``, with the episodes left out for
        it): (file, byte offset, what was wrong)."""
        return [tuple(p) for p in self._core.report("listing")["problems"]]

    @property
    def episodes_unlisted(self) -> int:
        """Episodes the `problems` took out of the listing (damaged Episode records, as their own
        headers count them, and episodes whose rows a damaged record took): lost, and not among
        `episodes`."""
        return int(self._core.report("listing")["episodes_unlisted"])

    def timelog(self, recording: int = 0) -> list[dict[str, Any]]:
        """The writer's timelog stored in the files of `recording` (see `num_recordings`): one
        dict per second of recording, oldest first, with the fields of a recorder's
        ``stats()["timelog"]`` (seconds per stage on the writer thread: copy, encode, compress,
        write, fsync, idle; ring fill; producer waits; ``steps``, vector steps: one step of every
        sub-env; bytes). Empty for recordings made with ``timelog=False`` or by a version that
        did not store it.

        Raises:
            InvalidArgumentError: no such recording.
            CorruptFileError: with ``strict=True``, a damaged timelog record (otherwise its
                samples are left out with a `TrajcoreWarning`).
        """
        if not 0 <= recording < self.num_recordings:
            raise InvalidArgumentError(f"no recording {recording} (the dataset has {self.num_recordings})")
        samples: list[dict[str, Any]]
        samples, problems = self._core.report("timelog", recording)
        for file, offset, why in problems:
            if self._strict:
                raise CorruptFileError(f"{file}: byte offset {offset}: {why}")
            why = f"{file}: byte offset {offset}: {why}; its timelog samples are left out"
            warnings.warn(why, TrajcoreWarning, stacklevel=2)
        return samples

    @property
    def damaged_episodes(self) -> list[int]:
        """Episodes reads found damaged since opening (without `strict`): left out of sampling
        (each was announced by a `TrajcoreWarning`, or by the `CorruptFileError` of a read of
        it)."""
        return cast(list[int], self._core.report("listing")["damaged_episodes"])

    @property
    def num_episodes(self) -> int:
        return self._core.num_episodes

    @property
    def num_recordings(self) -> int:
        return self._core.num_recordings

    def meta(self, recording: int = 0) -> dict[str, Any]:
        """The Meta record of a recording: metadata, layout, num_envs, autoreset_mode, user, ..."""
        return self._reads.meta(recording)

    @property
    def provenance(self) -> list[dict[str, Any]]:
        """Where each recording came from, in recording order (docs/provenance.md): the env's
        spec and wrapper chain, the vector env, the host, the versions, the command line and the
        git commit, as far as each recorder gathered them (empty for recordings made without)."""
        return [recording_provenance(self._reads, r) for r in range(self.num_recordings)]

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
        return dict(self._reads.summary())

    def _summary(self) -> dict[str, npt.NDArray[Any]]:
        """`summaries` without the copy of the dict (its arrays are read-only)."""
        return self._reads.summary()

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
        return {name: dict(stats) for name, stats in self._reads.metric_arrays().items()}

    def select(self, **filters: Unpack[EpisodeFilters]) -> Episodes:
        """The episodes that pass every given filter (bounds are inclusive), in dataset order.

        Filters read episode summaries (and, for `where`, episode metadata) from the index only:
        no observation is decompressed. The result samples like the dataset
        (``sample_transitions``, ``sample_sequences``, ``transitions``) over its
        episodes only.

        Args:
            metrics: bounds on episode metrics, ``{"data/logp": {"mean": (-1.0, None)}}``
                (inclusive; None for an open end; statistics: count, mean, sum, min, max).
            where: called with each remaining episode's metadata dict; keeps it if true.

        Raises:
            InvalidArgumentError: an unknown filter (the message lists them), a metric name the
                dataset does not have (the message lists those it has), an unknown statistic,
                or bounds that are not a pair.
        """
        return Episodes(self, select_indices(self._reads, self._sampled(), filters))

    def _sampled(self) -> range | list[int]:
        """The episodes sampling draws from: all, less those evicted (`evicted_episodes`)."""
        live = self._core.live_selection()
        return range(self.num_episodes) if live is None else [int(e) for e in live.episodes()]

    def refresh(self) -> int:
        """Picks up shards that grew or appeared since opening (a recorder still writing);
        returns the number of new episodes. A recorder of this process writing into this
        directory is asked to flush first (every 50 ms, waited for only as the 100 ms promise
        needs), listing the steps of its running episodes too (incomplete, `Episode.is_part`;
        each is listed whole in the same place once it ends): see docs/replay-buffer.md. They
        come after the episodes already listed, so episode numbers handed out stay valid
        (selections made before keep their episodes).
        The episodes listed are those a fresh open of the same files lists: an episode listed
        while it went on over a shard rollover grows in place once its end is read (the same
        index, its first steps unchanged; global step numbers after it move on by as many
        steps). A record the recorder is still writing is not read yet, and is not damage.

        It also checks the files already open: one truncated in place since opening is damage
        (its episodes can no longer be read: a `TrajcoreWarning`, or `CorruptFileError` with
        `strict`; a closed shard's change in place is said at most 50 ms after it happened, so
        that a refresh at every training step costs what it finds); one replaced (renamed over)
        or deleted is said with a `TrajcoreWarning`, and the dataset goes on reading the file it
        opened. A shard a bounded recording
        (``capacity_steps``) deleted is expected: no warning; its episodes leave sampling
        (`evicted_episodes`) and stay readable."""
        _live.flush_recorders(self._live_key)  # a recorder of this process writing here: its rows now
        added, problems, notices = self._core.refresh()
        self._reads.forget()
        if (problems, notices) == (self._warned, self._notices):
            return added  # nothing to say (the listing costs as much as the dataset)
        listing = self._core.report("listing")
        problems, notices = listing["problems"], listing["notices"]
        for file, offset, why in problems[self._warned :]:
            warnings.warn(f"{file}: byte offset {offset}: {why}", TrajcoreWarning, stacklevel=2)
        for file, _, why in notices[self._notices :]:
            warnings.warn(f"{file}: {why}", TrajcoreWarning, stacklevel=2)
        self._warned, self._notices = len(problems), len(notices)
        return added

    def close(self) -> None:
        """Lets go of the memory maps (once no array read from them is alive)."""
        self._reads.close()

    def __enter__(self) -> Dataset:
        return self

    def __exit__(self, *args: object) -> None:
        self.close()

    def __repr__(self) -> str:
        if self._reads.closed:
            return f"<trajcore.Dataset {self._path!r} (closed)>"
        return f"<trajcore.Dataset {self._path!r}: {self.num_episodes} episodes, {self.num_steps} steps>"

    @property
    def agents(self) -> list[str]:
        """The agents of a multi-agent dataset, in recording order (empty for single-agent data):
        ``select(agent=...)`` picks their episodes (see `trajcore.read.multiagent.agents`)."""
        return agents_of(self._reads)

    @property
    def env_episodes(self) -> EnvEpisodes:
        """The env episodes of a multi-agent dataset, each its agents aligned on the env's steps
        (`trajcore.read.multiagent.env_episodes.EnvEpisode`)."""
        return EnvEpisodes(self, range(self.num_episodes))


def _with_options_of(
    constructor: Callable[P, Dataset],
) -> Callable[[Callable[..., Dataset]], Callable[P, Dataset]]:
    """Gives the function it decorates the options of `constructor`, declared once there: mypy
    checks calls against them, help() shows them with their defaults (less the private ones,
    named with a leading underscore), and a misspelt one is a `TypeError`."""

    def shared(opener: Callable[..., Dataset]) -> Callable[P, Dataset]:
        options = inspect.signature(constructor)
        public = [p for p in options.parameters.values() if not p.name.startswith("_")]
        returns = inspect.signature(opener).return_annotation
        cast(Any, opener).__signature__ = options.replace(parameters=public, return_annotation=returns)
        return opener

    return shared


@_with_options_of(Dataset)
def open(path: str | os.PathLike[str], **options: Any) -> Dataset:
    """Opens a directory of shards (every recording in it) or one shard file.

    `path` may be a URL: ``s3://bucket/prefix`` (every shard under the prefix, or one
    ``.trj`` object), ``http(s)://host/path/shard.trj`` (read-only), or ``file://``. Data in
    object storage is read with range requests as reads need it, never downloaded whole (see
    docs/object-storage.md).

    Opening reads the index, not the data: damage inside chunk data is found by the first read
    that needs it (or by `verify`). Without `strict`, a read that finds it leaves the damaged
    episodes out of sampling and goes on, with a `TrajcoreWarning`.

    Args:
        path: the directory a recorder wrote, or one shard file.
        strict: raise `CorruptFileError` on any damage instead of warning and reading what is
            intact.
        cache_bytes: bound of the cache of decompressed chunks (frame stacks are held as
            their frames, each frame once: a stack of 4 frames costs a quarter of its bytes).
            None (the default): the whole dataset's decompressed chunks when they take at most
            a quarter of the memory available at open, else that quarter, never below 256 MiB;
            when the whole dataset fits, one copy is shared by every process that reads it
            (data-loader workers, forked or spawned). See docs/reading.md.
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
        storage_options: for a URL, options of its store over those the environment gives
            (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``,
            ``AWS_ENDPOINT_URL``, ``AWS_ALLOW_HTTP``, ...): ``{"endpoint": ...,
            "aws_access_key_id": ..., "timeout": "30s", "max_retries": "3"}``. Kept for the
            process (every later open of the same bucket or host uses them) and pickled with
            the dataset, so data-loader workers use them too.

    Raises:
        TrajcoreFileNotFoundError: `path` does not exist.
        CorruptFileError: a file is not a trajcore file (or, with `strict`, any damage).
        TrajcoreIOError: the store failed (refused the credentials, could not be reached,
            timed out after its retries); the message names the URL and why.
        InvalidArgumentError: an unknown storage option or a bad value.
    """
    return Dataset(path, **options)


def members(source: Dataset | Episodes | Episode) -> tuple[Dataset, list[int]]:
    """The dataset of `source` (a dataset, some of its episodes, or one) and the indexes of the
    episodes it holds: what the functions over any of them read (`trajcore.to_pandas`, the
    plots, the exports)."""
    if isinstance(source, Dataset):
        return source, list(range(source.num_episodes))
    # Episodes hold their dataset typed by what they read of it (`EpisodeSource`); only a
    # `Dataset` makes them.
    dataset = cast(Dataset, source._dataset)
    return dataset, source.indices if isinstance(source, Episodes) else [source.index]


def _reopen(path: str, options: dict[str, Any], shared: Any) -> Dataset:
    """A pickled dataset, reopened with its options (among them the listing a verification at
    open left it, and its store's options) and the shared decoded chunks of the process that
    pickled it, if passed."""
    return Dataset(path, **options, _shared_fd=None if shared is None else shared.detach())


def holds_shards(url: str) -> bool:
    """Whether the prefix `url` already holds a dataset's shards (damage in them is not this
    question's concern). Errors: `TrajcoreIOError`, the store failed."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            Dataset(url).close()
    except TrajcoreFileNotFoundError:
        return False
    return True
