"""Minari export read back with minari.load_dataset, compared value by value with what
trajcore.open reads; and the reverse, import-minari, on exported and on foreign datasets."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trajcore
from export_data import NAMES, record_single
from gymnasium import spaces
from helpers import assert_infos_equal, assert_tree_equal

minari = pytest.importorskip("minari", reason="minari is optional: Minari export needs it")
pytest.importorskip("h5py", reason="h5py is optional: Minari's HDF5 storage needs it")
pytest.importorskip("PIL", reason="Pillow is optional: Minari's storage imports it")


@pytest.fixture(autouse=True)
def minari_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Minari's local datasets root, per test (nothing is ever downloaded)."""
    root = tmp_path / "minari"
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(root))
    return root


def decoded(tree: Any) -> Any:
    """Minari's HDF5 gives str columns back as arrays of bytes: as lists of str."""
    if isinstance(tree, Mapping):
        return {k: decoded(v) for k, v in tree.items()}
    if isinstance(tree, np.ndarray) and tree.dtype.kind in "OS":
        return [v.decode() if isinstance(v, bytes) else str(v) for v in tree.tolist()]
    return tree


def stored_infos(ep: trajcore.Episode) -> dict[str, Any]:
    """What the export promises to store as infos: ep.infos, plus the custom data under
    "trajcore_data", data of step t at row t + 1 and row 0 masked."""
    infos = dict(ep.infos)
    if ep.data:
        infos["trajcore_data"] = {
            k: np.concatenate([np.zeros((1, *v.shape[1:]), v.dtype), v])
            if k[0] != "_"
            else np.concatenate([[False], v])
            for k, v in ep.data.items()
        }
    return infos


@pytest.mark.parametrize("name", NAMES)
def test_minari_load_dataset_reads_back_value_by_value(name: str, recorded: Callable[[str], Path]) -> None:
    dataset_id = f"trajcore-test/{name}-v0"
    with trajcore.open(recorded(name)) as ds:
        result = trajcore.export(ds, dataset_id, "minari")
        episodes = [ep for ep in ds.episodes if ep.length > 0]
        assert result["episodes"] == len(episodes)
        assert result["skipped"] == ds.num_episodes - len(episodes)
        loaded = minari.load_dataset(dataset_id)
        assert loaded.total_episodes == len(episodes)
        assert loaded.total_steps == ds.num_steps
        assert loaded.observation_space == ds.observation_space
        assert loaded.action_space == ds.action_space
        if name == "cartpole":
            assert loaded.env_spec.id == "CartPole-v1"
        assert loaded.storage.metadata["trajcore"]["metadata"] == ds.metadata
        metas = list(loaded.storage.get_episode_metadata(range(len(episodes))))
        for got, ep, meta in zip(loaded.iterate_episodes(), episodes, metas, strict=True):
            where = f"episode {ep.index}"
            assert_tree_equal(decoded(got.observations), ep.observations, f"{where} observations")
            assert_tree_equal(decoded(got.actions), ep.actions, f"{where} actions")
            assert_tree_equal(got.rewards, ep.rewards, f"{where} rewards")
            assert_tree_equal(got.terminations, ep.terminations, f"{where} terminations")
            assert_tree_equal(got.truncations, ep.truncations, f"{where} truncations")
            assert_infos_equal(decoded(got.infos), stored_infos(ep), f"{where} infos")
            ours = meta["trajcore"]
            assert int(ours["index"]) == ep.index and int(ours["env_index"]) == ep.env_index
            assert bool(ours["complete"]) == ep.complete
            assert float(ours["episode_return"]) == ep.episode_return
            assert json.loads(ours["metadata"]) == ep.metadata


@pytest.mark.parametrize("name", NAMES)
def test_import_minari_gives_the_trajcore_dataset_back(
    name: str, recorded: Callable[[str], Path], tmp_path: Path
) -> None:
    dataset_id = f"trajcore-test/{name}-v1"
    trajcore.export(recorded(name), dataset_id, "minari")
    result = trajcore.import_minari(dataset_id, tmp_path / "back")
    with trajcore.open(recorded(name)) as a, trajcore.open(tmp_path / "back") as b:
        originals = [ep for ep in a.episodes if ep.length > 0]
        assert result == {"episodes": len(originals), "steps": a.num_steps, "shards": b.shards}
        assert b.metadata == a.metadata
        assert b.observation_space == a.observation_space and b.action_space == a.action_space
        assert b.num_episodes == len(originals)
        for x, y in zip(originals, b.episodes, strict=True):
            where = f"episode {x.index}"
            assert_tree_equal(y.observations, x.observations, where)
            assert_tree_equal(y.actions, x.actions, where)
            assert_tree_equal(y.rewards, x.rewards, where)
            assert_tree_equal(y.terminations, x.terminations, where)
            assert_tree_equal(y.truncations, x.truncations, where)
            assert_infos_equal(y.infos, x.infos, where)
            assert_infos_equal(y.data, x.data, where)
            assert y.metadata == x.metadata, where
            assert (y.complete, y.terminated, y.truncated) == (x.complete, x.terminated, x.truncated), where
            assert y.episode_return == x.episode_return


