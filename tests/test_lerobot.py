"""LeRobot v3.0 both ways, against the real `lerobot` package: trajcore.to_lerobot's datasets load
in LeRobot's own `LeRobotDataset(repo_id, root=root)` offline with every non-video value equal
(float32) and the video frames within 40 dB PSNR, the MP4 files read back frame by frame with
PyAV; trajcore.from_lerobot reads a dataset LeRobot's own writer made, and exporting it again
gives back every non-video value.

LeRobot runs in a venv of its own (.ci/lerobot-venv: its pins conflict with the test extra's), as a
subprocess (tests/lerobot_probe.py); TRAJCORE_LEROBOT_PYTHON names its python. Without it these
tests skip, naming the command that makes it, except in CI, where they fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import pytest
import trajcore
from trajcore.errors import InvalidArgumentError, TrajcoreFileNotFoundError, TrajcoreWarning

av = pytest.importorskip("av", reason="the LeRobot export's videos need PyAV (av)")
pq = pytest.importorskip("pyarrow.parquet", reason="the LeRobot export needs pyarrow")

PROBE = Path(__file__).with_name("lerobot_probe.py")
DEFAULT_VENV_PYTHON = Path.home() / ".cache" / "trajcore" / "lerobot-venv" / "bin" / "python"


@pytest.fixture(scope="module")
def lerobot_python() -> str:
    python = os.environ.get("TRAJCORE_LEROBOT_PYTHON") or str(DEFAULT_VENV_PYTHON)
    if not Path(python).exists():
        message = (
            f"no python with LeRobot at {python}: make its venv with `bash .ci/lerobot-venv` (about 8 GB) and "
            "set TRAJCORE_LEROBOT_PYTHON to the path it prints"
        )
        if os.environ.get("CI"):
            pytest.fail(message)  # CI makes the venv (.ci/run): without it, something broke
        pytest.skip(message)
    return python


def probe(python: str, *args: str) -> str:
    """Runs tests/lerobot_probe.py with LeRobot's python; its stdout."""
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    done = subprocess.run([python, str(PROBE), *args], capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


# FFmpeg's libraries (Debian bookworm's) that LeRobot's default decoder, torchcodec, loads.
FFMPEG_DEBIAN = "libavdevice59 libavfilter8 libavformat59 libavcodec59 libavutil57 libswscale6 libswresample4"


def skip_without_torchcodec(python: str) -> None:
    """torchcodec loads FFmpeg from the system, which pip cannot install: without it, skip naming
    the Debian packages."""
    done = subprocess.run([python, "-c", "import torchcodec.decoders"], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        # (The reason names no Python package: in CI, a skip naming one of the test extra's fails.)
        pytest.skip(f"needs the Debian packages {FFMPEG_DEBIAN} (apt-get install -y {FFMPEG_DEBIAN})")


def load(
    python: str, repo_id: str, root: Path, out: Path, backend: str = "pyav"
) -> tuple[dict[str, Any], dict[str, Any]]:
    """LeRobotDataset(repo_id, root=root)'s every row (`backend` decoding its videos), and its summary."""
    probe(python, "load", repo_id, str(root), str(out), backend)
    with np.load(out) as got:
        arrays = {k: got[k] for k in got.files if k != "__meta__"}
        return arrays, json.loads(str(got["__meta__"]))


def psnr(a: npt.NDArray[Any], b: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
    """Per frame, in dB (inf where equal)."""
    mse = ((a.astype(np.float64) - b.astype(np.float64)) ** 2).reshape(len(a), -1).mean(axis=1)
    with np.errstate(divide="ignore"):
        return np.asarray(10 * np.log10(255.0**2 / mse))


def camera(rows: int, seed: int) -> npt.NDArray[np.uint8]:
    """Camera-like frames that move: a lit, textured scene (brightness carries the detail, as in
    photographs) with a coloured block crossing it."""
    y, x = np.mgrid[0:64, 0:64].astype(np.float64)
    out = np.empty((rows, 64, 64, 3), np.uint8)
    rng = np.random.default_rng(seed)
    tint = rng.uniform(0.6, 1.0, 3)
    for t in range(rows):
        light = 0.55 + 0.35 * np.sin((x + 1.5 * t + seed) / 7.0) * np.cos((y - t) / 9.0)
        frame = light[..., None] * tint * 230 + 12
        bx, by = (5 + 2 * t) % 48, 20 + (seed % 20)
        frame[by : by + 12, bx : bx + 12] = (200, 60 + 3 * seed, 40)
        out[t] = np.clip(frame, 0, 255).astype(np.uint8)
    return out


LENGTHS = (30, 45, 25)


def write_two_cameras(path: Path) -> None:
    """A Writer loop: a Dict observation of two cameras and a joint vector, three episodes
    (terminated, truncated, cut short), each with its task in its metadata."""
    obs_space = gym.spaces.Dict(
        {
            "cam_a": gym.spaces.Box(0, 255, (64, 64, 3), np.uint8),
            "cam_b": gym.spaces.Box(0, 255, (64, 64, 3), np.uint8),
            "joints": gym.spaces.Box(-np.pi, np.pi, (7,), np.float32),
        }
    )
    rng = np.random.default_rng(7)
    with trajcore.Writer(path, obs_space, gym.spaces.Box(-1, 1, (7,), np.float32)) as w:
        for e, T in enumerate(LENGTHS):
            w.add_episode(
                observations={
                    "cam_a": camera(T + 1, e),
                    "cam_b": camera(T + 1, 10 + e)[:, ::-1],
                    "joints": rng.uniform(-np.pi, np.pi, (T + 1, 7)).astype(np.float32),
                },
                actions=rng.uniform(-1, 1, (T, 7)).astype(np.float32),
                rewards=rng.normal(size=T),
                terminations=np.arange(T) == (T - 1 if e == 0 else -1),
                truncations=np.arange(T) == (T - 1 if e == 1 else -1),
                metadata={"task": f"pick the {['red', 'green', 'blue'][e]} cube"},
            )


@pytest.fixture(scope="module")
def two_cameras(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("lerobot") / "robot"
    write_two_cameras(path)
    return path


def steps(ds: trajcore.Dataset, get: Any) -> npt.NDArray[Any]:
    """A value of every step of every episode, in order (observations: the T before each step)."""
    return np.concatenate([get(ep) for ep in ds.episodes])


@pytest.mark.parametrize("backend", ["torchcodec", "pyav"])
def test_export_loads_in_lerobot_with_equal_values_and_video_within_40_db(
    two_cameras: Path, tmp_path: Path, lerobot_python: str, backend: str
) -> None:
    if backend == "torchcodec":
        skip_without_torchcodec(lerobot_python)  # LeRobot's default decoder
    out = tmp_path / "robot-lerobot"
    with pytest.warns(TrajcoreWarning, match="3 final observation"):
        result = trajcore.to_lerobot(two_cameras, out, repo_id="trajcore/two-cameras", fps=10)
    assert result["features"][:7] == [
        "observation.images.cam_a",
        "observation.images.cam_b",
        "observation.state",
        "action",
        "next.reward",
        "next.done",
        "next.truncated",
    ]
    got, meta = load(lerobot_python, "trajcore/two-cameras", out, tmp_path / "got.npz", backend)
    ds = trajcore.open(two_cameras)
    n = sum(LENGTHS)
    assert meta["video_backend"] == backend
    assert meta["num_frames"] == n and meta["num_episodes"] == 3 and meta["fps"] == 10
    assert meta["video_keys"] == ["observation.images.cam_a", "observation.images.cam_b"]
    # Non-video values: exactly trajcore's, as float32.
    np.testing.assert_array_equal(got["observation.state"], steps(ds, lambda e: e.observations["joints"][:-1]))
    np.testing.assert_array_equal(got["action"], steps(ds, lambda e: e.actions))
    np.testing.assert_array_equal(got["next.reward"], steps(ds, lambda e: e.rewards).astype(np.float32))
    terminated, truncated = steps(ds, lambda e: e.terminations), steps(ds, lambda e: e.truncations)
    np.testing.assert_array_equal(got["next.done"], terminated | truncated)
    np.testing.assert_array_equal(got["next.truncated"], truncated)
    assert got["next.done"].sum() == 2 and got["next.truncated"].sum() == 1
    frame_index = np.concatenate([np.arange(T) for T in LENGTHS])
    np.testing.assert_array_equal(got["frame_index"], frame_index)
    np.testing.assert_array_equal(got["episode_index"], np.repeat(np.arange(3), LENGTHS))
    np.testing.assert_array_equal(got["index"], np.arange(n))
    np.testing.assert_array_equal(got["timestamp"], (frame_index / 10).astype(np.float32))
    tasks = ["pick the red cube", "pick the green cube", "pick the blue cube"]
    assert list(got["task"]) == list(np.repeat(tasks, LENGTHS)) and meta["tasks"] == tasks
    # Video: every frame LeRobot decodes within 40 dB of the recorded one.
    for key in ("cam_a", "cam_b"):
        recorded = steps(ds, lambda e, key=key: e.observations[key][:-1])
        decoded = got[f"observation.images.{key}"]
        assert decoded.shape == recorded.shape
        assert psnr(decoded, recorded).min() >= 40.0, psnr(decoded, recorded).min()
    # LeRobot's statistics: every feature, every statistic, images per channel.
    stats = json.loads((out / "meta" / "stats.json").read_text())
    wanted = ["count", "max", "mean", "min", "q01", "q10", "q50", "q90", "q99", "std"]
    assert all(meta["stats"][k] == wanted for k in meta["stats"]) and set(meta["stats"]) == set(result["features"])
    state = got["observation.state"].astype(np.float64)
    np.testing.assert_array_equal(stats["observation.state"]["min"], state.min(axis=0))
    np.testing.assert_array_equal(stats["observation.state"]["max"], state.max(axis=0))
    np.testing.assert_allclose(stats["observation.state"]["mean"], state.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(stats["observation.state"]["std"], state.std(axis=0), rtol=1e-9)
    assert stats["observation.state"]["count"] == [n]
    assert np.asarray(stats["observation.images.cam_a"]["mean"]).shape == (3, 1, 1)
    assert 0 < np.asarray(stats["observation.images.cam_a"]["mean"]).min() < 1


def test_videos_read_back_frame_by_frame_with_pyav(two_cameras: Path, tmp_path: Path) -> None:
    out = tmp_path / "robot-lerobot"
    with pytest.warns(TrajcoreWarning):
        trajcore.to_lerobot(two_cameras, out, repo_id="trajcore/two-cameras", fps=10)
    ds = trajcore.open(two_cameras)
    episodes = pq.read_table(out / "meta" / "episodes" / "chunk-000" / "file-000.parquet").to_pylist()
    info = json.loads((out / "meta" / "info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["features"]["observation.images.cam_a"]["dtype"] == "video"
    for key in ("cam_a", "cam_b"):
        name = f"observation.images.{key}"
        path = out / info["video_path"].format(video_key=name, chunk_index=0, file_index=0)
        with av.open(str(path)) as container:
            decoded = [(f.time, f.to_ndarray(format="rgb24")) for f in container.decode(video=0)]
        assert len(decoded) == sum(LENGTHS)
        for ep, row in zip(ds.episodes, episodes, strict=True):
            first = round(row[f"videos/{name}/from_timestamp"] * 10)
            assert row[f"videos/{name}/to_timestamp"] == pytest.approx((first + ep.length) / 10)
            frames = np.stack([picture for _, picture in decoded[first : first + ep.length]])
            assert [t for t, _ in decoded[first : first + ep.length]] == pytest.approx(
                (first + np.arange(ep.length)) / 10
            )
            assert psnr(frames, ep.observations[key][:-1]).min() >= 40.0


def test_images_without_video_are_lossless(two_cameras: Path, tmp_path: Path, lerobot_python: str) -> None:
    out = tmp_path / "robot-png"
    with pytest.warns(TrajcoreWarning):
        trajcore.to_lerobot(two_cameras, out, repo_id="trajcore/two-cameras-png", video=False, fps=10)
    assert not (out / "videos").exists()
    got, meta = load(lerobot_python, "trajcore/two-cameras-png", out, tmp_path / "got.npz")
    assert meta["video_keys"] == [] and meta["features"]["observation.images.cam_a"]["dtype"] == "image"
    ds = trajcore.open(two_cameras)
    for key in ("cam_a", "cam_b"):
        want = steps(ds, lambda e, k=key: e.observations[k][:-1])
        np.testing.assert_array_equal(got[f"observation.images.{key}"], want)


def test_card_has_the_hubs_header(two_cameras: Path, tmp_path: Path) -> None:
    yaml = pytest.importorskip("yaml", reason="the card's header is read with pyyaml")
    out = tmp_path / "carded"
    with pytest.warns(TrajcoreWarning):
        trajcore.to_lerobot(two_cameras, out, repo_id="me/robot", license="mit", fps=10)
    text = (out / "README.md").read_text()
    header = yaml.safe_load(text.split("---\n")[1])
    assert header["license"] == "mit"
    assert header["task_categories"] == ["robotics", "reinforcement-learning"]
    assert "LeRobot" in header["tags"] and "trajcore" in header["tags"]
    assert header["size_categories"] == ["n<1K"]
    assert header["configs"] == [{"config_name": "default", "data_files": "data/*/*.parquet"}]
    assert 'LeRobotDataset("me/robot")' in text and "100 frames" in text


def test_mujoco_rendered_frames(tmp_path: Path, lerobot_python: str) -> None:
    from test_frames import _record_single, _skip_without_egl

    _skip_without_egl()
    env = gym.make("InvertedPendulum-v5", render_mode="rgb_array", width=64, height=64)
    _record_single(env, tmp_path / "pendulum", episodes=2, max_steps=20)
    out = tmp_path / "pendulum-lerobot"
    with pytest.warns(TrajcoreWarning, match="info/reward_survive .*; rounded to float32 \\(LeRobot's type\\): obs$"):
        result = trajcore.to_lerobot(tmp_path / "pendulum", out, repo_id="trajcore/pendulum", task="balance")
    assert {"observation.state", "observation.images.render", "action"} <= set(result["features"])
    got, meta = load(lerobot_python, "trajcore/pendulum", out, tmp_path / "got.npz")
    ds = trajcore.open(tmp_path / "pendulum")
    assert meta["fps"] == 25  # the env's render_fps
    np.testing.assert_array_equal(got["observation.state"], steps(ds, lambda e: e.observations[:-1]).astype(np.float32))
    # A (1,) feature is a scalar to LeRobot.
    np.testing.assert_array_equal(got["action"], steps(ds, lambda e: e.actions[:, 0]).astype(np.float32))
    frames = steps(ds, lambda e: e.frames[:-1])
    assert frames.std() > 0, "a rendered scene"
    assert psnr(got["observation.images.render"], frames).min() >= 40.0
    assert set(got["task"]) == {"balance"}


NATIVE_FEATURES = {
    "observation.state": {"dtype": "float32", "shape": [4], "names": ["x", "y", "z", "grip"]},
    "observation.images.top": {"dtype": "video", "shape": [32, 48, 3], "names": ["height", "width", "channels"]},
    "observation.images.wrist": {"dtype": "image", "shape": [16, 16, 3], "names": ["height", "width", "channels"]},
    "action": {"dtype": "float32", "shape": [3], "names": None},
    "next.reward": {"dtype": "float32", "shape": [1], "names": None},
    "next.done": {"dtype": "bool", "shape": [1], "names": None},
    "complementary_info.grasp": {"dtype": "int64", "shape": [2], "names": None},
}


@pytest.fixture(scope="module")
def native(tmp_path_factory: pytest.TempPathFactory, lerobot_python: str) -> Path:
    """A dataset LeRobot's own writer made (create, add_frame, save_episode, finalize)."""
    tmp = tmp_path_factory.mktemp("native")
    ends = np.cumsum([12, 20, 9])
    n = int(ends[-1])
    rng = np.random.default_rng(3)
    done = np.zeros(n, bool)
    done[ends[:2] - 1] = True  # the last episode is left open
    spec = {
        "observation.state": rng.normal(size=(n, 4)).astype(np.float32),
        "observation.images.top": np.stack([camera(n, 1)[t, 16:48, 8:56] for t in range(n)]),
        "observation.images.wrist": rng.integers(0, 256, (n, 16, 16, 3), dtype=np.uint8),
        "action": rng.uniform(-1, 1, (n, 3)).astype(np.float32),
        "next.reward": rng.normal(size=(n, 1)).astype(np.float32),
        "next.done": done[:, None],
        "complementary_info.grasp": rng.integers(-(2**30), 2**30, (n, 2)),  # past float32, squares in int64
    }
    np.savez(
        tmp / "spec.npz",
        features=np.array(json.dumps(NATIVE_FEATURES)),
        tasks=np.array(json.dumps(["stack", "unstack", "stack"])),
        episode_ends=ends,
        fps=np.array(15),
        **spec,
    )
    probe(lerobot_python, "write", "someone/native", str(tmp / "native"), str(tmp / "spec.npz"), "1")
    return tmp / "native"


def test_import_then_export_keeps_every_non_video_value(native: Path, tmp_path: Path, lerobot_python: str) -> None:
    with pytest.warns(TrajcoreWarning, match="final observation"):
        imported = trajcore.from_lerobot(native, tmp_path / "imported")
    assert imported["episodes"] == 3 and imported["steps"] == 41 and imported["absent"] == ["next.truncated"]
    want, want_meta = load(lerobot_python, "someone/native", native, tmp_path / "want.npz")
    ds = trajcore.open(tmp_path / "imported")
    assert [ep.length for ep in ds.episodes] == [12, 20, 9]
    assert [ep.metadata["task"] for ep in ds.episodes] == ["stack", "unstack", "stack"]
    assert [(ep.terminated, ep.truncated) for ep in ds.episodes] == [(True, False), (True, False), (False, False)]
    assert ds.metadata["lerobot"]["fps"] == 15
    ep = ds.episodes[1]
    np.testing.assert_array_equal(ep.observations["state"][:-1], want["observation.state"][12:32])
    np.testing.assert_array_equal(ep.observations["state"][-1], ep.observations["state"][-2])  # the copy
    np.testing.assert_array_equal(ep.observations["images.wrist"][:-1], want["observation.images.wrist"][12:32])
    np.testing.assert_array_equal(ep.actions, want["action"][12:32])
    np.testing.assert_array_equal(ep.rewards, want["next.reward"][12:32])
    np.testing.assert_array_equal(ep.data["complementary_info.grasp"], want["complementary_info.grasp"][12:32])
    # The video as LeRobot decodes it, frame by frame.
    np.testing.assert_array_equal(ep.observations["images.top"][:-1], want["observation.images.top"][12:32])

    with pytest.warns(TrajcoreWarning):
        trajcore.to_lerobot(tmp_path / "imported", tmp_path / "again", repo_id="someone/again")
    got, meta = load(lerobot_python, "someone/again", tmp_path / "again", tmp_path / "got.npz")
    assert set(got) == set(want) and meta["fps"] == 15 and meta["tasks"] == want_meta["tasks"]
    assert meta["features"]["observation.state"]["names"] == ["x", "y", "z", "grip"]
    # The statistics: LeRobot's writer's and the export's, of the same values.
    theirs = json.loads((native / "meta" / "stats.json").read_text())
    ours = json.loads((tmp_path / "again" / "meta" / "stats.json").read_text())
    assert set(ours) == set(theirs)
    for key, stats in theirs.items():
        if key.startswith("observation.images."):
            assert np.asarray(ours[key]["mean"]).shape == (3, 1, 1)
            continue
        span = np.asarray(stats["max"], np.float64) - np.asarray(stats["min"], np.float64)
        for name, value in stats.items():
            want_value, got_value = np.asarray(value, np.float64), np.asarray(ours[key][name], np.float64)
            if name == "count":
                np.testing.assert_array_equal(got_value, want_value, err_msg=f"{key} {name}")
            elif name in ("min", "max", "mean", "std"):  # LeRobot's timestamps are float64, ours float32
                np.testing.assert_allclose(got_value, want_value, rtol=1e-6, atol=1e-9, err_msg=f"{key} {name}")
            else:  # quantiles: LeRobot's histogram has 5000 bins
                np.testing.assert_allclose(got_value, want_value, rtol=0, atol=span.max() / 4000 + 1e-9)
    for key in want:
        if key == "observation.images.top":
            assert got[key].shape == want[key].shape and psnr(got[key], want[key]).min() >= 40.0
        else:
            np.testing.assert_array_equal(got[key], want[key], err_msg=key)
            assert got[key].dtype == want[key].dtype, key


def test_cli_export_and_import(two_cameras: Path, tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    out = tmp_path / "cli-lerobot"
    done = subprocess.run(
        [sys.executable, "-m", "trajcore", "export", str(two_cameras), str(out), "--format", "lerobot", "--images",
         "--repo-id", "me/cli", "--task", "ignored: the episodes name theirs"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "exported 3 episodes, 100 steps" in done.stderr
    back = tmp_path / "cli-back"
    done = subprocess.run(
        [sys.executable, "-m", "trajcore", "import-lerobot", str(out), str(back)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    ds, back_ds = trajcore.open(two_cameras), trajcore.open(back)
    assert [e.length for e in back_ds.episodes] == list(LENGTHS)
    np.testing.assert_array_equal(steps(back_ds, lambda e: e.observations["images.cam_a"][:-1]),
                                  steps(ds, lambda e: e.observations["cam_a"][:-1]))  # fmt: skip
    np.testing.assert_array_equal(steps(back_ds, lambda e: e.observations["state"][:-1]),
                                  steps(ds, lambda e: e.observations["joints"][:-1]))  # fmt: skip


def test_bad_input_is_refused_by_name(two_cameras: Path, tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match=r"trajcore\.to_lerobot"):
        trajcore.export(two_cameras, tmp_path / "z", format="lerobot")
    with pytest.raises(InvalidArgumentError, match="obs/nothing"):
        trajcore.to_lerobot(two_cameras, tmp_path / "a", repo_id="x/y", mapping={"obs/nothing": "observation.x"})
    with pytest.raises(InvalidArgumentError, match="pix_fmt"):
        trajcore.to_lerobot(two_cameras, tmp_path / "b", repo_id="x/y", pix_fmt="rgb")
    with pytest.raises(InvalidArgumentError, match="index"):
        trajcore.to_lerobot(two_cameras, tmp_path / "c", repo_id="x/y", mapping={"obs/joints": "index"})
    assert not any(tmp_path.iterdir()), "nothing left behind"
    with pytest.raises(TrajcoreFileNotFoundError, match=r"meta/info\.json"):
        trajcore.from_lerobot(tmp_path, tmp_path / "d")
    (tmp_path / "old" / "meta").mkdir(parents=True)
    (tmp_path / "old" / "meta" / "info.json").write_text('{"codebase_version": "v2.1", "features": {}}')
    with pytest.raises(InvalidArgumentError, match=r"v2\.1"):
        trajcore.from_lerobot(tmp_path / "old", tmp_path / "e")
    # A mapping leaves a camera out, another name for the joints.
    with pytest.warns(TrajcoreWarning, match="obs/cam_b"):
        result = trajcore.to_lerobot(
            two_cameras, tmp_path / "f", repo_id="x/y",
            mapping={"obs/cam_b": None, "obs/joints": "observation.environment_state"},
        )  # fmt: skip
    assert "observation.images.cam_b" not in result["features"]
    assert "observation.environment_state" in result["features"] and "observation.state" not in result["features"]



def test_files_roll_over_and_read_back(two_cameras: Path, tmp_path: Path, lerobot_python: str) -> None:
    out = tmp_path / "rolled"
    with pytest.warns(TrajcoreWarning):
        trajcore.to_lerobot(two_cameras, out, repo_id="x/rolled", fps=10, data_file_mb=0.001, video_file_mb=0.001)
    assert len(list((out / "data").rglob("*.parquet"))) == 3  # a file an episode, past the tiny sizes
    assert len(list((out / "videos" / "observation.images.cam_b").rglob("*.mp4"))) == 3
    got, _ = load(lerobot_python, "x/rolled", out, tmp_path / "got.npz")
    ds = trajcore.open(two_cameras)
    np.testing.assert_array_equal(got["observation.state"], steps(ds, lambda e: e.observations["joints"][:-1]))
    assert psnr(got["observation.images.cam_b"], steps(ds, lambda e: e.observations["cam_b"][:-1])).min() >= 40
    with pytest.warns(TrajcoreWarning):
        trajcore.from_lerobot(out, tmp_path / "back")
    back = trajcore.open(tmp_path / "back")
    decoded = steps(back, lambda e: e.observations["images.cam_b"][:-1])  # PyAV here, PyAV in LeRobot
    np.testing.assert_array_equal(decoded, got["observation.images.cam_b"])


def test_statistics_functions() -> None:
    """LeRobot's statistics as plain functions: the images' from histograms equal those over
    every pixel; the episodes' aggregate equals the statistics of all rows (quantiles excepted:
    LeRobot averages the episodes' by count)."""
    from trajcore.formats.lerobot_stats import aggregate, feature_stats, image_sample, image_stats

    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (7, 9, 11, 3), dtype=np.uint8)
    frames[..., 1] //= 3
    by_histogram, by_pixel = image_stats(frames), feature_stats(frames.reshape(-1, 3))
    for name, value in by_pixel.items():
        if name != "count":
            np.testing.assert_allclose(by_histogram[name].ravel(), np.asarray(value, np.float64) / 255, rtol=1e-12)
    assert by_histogram["count"].tolist() == [7] and by_histogram["mean"].shape == (3, 1, 1)
    rows = rng.normal(size=(50, 4))
    parts = [feature_stats(rows[:10]), feature_stats(rows[10:35]), feature_stats(rows[35:])]
    whole, joined = feature_stats(rows), aggregate(parts)
    for name in ("min", "max", "mean", "std", "count"):
        np.testing.assert_allclose(joined[name], whole[name], rtol=1e-12)
    one = feature_stats(rows[:1])  # one row: LeRobot's quantiles are the mean
    assert np.array_equal(one["q10"], one["mean"]) and one["count"].tolist() == [1]
    np.testing.assert_array_equal(feature_stats(np.array([[True], [False], [False]]))["max"], [True])
    assert image_sample(5).tolist() == [0, 1, 2, 3, 4] and len(image_sample(1000)) == 177  # LeRobot's sample
