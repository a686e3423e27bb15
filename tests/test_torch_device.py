"""`trajcore.torch.DeviceTransitions`: a replay held on a torch device (CI: ``device="cpu"``)
gives, for the same step numbers, exactly the batch `Dataset.transitions.gather` gives, on
frame stacks of a real pixel env (frames held once), vector envs over several shards and
episode selections, and columns that are no frame stacks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import trajcore
from gymnasium.wrappers import FrameStackObservation
from helpers import assert_tree_equal
from test_frame_stacks import FrameEnv

torch = pytest.importorskip("torch", reason="torch is not installed (trajcore.torch is optional)")
from trajcore.torch import DeviceTransitions  # noqa: E402

DEVICE = "cpu"


def numpy_tree(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: numpy_tree(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(numpy_tree(v) for v in value)
    assert isinstance(value, torch.Tensor) and value.device.type == DEVICE
    return value.numpy()


def assert_same_as_host(held: DeviceTransitions, source: Any, steps: np.ndarray) -> None:
    """Every leaf (dtype, shape, values) of the device batch equals the host gather's."""
    want = source.transitions.gather(steps, keys=held.keys)
    assert_tree_equal(numpy_tree(held.gather(steps)), want)
    assert_tree_equal(numpy_tree(held.gather(torch.from_numpy(steps))), want)


