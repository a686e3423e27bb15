"""Type stubs of the private extension `trajcore._core` (Rust, PyO3).

Users do not import this module; `trajcore` wraps it. Errors raised here are the classes of
`trajcore.errors` (`trajcore.TrajcoreError` and subclasses).
"""

from typing import Any, Literal, Self, final

import numpy as np
import numpy.typing as npt
from typing_extensions import disjoint_base

__all__ = [
    "ANNOTATION_EXTENSION",
    "FORMAT_VERSION",
    "MAX_INFO_DEPTH",
    "SHARD_EXTENSION",
    "BatchMemory",
    "Dataset",
    "MappedRows",
    "Recorder",
    "Selection",
    "__version__",
    "annotate",
    "configure_store",
    "convert",
    "escape_key",
    "layout_leaves",
    "live_store_shards",
    "num_threads",
    "recover",
    "recover_segments",
    "remote_stats",
    "unescape_key",
    "upload_file",
    "verify",
]

__version__: str
FORMAT_VERSION: tuple[int, int]
SHARD_EXTENSION: str
ANNOTATION_EXTENSION: str
MAX_INFO_DEPTH: int

@final
class Recorder:
    """The step path: one call per (vector) step copies the batch into the ring and returns.

    Args:
        path: directory that receives the shard files (created if missing).
        config_json: JSON object, see `Recorder.__init__` in rust/python/src/recorder.rs:
            num_envs (int), batched (bool: arrays carry a leading env axis),
            autoreset_mode ("next_step" | "same_step" | "disabled"),
            columns (list of {"name", "dtype", "shape", "timeline": "obs"|"step", "codec"?}
                     for observation and action leaves),
            observation, action (layout trees: {"leaf": name} | {"dict": [[key, tree], ...]}
                     | {"tuple": [tree, ...]}),
            metadata (dataset metadata, any JSON), user (any JSON stored for the Python side),
            max_shard_bytes, ring_bytes, chunk_bytes, flush_interval_s, durability
            ("flush" | "fsync_close" | "fsync_chunk" | "fsync_interval"), fsync_interval_s,
            block_when_full (bool), index_interval_bytes, timelog (bool: store the timelog in
            the file), info_codec / data_codec / frame_codec /
            flags_codec ({"delta": bool, "zstd_level": int | None, "chunk_bytes"?: int}; flags_codec
            covers reward, terminated, truncated; frame_codec the rendered frames, `render/frame`),
            upload_to (a store prefix: the shards go up there as the writer writes them, the
            recorder's path being a local staging directory),
            value_bounds ({column: {"low": [int], "high": [int], "space": str}}: the inclusive
            bounds of a discrete space's values, one pair or one per element; a value outside
            them is refused with SchemaError).
        test_no_info_plans: tests only: walk every info dict key by key, as a dict that matches
            no plan of its shape (tests record both ways and compare).

    Calls from several threads (a training thread stepping, a monitor calling `stats()` or
    `flush()`) take turns; every wait (for ring space, a flush, close, another thread's call)
    releases the GIL and checks for signals (Ctrl-C) every 20 ms. In a forked child every call
    raises `RecorderError`: the writer thread and the file stay with the parent.

    Raises:
        SchemaError: a column spec or layout is invalid.
        TrajcoreIOError: the directory cannot be created or the shard cannot be opened.
    """

    def __new__(
        cls,
        path: str,
        config_json: str,
        *,
        report_ended: bool = False,
        test_faults: str | None = None,
        test_no_info_plans: bool = False,
    ) -> Self:
        """`report_ended`: `step` returns the episodes it ended (else always None: no Python
        object is made for them). Test-only keywords: `test_faults`, for tests of failure
        handling, a JSON object of ``panic_at_step`` (the writer thread panics at that step,
        counted from 1) and ``slow_step_ms`` (it sleeps that long per step);
        `test_no_info_plans` walks every info dict key by key (tests record both ways and
        compare)."""
    def reset(
        self, observation: Any, info: dict[str, Any], mask: npt.ArrayLike | None = None, frame: Any = None
    ) -> None:
        """Starts episodes: every env (or those where `mask` is true) with this observation/info.
        `frame`: what the env rendered after the reset (one array, or for a vector recorder a
        sequence of one per sub-env or an array over them; None: no frame), column `render/frame`."""
    def step(
        self,
        action: Any,
        observation: Any,
        reward: Any,
        terminated: Any,
        truncated: Any,
        info: dict[str, Any],
        frame: Any = None,
    ) -> list[tuple[int, int, float, bool, bool]] | None:
        """Records one (vector) step; how rows become episodes follows the autoreset mode.
        `frame`: what the env rendered after the step (as for `reset`). Returns the episodes
        the step ended complete as ``(env_index, length, episode_return, terminated,
        truncated)`` in env order (what the file will hold), or None when it ended none or the
        recorder was made without `report_ended`."""
    def record(self, name: str, value: Any) -> None:
        """Custom per-step data, attached to the next `step` call (column `data/<name>`);
        checked now (`SchemaError` if it cannot be recorded)."""
    def set_episode_metadata(self, env_index: int, metadata_json: str) -> None:
        """Merges a JSON object into the metadata of an episode of `env_index`: the one that
        ended at the last step (until the next step or reset), else the running one."""
    def set_episode_defaults(self, metadata_json: str) -> None:
        """Merges a JSON object into the metadata every episode that begins after this call
        starts with, in every env; running episodes keep theirs."""
    def discard(self, env_index: int) -> None:
        """Drops an episode of `env_index` (as `set_episode_metadata` picks it); not listed."""
    def mark_start_lost(self, env_index: int) -> None:
        """The running episode of `env_index` is a part whose start is lost (a copy of a part
        listed on its own): it ends incomplete, keeping its terminated/truncated flags."""
    def abort(self, env_index: int | None = None) -> None:
        """Ends running episodes as incomplete; rows are ignored until the env ends them."""
    def flush(self, for_readers: bool = False) -> None:
        """Blocks (GIL released) until everything recorded so far is written to the file,
        running episodes listed up to it (a progress part of each). `for_readers`: only as a
        refresh in this process needs: a flush asked for every 50 ms, waiting only for one that
        covers every step 100 ms old."""
    def close(self) -> None:
        """Writes incomplete episodes, the index and the end record; idempotent."""
    @property
    def closed(self) -> bool: ...
    @property
    def shard_paths(self) -> list[str]: ...
    @property
    def num_envs(self) -> int: ...
    def stats(self) -> dict[str, Any]:
        """Counters: steps, episodes, bytes_raw, bytes_written, ring_capacity, ring_waits,
        backlog_waits, steps_not_recorded, values_not_recorded ({column: count}), timelog
        (a list of per-second dicts of the writer thread's timings, see `Recorder.stats` in
        trajcore.record.session), and recording to a store, bytes_uploaded (bytes put so far:
        segments and whole shards)."""