@pytest.mark.filterwarnings("ignore::UserWarning:minari.utils")  # minari's nudges for eval_env and env_spec
def test_import_a_dataset_made_by_minari(tmp_path: Path, minari_root: Path) -> None:
    from minari.data_collector import EpisodeBuffer

    rng = np.random.default_rng(0)
    obs_space = spaces.Box(-1, 1, (3,), np.float32)
    buffers = []
    for e in range(3):
        n = 4 + e
        buffers.append(
            EpisodeBuffer(
                observations=rng.uniform(-1, 1, (n + 1, 3)).astype(np.float32),
                actions=rng.integers(0, 2, n),
                rewards=rng.normal(size=n),
                terminations=np.array([False] * (n - 1) + [True]),
                truncations=np.zeros(n, dtype=bool),
                infos={"score": np.arange(n + 1, dtype=np.float64) * e},
                seed=10 + e,
            )
        )
    made = minari.create_dataset_from_buffers(
        "foreign/made-v0",
        buffers,
        observation_space=obs_space,
        action_space=spaces.Discrete(2),
        algorithm_name="random",
        author="someone",
        author_email="someone@example.org",
        code_permalink="https://example.org/code",
        description="made by minari",
    )
    # By id, and by the dataset's directory.
    for k, source in enumerate(("foreign/made-v0", str(minari_root / "foreign" / "made-v0"))):
        dst = tmp_path / f"import{k}"
        trajcore.import_minari(source, dst)
        with trajcore.open(dst) as ds:
            assert ds.num_episodes == 3
            assert ds.metadata["minari"]["dataset_id"] == "foreign/made-v0"
            assert ds.metadata["minari"]["author"] == ["someone"]
            assert ds.metadata["minari"]["description"] == "made by minari"
            for got, want, buf in zip(ds.episodes, made.iterate_episodes(), buffers, strict=True):
                np.testing.assert_array_equal(got.observations, want.observations)
                np.testing.assert_array_equal(got.actions, want.actions)
                np.testing.assert_array_equal(got.rewards, want.rewards)
                np.testing.assert_array_equal(got.terminations, want.terminations)
                np.testing.assert_array_equal(got.infos["score"], want.infos["score"])
                assert got.infos["_score"].all()  # given at every row
                assert got.metadata["minari"]["seed"] == buf.seed
                assert got.complete and got.terminated


def test_minari_errors(recorded: Callable[[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trajcore.export(recorded("cartpole"), "tt/cp-v0", "minari")
    with pytest.raises(trajcore.InvalidArgumentError, match="already exists"):
        trajcore.export(recorded("cartpole"), "tt/cp-v0", "minari")
    trajcore.export(recorded("cartpole"), "tt/cp-v0", "minari", force=True)
    assert minari.load_dataset("tt/cp-v0").total_episodes > 0
    with pytest.raises(trajcore.InvalidArgumentError, match="Malformed dataset ID"):
        trajcore.export(recorded("cartpole"), "no version", "minari")
    with pytest.raises(trajcore.TrajcoreFileNotFoundError, match="does not download"):
        trajcore.import_minari("tt/absent-v0", tmp_path / "x")
    (tmp_path / "taken").mkdir()
    with pytest.raises(trajcore.InvalidArgumentError, match="already exists"):
        trajcore.import_minari("tt/cp-v0", tmp_path / "taken")
    slash = tmp_path / "slash"
    record_single(slash, spaces.Dict({"a/b": spaces.Discrete(2)}), spaces.Discrete(2), infos=False, episodes=1)
    with pytest.raises(trajcore.InvalidArgumentError, match="reads as a path"):
        trajcore.export(slash, "tt/slash-v0", "minari")
    monkeypatch.setitem(sys.modules, "minari", None)
    with pytest.raises(trajcore.MissingDependencyError, match="pip install minari"):
        trajcore.export(recorded("cartpole"), "tt/other-v0", "minari")
