"""The mp4 export (`trajcore.export(..., format="mp4")`, ``trajcore export --format mp4``) and the
viewer's "save as video": every file read back frame by frame with PyAV and compared with the
recorded images (PSNR, since H.264 is lossy), its size, frame count (T + 1 an episode) and tags;
the grid of a vector recording tile by tile; real envs (CartPole's rendered frames) and a
`Writer` loop of smooth synthetic cameras of odd sizes."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import av
import gymnasium as gym
import numpy as np
import pytest
import trajcore
from gymnasium import spaces

PSNR_DB = 35.0


def _psnr(got: np.ndarray, want: np.ndarray) -> float:
    mse = float(np.mean((got.astype(np.float64) - want.astype(np.float64)) ** 2))
    return math.inf if mse == 0 else 10 * math.log10(255.0**2 / mse)


def _decode(path: Path, grey: bool = False) -> tuple[list[np.ndarray], dict[str, str], tuple[int, int]]:
    """Every frame of the file (rgb24, or gray), its tags, and the stream's (height, width)."""
    with av.open(str(path)) as c:
        stream = c.streams.video[0]
        size = (stream.height, stream.width)
        frames = [f.to_ndarray(format="gray" if grey else "rgb24") for f in c.decode(video=0)]
        return frames, dict(c.metadata), size


def _smooth(t: int, h: int, w: int, c: int, shift: int = 0) -> np.ndarray:
    """A smooth image that changes with t (what rendered scenes look like to a video codec)."""
    y, x = np.mgrid[0:h, 0:w]
    base = 30 + 80 * np.sin((x + 2 * t + shift) / 9.0) ** 2 + 60 * np.cos((y - t) / 11.0) ** 2
    img = np.stack([base + 25 * k for k in range(c)], axis=-1)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def _write_cameras(path: Path, lengths: list[int]) -> None:
    """A `Writer` loop: a Dict observation of two cameras of odd sizes (RGB, grey with a channel
    axis), a frame stack (4, H, W) and a joint vector."""
    obs_space = spaces.Dict(
        {
            "front": spaces.Box(0, 255, (33, 47, 3), np.uint8),
            "wrist": spaces.Box(0, 255, (21, 30, 1), np.uint8),
            "stack": spaces.Box(0, 255, (4, 24, 24), np.uint8),
            "joints": spaces.Box(-1, 1, (6,), np.float32),
        }
    )
    with trajcore.Writer(path, obs_space, spaces.Discrete(3)) as w:
        for e, n in enumerate(lengths):
            rows = range(n + 1)
            stack = np.stack([np.stack([_smooth(t + k, 24, 24, 1, 5 * e)[..., 0] for k in range(4)]) for t in rows])
            w.add_episode(
                observations={
                    "front": np.stack([_smooth(t, 33, 47, 3, 10 * e) for t in rows]),
                    "wrist": np.stack([_smooth(t, 21, 30, 1, 3 * e) for t in rows]),
                    "stack": stack,
                    "joints": np.zeros((n + 1, 6), np.float32),
                },
                actions=np.zeros(n, np.int64),
                rewards=np.full(n, 0.5 + e),
                terminations=np.arange(n) == n - 1,
                truncations=np.zeros(n, bool),
            )


def test_writer_cameras_export_one_video_per_episode_and_key(tmp_path: Path) -> None:
    _write_cameras(tmp_path / "cams", [12, 7])
    steps: list[int] = []
    ds = trajcore.open(tmp_path / "cams")
    result = trajcore.export(ds, tmp_path / "videos/", format="mp4", fps=15, progress=steps.append)
    keys = ["obs/front", "obs/stack", "obs/wrist"]  # a Dict space sorts its keys; the float joints are no image
    assert result["files"] == [f"episode-{i:06d}.{k.replace('/', '.')}.mp4" for i in (0, 1) for k in keys]
    assert result["steps"] == 19 and sum(steps) == 19
    assert result["out"] == str(tmp_path / "videos")
    for i, ep in enumerate(ds.episodes):
        for key in keys:
            leaf = key.split("/")[1]
            want = ep.observations[leaf]
            want = want[:, -1, :, :, None] if leaf == "stack" else want  # the newest frame of a stack
            grey = want.shape[-1] == 1
            frames, tags, size = _decode(tmp_path / "videos" / f"episode-{i:06d}.obs.{leaf}.mp4", grey)
            h, w = want.shape[1:3]
            assert len(frames) == ep.length + 1
            assert size == (h + h % 2, w + w % 2)  # odd sides padded to even
            for t, frame in enumerate(frames):
                got = frame[:h, :w] if not grey else frame[:h, :w, None]
                assert _psnr(got, want[t]) >= PSNR_DB, (key, i, t)
            assert tags["trajcore_episode"] == str(i)
            assert tags["trajcore_length"] == str(ep.length)
            assert float(tags["trajcore_return"]) == ep.episode_return
            assert tags["trajcore_key"] == key
            assert tags["trajcore_frames"] == str(ep.length + 1) and tags["trajcore_frames_missing"] == "0"
            assert f"{ep.length} steps, return {ep.episode_return!r}" in tags["comment"]
        with av.open(str(tmp_path / "videos" / f"episode-{i:06d}.obs.front.mp4")) as c:
            assert c.streams.video[0].average_rate == 15