@disjoint_base
class Dataset:
    """A directory of shards or one shard file, memory-mapped.
    Subclassed by `trajcore.read.core_reader.CoreReader`, which unpacks reports.

    verify: check every chunk at open and leave damaged episodes out (strict: raise).
    exclusions_json: what an earlier verification left out (`exclusions_json()`), applied
    without verifying again.
    mmap: read through memory maps; else positioned reads (no SIGBUS if a file is truncated).

    Raises:
        TrajcoreFileNotFoundError: the path does not exist.
        CorruptFileError: a file is not a trajcore file (or, with strict=True, any damage).
    """

    def __new__(
        cls,
        path: str,
        strict: bool = False,
        cache_bytes: int | None = None,
        verify: bool = False,
        exclusions_json: str | None = None,
        mmap: bool = True,
        shared_fd: int | None = None,
    ) -> Self: ...
    def report(
        self,
        name: Literal[
            "listing",
            "cache_stats",
            "evicted_steps",
            "meta",
            "schema_damage",
            "timelog",
            "annotations",
            "columns",
            "column_stats",
            "shard_steps",
            "num_recordings",
            "exclusions",
            "verify",
        ],
        recording: int | None = None,
    ) -> Any:
        """What the dataset says about itself, by name (GIL released); `recording` for those
        about one recording (meta, schema_damage, timelog, columns).

        - listing: {problems (damage found at open or by a verification at open) and notices
          (shard files replaced or deleted since opening), each [file, byte offset, what];
          episodes_unlisted; shards and shard_sizes; damaged_episodes (found by reads, lenient
          mode) and evicted_episodes (rows in shards a bounded recording deleted), ascending}.
        - cache_stats: {lru_bytes (LRU bound), shared_bytes (shared store bytes), decodes
          (chunks this process decoded), shared_fd (the store's descriptor, or None)}.
        - evicted_steps: transitions the bounded recordings of this directory deleted (their
          eviction log).
        - meta: the Meta record of a recording (dataset metadata, layout, user JSON).
        - schema_damage: where damage lost descriptions of a recording's columns (so some may be
          missing from `columns`): [file, byte offset, why], or None.
        - timelog: the timelog the recording's writer stored: [samples, [file, offset, why] of
          damaged timelog records left out].
        - annotations: the annotation sidecars found: recording, name, version, per, episodes,
          path, taken, problem.
        - columns: the column specs of a recording: name, dtype, shape, timeline, mask, mask_of,
          role, codec.
        - column_stats: storage per column of each recording, from the index (nothing is
          decoded): recording, name, chunks, raw_bytes, stored_bytes.
        - shard_steps: [recording, transitions] of each shard, in `shards` order.
        - num_recordings: how many recordings the dataset holds.
        - exclusions: what a verification at open left out ({episodes: [[recording id hex,
          episode id, first obs row], ...], problems: [[file, offset, why], ...]}), or None when
          nothing was: what the constructor's `exclusions_json` takes back.
        - verify: every record checksum checked and every chunk decoded, as `verify` reports
          them (its dict), of the dataset as opened.

        Raises:
            InvalidArgumentError: an unknown name, or a recording missing or given where none is asked.
            TrajcoreIndexError: no such recording.
            TrajcoreIOError: evicted_steps of a store prefix: the store failed; verify: a store
                failed while checking.
            TrajcoreFileNotFoundError: verify of a directory without a shard.
        """
    @property
    def strict(self) -> bool: ...
    @property
    def cache_bytes(self) -> int | None: ...
    @property
    def mmap(self) -> bool: ...
    def live_selection(self) -> Selection | None:
        """The episodes sampling draws from once a bounded recording evicted some (every
        episode less `evicted_episodes`, kept up to date by `refresh`); None while none is."""
    @property
    def num_episodes(self) -> int: ...
    def summaries(self) -> dict[str, npt.NDArray[Any]]:
        """One array per field over all episodes, in dataset order: recording, env_index, length,
        episode_return, complete, terminated, truncated, start_ns, end_ns, episode_id, shard."""
    def metrics(self) -> dict[str, dict[str, npt.NDArray[Any]]]:
        """Episode metrics by column name: {name: {count, sum, mean, min, max}}, one entry per
        episode in dataset order (count 0 and NaN where an episode has no value)."""
    def pin_episode(self, episode: int) -> object:
        """Keeps the shards episode `episode` reads open while the returned pin lives (a shard
        a bounded recording deleted is let go of at the first refresh after which no pin holds
        it)."""
    def episode_metadata_json(self, episode: int) -> str: ...
    def read_column(self, episode: int, column: str) -> np.ndarray | list[str]:
        """All rows of one column of one episode: T+1 rows for observation-timeline columns,
        T for step-timeline ones; str columns come back as a list of str. Rows stored raw in
        one chunk come back as a read-only view of the memory map (its base a `MappedRows`)."""
    def read_layout(self, episode: int, which: str) -> Any:
        """An episode's observations or actions (`which`: "observation" or "action"): its leaf
        columns, each as `read_column` gives it, nested in dicts and tuples like the recorded space.

        Raises:
            CorruptFileError: the recording's layout of them is missing or invalid.
            TrajcoreIndexError: an episode index out of range.
        """
    def refresh(self) -> tuple[int, int, int]:
        """Re-reads shards that grew or appeared: (new episodes (appended: step numbers handed
        out stay valid), problems, notices), the last two as many as `report("listing")` has."""
    def all_episodes(self) -> Selection:
        """Every episode, as the dataset grows (a refresh adds to them): the selection the reads
        over all of them are methods of."""
    def selection(self, episodes: npt.NDArray[np.int64]) -> Selection:
        """A subset of episodes (dataset indexes, negative from the end) to sample from.

        Raises:
            TrajcoreIndexError: an episode index out of range.
        """

