"""PyTorch datasets over trajcore datasets, for `torch.utils.data.DataLoader`.

Importing this module needs torch; nothing else in trajcore does.

- `TransitionDataset` / `SequenceDataset`: map-style, item i = transition i / window i of the
  dataset (or of a selection of its episodes). Indexed with a list of indexes they return the
  whole batch from one gather in Rust; `loader` sets a DataLoader up that way.
- `TransitionStream` / `SequenceStream`: iterable, endless or `batches` long, each batch drawn
  reproducibly from a seed (each worker and epoch draws its own).

With ``num_workers > 0`` each worker gets the dataset by fork (the memory maps are shared) or
by pickling (spawn: the dataset pickles as its path and options, plus episode indexes for a
selection, and reopens in the worker). A worker bounds trajcore's gather threads to 1, since
the workers are the parallelism; trajcore keeps no thread pool that a fork would break.

Batches are dicts like `Dataset.sample_transitions` gives, with numpy arrays turned into
tensors (without a copy); str leaves stay lists of str.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

try:
    import torch
    from torch.utils.data import BatchSampler, DataLoader, RandomSampler, SequentialSampler, get_worker_info
    from torch.utils.data import Dataset as _TorchDataset
    from torch.utils.data import IterableDataset as _TorchIterable
except ImportError as e:  # pragma: no cover - exercised only without torch
    raise ImportError("trajcore.torch needs PyTorch (pip install torch)") from e

import numpy as np

import trajcore
from trajcore.read.dataset import Dataset
from trajcore.read.episodes import Episodes
from trajcore.read.train.mix import Mixture
from trajcore.read.train.transitions import Batch, _Sampling

__all__ = ["SequenceDataset", "SequenceStream", "TransitionDataset", "TransitionStream", "loader", "to_tensors"]

Source = str | os.PathLike[str] | Dataset | Episodes
# What a stream draws from: a source, or several mixed (`trajcore.mix`).
StreamSource = Source | Mixture

_configured_pid: int | None = None


def _in_worker() -> None:
    """In a data-loader worker: one gather thread per worker (once per process)."""
    global _configured_pid
    if _configured_pid != os.getpid() and get_worker_info() is not None:
        trajcore.set_num_threads(1)
        _configured_pid = os.getpid()


def _open(source: Source) -> _Sampling:
    if isinstance(source, Dataset | Episodes):
        return source
    return trajcore.open(source)


def _open_stream(source: StreamSource) -> _Sampling | Mixture:
    return source if isinstance(source, Mixture) else _open(source)


def to_tensors(value: Any) -> Any:
    """numpy arrays (and numpy scalars) in a nested batch as tensors, sharing memory."""
    if isinstance(value, dict):
        return {k: to_tensors(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(to_tensors(v) for v in value)
    if isinstance(value, np.ndarray) and value.dtype.kind in "US":
        return value.tolist()  # text (a mixture's "source"): torch has no str tensors
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value) if value.flags.writeable else torch.as_tensor(value.copy())
    if isinstance(value, np.generic):
        return torch.as_tensor(value)
    return value


class _MapStyle(_TorchDataset[Any]):  # type: ignore[misc, unused-ignore]
    def __init__(self, source: Source, keys: Sequence[str] | None) -> None:
        self.source = _open(source)
        self.keys = None if keys is None else list(keys)

    def _batch(self, index: Any, single: bool = False) -> Any:
        raise NotImplementedError

    def __getitem__(self, index: Any) -> Any:
        """An int: one item (numpy values; `default_collate` stacks them). A list / array of
        ints (a `BatchSampler` as the sampler, ``batch_size=None``): the batch, as tensors."""
        _in_worker()
        if isinstance(index, int | np.integer):
            return self._batch(np.array([int(index)]), single=True)
        return to_tensors(self._batch(np.asarray(index, dtype=np.int64)))


def _first(batch: Any) -> Any:
    """Item 0 of a batch, without the batch axis."""
    if isinstance(batch, dict):
        return {k: _first(v) for k, v in batch.items()}
    if isinstance(batch, tuple):
        return tuple(_first(v) for v in batch)
    return batch[0]


class TransitionDataset(_MapStyle):
    """Map-style: item i is transition i of `source` (a path, `Dataset` or `Episodes`).

    Args:
        keys: as `Dataset.sample_transitions`.
    """

    def __init__(self, source: Source, *, keys: Sequence[str] | None = None) -> None:
        super().__init__(source, keys)

    def __len__(self) -> int:
        return self.source.num_steps

    def _batch(self, index: Any, single: bool = False) -> Any:
        batch = self.source.transitions.gather(index, keys=self.keys)
        return _first(batch) if single else batch


class SequenceDataset(_MapStyle):
    """Map-style: item i is window i of `length` steps inside one episode (see
    `Dataset.sequences`); with `pad`, shorter episodes count once, padded, with a ``mask``."""

    def __init__(self, source: Source, length: int, *, pad: bool = False, keys: Sequence[str] | None = None) -> None:
        super().__init__(source, keys)
        self.length = int(length)
        self.pad = pad

    def __len__(self) -> int:
        return self.source.num_windows(self.length, pad=self.pad)

    def _batch(self, index: Any, single: bool = False) -> Any:
        batch = self.source._selection().gather(index, self.length, self.pad, self.keys)
        return _first(batch) if single else batch


class _Stream(_TorchIterable[Any]):  # type: ignore[misc, unused-ignore]
    def __init__(self, source: _Sampling | Mixture, batch_size: int, seed: int | None, batches: int | None) -> None:
        self.source = source
        self.batch_size = int(batch_size)
        self.seed = seed
        self.batches = batches
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Draws the batches of epoch `epoch` next (as `DistributedSampler.set_epoch`). Workers
        get a copy of the stream when an epoch's iteration starts, so with ``num_workers > 0``
        call this before each epoch to draw new batches; in-process iteration moves on by
        itself."""
        self.epoch = int(epoch)

    def _draw(self, seed: int) -> Batch:
        raise NotImplementedError

    def __iter__(self) -> Iterator[Any]:
        """Batches drawn from seeds derived from (seed, epoch, worker): reproducible, and
        different across workers and epochs. With `batches`, the workers share them out. With
        ``seed=None`` the seed comes from torch's (the worker's seed, or torch's generator)."""
        _in_worker()
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        epoch = self.epoch
        self.epoch += 1
        if self.seed is None:
            base = info.seed if info is not None else int(torch.randint(0, 2**62, ()).item())
            sequence = np.random.SeedSequence([base & 0xFFFF_FFFF_FFFF_FFFF])
        else:
            sequence = np.random.SeedSequence([self.seed & 0xFFFF_FFFF_FFFF_FFFF, epoch, worker])
        seeds = sequence.generate_state(1, dtype=np.uint64)
        mine = None if self.batches is None else len(range(worker, self.batches, workers))
        k = 0
        while mine is None or k < mine:
            yield to_tensors(self._draw(int(seeds[0]) + k))
            k += 1


