"""`render_frames=True`: what ``env.render()`` returned after every reset and step, one frame per
observation row, checked against a replay of each recorded episode's actions on a fresh env of
the same id and seed that renders each row itself (so a frame on the wrong row, or of the wrong
episode, fails); for CartPole, Atari (frames and pixel observations) and MuJoCo, single envs and
vector envs (sync and async, every autoreset mode)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import pytest
import trajcore
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]


def _record_single(env: gym.Env[Any, Any], path: Path, episodes: int, max_steps: int, **options: Any) -> None:
    rec = trajcore.RecordEpisodes(env, path, render_frames=True, **options)
    rec.action_space.seed(0)
    for k in range(episodes):
        rec.reset(seed=100 + k)
        for _ in range(max_steps):
            _, _, terminated, truncated, _ = rec.step(rec.action_space.sample())
            if terminated or truncated:
                break
    rec.close()


def _replay_single(ds: trajcore.Dataset, make: Callable[[], gym.Env[Any, Any]]) -> int:
    """Every episode replayed on a fresh env reset with its seed: each row's frame must be what
    that env renders there. Returns the rows checked."""
    checked = 0
    env = make()
    for k, ep in enumerate(ds.episodes):
        assert ep.frames is not None and ep.frame_mask is not None
        assert len(ep.frames) == ep.length + 1 and ep.frame_mask.all()
        env.reset(seed=100 + k)
        assert np.array_equal(ep.frames[0], env.render()), f"episode {k}: reset frame"
        for t in range(ep.length):
            env.step(ep.actions[t])
            assert np.array_equal(ep.frames[t + 1], env.render()), f"episode {k}: frame of row {t + 1}"
        checked += ep.length + 1
    env.close()
    return checked


def test_cartpole_frames_are_the_rendered_rows(tmp_path: Path) -> None:
    make = lambda: gym.make("CartPole-v1", render_mode="rgb_array")  # noqa: E731
    _record_single(make(), tmp_path / "cp", episodes=3, max_steps=40)
    with trajcore.open(tmp_path / "cp") as ds:
        assert ds.num_episodes == 3
        assert ds.episodes[0].frames.shape[1:] == (400, 600, 3)
        assert ds.episodes[0].frames.dtype == np.uint8
        assert _replay_single(ds, make) > 40
        # Most frames differ from the one before: the replay check fails for frames a row off.
        ep = ds.episodes[0]
        changed = sum(not np.array_equal(a, b) for a, b in zip(ep.frames[1:], ep.frames[:-1], strict=True))
        assert changed > ep.length // 2


def test_atari_frames_and_pixel_observations(tmp_path: Path) -> None:
    import ale_py

    gym.register_envs(ale_py)
    make = lambda: gym.make("ALE/Breakout-v5", render_mode="rgb_array")  # noqa: E731
    _record_single(make(), tmp_path / "breakout", episodes=2, max_steps=60)
    with trajcore.open(tmp_path / "breakout") as ds:
        for ep in ds.episodes:
            # The RGB observation is the screen: it and the rendered frame are the same image.
            assert ep.frames.shape == ep.observations.shape == (ep.length + 1, 210, 160, 3)
            assert np.array_equal(ep.frames, ep.observations)
        assert _replay_single(ds, make) == sum(ep.length + 1 for ep in ds.episodes)

    # Preprocessed grey 84x84 observations, frames of the full screen beside them.
    def preprocessed() -> gym.Env[Any, Any]:
        env = gym.make("ALE/Breakout-v5", render_mode="rgb_array", frameskip=1)
        return gym.wrappers.AtariPreprocessing(env, frame_skip=4, screen_size=84)

    _record_single(preprocessed(), tmp_path / "pre", episodes=1, max_steps=50)
    with trajcore.open(tmp_path / "pre") as ds:
        ep = ds.episodes[0]
        assert ep.observations.shape == (ep.length + 1, 84, 84)
        assert ep.frames.shape == (ep.length + 1, 210, 160, 3)
        assert _replay_single(ds, preprocessed) == ep.length + 1


# Debian packages that give MuJoCo an EGL context without a display or GPU (Mesa's software driver).
EGL_DEBIAN = "libegl1 libegl-mesa0 libgl1-mesa-dri"


def _skip_without_egl() -> None:
    """EGL is a system library, which ``pip install ".[test]"`` cannot install: without one that
    opens a context, the test skips and names the Debian packages."""
    import mujoco

    try:
        context = mujoco.GLContext(8, 8)
    except Exception as e:  # mujoco raises ImportError or RuntimeError, by what is missing
        pytest.skip(f"needs the Debian packages {EGL_DEBIAN} (apt-get install -y {EGL_DEBIAN}): {e}")
    context.free()


def test_mujoco_frames(tmp_path: Path) -> None:
    # MuJoCo renders through OpenGL: EGL here (MUJOCO_GL, set in conftest.py).
    _skip_without_egl()
    make = lambda: gym.make("Hopper-v5", render_mode="rgb_array", width=96, height=64)  # noqa: E731
    _record_single(make(), tmp_path / "hopper", episodes=2, max_steps=15)
    with trajcore.open(tmp_path / "hopper") as ds:
        assert ds.episodes[0].frames.shape[1:] == (64, 96, 3)
        assert ds.episodes[0].frames.std() > 0, "a rendered scene, not a blank frame"
        assert _replay_single(ds, make) > 4


def _vector(mode: AutoresetMode, vectorization: str, n: int = 3) -> Any:
    return gym.make_vec(
        "CartPole-v1",
        num_envs=n,
        vectorization_mode=vectorization,
        vector_kwargs={"autoreset_mode": mode},
        render_mode="rgb_array",
        max_episode_steps=12,
    )


@pytest.mark.parametrize("vectorization", ["sync", "async"])
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_vector_frames_per_sub_env(tmp_path: Path, mode: AutoresetMode, vectorization: str) -> None:
    """Each sub-env's episodes replayed in order on one fresh single env (reset with its seed
    first, then without, as autoreset does): rows carry that sub-env's own frames. Under
    SAME_STEP the final row of an episode that ended inside a step has no frame (masked); every
    other row has one."""
    n, seed = 3, 7
    rec = trajcore.RecordVectorEpisodes(_vector(mode, vectorization, n), tmp_path / "v", render_frames=True)
    rec.action_space.seed(0)
    rec.reset(seed=seed)
    for _ in range(40):
        _, _, term, trunc, _ = rec.step(rec.action_space.sample())
        done = np.logical_or(term, trunc)
        if mode is AutoresetMode.DISABLED and done.any():
            rec.reset(options={"reset_mask": done})
    rec.close()
    with trajcore.open(tmp_path / "v") as ds:
        ended_inside = 0
        for i in range(n):
            env = gym.make("CartPole-v1", render_mode="rgb_array", max_episode_steps=12)
            for k, ep in enumerate(e for e in ds.episodes if e.env_index == i):
                where = f"sub-env {i} episode {k}"
                env.reset(seed=seed + i if k == 0 else None)
                assert ep.frame_mask[0] and np.array_equal(ep.frames[0], env.render()), where
                for t in range(ep.length):
                    env.step(ep.actions[t])
                    final = t + 1 == ep.length and ep.complete
                    if final and mode is AutoresetMode.SAME_STEP:
                        assert not ep.frame_mask[t + 1], f"{where}: the final row has no frame"
                        assert not ep.frames[t + 1].any(), f"{where}: a missing frame reads as zeros"
                        ended_inside += 1
                    else:
                        assert ep.frame_mask[t + 1], f"{where} row {t + 1}"
                        assert np.array_equal(ep.frames[t + 1], env.render()), f"{where} row {t + 1}"
            env.close()
        if mode is AutoresetMode.SAME_STEP:
            assert ended_inside >= n, "every sub-env ended at least one episode"


class _OddRenderer(gym.Env[Any, Any]):
    """Renders a 4x6 frame showing the step count, except None at step 3 and a frame of another
    shape at step 5."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "render_fps": 12}
    observation_space = spaces.Box(0, 100, (1,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self, render_mode: str | None = "rgb_array") -> None:
        self.render_mode = render_mode
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self.t += 1
        return np.full(1, self.t, np.float32), 1.0, self.t == 8, False, {}

    def render(self) -> Any:
        if self.t == 3:
            return None
        if self.t == 5:
            return np.zeros((2, 2, 3), np.uint8)
        return np.full((4, 6, 3), self.t, np.uint8)


def test_missing_and_misfit_frames_are_masked(tmp_path: Path) -> None:
    rec = trajcore.RecordEpisodes(_OddRenderer(), tmp_path / "odd", render_frames=True)
    rec.reset(seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(8):
            rec.step(0)
        stats = rec.stats()
        rec.close()
    assert stats["values_not_recorded"] == {"render/frame": 1}
    assert any("render entry 'frame'" in str(w.message) for w in caught)
    with trajcore.open(tmp_path / "odd") as ds:
        ep = ds.episodes[0]
        assert ds.meta(0)["user"]["render_fps"] == 12
        assert ep.frame_mask.tolist() == [t not in (3, 5) for t in range(9)]
        for t in range(9):
            want = 0 if t in (3, 5) else t
            assert (ep.frames[t] == want).all(), t


def test_envs_that_do_not_render_rgb_arrays_are_refused(tmp_path: Path) -> None:
    with pytest.raises(trajcore.InvalidArgumentError, match=r"CartPole-v1 has render_mode=None.*rgb_array"):
        trajcore.RecordEpisodes(gym.make("CartPole-v1"), tmp_path / "a", render_frames=True)
    with pytest.raises(trajcore.InvalidArgumentError, match="render_mode='human'"):
        trajcore.RecordEpisodes(_OddRenderer("human"), tmp_path / "b", render_frames=True)
    envs = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync")
    with pytest.raises(trajcore.InvalidArgumentError, match="render_mode=None"):
        trajcore.RecordVectorEpisodes(envs, tmp_path / "c", render_frames=True)
    envs.close()
    assert not (tmp_path / "a").exists(), "nothing is created for a refused recorder"


def test_no_frames_without_the_option(tmp_path: Path) -> None:
    rec = trajcore.RecordEpisodes(gym.make("CartPole-v1", render_mode="rgb_array"), tmp_path / "cp")
    rec.reset(seed=0)
    rec.step(0)
    rec.close()
    with trajcore.open(tmp_path / "cp") as ds:
        assert ds.episodes[0].frames is None and ds.episodes[0].frame_mask is None


def test_frame_codec_is_lossless_by_default_and_can_be_set(tmp_path: Path) -> None:
    env = gym.make("CartPole-v1", render_mode="rgb_array")
    rec = trajcore.RecordEpisodes(env, tmp_path / "raw", render_frames=True, codecs={"render": {"zstd_level": None}})
    rec.reset(seed=0)
    for _ in range(5):
        rec.step(0)
    rec.close()
    _record_single(gym.make("CartPole-v1", render_mode="rgb_array"), tmp_path / "zstd", episodes=1, max_steps=5)
    with trajcore.open(tmp_path / "raw") as raw, trajcore.open(tmp_path / "zstd") as packed:
        codecs = {c["name"]: c["codec"] for c in raw._core.columns(0)}
        assert codecs["render/frame"]["zstd_level"] is None
        codecs = {c["name"]: c["codec"] for c in packed._core.columns(0)}
        assert codecs["render/frame"] == {"delta": True, "zstd_level": 3, "chunk_bytes": 4 << 20}
        stored = {s["name"]: s for s in packed._core.column_stats()}["render/frame"]
        assert stored["stored_bytes"] * 50 < stored["raw_bytes"], "CartPole frames compress well"


def test_vector_frames_given_as_one_array_or_with_gaps(tmp_path: Path) -> None:
    """Any VectorEnv-like object: render() may return one array over the sub-envs, or a tuple
    with None for a sub-env that has no frame."""

    class Foreign:
        num_envs = 2
        single_observation_space = spaces.Box(0, 9, (1,), np.float32)
        single_action_space = spaces.Discrete(2)
        observation_space = spaces.Box(0, 9, (2, 1), np.float32)
        action_space = spaces.MultiDiscrete([2, 2])
        metadata: ClassVar[dict[str, Any]] = {"autoreset_mode": AutoresetMode.NEXT_STEP}
        render_mode = "rgb_array"

        def __init__(self) -> None:
            self.t = 0

        def reset(self, *, seed: Any = None, options: Any = None) -> Any:
            self.t = 0
            return np.zeros((2, 1), np.float32), {}

        def step(self, actions: Any) -> Any:
            self.t += 1
            return np.full((2, 1), self.t, np.float32), np.ones(2), np.zeros(2, bool), np.zeros(2, bool), {}

        def render(self) -> Any:
            frames = np.stack([np.full((3, 3, 3), 10 * i + self.t, np.uint8) for i in range(2)])
            return (frames[0], None) if self.t == 2 else frames

        def close(self) -> None:
            pass

    rec = trajcore.RecordVectorEpisodes(Foreign(), tmp_path / "f", render_frames=True)
    rec.reset()
    for _ in range(3):
        rec.step(np.zeros(2, np.int64))
    rec.close()
    with trajcore.open(tmp_path / "f") as ds:
        for ep in ds.episodes:
            i = ep.env_index
            assert ep.frame_mask.tolist() == [True, True, i == 0, True]
            for t in range(4):
                assert (ep.frames[t] == (10 * i + t if ep.frame_mask[t] else 0)).all()


def test_timelog_is_live_and_not_empty(tmp_path: Path) -> None:
    rec = trajcore.RecordEpisodes(gym.make("CartPole-v1", render_mode="rgb_array"), tmp_path / "t", render_frames=True)
    rec.reset(seed=0)
    for _ in range(30):
        _, _, te, tr, _ = rec.step(rec.action_space.sample())
        if te or tr:
            rec.reset()
    rec.close()
    timelog = rec.stats()["timelog"]
    assert timelog, "closing publishes the last sample"
    assert sum(s["steps"] for s in timelog) == 30
    assert sum(s["compress_s"] for s in timelog) > 0
    assert set(timelog[0]) >= {"t_s", "dt_s", "copy_s", "encode_s", "compress_s", "write_s", "fsync_s", "ring_fill"}


class _BigFrames(gym.Env[Any, Any]):
    """3 MB frames: 8 sub-envs make a 24 MB step, more than the 16 MiB default ring."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "autoreset_mode": AutoresetMode.NEXT_STEP}
    observation_space = spaces.Box(0, 1, (1,), np.float32)
    action_space = spaces.Discrete(2)
    render_mode = "rgb_array"

    def __init__(self) -> None:
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self.t += 1
        return np.zeros(1, np.float32), 0.0, False, self.t == 3, {}

    def render(self) -> Any:
        return np.full((1000, 1000, 3), self.t, np.uint8)


def test_the_ring_is_sized_for_the_frames_at_the_first_reset(tmp_path: Path) -> None:
    envs = gym.vector.SyncVectorEnv([_BigFrames for _ in range(8)])
    rec = trajcore.RecordVectorEpisodes(envs, tmp_path / "big", render_frames=True)
    assert not (tmp_path / "big").exists(), "nothing is written before the first reset"
    with pytest.raises(trajcore.InvalidArgumentError, match="starts at the first reset"):
        rec.stats()
    assert not rec.closed
    rec.reset(seed=0)
    assert rec.stats()["ring_capacity"] >= 64 * 8 * 3_000_000 or rec.stats()["ring_capacity"] >= 1 << 30
    for _ in range(4):
        rec.step(np.zeros(8, np.int64))
    rec.close()
    assert rec.closed
    with trajcore.open(tmp_path / "big") as ds:
        assert ds.num_episodes == 8
        assert all((ep.frames[t] == t).all() for ep in ds.episodes for t in range(4))


def test_a_recorder_closed_before_its_first_reset_closes_the_env(tmp_path: Path) -> None:
    env = _BigFrames()
    closed: list[bool] = []
    env.close = lambda: closed.append(True)  # type: ignore[method-assign]
    rec = trajcore.RecordEpisodes(env, tmp_path / "never", render_frames=True)
    rec.close()
    assert closed == [True] and rec.closed
    assert not (tmp_path / "never").exists()
    rec = trajcore.RecordEpisodes(_BigFrames(), tmp_path / "sized", render_frames=True, ring_bytes=16 << 20)
    assert list((tmp_path / "sized").iterdir()), "with ring_bytes given, the recorder starts at once"
    rec.close()
