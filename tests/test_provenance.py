"""Provenance and the policy behind each episode (issue 35, items 1 and 2), against real envs and
wrappers, real vector envs in each autoreset mode, PettingZoo, the `Writer`, real processes run
outside any git repository and inside a dirty one, and the command line."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import trajcore
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from trajcore.cli import main
from trajcore.errors import InvalidArgumentError

GIT = shutil.which("git")


def _cartpole_stack() -> gym.Env[Any, Any]:
    return gym.wrappers.RecordEpisodeStatistics(gym.wrappers.TimeLimit(gym.make("CartPole-v1"), max_episode_steps=20))


def test_cartpole_spec_wrapper_chain_versions_and_reset_seeds(tmp_path: Path) -> None:
    env = trajcore.RecordEpisodes(_cartpole_stack(), tmp_path / "cp")
    env.action_space.seed(0)
    seeds: list[Any] = [7, None, 9]
    options: list[Any] = [None, None, {"low": -0.01, "high": 0.01}]
    for seed, opts in zip(seeds, options, strict=True):
        env.reset(seed=seed, options=opts)
        while True:
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                break
    env.close()

    with trajcore.open(tmp_path / "cp") as ds:
        [p] = ds.provenance
        assert ds.meta(0)["user"]["provenance"] == {k: v for k, v in p.items() if k != "env_id"}
        spec = p["env"]["spec"]
        assert spec["id"] == "CartPole-v1" and spec["version"] == 1 and spec["kwargs"] == {}
        assert spec["entry_point"] == "gymnasium.envs.classic_control.cartpole:CartPoleEnv"
        assert spec["max_episode_steps"] == 20
        assert spec["additional_wrappers"] == [
            {
                "name": "RecordEpisodeStatistics",
                "entry_point": "gymnasium.wrappers.common:RecordEpisodeStatistics",
                "kwargs": {"buffer_length": 100, "stats_key": "episode"},
            }
        ]
        # The chain as stacked: the base env, what gym.make added, then the user's two wrappers.
        chain = [(w["class"].rpartition(".")[2], w.get("kwargs")) for w in p["env"]["wrappers"]]
        assert chain == [
            ("CartPoleEnv", None),
            ("PassiveEnvChecker", {}),
            ("OrderEnforcing", {"disable_render_order_enforcing": False}),
            ("TimeLimit", {"max_episode_steps": 500}),
            ("TimeLimit", {"max_episode_steps": 20}),
            ("RecordEpisodeStatistics", {"buffer_length": 100, "stats_key": "episode"}),
        ]
        assert "vector" not in p  # one env
        assert p["host"]["hostname"] == socket.gethostname()
        versions = p["versions"]
        assert versions["trajcore"] == trajcore.__version__
        assert versions["gymnasium"] == gym.__version__ and versions["numpy"] == np.__version__
        for name in ("torch", "jax", "ray"):  # recorded when imported, never imported for it
            assert (name in versions) == (name in sys.modules), name
        assert p["command"] == {"argv": sys.argv, "cwd": os.getcwd()}
        assert p["env_id"] == "CartPole-v1"

        episodes = list(ds.episodes)
        assert len(episodes) == 3
        assert [ep.provenance.get("reset_seed") for ep in episodes] == seeds
        assert [ep.provenance.get("reset_options") for ep in episodes] == options
        assert all(ep.metadata == {} for ep in episodes)  # the metadata is the user's
        # The seed is the one that started it: a fresh env reset with it gives its first observation.
        for ep in (episodes[0], episodes[2]):
            fresh = gym.make("CartPole-v1")
            first, _ = fresh.reset(seed=ep.provenance["reset_seed"], options=ep.provenance.get("reset_options"))
            np.testing.assert_array_equal(ep.observations[0], first)
        assert episodes[0].provenance["env"] == p["env"] and "reset_seed" not in episodes[1].provenance
        want = [ep.provenance for ep in episodes]
    # A copy keeps it: the recording's in the Meta record, the reset's with each episode.
    assert main(["convert", str(tmp_path / "cp"), str(tmp_path / "copy")]) == 0
    with trajcore.open(tmp_path / "copy") as copy:
        assert [ep.provenance for ep in copy.episodes] == want


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED])
def test_vector_envs_each_autoreset_mode(tmp_path: Path, mode: AutoresetMode) -> None:
    n = 3
    fns = [lambda: gym.wrappers.TimeLimit(gym.make("CartPole-v1"), max_episode_steps=9) for _ in range(n)]
    envs = trajcore.RecordVectorEpisodes(SyncVectorEnv(fns, autoreset_mode=mode), tmp_path / "v")
    envs.action_space.seed(1)
    # What the test sees for itself: per sub-env, (policy step, reset seed) of each episode begun.
    begun: list[list[tuple[int, int | None]]] = [[] for _ in range(n)]
    policy = 0
    envs.set_policy(name="pi", step=policy)
    envs.reset(seed=100)
    for i in range(n):
        begun[i].append((policy, 100 + i))
    pending = np.zeros(n, dtype=bool)  # NEXT_STEP: sub-envs whose next step begins an episode
    for t in range(60):
        if t % 5 == 4:
            policy += 1
            envs.set_policy(name="pi", step=policy)
        _, _, term, trunc, _ = envs.step(envs.action_space.sample())
        done = term | trunc
        if mode is AutoresetMode.NEXT_STEP:
            for i in np.flatnonzero(pending):
                begun[i].append((policy, None))
            pending = done
        elif mode is AutoresetMode.SAME_STEP:
            for i in np.flatnonzero(done):
                begun[i].append((policy, None))
        elif done.any():
            # DISABLED: the ended sub-envs stay ended until a masked reset restarts them (seeded).
            if t % 3 == 0:
                policy += 1
                envs.set_policy(name="pi", step=policy)
            envs.reset(seed=1000 + t, options={"reset_mask": done.copy()})
            for i in np.flatnonzero(done):
                begun[i].append((policy, 1000 + t + i))
    envs.close()

    with trajcore.open(tmp_path / "v") as ds:
        [p] = ds.provenance
        assert p["vector"] == {
            "kind": "gymnasium.vector.sync_vector_env.SyncVectorEnv",
            "num_envs": n,
            "autoreset_mode": {"NextStep": "next_step", "SameStep": "same_step", "Disabled": "disabled"}[mode.value],
        }
        assert p["env"]["wrappers"][-1]["class"].endswith("SyncVectorEnv")
        # A sync vector env's sub-envs are in this process: their wrapper chain too.
        assert p["env"]["sub_env_wrappers"][-1] == {
            "class": "gymnasium.wrappers.common.TimeLimit",
            "kwargs": {"max_episode_steps": 9},
        }
        for i in range(n):
            mine = ds.select(env_index=i)
            got = [(ep.metadata["policy"]["step"], ep.provenance.get("reset_seed")) for ep in mine]
            # A lane's episodes are listed in the order they ended, which is the order they began.
            assert got == begun[i][: len(got)], (i, got, begun[i])
            assert len(got) == len(begun[i]) or len(got) == len(begun[i]) - 1  # a begun one may never step
            assert all(ep.metadata["policy"]["name"] == "pi" for ep in mine)


def test_wrapper_arguments_json_cannot_hold_are_stored_as_text(tmp_path: Path) -> None:
    env = gym.make("CartPole-v1")
    space = spaces.Box(-10, 10, (4,), np.float64)
    wrapped = gym.wrappers.TransformObservation(env, lambda o: o.astype(np.float64) * 2, space)
    rec = trajcore.RecordEpisodes(wrapped, tmp_path / "t")
    rec.reset(seed=0)
    rec.step(0)
    rec.close()
    with trajcore.open(tmp_path / "t") as ds:
        outer = ds.provenance[0]["env"]["wrappers"][-1]
        assert outer["class"] == "gymnasium.wrappers.transform_observation.TransformObservation"
        assert (
            outer["kwargs"]["func"].startswith("<function ")
            and "Box(-10.0, 10.0, (4,), float64)" in outer["kwargs"]["observation_space"]
        )


def test_set_policy_checks_its_values_and_select_is_exact(tmp_path: Path) -> None:
    obs_space, act_space = spaces.Box(-1, 1, (2,), np.float32), spaces.Discrete(2)
    with trajcore.Writer(tmp_path / "w", obs_space, act_space, env_id="Robot-v0") as w:
        for bad, kwargs in (
            ("name", {"name": 3}),
            ("step", {"step": 1.5}),
            ("step", {"step": True}),
            ("checkpoint", {"checkpoint": 7}),
        ):
            with pytest.raises(InvalidArgumentError, match=bad):
                w.set_policy(**kwargs)
        with pytest.raises(InvalidArgumentError, match="JSON"):
            w.set_policy(name="x", extra=object())

        def episode(t: int) -> None:
            w.add_episode(
                observations=np.zeros((3, 2), np.float32),
                actions=np.zeros(2, np.int64),
                rewards=np.full(2, float(t)),
                terminations=[False, True],
                truncations=[False, False],
            )

        episode(-1)  # before any policy
        for step in range(10):
            w.set_policy(name="bc" if step % 2 else "sac", step=step, checkpoint=Path(f"ckpt/{step}"), seed=step)
            episode(step)
        w.set_policy(name="nameless-step")
        episode(99)

    with trajcore.open(tmp_path / "w") as ds:
        [p] = ds.provenance
        assert "env" not in p and "vector" not in p and set(p) >= {"host", "versions", "command", "git"}
        assert ds.episodes[3].metadata["policy"] == {"name": "sac", "step": 2, "checkpoint": "ckpt/2", "seed": 2}

        def steps(episodes: Any) -> list[Any]:
            return [ep.metadata.get("policy", {}).get("step") for ep in episodes]

        assert steps(ds.select(policy_step=(3, 5))) == [3, 4, 5]
        assert steps(ds.select(policy_step=(None, 1))) == [0, 1]
        assert steps(ds.select(policy_step=(8, None))) == [8, 9]
        assert steps(ds.select(policy="bc")) == [1, 3, 5, 7, 9]
        assert steps(ds.select(policy=["sac", "nameless-step"])) == [0, 2, 4, 6, 8, None]
        assert steps(ds.select(policy="sac", policy_step=(2, 6))) == [2, 4, 6]
        assert len(ds.select(policy="nope")) == 0
        for bad in ((1.5, 2), (True, 3), (1, 2, 3), "1:2"):
            with pytest.raises(InvalidArgumentError, match="policy_step"):
                ds.select(policy_step=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError, match="policy"):
            ds.select(policy=3)  # type: ignore[arg-type]
        want = ds.select(policy="sac", policy_step=(2, 6)).indices
        provenance = ds.provenance

    # The command line's --select keeps the same episodes; ls shows the policy, info counts them.
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "trajcore",
            "ls",
            str(tmp_path / "w"),
            "--json",
            "--select",
            "policy=sac",
            "--select",
            "policy_step=2:6",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["episode"] for r in rows] == want
    assert [r["policy"]["step"] for r in rows] == [2, 4, 6]
    table = subprocess.run(
        [sys.executable, "-m", "trajcore", "ls", str(tmp_path / "w")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.splitlines()
    assert "policy" in table[0] and "bc@3" in table[5] and "nameless-step" in table[-1]
    info = json.loads(
        subprocess.run(
            [sys.executable, "-m", "trajcore", "info", "--json", str(tmp_path / "w")],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
    )
    assert info["policies"] == [
        {"name": "sac", "episodes": 5, "steps": [0, 8]},
        {"name": "bc", "episodes": 5, "steps": [1, 9]},
        {"name": "nameless-step", "episodes": 1, "steps": None},
    ]
    assert info["provenance"] == provenance


def test_provenance_off_or_in_parts(tmp_path: Path) -> None:
    for option, parts in ((False, set()), (["git", "env"], {"git", "env"}), (["versions"], {"versions"})):
        path = tmp_path / str(len(parts))
        env = trajcore.RecordEpisodes(gym.make("CartPole-v1"), path, provenance=option)
        env.reset(seed=3)
        env.step(0)
        env.close()
        with trajcore.open(path) as ds:
            assert "provenance" not in ds.meta(0)["user"] if not parts else True
            assert set(ds.provenance[0]) - {"env_id"} == parts
            assert ("reset_seed" in ds.episodes[0].provenance) == (option is True)
    for bad in (["env", "passwords"], "env", 3):
        with pytest.raises(InvalidArgumentError, match="provenance"):
            trajcore.RecordEpisodes(gym.make("CartPole-v1"), tmp_path / "bad", provenance=bad)  # type: ignore[arg-type]


def test_set_policy_before_a_deferred_recorder_starts(tmp_path: Path) -> None:
    pytest.importorskip("pygame", reason="CartPole's rgb_array rendering needs pygame (the test extra installs it)")
    env = trajcore.RecordEpisodes(gym.make("CartPole-v1", render_mode="rgb_array"), tmp_path / "f", render_frames=True)
    env.set_policy(name="early", step=1)  # the recorder starts at the first reset
    env.reset(seed=0)
    env.step(0)
    env.close()
    with trajcore.open(tmp_path / "f") as ds:
        assert ds.episodes[0].metadata == {"policy": {"name": "early", "step": 1}}
        assert ds.episodes[0].provenance["reset_seed"] == 0


def test_pettingzoo_parallel_and_aec(tmp_path: Path) -> None:
    from mpe2 import simple_spread_v3
    from pettingzoo.classic import tictactoe_v3

    env = trajcore.RecordParallelEpisodes(simple_spread_v3.parallel_env(N=2, max_cycles=4), tmp_path / "par")
    env.set_policy(name="mappo", step=1)
    for seed in (3, 4):
        env.reset(seed=seed)
        while env.agents:
            env.step({a: env.action_space(a).sample() for a in env.agents})
        env.set_policy(name="solo", step=2, agent="agent_0")
    env.close()
    with trajcore.open(tmp_path / "par") as ds:
        assert ds.provenance[0]["env"]["name"] == "simple_spread_v3"
        got = sorted((ep.agent, ep.provenance["reset_seed"], ep.metadata["policy"]["name"]) for ep in ds.episodes)
        assert got == [
            ("agent_0", 3, "mappo"),
            ("agent_0", 4, "solo"),  # set for agent_0 alone, between the env episodes
            ("agent_1", 3, "mappo"),
            ("agent_1", 4, "mappo"),
        ]
        assert len(ds.select(policy="mappo", agent="agent_0")) == 1

    aec = trajcore.RecordAECEpisodes(tictactoe_v3.env(), tmp_path / "aec")
    aec.set_policy(name="minimax", step=5)
    aec.reset(seed=11)
    rng = np.random.default_rng(0)
    for agent in aec.agent_iter():
        _, _, terminated, truncated, _ = aec.last()
        mask = aec.observe(agent)["action_mask"]
        aec.step(None if terminated or truncated else int(rng.choice(np.flatnonzero(mask))))
    aec.close()
    with trajcore.open(tmp_path / "aec") as ds:
        assert {ep.agent for ep in ds.episodes} == {"player_1", "player_2"}
        assert all(ep.provenance["reset_seed"] == 11 and ep.metadata["policy"]["step"] == 5 for ep in ds.episodes)


_SCRIPT = """
import gymnasium as gym
import trajcore
env = trajcore.RecordEpisodes(gym.make("CartPole-v1"), "run")
env.reset(seed=1)
env.step(0)
env.close()
"""


def _run_script(folder: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Runs a recording script that sits in `folder`, from there, in a process of its own; the
    recording's provenance."""
    (folder / "record.py").write_text(textwrap.dedent(_SCRIPT))
    pythonpath = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), *sys.path) if p)
    base = {"PYTHONPATH": pythonpath, "HOME": os.environ.get("HOME", "/tmp"), "PATH": os.environ.get("PATH", "")}
    subprocess.run(
        [sys.executable, "record.py", "--lr", "0.1"],
        cwd=folder,
        env={**base, **(env or {})},
        check=True,
        timeout=120,
        capture_output=True,
    )
    with trajcore.open(folder / "run") as ds:
        [p] = ds.provenance
        return p


