"""`TrajcoreDatasource`: a trajcore dataset as a Ray Data `Datasource` (behind
`trajcore.ray.read_transitions` and `trajcore.ray.read_episodes`).

The read is planned when the datasource is made (the dataset is opened once, here, so a bad path
or a bad column name fails at once; a later read of the same unchanged files reuses the plan):
which episodes, which leaves, and the keys that let each task find its episodes again. Ray then
asks for read tasks: one per shard at least, more for a shard with more steps than a task should
read (`trajcore.ray._plan`); each task opens the directory in its worker and yields blocks of
numpy columns (`trajcore.ray._blocks`).

A dataset in a store (``s3://bucket/prefix``) is read the same way: the tasks carry the store's
options (a worker process has none of the driver's), and a worker opens the prefix once for the
tasks it runs (a listing and the shards' indexes), then fetches the chunks its ranges need.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from ray.data.block import Block, BlockAccessor, BlockMetadata
from ray.data.context import DataContext
from ray.data.datasource import Datasource, ReadTask

from trajcore._core import ANNOTATION_EXTENSION, SHARD_EXTENSION
from trajcore._store import is_store_url
from trajcore.errors import InvalidArgumentError
from trajcore.formats._columns import choose
from trajcore.formats._read import pass_cache_bytes, plan_of, recordings_of, row_bytes
from trajcore.formats.summaries import SUMMARY_FIELDS
from trajcore.ray._blocks import EPISODE_LEFT_OUT, Kind, ReadSpec, column_names, read_batches
from trajcore.ray._plan import Keys, TaskPlan, key_arrays, plan_tasks
from trajcore.read.dataset import Dataset, members
from trajcore.read.episodes import Episodes
from trajcore.read.multiagent.agents import agent_names

__all__ = ["TrajcoreDatasource"]

_TASK_BLOCKS = 4
"""A read task reads at most about this many of Ray Data's target blocks (then another task
takes over the rest of its shard): enough work per task, and fine enough to spread a big shard."""

_DEFAULT_BLOCK_BYTES = 128 << 20

TASKS_PER_CPU = 1
"""Read tasks per CPU of the cluster when the caller names no number (`default_tasks`)."""

MIN_TASK_BYTES = 32 << 20
"""The least a read task reads (in memory) when the caller names no number of tasks: Ray's own
choice (about one task per MiB, 100 for a 1.5M-step CartPole dataset) costs each task Ray's
scheduling, tens of milliseconds, next to a bulk read of 5M steps a second."""


class TrajcoreDatasource(Datasource):  # type: ignore[misc]  # ray has no type stubs
    """A trajcore dataset (or a selection of its episodes) for `ray.data.read_datasource`.

    Args:
        source: a dataset path (a directory of shards or one shard file), a `Dataset`, or
            `Episodes` (``ds.select(...)``): only those episodes are read.
        kind: ``"transitions"``: a row per step (``obs`` and ``next_obs`` beside each other);
            ``"episodes"``: a row per episode, each cell holding the episode's whole column.
        columns: the leaves wanted, by name or '/'-bounded prefix (``["obs", "action",
            "reward"]``); default all. The index columns (and for episodes the summaries) are
            always there.
        strict: open the dataset with ``strict=True`` (damage raises instead of warning).
        storage_options: for a URL, options of its store over those of the environment (see
            `trajcore.open`), handed to every read task; a `Dataset` opened with options
            carries its own.

    Raises:
        TrajcoreFileNotFoundError: the path does not exist.
        InvalidArgumentError: an unknown kind, `columns` naming no leaf, recordings of other
            observation or action columns in one dataset.
        SchemaError: an info or custom-data key has other dtypes or shapes in two recordings.
    """

    def __init__(
        self,
        source: str | os.PathLike[str] | Dataset | Episodes,
        *,
        kind: Kind = "transitions",
        columns: Iterable[str] | None = None,
        strict: bool = False,
        storage_options: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__()
        if kind not in ("transitions", "episodes"):
            raise InvalidArgumentError(f"kind must be 'transitions' or 'episodes', got {kind!r}")
        wanted = None if columns is None else tuple(columns)
        if isinstance(source, Episodes | Dataset):
            self._planned = _Planned.of(source, kind, wanted, strict)
        else:
            self._planned = _planned_path(os.fspath(source), kind, wanted, strict, storage_options)
        self._spec = self._planned.spec
        self._tasks: dict[tuple[int, int], list[TaskPlan]] = {}

    @property
    def columns(self) -> list[str]:
        """The columns of the rows this datasource gives, in order."""
        return list(self._planned.columns)

    def get_name(self) -> str:
        return "Trajcore" + self._spec.kind.capitalize()

    def estimate_inmemory_data_size(self) -> int:
        return int(self._planned.episodes.length.sum()) * self._planned.row_bytes

    def default_tasks(self) -> int:
        """The number of read tasks `read_transitions` asks for when the caller names none:
        `TASKS_PER_CPU` per CPU of the cluster (of this machine before `ray.init`), fewer for a
        small read (each reads at least `MIN_TASK_BYTES`); a shard still gets its own."""
        import ray

        cpus = int(ray.cluster_resources().get("CPU", 1)) if ray.is_initialized() else os.cpu_count() or 1
        wanted = -(-self.estimate_inmemory_data_size() // MIN_TASK_BYTES)
        return max(1, min(TASKS_PER_CPU * cpus, wanted))

    def get_read_tasks(
        self, parallelism: int, per_task_row_limit: int | None = None, data_context: DataContext | None = None
    ) -> list[ReadTask]:
        block_bytes = (data_context or DataContext.get_current()).target_max_block_size or _DEFAULT_BLOCK_BYTES
        row_bytes = self._planned.row_bytes
        block_steps = max(1, block_bytes // row_bytes)
        spec = dataclasses.replace(self._spec, block_steps=block_steps)
        # Ray Data asks again for the same parallelism (to size its plan, then to read).
        planned = self._tasks.get((parallelism, block_steps))
        if planned is None:
            planned = plan_tasks(self._planned.episodes, parallelism, block_steps * _TASK_BLOCKS)
            self._tasks[(parallelism, block_steps)] = planned
        tasks = []
        for task in planned:
            rows = task.steps if spec.kind == "transitions" else len(task.episodes)
            metadata = BlockMetadata(
                num_rows=rows,
                size_bytes=int(task.steps * row_bytes),
                input_files=[_shard_file(spec.path, task.shard)],
                exec_stats=None,
            )
            tasks.append(ReadTask(_reader(spec, task), metadata, per_task_row_limit=per_task_row_limit))
        return tasks


@dataclasses.dataclass(frozen=True)
class _Planned:
    """What a datasource plans from the opened dataset: the episodes to read (their keys), the
    spec every task shares, the row size and the column names."""

    episodes: Keys
    spec: ReadSpec
    row_bytes: int
    columns: tuple[str, ...]

    @classmethod
    def of(
        cls, source: Dataset | Episodes, kind: Kind, wanted: tuple[str, ...] | None, strict: bool, token: str = ""
    ) -> _Planned:
        """The plan of a read of `source` (`token`: of the files it was opened from, else of
        its shards now)."""
        ds, indices = (members(source)[0], list(source.indices)) if isinstance(source, Episodes) else (source, None)
        plan = plan_of(ds, indices)
        leaves, columns = plan.leaves, None if wanted is None else list(wanted)
        if kind == "episodes":
            # An episode's rows hold its observations whole, and its step flags are its
            # summary's (False but at the last step): neither next_obs nor flag leaves.
            leaves = tuple(lf for lf in leaves if lf.group not in EPISODE_LEFT_OUT)
            columns = None if columns is None else [c for c in columns if c not in SUMMARY_FIELDS]
        chosen, _ = choose(leaves, columns, 1 << 62)
        shard_names = [os.path.basename(p) for p in ds.shards]
        options = ds._storage_options
        summary = ds._reads.summary()
        keys = key_arrays(shard_names, summary)
        metrics = tuple(ds.metrics()) if kind == "episodes" else ()
        spec = ReadSpec(
            path=ds.path,
            strict=ds._strict or strict,
            token=token or dataset_token(ds),
            kind=kind,
            leaves=tuple(chosen),
            block_steps=1,  # set by get_read_tasks, from Ray Data's block size
            metrics=metrics,
            cache_bytes=pass_cache_bytes(ds._core.column_stats(), summary["recording"], summary["env_index"]),
            recordings=recordings_of(ds, indices),
            storage_options=tuple(sorted(options.items())) if options else (),
        )
        return cls(
            episodes=keys if indices is None else keys.take(np.asarray(indices, dtype=np.int64)),
            spec=spec,
            row_bytes=row_bytes(chosen),
            columns=tuple(column_names(kind, chosen, metrics, agents=agent_names(ds._reads) is not None)),
        )


_PLANNED: OrderedDict[tuple[str, bool, str, Kind, tuple[str, ...] | None], _Planned] = OrderedDict()
_PLANNED_LOCK = threading.Lock()
_KEEP_PLANNED = 2  # plans of paths the driver keeps for later reads of the same files


def _planned_path(
    path: str, kind: Kind, wanted: tuple[str, ...] | None, strict: bool, storage_options: Mapping[str, str] | None
) -> _Planned:
    """The plan of a read of the dataset at `path`, made once while its files stay as they are
    (`files_of`, `files_token`): opening lists every episode of every shard, which for a large
    dataset costs as much as a read task's share of the read, and an epoch loop reads the same
    files again and again. Workers key what they opened on the same token. A store's objects
    are known from its listing, so a URL is opened first (again: the process's cache holds what
    it fetched, and a listing is one request) and its token is that of the objects listed."""
    store = is_store_url(path)
    ds = Dataset(path, strict=strict, storage_options=storage_options) if store else None
    try:
        token = dataset_token(ds) if ds is not None else files_token(files_of(path))
        key = (path if store else os.path.abspath(path), strict, token, kind, wanted)
        with _PLANNED_LOCK:
            planned = _PLANNED.get(key)
            if planned is not None:
                _PLANNED.move_to_end(key)
                return planned
        if ds is None:
            ds = Dataset(path, strict=strict)
        planned = _Planned.of(ds, kind, wanted, strict, token)
    finally:
        if ds is not None:
            ds.close()
    with _PLANNED_LOCK:
        _PLANNED[key] = planned
        while len(_PLANNED) > _KEEP_PLANNED:
            _PLANNED.popitem(last=False)
    return planned


def files_of(path: str) -> list[str]:
    """The files a dataset at `path` may open: the shard file itself, or the files with a
    shard's or an annotation sidecar's extension in the directory, in name order (a superset of
    `Dataset.shards`: any of them changing may change what the dataset lists or reads)."""
    if not os.path.isdir(path):
        return [path]
    suffixes = ("." + SHARD_EXTENSION, "." + ANNOTATION_EXTENSION)
    with os.scandir(path) as entries:
        return sorted(e.path for e in entries if e.name.endswith(suffixes) and e.is_file())


def files_token(shards: Iterable[str]) -> str:
    """Names the shard files a read was planned over (name, size, modification time): reads of
    unchanged files share the dataset a worker process opened for an earlier one (opening and
    listing cost about as much as a small read), and any change makes workers open it again.
    A file gone since (stat fails) gives a token of its own."""
    digest = hashlib.blake2b(digest_size=16)
    try:
        for path in shards:
            st = os.stat(path)
            digest.update(f"{os.path.basename(path)}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    except OSError:
        return uuid.uuid4().hex
    return digest.hexdigest()


def dataset_token(ds: Dataset) -> str:
    """`files_token` of an opened dataset's shards; in a store, of the objects its listing gave
    (name and size: a store's objects are replaced whole, and a reader of a URL reads them as
    listed when it opened)."""
    if not is_store_url(ds.path):
        return files_token(ds.shards)
    digest = hashlib.blake2b(digest_size=16)
    for url, size in zip(ds.shards, ds.shard_sizes, strict=True):
        digest.update(f"{url}\0{size}\0".encode())
    return digest.hexdigest()


def _shard_file(path: str, shard: str) -> str:
    """The file (or object) of `shard` in the dataset at `path`, for Ray's metadata."""
    if is_store_url(path):
        return path if path.endswith(f".{SHARD_EXTENSION}") else f"{path.rstrip('/')}/{shard}"
    return os.path.join(path, shard) if os.path.isdir(path) else path


def _reader(spec: ReadSpec, task: TaskPlan) -> Callable[[], Iterator[Block]]:
    # A function, not a `functools.partial`: Ray names a task's read function by `__name__`.
    def read() -> Iterator[Block]:
        for columns in read_batches(spec, task):
            yield arrow_block(columns)

    return read


def arrow_block(columns: dict[str, npt.NDArray[Any]]) -> Block:
    """The Arrow block `BlockAccessor.batch_to_block` makes of numpy columns, the same types,
    made faster: a 1-D number or bool column goes straight to `pyarrow.array` (Ray's conversion
    infers its type element by element first, most of a CartPole task's time); the others
    (tensors, str) through Ray's."""
    direct = {k: v for k, v in columns.items() if v.ndim == 1 and v.dtype.kind in "biuf"}
    rest = {k: v for k, v in columns.items() if k not in direct}
    converted = BlockAccessor.batch_to_block(rest) if rest else pa.table({})
    arrays = {k: pa.array(v) if k in direct else converted.column(k) for k, v in columns.items()}
    return pa.table(arrays)