def test_keys_choose_and_refuse_by_name(tmp_path: Path) -> None:
    _write_cameras(tmp_path / "cams", [3])
    out = trajcore.export(tmp_path / "cams", tmp_path / "front", format="mp4", keys=["obs/front"])
    assert out["files"] == ["episode-000000.obs.front.mp4"]
    with pytest.raises(trajcore.InvalidArgumentError, match=r"'obs/joints' is 6 float32, not an image"):
        trajcore.export(tmp_path / "cams", tmp_path / "j", format="mp4", keys=["obs/joints"])
    with pytest.raises(trajcore.InvalidArgumentError, match=r"'obs/nope' names no observation value.*obs/front"):
        trajcore.export(tmp_path / "cams", tmp_path / "n", format="mp4", keys=["obs/nope"])
    with pytest.raises(trajcore.InvalidArgumentError, match="keys, fps and grid apply to mp4"):
        trajcore.export(tmp_path / "cams", tmp_path / "x.csv", keys=["obs/front"])
    with pytest.raises(trajcore.InvalidArgumentError, match="fps must be a positive number"):
        trajcore.export(tmp_path / "cams", tmp_path / "f", format="mp4", fps=0)
    assert not (tmp_path / "f").exists()  # nothing half-written left behind
    with pytest.raises(trajcore.InvalidArgumentError, match="exists"):
        trajcore.export(tmp_path / "cams", tmp_path / "front", format="mp4")


def test_cartpole_rendered_frames_by_default(tmp_path: Path) -> None:
    rec = trajcore.RecordEpisodes(gym.make("CartPole-v1", render_mode="rgb_array"), tmp_path / "cp", render_frames=True)
    rec.action_space.seed(0)
    for k in range(2):
        rec.reset(seed=k)
        for _ in range(30):
            _, _, terminated, truncated, _ = rec.step(rec.action_space.sample())
            if terminated or truncated:
                break
    rec.close()
    ds = trajcore.open(tmp_path / "cp")
    out = trajcore.export(ds.select(min_length=1), tmp_path / "v", format="mp4")
    assert out["files"] == [f"episode-{i:06d}.render.frame.mp4" for i in range(ds.num_episodes)]  # obs: no image
    for i, ep in enumerate(ds.episodes):
        frames, tags, size = _decode(tmp_path / "v" / out["files"][i])
        assert size == (400, 600) and len(frames) == ep.length + 1
        assert min(_psnr(f, ep.frames[t]) for t, f in enumerate(frames)) >= PSNR_DB
        assert tags["trajcore_return"] == repr(ep.episode_return)
        with av.open(str(tmp_path / "v" / out["files"][i])) as c:
            assert c.streams.video[0].average_rate == 50  # CartPole's render_fps