def _git(repo: Path, *args: str) -> str:
    assert GIT is not None
    done = subprocess.run(
        [GIT, "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stdout.strip()


def test_outside_any_git_repository(tmp_path: Path) -> None:
    outside = subprocess.run(["git", "rev-parse"], cwd=tmp_path, capture_output=True, timeout=60) if GIT else None
    assert outside is None or outside.returncode != 0, "the temporary directory is inside a git repository"
    p = _run_script(tmp_path, env={"TRAJCORE_TEST_SECRET": "hunter2-secret-value"})
    assert p["git"] is None
    assert p["command"]["argv"] == ["record.py", "--lr", "0.1"]
    # Nothing of the environment's variables is stored.
    for shard in (tmp_path / "run").glob("*.trj"):
        assert b"hunter2-secret-value" not in shard.read_bytes()


@pytest.mark.skipif(GIT is None, reason="needs the git binary (Debian package git) to make the repository")
def test_inside_a_dirty_git_repository_and_without_a_git_binary(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "train.py").write_text("print('v1')\n")
    _git(repo, "add", "train.py")
    _git(repo, "commit", "-q", "-m", "v1")
    head = _git(repo, "rev-parse", "HEAD")
    clean = _run_script(repo)  # record.py itself is untracked: not a change to the commit's code
    assert clean["git"]["commit"] == head and clean["git"]["dirty"] is False
    (repo / "train.py").write_text("print('v2')\n")  # a tracked file changed: the tree is dirty
    shutil.rmtree(repo / "run")
    dirty = _run_script(repo)
    assert dirty["git"]["commit"] == head and dirty["git"]["dirty"] is True
    # Without a git binary on PATH, the commit is read from .git; whether it is dirty is unknown.
    shutil.rmtree(repo / "run")
    no_git = _run_script(repo, env={"PATH": ""})
    assert no_git["git"] == {"commit": head, "dirty": None}


def test_info_text_and_viewer_show_the_provenance(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = trajcore.RecordEpisodes(_cartpole_stack(), tmp_path / "cp")
    env.set_policy(name="ppo", step=12, checkpoint="ckpt/12")
    env.reset(seed=5)
    for _ in range(5):
        env.step(0)
    env.close()
    assert main(["info", str(tmp_path / "cp")]) == 0
    text = capsys.readouterr().out
    assert "spec: CartPole-v1 (gymnasium.envs.classic_control.cartpole:CartPoleEnv, version 1, kwargs {})" in text
    assert (
        "wrappers: CartPoleEnv > PassiveEnvChecker > OrderEnforcing > TimeLimit > TimeLimit > RecordEpisodeStatistics"
        in text
    )
    assert f"Python {sys.version.split()[0]}" in text and "git: " in text
    assert "policy ppo: 1 episode(s), steps 12 to 12" in text
    with trajcore.open(tmp_path / "cp") as ds:
        ep = ds.episodes[0]
        trajcore.viewer.write_html(ep, tmp_path / "ep.html")
        page = (tmp_path / "ep.html").read_text()
        match = re.search(r'<script type="application/json" id="trajcore-data">(.*?)</script>', page, re.S)
        assert match is not None
        assert json.loads(match.group(1))["summary"]["provenance"] == ep.provenance
        assert 'id="provenance"' in page
