"""DQN on CartPole-v1 (CleanRL's dqn.py, in short) with trajcore as the replay buffer.

The recorder writes every transition to `--dir` in the background and keeps the newest
`--buffer-size` of them (`capacity_steps`); the learner refreshes a `Dataset` of that directory
and samples its batches from it. `--buffer numpy` swaps in the in-memory ring buffer CleanRL and
Stable-Baselines3 use, of the same capacity, with everything else the same.

    python examples/dqn.py --seed 1 --returns returns.csv
    python examples/dqn.py --seed 1 --returns returns.csv --buffer numpy

Writes (global_step, episodic_return) rows to `--returns`, one per finished episode.
"""

from __future__ import annotations

import argparse
import csv
import random
import shutil
import time
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import trajcore
from torch import nn


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--buffer", choices=["trajcore", "numpy"], default="trajcore")
    p.add_argument("--dir", default="runs/dqn-buffer", help="the trajcore buffer's directory (emptied first)")
    p.add_argument("--returns", default="returns.csv", help="CSV of (global_step, episodic_return)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--num-envs", type=int, default=4)
    p.add_argument("--total-steps", type=int, default=100_000, help="env steps, over all sub-envs")
    p.add_argument("--buffer-size", type=int, default=50_000)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--learning-rate", type=float, default=2.5e-4)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--learning-starts", type=int, default=2_000, help="env steps before the first update")
    p.add_argument("--train-frequency", type=int, default=2, help="vector steps between updates")
    p.add_argument("--target-frequency", type=int, default=125, help="vector steps between target copies")
    p.add_argument("--exploration-fraction", type=float, default=0.25, help="of total steps, epsilon 1 -> 0.05")
    return p.parse_args(argv)


class NumpyBuffer:
    """The CleanRL/SB3 replay buffer: preallocated arrays written at a cursor, sampled uniformly."""

    def __init__(self, capacity: int, obs_shape: tuple[int, ...]) -> None:
        self.observations = np.zeros((capacity, *obs_shape), np.float32)
        self.next_observations = np.zeros((capacity, *obs_shape), np.float32)
        self.actions = np.zeros(capacity, np.int64)
        self.rewards = np.zeros(capacity, np.float32)
        self.terminations = np.zeros(capacity, bool)
        self.capacity, self.pos, self.size = capacity, 0, 0

    def add(self, obs: np.ndarray, next_obs: np.ndarray, actions: np.ndarray, rewards: np.ndarray,
            terminations: np.ndarray) -> None:
        for i in range(len(obs)):
            p = self.pos
            self.observations[p], self.next_observations[p], self.actions[p] = obs[i], next_obs[i], actions[i]
            self.rewards[p], self.terminations[p] = rewards[i], terminations[i]
            self.pos, self.size = (p + 1) % self.capacity, min(self.size + 1, self.capacity)

    def sample_transitions(self, n: int, seed: int) -> dict[str, np.ndarray]:
        idx = np.random.default_rng(seed).integers(0, self.size, n)
        return {k: getattr(self, k)[idx] for k in
                ("observations", "actions", "rewards", "next_observations", "terminations")}


def q_network(envs: Any) -> nn.Module:
    n_obs = int(np.prod(envs.single_observation_space.shape))
    return nn.Sequential(nn.Linear(n_obs, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                         nn.Linear(84, int(envs.single_action_space.n)))


def train(args: argparse.Namespace) -> tuple[list[tuple[int, float]], float]:
    """Trains; returns the (global_step, episodic_return) of each finished episode and the loop's
    env steps per second."""
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    envs = gym.make_vec("CartPole-v1", num_envs=args.num_envs, vectorization_mode="sync")
    if args.buffer == "trajcore":
        shutil.rmtree(args.dir, ignore_errors=True)
        envs = trajcore.RecordVectorEpisodes(envs, args.dir, capacity_steps=args.buffer_size)
        buffer: Any = None  # the Dataset, opened once the recording has steps
    else:
        buffer = NumpyBuffer(args.buffer_size, envs.single_observation_space.shape)

    q, target = q_network(envs), q_network(envs)
    target.load_state_dict(q.state_dict())
    optimizer = torch.optim.Adam(q.parameters(), lr=args.learning_rate)

    returns: list[tuple[int, float]] = []
    episode_return = np.zeros(args.num_envs)
    obs, _ = envs.reset(seed=args.seed)
    envs.action_space.seed(args.seed)
    # Gymnasium's vector envs reset a sub-env on the step after it ended: that step is no transition.
    resetting = np.zeros(args.num_envs, bool)
    start = time.perf_counter()
    for it in range(args.total_steps // args.num_envs):
        global_step = it * args.num_envs
        epsilon = max(0.05, 1 - 0.95 * global_step / (args.exploration_fraction * args.total_steps))
        if random.random() < epsilon:
            actions = envs.action_space.sample()
        else:
            with torch.no_grad():
                actions = q(torch.as_tensor(obs)).argmax(1).numpy()
        next_obs, rewards, terminations, truncations, _ = envs.step(actions)

        live = ~resetting
        episode_return[live] += rewards[live]
        for i in np.flatnonzero(live & (terminations | truncations)):
            returns.append((global_step, float(episode_return[i])))
            episode_return[i] = 0
        if args.buffer == "numpy":
            buffer.add(obs[live], next_obs[live], actions[live], rewards[live], terminations[live])
        resetting = terminations | truncations
        obs = next_obs

        if global_step >= args.learning_starts and it % args.train_frequency == 0:
            if buffer is None:
                envs.flush()  # the steps so far are in the files: open the buffer once
                buffer = trajcore.open(args.dir)
            if args.buffer == "trajcore":
                buffer.refresh()  # new transitions in, evicted ones out
            b = buffer.sample_transitions(args.batch_size, seed=args.seed * 1_000_003 + it)
            with torch.no_grad():
                next_q = target(torch.as_tensor(b["next_observations"])).max(1).values
                td_target = torch.as_tensor(b["rewards"], dtype=torch.float32) + args.gamma * next_q * (
                    1 - torch.as_tensor(b["terminations"], dtype=torch.float32))
            q_taken = q(torch.as_tensor(b["observations"])).gather(1, torch.as_tensor(b["actions"]).view(-1, 1))
            loss = nn.functional.mse_loss(q_taken.squeeze(1), td_target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if it % args.target_frequency == 0:
            target.load_state_dict(q.state_dict())

    steps_per_s = args.total_steps / (time.perf_counter() - start)
    envs.close()
    if args.buffer == "trajcore" and buffer is not None:
        buffer.close()
    return returns, steps_per_s


def main() -> None:
    args = parse_args()
    returns, steps_per_s = train(args)
    with open(args.returns, "w", newline="") as f:
        csv.writer(f).writerows([("global_step", "episodic_return"), *returns])
    last = [r for _, r in returns[-20:]]
    print(f"{args.buffer} buffer: {len(returns)} episodes, mean return of the last 20 {np.mean(last):.1f}, "
          f"{steps_per_s:,.0f} env steps/s")


if __name__ == "__main__":
    main()
