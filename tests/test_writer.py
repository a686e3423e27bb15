"""trajcore.Writer: episodes from any loop (whole, as arrays, or step by step) read back value for
value, and bad inputs refused with the error class and a message naming what was wrong."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trajcore
from gymnasium import spaces
from helpers import SpaceEnv, assert_infos_equal, assert_tree_equal, expected_infos, run_single, stack

SPACES: dict[str, tuple[spaces.Space[Any], spaces.Space[Any]]] = {
    "box-discrete": (spaces.Box(-1.0, 1.0, (3,), np.float32), spaces.Discrete(4)),
    "image-box": (spaces.Box(0, 255, (8, 6, 3), np.uint8), spaces.Box(-2.0, 2.0, (2,), np.float64)),
    "dict": (
        spaces.Dict(
            {
                "image": spaces.Box(0, 255, (5, 5, 3), np.uint8),
                "pos": spaces.Box(-1.0, 1.0, (2,), np.float32),
                "mask": spaces.MultiBinary(4),
            }
        ),
        spaces.Dict({"move": spaces.Discrete(3), "force": spaces.Box(-1.0, 1.0, (1,), np.float32)}),
    ),
    "tuple": (
        spaces.Tuple((spaces.Discrete(5), spaces.Box(-1.0, 1.0, (2, 2), np.float32), spaces.Text(6))),
        spaces.Tuple((spaces.MultiDiscrete([3, 2]), spaces.Discrete(2))),
    ),
}


def _episodes(obs_space: spaces.Space[Any], action_space: spaces.Space[Any], n: int = 4) -> list[Any]:
    """What an env produced, captured without trajcore (the independent side of the comparison)."""
    env = SpaceEnv(obs_space, action_space, max_steps=9, p_terminate=0.2)
    return run_single(env, episodes=n, seed=3)


def _check(ep: trajcore.Episode, want: Any, obs_space: spaces.Space[Any], action_space: spaces.Space[Any]) -> None:
    assert ep.length == want.length
    assert ep.complete
    assert ep.terminated == want.terminations[-1]
    assert ep.truncated == want.truncations[-1]
    assert_tree_equal(ep.observations, stack(want.observations, obs_space), "observations")
    assert_tree_equal(ep.actions, stack(want.actions, action_space), "actions")
    assert_tree_equal(ep.rewards, np.array(want.rewards, dtype=np.float64), "rewards")
    assert_tree_equal(ep.terminations, np.array(want.terminations), "terminations")
    assert_tree_equal(ep.truncations, np.array(want.truncations), "truncations")
    assert_infos_equal(ep.infos, expected_infos(want.infos))


@pytest.mark.parametrize("name", list(SPACES))
def test_add_episode_round_trip(tmp_path: Path, name: str) -> None:
    obs_space, action_space = SPACES[name]
    episodes = _episodes(obs_space, action_space)
    with trajcore.Writer(tmp_path / "w", obs_space, action_space, metadata={"robot": name}) as w:
        for i, e in enumerate(episodes):
            w.add_episode(
                observations=stack(e.observations, obs_space),
                actions=stack(e.actions, action_space),
                rewards=np.array(e.rewards),
                terminations=np.array(e.terminations),
                truncations=np.array(e.truncations),
                infos=e.infos,
                data={"logp": np.arange(e.length, dtype=np.float32) * i, "tag": [f"t{k}" for k in range(e.length)]},
                metadata={"episode": i},
            )
    with trajcore.open(tmp_path / "w") as ds:
        assert ds.metadata == {"robot": name}
        assert ds.num_episodes == len(episodes)
        assert str(ds.observation_space) == str(obs_space)
        for i, (ep, want) in enumerate(zip(ds.episodes, episodes, strict=True)):
            _check(ep, want, obs_space, action_space)
            assert ep.metadata == {"episode": i}
            assert_tree_equal(ep.data["logp"], np.arange(want.length, dtype=np.float32) * i, "data/logp")
            assert ep.data["tag"] == [f"t{k}" for k in range(want.length)]
            assert ep.data["_logp"].all()


@pytest.mark.parametrize("name", ["dict", "tuple"])
def test_step_by_step_matches_add_episode(tmp_path: Path, name: str) -> None:
    obs_space, action_space = SPACES[name]
    episodes = _episodes(obs_space, action_space, n=3)
    with trajcore.Writer(tmp_path / "live", obs_space, action_space) as w:
        for i, e in enumerate(episodes):
            w.reset(e.observations[0], e.infos[0])
            for t in range(e.length):
                ended = w.step(
                    e.actions[t],
                    e.observations[t + 1],
                    e.rewards[t],
                    e.terminations[t],
                    e.truncations[t],
                    e.infos[t + 1],
                    data={"t": t} if t % 2 else None,
                )
                assert ended == (t == e.length - 1)
            w.set_episode_metadata(episode=i)
    with trajcore.open(tmp_path / "live") as ds:
        for i, (ep, want) in enumerate(zip(ds.episodes, episodes, strict=True)):
            _check(ep, want, obs_space, action_space)
            assert ep.metadata == {"episode": i}
            odd = np.arange(want.length) % 2 == 1
            assert_tree_equal(ep.data["_t"], odd, "data/_t")
            assert_tree_equal(ep.data["t"][odd], np.arange(want.length)[odd].astype(np.int64), "data/t")


def test_infos_and_data_as_arrays_with_masks_round_trip(tmp_path: Path) -> None:
    """Infos and data in the form `Episode` gives them (arrays with ``_key`` masks, nested) are
    written back as the same values: a dataset copied episode by episode reads the same."""
    obs_space, action_space = SPACES["box-discrete"]
    episodes = _episodes(obs_space, action_space)
    with trajcore.Writer(tmp_path / "a", obs_space, action_space) as w:
        for e in episodes:
            w.add_episode(
                stack(e.observations, obs_space),
                stack(e.actions, action_space),
                e.rewards,
                e.terminations,
                e.truncations,
                infos=e.infos,
                data={"even": np.arange(e.length), "_even": np.arange(e.length) % 2 == 0},
            )
    with trajcore.open(tmp_path / "a") as src, trajcore.Writer(tmp_path / "b", obs_space, action_space) as w:
        for ep in src.episodes:
            w.add_episode(
                ep.observations, ep.actions, ep.rewards, ep.terminations, ep.truncations, ep.infos, ep.data, ep.metadata
            )
    with trajcore.open(tmp_path / "a") as a, trajcore.open(tmp_path / "b") as b:
        assert a.num_episodes == b.num_episodes == len(episodes)
        for x, y, want in zip(a.episodes, b.episodes, episodes, strict=True):
            _check(y, want, obs_space, action_space)
            assert_infos_equal(y.infos, x.infos)
            assert_infos_equal(y.data, x.data, "data")
            assert not y.data["_even"][1::2].any()


def test_incomplete_and_empty_episodes(tmp_path: Path) -> None:
    obs_space, action_space = SPACES["box-discrete"]
    obs = np.zeros((4, 3), np.float32)
    with trajcore.Writer(tmp_path / "w", obs_space, action_space) as w:
        w.add_episode(obs, [0, 1, 2], [1.0, 2.0, 3.0], [False] * 3, [False] * 3, env_episode="e0")
        with pytest.raises(trajcore.InvalidArgumentError, match="needs at least one step"):
            w.add_episode(obs[:1], [], [], [], [])
        w.add_episode(obs, [0, 1, 2], [1.0, 2.0, 3.0], [False, False, True], [False] * 3)
    with trajcore.open(tmp_path / "w") as ds:
        got = [(e.length, e.complete, e.terminated, e.env_episode) for e in ds.episodes]
        assert sorted(got, key=repr) == sorted([(3, False, False, "e0"), (3, True, True, None)], key=repr)
        assert ds.agents == []
        assert all(e.agent is None for e in ds.episodes)


def test_frames_and_options(tmp_path: Path) -> None:
    obs_space, action_space = SPACES["box-discrete"]
    frames = np.random.default_rng(0).integers(0, 255, (4, 6, 5, 3), dtype=np.uint8)
    with trajcore.Writer(tmp_path / "w", obs_space, action_space, render_frames=True, durability="fsync_close") as w:
        w.add_episode(np.zeros((4, 3), np.float32), [0, 1, 2], [1.0, 2.0, 3.0], [0, 0, 1], [0, 0, 0], frames=frames)
        w.flush()
        assert w.stats()["steps"] == 3
    with trajcore.open(tmp_path / "w") as ds:
        assert_tree_equal(ds.episodes[0].frames, frames, "frames")
    with pytest.raises(trajcore.InvalidArgumentError, match="unknown recording option"):
        trajcore.Writer(tmp_path / "x", obs_space, action_space, not_an_option=1)  # type: ignore[call-arg]


def _good(n: int = 3) -> dict[str, Any]:
    return {
        "observations": {
            "image": np.zeros((n + 1, 5, 5, 3), np.uint8),
            "pos": np.zeros((n + 1, 2), np.float32),
            "mask": np.zeros((n + 1, 4), np.int8),
        },
        "actions": {"move": np.zeros(n, np.int64), "force": np.zeros((n, 1), np.float32)},
        "rewards": np.ones(n),
        "terminations": np.zeros(n, bool),
        "truncations": np.zeros(n, bool),
    }


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        # Blamed on the argument whose length differs from the others' (issue 33, point 13).
        (
            {"rewards": np.ones(2)},
            trajcore.InvalidArgumentError,
            r"rewards must be 3 values \(T = 3 as actions, terminations, truncations, observations give it\), got 2",
        ),
        ({"truncations": np.zeros(4, bool)}, trajcore.InvalidArgumentError, r"truncations must be 3 values"),
        ({"actions": {"move": np.zeros(3, np.int64)}}, trajcore.InvalidArgumentError, r"actions has no key 'force'"),
        ({"terminations": [True, False, True]}, trajcore.InvalidArgumentError, r"step 0 of 3 is terminated"),
        ({"infos": [{}] * 3}, trajcore.InvalidArgumentError, r"infos has 3 dicts, expected T\+1 = 4"),
        ({"infos": {"x": np.zeros(3)}}, trajcore.InvalidArgumentError, r"infos\['x'\] has 3 rows, expected T\+1 = 4"),
        ({"data": {"logp": np.zeros(4)}}, trajcore.InvalidArgumentError, r"data\['logp'\] has 4 rows, expected T = 3"),
        ({"metadata": [1]}, trajcore.InvalidArgumentError, r"metadata must be a mapping"),
        (
            {"observations.pos": np.zeros((4, 3), np.float32)},
            trajcore.SchemaError,
            r"observations\['pos'\]: rows of shape \(3,\), the space's are \(2,\)",
        ),
        (
            {"observations.image": np.zeros((4, 5, 5), np.uint8)},
            trajcore.SchemaError,
            r"observations\['image'\]: rows of shape \(5, 5\)",
        ),
        ({"actions.move": np.array(["a", "b", "c"])}, trajcore.SchemaError, r"add_episode: step 0: .*action/move"),
    ],
)
def test_bad_inputs_name_what_was_wrong(
    tmp_path: Path, change: dict[str, Any], error: type[Exception], match: str
) -> None:
    obs_space, action_space = SPACES["dict"]
    args = _good()
    for key, value in change.items():
        if "." in key:
            outer, inner = key.split(".")
            args[outer] = {**args[outer], inner: value}
        else:
            args[key] = value
    with trajcore.Writer(tmp_path / "w", obs_space, action_space) as w:
        with pytest.raises(error, match=match):
            w.add_episode(**args)
        w.add_episode(**_good())  # the writer goes on
    with trajcore.open(tmp_path / "w") as ds:
        assert [e.length for e in ds.episodes] == [3]  # nothing of the refused episode is listed


def test_bad_spaces_and_agent(tmp_path: Path) -> None:
    with pytest.raises(trajcore.InvalidArgumentError, match="observation_space must be a gymnasium space"):
        trajcore.Writer(tmp_path / "w", (3,), spaces.Discrete(2))  # type: ignore[arg-type]
    with pytest.raises(trajcore.InvalidArgumentError, match="agent must be a str"):
        trajcore.Writer(tmp_path / "w", spaces.Discrete(2), spaces.Discrete(2), agent=3)  # type: ignore[arg-type]


def test_agents_with_their_own_spaces_share_a_directory(tmp_path: Path) -> None:
    a_space, b_space = SPACES["box-discrete"], SPACES["image-box"]
    with (
        trajcore.Writer(tmp_path / "m", *a_space, agent="a") as wa,
        trajcore.Writer(tmp_path / "m", *b_space, agent="b") as wb,
    ):
        wa.add_episode(np.zeros((3, 3), np.float32), [1, 2], [0.5, 1.0], [0, 1], [0, 0], env_episode=0)
        wb.add_episode(np.ones((2, 8, 6, 3), np.uint8), np.zeros((1, 2)), [2.0], [1], [0], env_episode=0)
    with trajcore.open(tmp_path / "m") as ds:
        assert ds.agents == ["a", "b"]
        a = ds.select(agent="a")
        assert [(e.agent, e.env_episode, e.length) for e in a] == [("a", 0, 2)]
        assert [e.agent for e in ds.select(agent=["a", "b"])] == ["a", "b"]
        assert a.sample_transitions(4, seed=0)["observations"].shape == (4, 3)
        with pytest.raises(trajcore.InvalidArgumentError, match="no agent 'c' in this dataset"):
            ds.select(agent="c")
    # The same agent again with other spaces is refused, as for a recorder.
    with pytest.raises(trajcore.InvalidArgumentError, match="holds recordings of another observation space"):
        trajcore.Writer(tmp_path / "m", *b_space, agent="a")


def test_one_agents_selection_reads_on_after_another_agent_appears(tmp_path: Path) -> None:
    """A selection plans its batches over its own recordings; recordings a later `refresh` opens
    (another agent's, other spaces) are not among them."""
    box, image = SPACES["box-discrete"], SPACES["image-box"]
    with (
        trajcore.Writer(tmp_path / "m", *box, agent="a") as wa,
        trajcore.Writer(tmp_path / "m", *image, agent="b") as wb,
    ):
        wa.add_episode(np.zeros((3, 3), np.float32), [1, 2], [0.5, 1.0], [0, 1], [0, 0])
        wb.add_episode(np.ones((2, 8, 6, 3), np.uint8), np.zeros((1, 2)), [2.0], [1], [0])
    ds = trajcore.open(tmp_path / "m")
    a = ds.select(agent="a")
    assert a.sample_transitions(2, seed=0)["observations"].shape == (2, 3)
    with trajcore.Writer(tmp_path / "m", spaces.Discrete(2), spaces.Discrete(2), agent="c") as wc:
        wc.add_episode([0, 1], [1], [1.0], [1], [0])
    assert ds.refresh() == 1
    # A key not planned yet: planned now, over the selection's recordings of before the refresh.
    batch = a.sample_transitions(2, seed=0, keys=["observations", "rewards"])
    assert batch["observations"].shape == (2, 3) and batch["rewards"].shape == (2,)
    assert ds.select(agent="c").sample_transitions(1, seed=0)["observations"].shape == (1,)
    ds.close()