@final
class Selection:
    """Episodes of a dataset (every one, or a fixed subset) with their own step and window
    numbering, and the training reads over them (GIL released). Holds its dataset."""

    @property
    def num_steps(self) -> int: ...
    def episodes(self) -> npt.NDArray[np.int64]:
        """The dataset indexes of its episodes, in order."""
    def __len__(self) -> int: ...
    def file_order(self) -> Selection:
        """Its episodes in file order: grouped by recording, then by sub-env, each one's in the
        order recorded."""
    def num_windows(self, length: int, pad: bool = False) -> int:
        """Windows of `length` steps inside single episodes (with `pad`, each shorter one counts once)."""
    def sample(
        self, n: int, seed: int, length: int | None = None, pad: bool = False, keys: list[str] | None = None
    ) -> dict[str, Any]:
        """`n` windows drawn uniformly with replacement from a 64-bit `seed` (GIL released):
        transitions (`length=None`: arrays [n, ...], episode_index and step_index int64 [n]), or
        windows of `length` steps inside single episodes (arrays [n, length, ...], episode_index
        [n], step_index [n, length], and with `pad` a bool mask [n, length]).

        keys: output keys (default: observations, actions, rewards, next_observations,
        terminations, truncations) or column names.

        Raises:
            InvalidArgumentError: no step (or window) to sample. SchemaError: a key names no column.
            CorruptFileError: a chunk is damaged.
        """
    def gather(
        self,
        which: npt.NDArray[np.int64] | tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | range,
        length: int | None = None,
        pad: bool = False,
        keys: list[str] | None = None,
    ) -> dict[str, Any]:
        """The windows `which` names: `length=None` reads transitions, else windows of `length`
        steps (padded with `pad`). `which` is an array of numbers (negative from the end): step
        numbers for transitions, else window numbers (0 .. num_windows(length, pad) - 1); or
        (dataset episodes, first steps), two arrays; or a `range` of steps, read in bulk (a run
        per episode; the batch their numbers give, damage included).

        Raises:
            TrajcoreIndexError: a number out of range, or the range runs past the steps.
            InvalidArgumentError: the pairs' arrays differ in length.
        """
    def step(self, index: int, keys: list[str] | None = None) -> dict[str, Any]:
        """One step by number, without a batch axis (numpy scalars for scalar columns, str for str
        columns; `episode_index` and `step_index` as int).

        Raises:
            TrajcoreIndexError: the step number is out of range.
        """
    def frames_of(self, column: str, max_bytes: int) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64], int]:
        """(frames as bytes, frame ids, stack): a column's frames each once, in stored order, and
        `stack` ids per observation row (an episode's T + 1 rows after another's, in its order);
        a column that is no frame stack gives stack 1, a frame a row.

        Raises:
            InvalidArgumentError: they would take more than `max_bytes` (naming the size).
            SchemaError: no such column, or a str one. CorruptFileError: a chunk is damaged.
        """

