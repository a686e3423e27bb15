"""`trajcore.mix`: each batch takes exactly its share of rows from each source (largest
remainder rule), names each row's source, draws the same batch for the same seed, and refuses
sources whose spaces differ unless the caller picks keys whose values match."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import trajcore
from trajcore.errors import InvalidArgumentError, SchemaError
from trajcore.read.train.mix import shares


def _record(path: Path, env_id: str, seed: int, steps: int = 300) -> Path:
    envs = trajcore.RecordVectorEpisodes(gym.make_vec(env_id, num_envs=4, vectorization_mode="sync"), path)
    envs.reset(seed=seed)
    envs.action_space.seed(seed)
    for _ in range(steps):
        envs.step(envs.action_space.sample())
    envs.close()
    return path


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("mix")
    return {
        "offline": _record(root / "offline", "CartPole-v1", 0),
        "online": _record(root / "online", "CartPole-v1", 1, steps=100),
        "acrobot": _record(root / "acrobot", "Acrobot-v1", 2, steps=50),
    }


@pytest.mark.parametrize(
    ("weights", "n", "want"),
    [
        ([0.5, 0.5], 256, [128, 128]),
        ([0.5, 0.5], 255, [128, 127]),  # a tie: the first source gets the row
        ([1, 1, 1], 256, [86, 85, 85]),
        ([0.25, 0.75], 10, [3, 7]),  # 2.5 and 7.5: the remainders tie, the first source wins
        ([0.7, 0.2, 0.1], 256, [179, 51, 26]),
        ([3, 0], 7, [7, 0]),
        ([1, 2], 0, [0, 0]),
        ([0.1] * 10, 3, [1, 1, 1, 0, 0, 0, 0, 0, 0, 0]),
    ],
)
def test_shares_follow_the_largest_remainder_rule(weights: list[float], n: int, want: list[int]) -> None:
    got = shares(weights, n)
    exact = [w / sum(weights) * n for w in weights]
    assert sum(got) == n
    assert all(abs(g - e) < 1 for g, e in zip(got, exact, strict=True))
    assert got == want


@pytest.mark.parametrize("weights", [[-1, 2], [float("nan"), 1], [0, 0], [float("inf"), 1]])
def test_bad_weights_are_refused(weights: list[float]) -> None:
    with pytest.raises(InvalidArgumentError, match="weights"):
        shares(weights, 10)


def test_batches_take_exact_counts_and_name_their_source(datasets: dict[str, Path]) -> None:
    offline, online = trajcore.open(datasets["offline"]), trajcore.open(datasets["online"])
    mixture = trajcore.mix({"offline": offline, "online": online}, [0.75, 0.25])
    for n in (256, 255, 7, 1):
        batch = mixture.sample_transitions(n, seed=n)
        counts = shares([0.75, 0.25], n)
        assert len(batch["rewards"]) == n and batch["observations"].shape == (n, 4)
        assert (batch["source"] == "offline").sum() == counts[0]
        assert (batch["source"] == "online").sum() == counts[1]
        assert batch["source_index"].tolist() == [0] * counts[0] + [1] * counts[1]
        # Each row is its source's own: the observation at its episode and step there.
        for i in range(n):
            ds = offline if batch["source"][i] == "offline" else online
            ep, step = int(batch["episode_index"][i]), int(batch["step_index"][i])
            np.testing.assert_array_equal(ds.episodes[ep].observations[step], batch["observations"][i])


def test_the_same_seed_draws_the_same_batch(datasets: dict[str, Path]) -> None:
    mixture = trajcore.mix([datasets["offline"], datasets["online"]], [0.5, 0.5])
    a, b = mixture.sample_transitions(128, seed=3), mixture.sample_transitions(128, seed=3)
    c = mixture.sample_transitions(128, seed=4)
    for key in ("observations", "actions", "episode_index", "step_index", "source"):
        np.testing.assert_array_equal(a[key], b[key])
    assert not np.array_equal(a["observations"], c["observations"])
    # Named by their paths when given as a list.
    assert set(a["source"]) == {str(datasets["offline"]), str(datasets["online"])}


def test_sources_with_other_spaces_are_refused_by_name(datasets: dict[str, Path]) -> None:
    with pytest.raises(SchemaError, match=r"acrobot.*observation space"):
        trajcore.mix({"cartpole": datasets["offline"], "acrobot": datasets["acrobot"]}, [0.5, 0.5])
    # Keys whose values match mix; keys whose values differ are refused by name.
    mixture = trajcore.mix(
        {"cartpole": datasets["offline"], "acrobot": datasets["acrobot"]}, [0.5, 0.5], keys=["rewards", "terminations"]
    )
    batch = mixture.sample_transitions(100, seed=0)
    assert set(batch) >= {"rewards", "terminations", "source"} and "observations" not in batch
    mixed_obs = trajcore.mix(
        {"cartpole": datasets["offline"], "acrobot": datasets["acrobot"]}, [0.5, 0.5], keys=["observations"]
    )
    with pytest.raises(SchemaError, match="observations: source 'acrobot'"):
        mixed_obs.sample_transitions(10, seed=0)


def test_bad_arguments_are_refused(datasets: dict[str, Path]) -> None:
    with pytest.raises(InvalidArgumentError, match="at least one source"):
        trajcore.mix([], [])
    with pytest.raises(InvalidArgumentError, match="2 sources but 1 weights"):
        trajcore.mix([datasets["offline"], datasets["online"]], [1.0])
    with pytest.raises(InvalidArgumentError, match="weights"):
        trajcore.mix([datasets["offline"]], [-1.0])


def test_a_live_source_is_followed_by_refresh(tmp_path: Path, datasets: dict[str, Path]) -> None:
    """Offline data mixed with a buffer a recorder in this process is writing: `refresh` brings
    in what the recorder flushed."""
    envs = trajcore.RecordVectorEpisodes(gym.make_vec("CartPole-v1", num_envs=4), tmp_path / "live")
    envs.reset(seed=5)
    envs.action_space.seed(5)
    for _ in range(200):
        envs.step(envs.action_space.sample())
    envs.flush()
    live = trajcore.open(tmp_path / "live")
    mixture = trajcore.mix({"offline": datasets["offline"], "live": live}, [0.5, 0.5])
    before = live.num_steps
    assert before > 0
    for _ in range(200):
        envs.step(envs.action_space.sample())
    envs.close()
    assert mixture.refresh() > 0 and live.num_steps > before
    batch = mixture.sample_transitions(64, seed=1)
    assert (batch["source"] == "live").sum() == 32


def test_a_torch_stream_of_a_mixture_keeps_the_shares(datasets: dict[str, Path]) -> None:
    torch = pytest.importorskip("torch", reason="trajcore.torch needs torch (the test extra installs it)")
    from trajcore.torch import TransitionStream

    mixture = trajcore.mix({"offline": datasets["offline"], "online": datasets["online"]}, [0.75, 0.25])
    loader = torch.utils.data.DataLoader(TransitionStream(mixture, 100, seed=0, batches=3), batch_size=None)
    batches = list(loader)
    assert len(batches) == 3
    for batch in batches:
        assert isinstance(batch["observations"], torch.Tensor) and batch["observations"].shape == (100, 4)
        assert batch["source"].count("offline") == 75 and batch["source"].count("online") == 25
        assert batch["source_index"].tolist() == [0] * 75 + [1] * 25
    again = list(torch.utils.data.DataLoader(TransitionStream(mixture, 100, seed=0, batches=3), batch_size=None))
    assert all(torch.equal(a["observations"], b["observations"]) for a, b in zip(batches, again, strict=True))