class _Painter(gym.Env[np.ndarray, int]):
    """Renders a smooth picture of its own (sub-env id, step), episodes of lengths 3, 5, 7, ..."""

    metadata: dict[str, Any] = {"render_modes": ["rgb_array"], "render_fps": 20}  # noqa: RUF012

    def __init__(self, render_mode: str = "rgb_array", env_id: int = 0) -> None:
        self.render_mode = render_mode
        self.observation_space = spaces.Box(0, 1, (2,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.env_id, self.episode, self.t = env_id, -1, 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.episode += 1
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.t += 1
        done = self.t >= 3 + 2 * self.episode + self.env_id
        return np.zeros(2, np.float32), 1.0, done, False, {}

    def render(self) -> np.ndarray:
        return _smooth(self.t, 20, 30, 3, 40 * self.env_id + 13 * self.episode)


def test_grid_tiles_the_sub_envs(tmp_path: Path) -> None:
    envs = gym.vector.SyncVectorEnv([lambda k=k: _Painter(env_id=k) for k in range(3)])
    rec = trajcore.RecordVectorEpisodes(envs, tmp_path / "vec", render_frames=True)
    rec.reset(seed=0)
    for _ in range(14):
        rec.step(np.zeros(3, np.int64))
    rec.close()
    ds = trajcore.open(tmp_path / "vec")
    complete = ds.select(complete=True)
    out = trajcore.export(complete, tmp_path / "grid", format="mp4", grid=True)
    assert out["files"] == ["grid.render.frame.mp4"]
    frames, tags, size = _decode(tmp_path / "grid" / "grid.render.frame.mp4")
    assert size == (2 * 20, 2 * 30)  # 3 tiles: 2 a row, 2 rows
    assert json.loads(tags["trajcore_tiles"]) == [[0, 0], [0, 1], [0, 2]]
    per_tile: dict[int, list[Any]] = {0: [], 1: [], 2: []}
    for ep in complete:
        per_tile[ep.env_index].append(ep)
    assert len(frames) == max(sum(e.length + 1 for e in eps) for eps in per_tile.values())
    placed = {row[0]: row for row in json.loads(tags["trajcore_episodes"])}
    for tile, eps in per_tile.items():
        y, x = divmod(tile, 2)
        f = 0
        for ep in eps:
            assert placed[ep.index][1:4] == [tile, f, ep.length]
            for t in range(ep.length + 1):
                got = frames[f][y * 20 : (y + 1) * 20, x * 30 : (x + 1) * 30]
                assert _psnr(got, ep.frames[t]) >= PSNR_DB, (tile, ep.index, t)
                f += 1
        for rest in frames[f:]:  # its episodes are over: black (but a codec's bleed at the edges)
            assert rest[y * 20 : (y + 1) * 20, x * 30 : (x + 1) * 30].mean() <= 3
    assert max(frame[20:, 30:].mean() for frame in frames) <= 3  # the fourth tile has no sub-env


def test_write_mp4_absent_frames_are_black(tmp_path: Path) -> None:
    from trajcore.video import write_mp4

    frames = np.stack([_smooth(t, 16, 16, 3) for t in range(4)])
    present = np.array([True, False, True, True])
    assert write_mp4(str(tmp_path / "a.mp4"), frames, present, tags={"comment": "x"}) == 4
    got, tags, _ = _decode(tmp_path / "a.mp4")
    assert got[1].mean() <= 3 and _psnr(got[2], frames[2]) >= PSNR_DB
    assert tags["comment"] == "x"


def test_without_pyav_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write_cameras(tmp_path / "cams", [3])
    monkeypatch.setitem(sys.modules, "av", None)  # import av now raises ImportError
    with pytest.raises(trajcore.MissingDependencyError, match=r"pip install \"trajcore\[video\]\""):
        trajcore.export(tmp_path / "cams", tmp_path / "v", format="mp4")
    assert not (tmp_path / "v").exists()


def test_viewer_links_its_video_where_pyav_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write_cameras(tmp_path / "cams", [5])
    ep = trajcore.open(tmp_path / "cams").episodes[0]
    page = Path(trajcore.viewer.write_html(ep, tmp_path / "ep0.html"))
    assert '<a href="ep0.mp4" download>save as video</a>' in page.read_text()
    frames, tags, _ = _decode(tmp_path / "ep0.mp4")
    assert len(frames) == 6 and _psnr(frames[3][:33, :47], ep.observations["front"][3]) >= PSNR_DB
    assert tags["trajcore_length"] == "5"

    monkeypatch.setitem(sys.modules, "av", None)
    page = Path(trajcore.viewer.write_html(ep, tmp_path / "plain.html"))
    assert "save as video" not in page.read_text() and not (tmp_path / "plain.mp4").exists()
    with pytest.raises(trajcore.MissingDependencyError, match=r"trajcore\[video\]"):
        trajcore.viewer.write_html(ep, tmp_path / "asked.html", video=True)


def test_cli_export_mp4(tmp_path: Path) -> None:
    _write_cameras(tmp_path / "cams", [4, 6])
    cmd = [sys.executable, "-m", "trajcore", "export", str(tmp_path / "cams"), str(tmp_path / "v"), "--format", "mp4"]
    done = subprocess.run(
        [*cmd, "--keys", "obs/front,obs/wrist", "--fps", "12"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "4 videos" in done.stderr
    assert sorted(p.name for p in (tmp_path / "v").iterdir()) == [
        f"episode-{i:06d}.obs.{k}.mp4" for i in (0, 1) for k in ("front", "wrist")
    ]
    frames, tags, _ = _decode(tmp_path / "v" / "episode-000001.obs.front.mp4")
    assert len(frames) == 7 and tags["trajcore_return"] == repr(6 * 1.5)
    grid = subprocess.run(
        [*cmd[:5], str(tmp_path / "g"), "--format", "mp4", "--grid", "--keys", "obs/front"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert grid.returncode == 0, grid.stderr
    frames, _, size = _decode(tmp_path / "g" / "grid.obs.front.mp4")
    assert size == (34, 48) and len(frames) == 5 + 7  # one sub-env: its episodes one after another
    bad = subprocess.run(
        [*cmd[:5], str(tmp_path / "b"), "--format", "mp4", "--keys", "obs/joints"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode != 0 and "'obs/joints' is 6 float32, not an image" in bad.stderr
    wrong = subprocess.run([*cmd[:5], str(tmp_path / "c.csv"), "--grid"], capture_output=True, text=True, timeout=300)
    assert wrong.returncode != 0 and "--grid apply to --format mp4" in wrong.stderr


def test_recording_without_frames_is_skipped_and_said(tmp_path: Path) -> None:
    obs_space, act_space = spaces.Box(-1, 1, (2,), np.float32), spaces.Discrete(2)
    rows = 4
    with trajcore.Writer(tmp_path / "mixed", obs_space, act_space, render_frames=True) as w:
        w.add_episode(
            observations=np.zeros((rows, 2), np.float32),
            actions=np.zeros(rows - 1, np.int64),
            rewards=np.ones(rows - 1),
            terminations=np.arange(rows - 1) == rows - 2,
            truncations=np.zeros(rows - 1, bool),
            frames=np.stack([_smooth(t, 16, 16, 3) for t in range(rows)]),
        )
    with trajcore.Writer(tmp_path / "mixed", obs_space, act_space) as w:  # a second recording, no frames
        w.add_episode(
            observations=np.zeros((3, 2), np.float32),
            actions=np.zeros(2, np.int64),
            rewards=np.ones(2),
            terminations=np.array([False, True]),
            truncations=np.zeros(2, bool),
        )
    ds = trajcore.open(tmp_path / "mixed")
    assert ds.num_recordings == 2
    with pytest.warns(trajcore.TrajcoreWarning, match=r"1 episode videos not written.*render/frame"):
        out = trajcore.export(ds, tmp_path / "v", format="mp4")
    assert out["files"] == ["episode-000000.render.frame.mp4"] and out["skipped"] == 1
    grid = trajcore.export(ds, tmp_path / "g", format="mp4", grid=True)
    frames, tags, size = _decode(tmp_path / "g" / grid["files"][0])
    assert size == (16, 2 * 16) and len(frames) == rows  # two tiles; the second (no frames) black
    assert json.loads(tags["trajcore_tiles"]) == [[0, 0], [1, 0]]
    assert [row[2] for row in json.loads(tags["trajcore_episodes"])] == [0, None]
    assert all(
        f[:, 16:].mean() <= 3 and _psnr(f[:, :16], _smooth(t, 16, 16, 3)) >= PSNR_DB for t, f in enumerate(frames)
    )


def test_cli_view_writes_the_video_unless_told(tmp_path: Path) -> None:
    _write_cameras(tmp_path / "cams", [4])
    view = [sys.executable, "-m", "trajcore", "view", str(tmp_path / "cams"), "--episode", "0", "-o"]
    done = subprocess.run([*view, str(tmp_path / "a.html")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "save as video" in (tmp_path / "a.html").read_text()
    assert len(_decode(tmp_path / "a.mp4")[0]) == 5
    done = subprocess.run([*view, str(tmp_path / "b.html"), "--no-video"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "save as video" not in (tmp_path / "b.html").read_text() and not (tmp_path / "b.mp4").exists()