def every_step_and_random(n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [np.arange(n), rng.integers(0, n, 256), np.array([-1, 0, -n])]


def record(venv: Any, path: Path, steps: int, seed: int = 0, **options: Any) -> trajcore.Dataset:
    """`steps` random steps of vector env `venv` recorded at `path`, opened strict."""
    rec = trajcore.RecordVectorEpisodes(venv, path, **options)
    rec.action_space.seed(seed)
    rec.reset(seed=seed)
    for _ in range(steps):
        rec.step(rec.action_space.sample())
    rec.close()
    return trajcore.open(path, strict=True)


def _breakout() -> gym.Env[Any, Any]:
    env = gym.make("ALE/Breakout-v5", frameskip=1, max_episode_steps=120)
    env = gym.wrappers.AtariPreprocessing(env, frame_skip=4, screen_size=84, noop_max=10)
    return FrameStackObservation(env, 4)


@pytest.fixture(scope="module")
def atari(tmp_path_factory: pytest.TempPathFactory) -> trajcore.Dataset:
    """Breakout frame stacks (4, 84, 84) from 2 sub-envs, truncated at 30 steps, in small
    chunks over several shards."""
    ale_py = pytest.importorskip("ale_py", reason="ale-py is not installed (.ci/run installs it)")
    gym.register_envs(ale_py)
    venv = gym.vector.SyncVectorEnv([_breakout, _breakout])
    path = tmp_path_factory.mktemp("atari") / "d"
    return record(venv, path, 170, seed=1, chunk_bytes=100_000, max_shard_bytes=20_000)


def test_atari_frame_stacks_equal_host_reads_and_are_held_once(atari: trajcore.Dataset) -> None:
    assert len(atari.shards) > 1
    assert any(e.truncated for e in atari.episodes)
    assert len({e.recording for e in atari.episodes}) == 1 and atari.num_episodes > 4
    held = DeviceTransitions(atari, DEVICE)
    n = atari.num_steps
    assert len(held) == n
    for steps in every_step_and_random(n):
        assert_same_as_host(held, atari, steps)
    batch = held.sample(32)
    assert batch["observations"].shape == (32, 4, 84, 84) and batch["observations"].dtype == torch.uint8
    assert batch["next_observations"].shape == (32, 4, 84, 84)
    assert batch["actions"].shape == (32,) and batch["rewards"].shape == (32,)
    # Each frame about once: far less than the stacks of observations and next observations.
    stacks = 2 * n * 4 * 84 * 84
    assert held.nbytes < 0.3 * stacks, (held.nbytes, stacks)
    assert held.nbytes > (n + atari.num_episodes) * 84 * 84


def test_terminations_selections_and_keys(tmp_path: Path) -> None:
    """Frame stacks of 3 whose episodes terminate (3 to 20 steps), with padded starts; a
    selection of their episodes; keys other than the default."""
    venv = gym.vector.SyncVectorEnv([lambda: FrameStackObservation(FrameEnv(shape=(12, 10)), 3)] * 2)
    ds = record(venv, tmp_path / "d", 300, chunk_bytes=4_000)
    assert any(e.terminated for e in ds.episodes)
    held = DeviceTransitions(ds, DEVICE)
    for steps in every_step_and_random(ds.num_steps):
        assert_same_as_host(held, ds, steps)
    subset = ds.episodes[3:9]
    some = DeviceTransitions(subset, DEVICE, keys=["next_observations", "terminations"])
    assert len(some) == subset.num_steps
    for steps in every_step_and_random(subset.num_steps):
        assert_same_as_host(some, subset, steps)
    assert list(some.gather([0])) == ["next_observations", "terminations", "episode_index", "step_index"]


def test_columns_that_are_no_frame_stacks(tmp_path: Path) -> None:
    """CartPole from a vector env of 4: the same reads, from a path."""
    ds = record(gym.make_vec("CartPole-v1", 4), tmp_path / "cp", 400, chunk_bytes=2_000)
    held = DeviceTransitions(tmp_path / "cp", DEVICE)
    for steps in every_step_and_random(ds.num_steps):
        assert_same_as_host(held, ds, steps)
    batch = held.sample(64)
    assert batch["observations"].shape == (64, 4) and batch["observations"].dtype == torch.float32
    assert batch["terminations"].dtype == torch.bool


def test_sampling_is_reproducible_and_batches_iterate(tmp_path: Path) -> None:
    record(gym.make_vec("CartPole-v1", 1), tmp_path / "cp", 200)
    held = DeviceTransitions(tmp_path / "cp", DEVICE)
    first = held.sample(16, torch.Generator(DEVICE).manual_seed(5))
    again = held.sample(16, torch.Generator(DEVICE).manual_seed(5))
    assert_tree_equal(numpy_tree(first), numpy_tree(again))
    batches = list(held.batches(8, batches=3, generator=torch.Generator(DEVICE).manual_seed(1)))
    assert len(batches) == 3 and all(b["rewards"].shape == (8,) for b in batches)
    with pytest.raises(IndexError):
        held.gather([held.num_steps])


def test_memory_beyond_the_limit_is_refused_naming_the_size(atari: trajcore.Dataset) -> None:
    held = DeviceTransitions(atari, DEVICE)
    with pytest.raises(trajcore.InvalidArgumentError, match=r"take \d+ bytes.* of the 100000 bytes allowed"):
        DeviceTransitions(atari, DEVICE, max_bytes=100_000)
    # Just enough is enough.
    assert DeviceTransitions(atari, DEVICE, max_bytes=held.nbytes).nbytes == held.nbytes
    with pytest.raises(trajcore.InvalidArgumentError, match="allowed"):
        DeviceTransitions(atari, DEVICE, max_bytes=held.nbytes - 1)


def test_dict_and_tuple_observations_keep_each_leaf_on_its_column(tmp_path: Path) -> None:
    """Observations nested in a Dict (keys not in sorted order) and a Tuple: each leaf of the
    device batch is its own column's values, as the host gather nests them."""
    from gymnasium import spaces
    from helpers import SpaceEnv

    space = spaces.Dict(
        {
            "zeta": spaces.Box(0, 255, (3, 5), np.uint8),
            "alpha": spaces.Tuple((spaces.Discrete(7), spaces.Box(-1, 1, (2,), np.float32))),
        }
    )
    venv = gym.vector.SyncVectorEnv([lambda: SpaceEnv(space, infos=False) for _ in range(2)])
    ds = record(venv, tmp_path / "d", 200)
    held = DeviceTransitions(ds, DEVICE)
    for steps in every_step_and_random(ds.num_steps):
        assert_same_as_host(held, ds, steps)
