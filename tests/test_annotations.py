"""Annotations (`trajcore.annotate`): a column added beside a recorded dataset, read by every read
path as custom data, without a byte of the shards changing; later versions replace earlier ones;
bad annotations are refused by name; damaged sidecars are named."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import trajcore
from trajcore.tools.annotate import annotations_of


def record_cartpole(path: Path, steps: int = 300, **options: Any) -> None:
    envs = gym.make_vec("CartPole-v1", num_envs=4, vectorization_mode="sync")
    envs = trajcore.RecordVectorEpisodes(envs, path, **options)
    envs.reset(seed=0)
    envs.action_space.seed(0)
    for _ in range(steps):
        envs.step(envs.action_space.sample())
    envs.close()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("annotations") / "cp"
    record_cartpole(path)
    return path


@pytest.fixture
def cp(recorded: Path, tmp_path: Path) -> Path:
    """A fresh copy of the recording (tests annotate it)."""
    return Path(shutil.copytree(recorded, tmp_path / "cp"))


def hashes(path: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.glob("*.trj"))}


def scores(ds: trajcore.Dataset) -> list[np.ndarray]:
    """Per-step values that say which episode and step they belong to."""
    return [(np.arange(ep.length) + 1000 * i).astype(np.float32) for i, ep in enumerate(ds.episodes)]


def expected(values: list[np.ndarray], episodes: Any, steps: Any) -> np.ndarray:
    return np.array([values[e][s] for e, s in zip(np.ravel(episodes), np.ravel(steps), strict=True)])


def test_every_read_path_sees_the_column_and_no_shard_byte_changes(cp: Path, tmp_path: Path) -> None:
    before = hashes(cp)
    ds = trajcore.open(cp)
    values = scores(ds)
    labels = [bool(ep.terminated) for ep in ds.episodes]
    written = trajcore.annotate(ds, "score", values)
    trajcore.annotate(ds, "success", labels)  # one value per episode: on each of its steps
    assert [Path(p).suffix for p in written] == [".trja"]
    assert hashes(cp) == before

    # Episodes (the open dataset was refreshed), with the mask of custom data.
    for i, ep in enumerate(ds.episodes):
        np.testing.assert_array_equal(ep.data["score"], values[i])
        assert ep.data["_score"].all()
        np.testing.assert_array_equal(ep.data["success"], np.full(ep.length, labels[i]))
    # Sampling: transitions and sequences.
    b = ds.sample_transitions(500, seed=1, keys=["rewards", "data/score", "data/_score"])
    np.testing.assert_array_equal(b["data/score"], expected(values, b["episode_index"], b["step_index"]))
    assert b["data/_score"].all()
    s = ds.sample_sequences(40, 5, seed=2, keys=["data/score"])
    episodes = np.repeat(s["episode_index"], 5)
    np.testing.assert_array_equal(s["data/score"].ravel(), expected(values, episodes, s["step_index"]))
    # Exports: pandas, CSV, Parquet, JSON Lines.
    frame = trajcore.to_pandas(ds)
    np.testing.assert_array_equal(frame["data/score"], expected(values, frame["episode"], frame["step"]))
    pd = pytest.importorskip("pandas")
    trajcore.export(ds, tmp_path / "x.csv")
    trajcore.export(ds, tmp_path / "x.parquet")
    csv = pd.read_csv(tmp_path / "x.csv")
    np.testing.assert_array_equal(csv["data/score"], expected(values, csv["episode"], csv["step"]))
    assert list(csv["data/success"]) == [labels[e] for e in csv["episode"]]
    parquet = pd.read_parquet(tmp_path / "x.parquet")  # custom data nests under "data"
    got = [d["score"] for d in parquet["data"]]
    np.testing.assert_array_equal(got, expected(values, parquet["episode"], parquet["step"]))
    assert [d["success"] for d in parquet["data"]] == [labels[e] for e in parquet["episode"]]
    trajcore.export(ds, tmp_path / "x.jsonl")
    lines = [json.loads(line) for line in (tmp_path / "x.jsonl").read_text().splitlines()]
    assert [line["score"] for line in lines] == [list(v) for v in values if len(v)]
    # convert folds the annotations into a plain copy: custom data of its own, no sidecar.
    trajcore.convert(ds, tmp_path / "plain")
    assert not list((tmp_path / "plain").glob("*.trja"))
    with trajcore.open(tmp_path / "plain") as plain:
        assert plain.num_episodes == ds.num_episodes
        for i, ep in enumerate(plain.episodes):
            np.testing.assert_array_equal(ep.data["score"], values[i])
        assert annotations_of(plain) == []
    assert hashes(cp) == before
    ds.close()


def test_torch_loaders_read_the_column(cp: Path) -> None:
    torch = pytest.importorskip("torch", reason="torch is not installed (trajcore.torch is optional)")
    from torch.utils.data import DataLoader
    from trajcore.torch import SequenceDataset, TransitionDataset

    with trajcore.open(cp) as ds:
        values = scores(ds)
        trajcore.annotate(ds, "score", values)
        want = np.concatenate(values)
        dl = DataLoader(TransitionDataset(ds, keys=["data/score"]), batch_size=64, num_workers=2)
        got = torch.cat([b["data/score"] for b in dl]).numpy()
        np.testing.assert_array_equal(got, want)
        seq = SequenceDataset(ds, 3, keys=["data/score"])
        item = seq[np.arange(len(seq))]
        episodes = np.repeat(item["episode_index"], 3)
        np.testing.assert_array_equal(item["data/score"].reshape(-1), expected(values, episodes, item["step_index"]))


def test_ray_data_reads_the_column(cp: Path, ray_local: None) -> None:
    import trajcore.ray

    with trajcore.open(cp) as ds:
        values = scores(ds)
    trajcore.annotate(cp, "score", values)
    rows = trajcore.ray.read_transitions(cp, columns=["reward", "data/score"]).take_all()
    assert len(rows) == sum(len(v) for v in values)
    assert all(r["data/score"] == values[r["episode"]][r["step"]] for r in rows)


def test_a_later_annotation_replaces_the_earlier_by_a_new_version(cp: Path) -> None:
    with trajcore.open(cp) as ds:
        values = scores(ds)
    first = trajcore.annotate(cp, "score", values)
    first_bytes = Path(first[0]).read_bytes()
    second = trajcore.annotate(cp, "score", [v * 2 for v in values])
    assert second != first and Path(first[0]).read_bytes() == first_bytes
    with trajcore.open(cp) as ds:
        found = {(a["version"], a["taken"]) for a in annotations_of(ds)}
        assert found == {(1, False), (2, True)}
        for i, ep in enumerate(ds.episodes):
            np.testing.assert_array_equal(ep.data["score"], values[i] * 2)


def test_episodes_left_without_a_value_read_as_no_value(cp: Path) -> None:
    with trajcore.open(cp) as ds:
        values: list[Any] = list(scores(ds))
        values[1] = None
        trajcore.annotate(ds, "score", values)
        assert "score" not in ds.episodes[1].data
        b = ds.sample_transitions(300, seed=0, keys=["data/score", "data/_score"])
        np.testing.assert_array_equal(b["data/_score"], b["episode_index"] != 1)
        np.testing.assert_array_equal(b["data/score"][b["episode_index"] == 1], 0)


def test_bad_annotations_are_refused_by_name(cp: Path) -> None:
    with trajcore.open(cp) as ds:
        values = scores(ds)
        n, length = ds.num_episodes, ds.episodes[3].length
        lengths = [ep.length for ep in ds.episodes]
        with pytest.raises(trajcore.InvalidArgumentError, match=f"{n - 1} entries for the dataset's {n} episodes"):
            trajcore.annotate(ds, "score", values[:-1])
        short = [*values[:3], values[3][:-1], *values[4:]]
        want = f"episode 3: {length - 1} values for its {length} steps"
        with pytest.raises(trajcore.InvalidArgumentError, match=want):
            trajcore.annotate(ds, "score", short)
        with pytest.raises(trajcore.InvalidArgumentError, match="annotation name"):
            trajcore.annotate(ds, "a/b", values)
        with pytest.raises(trajcore.InvalidArgumentError, match="not numeric or bool"):
            trajcore.annotate(ds, "text", [np.array(["x"] * k) for k in lengths])
        with pytest.raises(trajcore.InvalidArgumentError, match="episode 2: rows of shape"):
            trajcore.annotate(ds, "vec", [np.zeros((k, 2 if i != 2 else 3)) for i, k in enumerate(lengths)])
        with pytest.raises(trajcore.InvalidArgumentError, match="episode 0: one value for its"):
            trajcore.annotate(ds, "x", [1.0] + [np.zeros(k) for k in lengths[1:]], per="step")
        mixed = [np.zeros(k) if i != 1 else np.zeros(k, np.int64) for i, k in enumerate(lengths)]
        with pytest.raises(trajcore.InvalidArgumentError, match="episode 1: dtype int64 differs"):
            trajcore.annotate(ds, "x", mixed)
        assert annotations_of(ds) == []
    # A name the recording records as custom data of its own.
    own = cp.parent / "mine"
    with trajcore.Writer(own, gym.spaces.Box(-1, 1, (2,)), gym.spaces.Discrete(2)) as w:
        w.add_episode(observations=np.zeros((3, 2), np.float32), actions=[0, 1], rewards=[0.0, 1.0],
                      terminations=[False, True], truncations=[False, False], data={"x": [1, 2]})
    with pytest.raises(trajcore.InvalidArgumentError, match="records a column 'data/x' itself"):
        trajcore.annotate(own, "x", [[5, 6]])
    with pytest.raises(trajcore.InvalidArgumentError, match="local dataset directory"):
        trajcore.annotate(next(own.glob("*.trj")), "y", [[5, 6]])


def test_a_core_refusal_names_an_episode_that_does_not_exist(cp: Path) -> None:
    from trajcore import _core

    with pytest.raises(trajcore.TrajcoreIndexError, match="episode 9999: no such episode"):
        _core.annotate(str(cp), "x", "float64", [], False, [9999], [b"\0" * 8])
    with trajcore.open(cp) as ds:
        n = ds.episodes[0].length
    with pytest.raises(trajcore.InvalidArgumentError, match="episode 0: given twice"):
        _core.annotate(str(cp), "x", "float64", [], False, [0, 0], [b"\0" * 8 * n] * 2)


def test_a_reopen_in_another_process_reads_the_annotation(cp: Path) -> None:
    with trajcore.open(cp) as ds:
        values = scores(ds)
    trajcore.annotate(cp, "score", values)
    code = (
        "import json, sys, trajcore\n"
        "ds = trajcore.open(sys.argv[1])\n"
        "print(json.dumps([ep.data['score'].tolist() for ep in ds.episodes]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(cp)], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [v.tolist() for v in values]


def test_a_damaged_sidecar_is_named_and_never_read(cp: Path) -> None:
    with trajcore.open(cp) as ds:
        values = scores(ds)
    trajcore.annotate(cp, "score", values)
    (second,) = trajcore.annotate(cp, "score", [v + 1 for v in values])
    # A flipped byte in a chunk: the read that needs it names the sidecar.
    data = bytearray(Path(second).read_bytes())
    at = data.rindex(b"data/_score") + 400  # past the Column records: chunk data
    data[at] ^= 0xFF
    Path(second).write_bytes(bytes(data))
    with trajcore.open(cp) as ds, pytest.raises(trajcore.CorruptFileError, match=Path(second).name):
        [ep.data for ep in ds.episodes]
    # Training reads: the annotation's read fails naming the sidecar; reads of recorded values
    # leave no episode out, before or after it.
    with trajcore.open(cp) as ds, warnings.catch_warnings():
        warnings.simplefilter("error")
        every = set(range(ds.num_episodes))
        assert set(ds.sample_transitions(20_000, seed=0, keys=["rewards"])["episode_index"].tolist()) == every
        with pytest.raises(trajcore.CorruptFileError, match=Path(second).name):
            ds.sample_transitions(20_000, seed=0, keys=["rewards", "data/score"])
        assert set(ds.sample_transitions(20_000, seed=1, keys=["rewards"])["episode_index"].tolist()) == every
    # `recover` copies what was recorded: every episode, whole, without the annotation.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trajcore.recover(cp, cp.parent / "saved")
    with trajcore.open(cp.parent / "saved") as saved, trajcore.open(cp) as ds:
        assert [ep.length for ep in saved.episodes] == [ep.length for ep in ds.episodes]
        assert all("score" not in ep.data for ep in saved.episodes)
    # A damaged Meta record: the sidecar is left out with a warning naming it, and the earlier
    # version is not read in its place (its values are not the ones asked for).
    data = bytearray(Path(second).read_bytes())
    data[data.index(b'"annotation"') + 3] ^= 0xFF
    Path(second).write_bytes(bytes(data))
    with pytest.warns(trajcore.TrajcoreWarning, match=Path(second).name):
        ds = trajcore.open(cp)
    with ds:
        assert all("score" not in ep.data for ep in ds.episodes)
        assert [a["taken"] for a in annotations_of(ds)] == [False, False]


def test_a_live_dataset_sees_an_annotation_at_refresh(cp: Path) -> None:
    with trajcore.open(cp) as reader:
        values = scores(reader)
        assert "score" not in reader.episodes[0].data
        trajcore.annotate(cp, "score", values)
        reader.refresh()
        np.testing.assert_array_equal(reader.episodes[5].data["score"], values[5])


def test_evicted_episodes_keep_their_values_and_the_sidecar_stays(tmp_path: Path) -> None:
    path = tmp_path / "buf"
    record_cartpole(path, steps=200, capacity_steps=400, max_shard_bytes=20_000)
    reader = trajcore.open(path)
    values = scores(reader)
    (sidecar,) = trajcore.annotate(reader, "score", values)
    # A second bounded recording in the directory deletes the first one's shards, oldest first;
    # it neither counts nor deletes the sidecar.
    record_cartpole(path, steps=400, capacity_steps=400, max_shard_bytes=20_000)
    assert Path(sidecar).exists()
    reader.refresh()
    assert len(reader.evicted_episodes) > 0
    for i in range(len(values)):  # still readable from the files the reader opened, with their values
        np.testing.assert_array_equal(reader.episodes[i].data["score"], values[i])
    reader.close()
    # A fresh open no longer holds the annotated recording: the sidecar is named, never joined.
    with pytest.warns(trajcore.TrajcoreWarning, match=Path(sidecar).name):
        ds = trajcore.open(path)
    with ds:
        assert all("score" not in ep.data for ep in ds.episodes)


def test_the_command_line_annotates_from_npy_and_npz(cp: Path, tmp_path: Path, capsys: Any) -> None:
    from trajcore.cli import main

    with trajcore.open(cp) as ds:
        labels = np.array([ep.terminated for ep in ds.episodes])
        halves = {str(i): np.full(ep.length, i, np.int32) for i, ep in enumerate(ds.episodes) if i % 2 == 0}
    np.save(tmp_path / "labels.npy", labels)
    np.savez(tmp_path / "halves.npz", **halves)
    assert main(["annotate", str(cp), "label", str(tmp_path / "labels.npy")]) == 0
    assert main(["annotate", str(cp), "half", str(tmp_path / "halves.npz")]) == 0
    assert "wrote" in capsys.readouterr().out
    assert main(["info", str(cp)]) == 0
    assert "annotation data/half v1 (" in capsys.readouterr().out
    with trajcore.open(cp) as ds:
        for i, ep in enumerate(ds.episodes):
            np.testing.assert_array_equal(ep.data["label"], np.full(ep.length, labels[i]))
            assert ("half" in ep.data) == (i % 2 == 0)
    np.savez(tmp_path / "bad.npz", **{"9999": np.zeros(3)})
    assert main(["annotate", str(cp), "bad", str(tmp_path / "bad.npz")]) == 2
    assert "key '9999' names no episode" in capsys.readouterr().err


def test_the_independent_decoder_reads_a_sidecar_as_the_format_says(cp: Path) -> None:
    import format_decoder as fd

    with trajcore.open(cp) as ds:
        values = scores(ds)
        spans = {(ep.env_index, ep.episode_id): i for i, ep in enumerate(ds.episodes)}
        shard = fd.open_shard(ds.shards[0])
    trajcore.annotate(cp, "score", values)
    (path,) = trajcore.annotate(cp, "score", [v + 1 for v in values])
    side = fd.open_shard(path)
    assert side.header.required_flags == fd.FILE_PACKED_TABLES | fd.FILE_ANNOTATION
    assert side.header.recording_id == shard.header.recording_id and side.header.shard_seq == 2
    meta = side.meta["annotation"]
    assert (meta["name"], meta["version"], meta["per"]) == ("score", 2, "step")
    assert [side.columns[i]["name"] for i in (0, 1)] == ["data/score", "data/_score"]
    assert side.columns[0]["mask"] == 1 and side.columns[1]["mask_of"] == 0 and not side.episodes
    rows: dict[tuple[int, int], float] = {}
    for ref in side.chunks:
        assert ref.flags & fd.CHUNK_CHECKSUM
        spec = side.columns[ref.column]
        for k, row in enumerate(fd.chunk_rows(fd.decode_chunk(side.buf, ref, spec), ref, spec)):
            if ref.column == 0:
                rows[(ref.lane, ref.first_row + k)] = float(np.frombuffer(row, "<f4")[0])
            else:
                assert row == b"\x01"
    for span in meta["episodes"]:
        i = spans[(span["lane"], span["episode_id"])]
        got = [rows.pop((span["lane"], span["first_row"] + t)) for t in range(span["rows"])]
        np.testing.assert_array_equal(got, values[i] + 1)
    assert not rows  # no row outside the episodes the Meta record lists


def test_a_recording_still_written_keeps_its_annotation_when_it_adds_columns(tmp_path: Path) -> None:
    path = tmp_path / "live"
    box, two = gym.spaces.Box(-1, 1, (2,)), gym.spaces.Discrete(2)

    def episode(w: trajcore.Writer, n: int, data: dict[str, Any] | None = None) -> None:
        w.add_episode(observations=np.zeros((n + 1, 2), np.float32), actions=np.zeros(n, np.int64),
                      rewards=np.ones(n), terminations=np.arange(n) == n - 1, truncations=np.zeros(n, bool), data=data)

    with trajcore.Writer(path, box, two) as w:
        for n in (3, 4, 5):
            episode(w, n)
        w.flush()
        ds = trajcore.open(path)
        assert ds.num_episodes == 3
        values = [np.arange(n, dtype=np.int32) + 10 * i for i, n in enumerate((3, 4, 5))]
        trajcore.annotate(ds, "score", values)
        chosen = ds.select(min_length=4)
        before = chosen.sample_transitions(50, seed=0, keys=["data/score"])  # plans made, with the ids of now
        want = expected(values, before["episode_index"], before["step_index"])
        np.testing.assert_array_equal(before["data/score"], want)
        # The recording adds columns of its own after the annotation: the annotation's ids move.
        episode(w, 6, data={"new": np.arange(6, dtype=np.int32) + 100})
        w.flush()
        ds.refresh()
        assert ds.num_episodes == 4
        for sampler in (chosen, ds):
            b = sampler.sample_transitions(200, seed=1, keys=["data/score", "data/_score", "data/new"])
            old = b["episode_index"] < 3
            want = expected(values, b["episode_index"][old], b["step_index"][old])
            np.testing.assert_array_equal(b["data/score"][old], want)
            assert b["data/_score"].tolist() == old.tolist()
            np.testing.assert_array_equal(b["data/new"][~old], b["step_index"][~old] + 100)
        assert list(ds.episodes[3].data) == ["new", "_new"]
        ds.close()


def test_one_array_per_episode_is_stored_on_each_of_its_steps(cp: Path) -> None:
    with trajcore.open(cp) as ds:
        goals = [np.array([i, -i, 2 * i], np.int16) for i in range(ds.num_episodes)]
        trajcore.annotate(ds, "goal", goals, per="episode")
        (found,) = annotations_of(ds)
        assert found["per"] == "episode"
        for i, ep in enumerate(ds.episodes):
            assert ep.data["goal"].shape == (ep.length, 3) and ep.data["goal"].dtype == np.int16
            assert (ep.data["goal"] == goals[i]).all()


def test_sidecars_beside_shards_in_object_storage_are_read(cp: Path, s3: Any) -> None:
    with trajcore.open(cp) as ds:
        values = scores(ds)
    trajcore.annotate(cp, "score", values)
    trajcore.annotate(cp, "score", [v + 1 for v in values])  # the later version is read
    bucket = s3.bucket()
    keys = s3.upload(cp, bucket, "run")
    assert sum(k.endswith(".trja") for k in keys) == 2
    with trajcore.open(f"s3://{bucket}/run", storage_options=s3.options) as remote:
        assert [a["taken"] for a in annotations_of(remote)] == [False, True]
        for i, ep in enumerate(remote.episodes):
            np.testing.assert_array_equal(ep.data["score"], values[i] + 1)
        b = remote.sample_transitions(100, seed=0, keys=["data/score"])
        np.testing.assert_array_equal(b["data/score"], expected(values, b["episode_index"], b["step_index"]) + 1)
