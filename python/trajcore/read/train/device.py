"""A transition replay held in a torch device's memory (`trajcore.torch.DeviceTransitions`).

A frame-stack observation column (``(4, 84, 84)`` from `FrameStackObservation`) is held as its
frames, each once, plus ``stack`` frame ids per observation row: the core hands both over as its
chunks store them (`_core.Selection.frames_of`), without rebuilding a stack. Observations and
next observations of a transition are rows ``r`` and ``r + 1`` of their episode's observation
rows, so they share the frames and the ids. Other columns are plain tensors, one row a step.
A batch is index arithmetic and gathers on the device: no host-to-device copy per batch.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch

import trajcore
from trajcore import _core
from trajcore.errors import InvalidArgumentError
from trajcore.read.train.transitions import Batch, _Sampling, int64

__all__ = ["DeviceTransitions"]

_DEFAULT_KEYS = ("observations", "actions", "rewards", "next_observations", "terminations", "truncations")
# Output keys read from the observation rows: (key, row offset of a step's row).
_OBSERVATION_KEYS = {"observations": 0, "next_observations": 1}
_INDEX_KEYS = ("episode_index", "step_index")


def _map(fn: Callable[..., Any], tree: Any, *others: Any) -> Any:
    """`fn` over the leaves of nested dicts and tuples (and the same places of `others`)."""
    if isinstance(tree, dict):
        return {k: _map(fn, v, *(o[k] for o in others)) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(_map(fn, *parts) for parts in zip(tree, *others, strict=True))
    return fn(tree, *others)


def free_bytes(device: torch.device) -> int | None:
    """Memory free on `device`: CUDA's own count, the host's available memory for the CPU,
    `None` where it cannot be asked."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    if device.type == "cpu":
        try:
            with open("/proc/meminfo") as f:
                for line in f:
                    if line.startswith("MemAvailable:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    return None


class _Frames:
    """One observation column: its frames ``(F, *frame)`` and ``(rows, stack)`` frame ids."""

    def __init__(self, frames: torch.Tensor, ids: torch.Tensor, shape: tuple[int, ...]) -> None:
        self.frames, self.ids, self.shape = frames, ids, shape

    def take(self, rows: torch.Tensor) -> torch.Tensor:
        ids = self.ids.index_select(0, rows).reshape(-1)
        return self.frames.index_select(0, ids).reshape(len(rows), *self.shape)

    @property
    def nbytes(self) -> int:
        return self.frames.nbytes + self.ids.nbytes


class DeviceTransitions:
    """Every transition of `source` (a path, `Dataset` or `Episodes`) held on `device`, sampled
    there: ``sample(256)`` gives the batch `Dataset.sample_transitions` gives (same keys,
    nesting, dtypes and values for the same steps) as tensors on `device`.

    Memory: each distinct frame of a frame-stack observation once (about a quarter of the
    stacks' bytes for stacks of 4) plus 8 bytes per frame id (``stack`` per observation row:
    the T + 1 rows of each episode), other observation columns one row per observation row,
    the other keys one row per step, and 8 bytes per step for its observation row. `nbytes`
    says what it holds.

    Args:
        device: where the tensors live (``"cuda"``, ``"cpu"``, ...).
        keys: as `Dataset.sample_transitions` (default: observations, actions, rewards,
            next_observations, terminations, truncations); fixed-size columns only.
        max_bytes: refuse to hold more than this (besides the device's free memory).

    Raises:
        InvalidArgumentError: no step; more than `max_bytes` or the device's free memory
            (the message names the size); a key whose values are str.
        SchemaError: a key names no column. CorruptFileError: a chunk is damaged (select the
            intact episodes first).
    """

    def __init__(
        self,
        source: str | os.PathLike[str] | _Sampling,
        device: str | torch.device = "cpu",
        *,
        keys: Sequence[str] | None = None,
        max_bytes: int | None = None,
    ) -> None:
        src = source if isinstance(source, _Sampling) else trajcore.open(source)
        reader, sel = src._reader(), src._selection()
        self.device = torch.device(device)
        self.num_steps = n = src.num_steps
        if n == 0:
            raise InvalidArgumentError("no transition to hold: the episodes hold no step")
        self.keys = list(_DEFAULT_KEYS if keys is None else keys)
        limits = [b for b in (max_bytes, free_bytes(self.device)) if b is not None]
        self._budget = min(limits) if limits else 2**63 - 1
        self._held = 0

        lengths = reader.summaries()["length"][sel.episodes()].astype(np.int64)
        # A step's observation row: its number plus the final observation rows of the episodes
        # before its own.
        rows = np.arange(n, dtype=np.int64) + np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
        self._rows = self._put(torch.from_numpy(rows), "observation rows")

        rest = [k for k in self.keys if k not in _OBSERVATION_KEYS]
        observed = any(k in _OBSERVATION_KEYS for k in self.keys)
        probe = src.transitions.gather([0], keys=rest + (["observations"] if observed else []))
        # episode_index and step_index come with every batch.
        self._columns = self._read_steps(src, rest, {k: probe[k] for k in [*rest, *_INDEX_KEYS]})
        if observed:
            # The core's leaves of the layout, in its order: the order a batch's leaves nest in.
            layout = reader.report("meta", 0)["layout"]["observation"]
            columns = iter([column for _, column in _core.layout_leaves(json.dumps(layout))])
            self._observations = _map(
                lambda leaf: self._read_frames(sel, next(columns), leaf, len(lengths) + n),
                probe["observations"],
            )

    def _count(self, size: int, what: str) -> None:
        """Counts `size` more bytes held, refused past the budget."""
        if self._held + size > self._budget:
            raise InvalidArgumentError(
                f"{what} take {size} bytes: {self._held + size} in all, more than the "
                f"{self._budget} allowed on {self.device} (max_bytes or its free memory)"
            )
        self._held += size

    def _put(self, tensor: torch.Tensor, what: str) -> torch.Tensor:
        """`tensor` on the device, counted against the budget first."""
        self._count(tensor.nbytes, what)
        return tensor.to(self.device)

    def _read_steps(self, src: _Sampling, keys: list[str], probe: dict[str, Any]) -> dict[str, Any]:
        """The step columns of `keys` (and the indexes), read in bulk into device tensors."""
        n = self.num_steps

        def empty(leaf: Any) -> torch.Tensor:
            if not isinstance(leaf, np.ndarray):
                raise InvalidArgumentError("str values cannot be held on a device; leave their key out")
            self._count(n * leaf.nbytes // len(leaf), f"{n} steps of a {leaf.dtype} {leaf.shape[1:]} column")
            return torch.empty((n, *leaf.shape[1:]), dtype=torch.from_numpy(leaf[:0]).dtype, device=self.device)

        out = _map(empty, probe)
        start = 0
        for block in src.transitions.blocks(keys=keys):
            span = slice(start, start + len(block["step_index"]))
            _map(lambda held, part, span=span: held[span].copy_(torch.from_numpy(part)), out, block)
            start = span.stop
        return dict(out)

    def _read_frames(self, sel: _core.Selection, column: str, probe: np.ndarray, rows: int) -> _Frames:
        """Observation column `column` as its frames and frame ids on the device."""
        try:
            frames, ids, stack = sel.frames_of(column, max(0, self._budget - self._held))
        except InvalidArgumentError as e:
            raise InvalidArgumentError(
                f"{e}: what is left of the {self._budget} bytes allowed on {self.device} (max_bytes or its "
                f"free memory) after {self._held} for the other columns"
            ) from None
        shape = probe.shape[1:]
        if len(ids) != rows * stack:
            raise InvalidArgumentError(f"column '{column}': {len(ids) // stack} observation rows, not {rows}")
        frame_shape = shape[1:] if stack > 1 else shape
        frames = frames.view(probe.dtype).reshape(-1, *frame_shape)
        return _Frames(
            self._put(torch.from_numpy(frames), f"column '{column}': its frames"),
            self._put(torch.from_numpy(ids.reshape(-1, stack)), f"column '{column}': its frame ids"),
            shape,
        )

    @property
    def nbytes(self) -> int:
        """The device memory held."""
        return self._held

    def __len__(self) -> int:
        return self.num_steps

    def gather(self, index: Any) -> Batch:
        """The transitions with these step numbers (a tensor, array or list of ints; negative
        from the end) as tensors on the device. The numbers of a tensor already on the device are
        not checked against the range (that would wait for the device)."""
        if isinstance(index, torch.Tensor) and index.device == self.device:
            steps = index.long().reshape(-1)
            steps = torch.where(steps < 0, steps + self.num_steps, steps)
        else:
            numbers = int64(index.cpu().numpy() if isinstance(index, torch.Tensor) else index)
            bad = (numbers < -self.num_steps) | (numbers >= self.num_steps)
            if bad.any():
                raise IndexError(f"step {int(numbers[bad][0])} is out of range ({self.num_steps} steps)")
            steps = torch.from_numpy(numbers % self.num_steps).to(self.device)
        return self._take(steps)

    def _take(self, steps: torch.Tensor) -> Batch:
        """The batch of device tensor `steps` (numbers in range)."""
        rows = self._rows.index_select(0, steps)
        out: Batch = {}
        for key in self.keys:
            if key in _OBSERVATION_KEYS:
                at = rows + _OBSERVATION_KEYS[key]
                out[key] = _map(lambda held, at=at: held.take(at), self._observations)
            else:
                out[key] = _map(lambda t: t.index_select(0, steps), self._columns[key])
        for key in _INDEX_KEYS:
            out[key] = self._columns[key].index_select(0, steps)
        return out

    def sample(self, batch_size: int, generator: torch.Generator | None = None) -> Batch:
        """`batch_size` transitions drawn uniformly with replacement, on the device (a
        `generator` must live on the same device)."""
        return self._take(torch.randint(0, self.num_steps, (int(batch_size),), device=self.device, generator=generator))

    def batches(
        self, batch_size: int, *, batches: int | None = None, generator: torch.Generator | None = None
    ) -> Iterator[Batch]:
        """`sample` again and again: endless, or `batches` long."""
        k = 0
        while batches is None or k < batches:
            yield self.sample(batch_size, generator)
            k += 1

    def __repr__(self) -> str:
        return f"<trajcore.torch.DeviceTransitions: {self.num_steps} steps, {self._held} bytes on {self.device}>"