class TransitionStream(_Stream):
    """Iterable: batches of `batch_size` transitions sampled uniformly with replacement (from
    a `trajcore.mix` mixture: each batch with its sources' exact shares, ``source`` as a list
    of str).

    Args:
        batches: batches per epoch over all workers (None: endless).
        seed: the stream's seed (epochs and workers derive theirs from it); None: from torch.
    """

    def __init__(
        self,
        source: StreamSource,
        batch_size: int,
        *,
        seed: int | None = 0,
        batches: int | None = None,
        keys: Sequence[str] | None = None,
    ) -> None:
        super().__init__(_open_stream(source), batch_size, seed, batches)
        self.keys = None if keys is None else list(keys)

    def _draw(self, seed: int) -> Batch:
        return self.source.sample_transitions(self.batch_size, seed, keys=self.keys)


class SequenceStream(_Stream):
    """Iterable: batches of `batch_size` windows of `length` steps (see `sample_sequences`)."""

    def __init__(
        self,
        source: Source,
        batch_size: int,
        length: int,
        *,
        pad: bool = False,
        seed: int | None = 0,
        batches: int | None = None,
        keys: Sequence[str] | None = None,
    ) -> None:
        self.sequences = _open(source)
        super().__init__(self.sequences, batch_size, seed, batches)
        self.length = int(length)
        self.pad = pad
        self.keys = None if keys is None else list(keys)

    def _draw(self, seed: int) -> Batch:
        return self.sequences.sample_sequences(self.batch_size, self.length, seed, pad=self.pad, keys=self.keys)


def loader(
    dataset: TransitionDataset | SequenceDataset,
    batch_size: int,
    *,
    shuffle: bool = True,
    drop_last: bool = False,
    generator: torch.Generator | None = None,
    **kwargs: Any,
) -> DataLoader[Any]:
    """A DataLoader fetching each batch with one gather (a `BatchSampler` as its sampler).

    Other keyword arguments go to `DataLoader` (num_workers, multiprocessing_context, ...).
    """
    base = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
    sampler = BatchSampler(base, batch_size, drop_last)
    return DataLoader(dataset, batch_size=None, sampler=sampler, **kwargs)


from trajcore.read.train.device import DeviceTransitions  # noqa: E402  (needs the torch imported above)

__all__ += ["DeviceTransitions"]
