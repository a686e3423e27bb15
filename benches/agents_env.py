"""A PettingZoo env that costs next to nothing a step, for the multi-agent benchmarks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv


class Swarm(ParallelEnv[str, Any, Any]):
    """`n` agents (or the agents `names`) with 8 float32 observations and 5 actions each,
    episodes of `length` steps; an agent in `leaves` ends its episode after that many steps.
    The observations are drawn once, so a step costs a few dict builds."""

    metadata: ClassVar[dict[str, Any]] = {"name": "swarm_v0"}

    def __init__(
        self, n: int = 0, length: int = 100, names: Sequence[str] = (), leaves: Mapping[str, int] | None = None
    ) -> None:
        self.possible_agents = list(names) or [f"agent_{i}" for i in range(n)]
        self.agents: list[str] = []
        self.length = length
        self.leaves = dict(leaves or {})
        self.t = 0
        rng = np.random.default_rng(0)
        self._obs = {a: rng.standard_normal(8).astype(np.float32) for a in self.possible_agents}
        self._space = spaces.Box(-np.inf, np.inf, (8,), np.float32)

    def observation_space(self, agent: str) -> spaces.Space[Any]:
        return self._space

    def action_space(self, agent: str) -> spaces.Space[Any]:
        return spaces.Discrete(5)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, Any]:
        self.t = 0
        self.agents = list(self.possible_agents)
        return dict(self._obs), {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[Any, Any, Any, Any, Any]:
        self.t += 1
        acting = self.agents
        if self.leaves:
            ended = {a: self.t >= min(self.length, self.leaves.get(a, self.length)) for a in acting}
            self.agents = [a for a in acting if not ended[a]]
        else:  # every agent together: no per-agent work (the overhead benchmark's step)
            done = self.t >= self.length
            ended = dict.fromkeys(acting, done)
            self.agents = [] if done else acting
        return (
            {a: self._obs[a] for a in acting},
            dict.fromkeys(acting, 1.0),
            dict.fromkeys(acting, False),
            ended,
            {a: {} for a in acting},
        )