@final
class BatchMemory:
    """The owner (numpy base) of a large batch's memory, handed back to a small pool (at most
    2 blocks, 256 MB) for the next large batch when the arrays are gone."""

@final
class MappedRows:
    """The owner (numpy base) of arrays viewing raw rows of a memory map; keeps the map alive."""

def convert(src: Dataset, dst: str, options_json: str) -> dict[str, Any]:
    """Rewrites `src` (or the given episodes) into the new directory `dst` with other codecs.
    options_json: an object, each entry optional (null: the default): codecs ({"<column,
    '/'-bounded prefix or 'default'>": {"delta": bool, "zstd_level": int | null}}),
    chunk_bytes, max_shard_bytes, episodes (dataset indexes), keys (the values kept: column
    names or '/'-bounded prefixes; reward and flags always).

    Raises:
        InvalidArgumentError: dst is not empty, an episode is out of range, bad options.
    """

def annotate(
    path: str,
    name: str,
    dtype: str,
    shape: list[int],
    per_episode: bool,
    episodes: list[int],
    values: list[bytes],
) -> list[str]:
    """Writes annotation `name` of the dataset directory `path` (GIL released): `values[i]`
    holds the rows of episode `episodes[i]`, little-endian `dtype` of `shape`. Returns the
    sidecar files written.

    Raises:
        InvalidArgumentError: a bad name or dtype, values of another length than their episode,
            an episode given twice, a name the recording records itself, not a local directory.
        TrajcoreIndexError: an episode the dataset does not have.
    """

