"""`trajcore.torch` with `torch.utils.data.DataLoader`: map-style and iterable datasets, in the
main process and in worker processes (fork and spawn), against `Dataset` reads."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import trajcore
from gymnasium import spaces
from helpers import SpaceEnv, assert_tree_equal

torch = pytest.importorskip("torch", reason="torch is not installed (trajcore.torch is optional)")
from torch.utils.data import DataLoader  # noqa: E402
from trajcore.torch import (  # noqa: E402
    SequenceDataset,
    SequenceStream,
    TransitionDataset,
    TransitionStream,
    loader,
)

OBS = spaces.Dict({"pos": spaces.Box(-1, 1, (2,), np.float32), "grid": spaces.Box(0, 255, (3, 3), np.uint8)})


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> trajcore.Dataset:
    path = tmp_path_factory.mktemp("torch") / "ds"
    rec = trajcore.RecordEpisodes(SpaceEnv(OBS, max_steps=9, p_terminate=0.1), path, chunk_bytes=512)
    rec.reset(seed=0)
    for _ in range(400):
        _, _, term, trunc, _ = rec.step(rec.action_space.sample())
        if term or trunc:
            rec.reset()
    rec.close()
    return trajcore.open(path)


def numpy_tree(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: numpy_tree(v) for k, v in value.items()}
    if isinstance(value, tuple | list) and value and isinstance(value[0], torch.Tensor):
        return type(value)(numpy_tree(v) for v in value)
    return value.numpy() if isinstance(value, torch.Tensor) else value


def concat(batches: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in batches[0]:
        if isinstance(batches[0][key], dict):
            out[key] = concat([b[key] for b in batches])
        else:
            out[key] = np.concatenate([numpy_tree(b[key]) for b in batches])
    return out


@pytest.mark.parametrize(("workers", "context"), [(0, None), (2, "fork"), (2, "spawn")])
def test_map_style_batches_equal_dataset_reads(ds: trajcore.Dataset, workers: int, context: str | None) -> None:
    data = TransitionDataset(ds)
    assert len(data) == ds.num_steps
    dl = loader(data, 64, shuffle=False, num_workers=workers, multiprocessing_context=context)
    batches = list(dl)
    assert isinstance(batches[0]["observations"]["pos"], torch.Tensor)
    assert batches[0]["observations"]["pos"].shape == (64, 2)
    assert_tree_equal(concat(batches), ds.transitions[np.arange(ds.num_steps)])
    # Shuffled: every step exactly once.
    seen = concat(list(loader(data, 50, shuffle=True, num_workers=workers, multiprocessing_context=context)))
    pairs = seen["episode_index"] * 1000 + seen["step_index"]
    assert sorted(pairs.tolist()) == sorted(
        (
            ds.transitions[np.arange(ds.num_steps)]["episode_index"] * 1000
            + np.concatenate([np.arange(ep.length) for ep in ds.episodes])
        ).tolist()
    )


def test_per_item_access_with_default_collate(ds: trajcore.Dataset) -> None:
    dl = DataLoader(TransitionDataset(ds.select(complete=True)), batch_size=16, num_workers=2)
    first = next(iter(dl))
    want = ds.select(complete=True).transitions[np.arange(16)]
    assert_tree_equal(numpy_tree(first), want)


def test_sequences_map_style(ds: trajcore.Dataset) -> None:
    data = SequenceDataset(ds, 4, pad=True)
    assert len(data) == ds.num_windows(4, pad=True)
    batch = next(iter(loader(data, 8, shuffle=False, num_workers=2)))
    assert batch["observations"]["grid"].shape == (8, 4, 3, 3) and batch["mask"].dtype == torch.bool
    assert_tree_equal(numpy_tree(batch), ds.sequences(4, pad=True)[np.arange(8)])


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_streams_are_reproducible_and_split_between_workers(ds: trajcore.Dataset, context: str) -> None:
    stream = TransitionStream(ds, 32, seed=5, batches=6)
    dl = DataLoader(stream, batch_size=None, num_workers=2, multiprocessing_context=context)
    first = [numpy_tree(b) for b in dl]
    assert len(first) == 6
    again = [
        numpy_tree(b)
        for b in DataLoader(
            TransitionStream(ds, 32, seed=5, batches=6), batch_size=None, num_workers=2, multiprocessing_context=context
        )
    ]
    for a, b in zip(first, again, strict=True):
        assert_tree_equal(a, b)
    keys = {tuple((b["episode_index"] * 1000 + b["step_index"]).tolist()) for b in first}
    assert len(keys) == 6, "workers and batches draw different samples"
    for b in first:
        e, t = int(b["episode_index"][0]), int(b["step_index"][0])
        assert b["rewards"][0] == ds.episodes[e].rewards[t]
    stream.set_epoch(1)
    second_epoch = [numpy_tree(b) for b in dl]
    assert not np.array_equal(second_epoch[0]["episode_index"], first[0]["episode_index"])
    # In-process iteration moves to the next epoch by itself.
    solo = TransitionStream(ds, 8, seed=5, batches=1)
    assert not np.array_equal(next(iter(solo))["step_index"], next(iter(solo))["step_index"])


def test_sequence_stream(ds: trajcore.Dataset) -> None:
    batch = next(iter(SequenceStream(ds.select(min_length=5), 4, 5, seed=1)))
    assert batch["rewards"].shape == (4, 5)
    lengths = ds.summaries()["length"]
    assert (lengths[batch["episode_index"].numpy()] >= 5).all()