def verify(path: str) -> dict[str, Any]:
    """Checks every record checksum and decodes every chunk (GIL released): damage (a list of
    {file, offset, why, episodes: [episode indexes]}), shards, bytes, records, chunks,
    decoded_bytes.

    Raises:
        TrajcoreFileNotFoundError: the path does not exist.
    """

def recover(src: str, dst: str, left_out: list[tuple[int, str]]) -> dict[str, Any]:
    """Writes what of `src` still reads into the new directory `dst`: whole, cut, lost, steps,
    shards, recordings_lost ([[file, offset, why]]), source (a `verify` dict without seconds).

    Raises:
        InvalidArgumentError: dst is not empty.
    """

def num_threads(n: int | None = None) -> int:
    """The bound on the threads one batched read may use, after setting it to `n` when given
    (0: the default, cores up to 8)."""

def escape_key(key: str) -> str:
    """A key as one component of a column name: '%' -> %25, '/' -> %2F and a leading '_' -> %5F."""

def unescape_key(part: str) -> str:
    """The key of a column name component (the inverse of `escape_key`)."""

def layout_leaves(layout_json: str) -> list[list[Any]]:
    """The leaves of a layout tree (JSON) in the tree's order: [path, column name], each path
    item a dict key (str) or a tuple position (int).

    Raises:
        InvalidArgumentError: the tree is malformed or nests deeper than 64 levels; the message
            is only what is wrong.
    """

def configure_store(url: str, options: list[tuple[str, str]]) -> None:
    """Sets the options of the object store `url` is in, over the environment's (see the core's
    `remote::configure`)."""

def remote_stats() -> tuple[int, int, int, int]:
    """(requests, bytes fetched, chunk bytes fetched for, bytes cached) from object storage by
    this process so far."""

def upload_file(local: str, url: str) -> None:
    """Puts the local file `local` as the object `url` (GIL released; see the core's
    `segments::upload`)."""

def recover_segments(url: str, staging: str, skip_live: bool) -> list[dict[str, Any]]:
    """Makes shards of the segments under the prefix `url`, through files in `staging` (GIL
    released; see the core's `segments::recover_segments`): a list of dicts. With `skip_live`,
    the segments of recordings holding a fresh lease there are left alone."""

def live_store_shards(url: str, names: list[str]) -> list[bool]:
    """Which of the shards `names` under the store prefix `url` belong to a recording that holds
    a fresh lease there (GIL released; see the core's `capacity::of_live_recordings`)."""
