"""How much recording slows *your* env loop: `measure_overhead` (also ``python -m trajcore bench``).

The env loop runs with random actions (drawn once from the seeded action space, the same sequence
for both loops) or with a policy, once without recording and once with it, in alternating
segments, so that whatever else loads the machine hits both alike. Every figure is a ratio of two
loops measured in the same run; absolute rates are there for scale.

Two overheads are reported:

- end to end: the difference of the two loops' time per step. It is what training feels, but on
  a busy or virtual machine its spread across segments can be larger than the overhead itself.
- recorder call: the same recorder fed the same (captured) steps by a replay env that does no
  work, against the replay env alone. It isolates the time recording adds to the env loop's
  thread, with little noise; the writer thread's compression runs on another core.
"""

from __future__ import annotations

import copy
import os
import resource
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
from gymnasium.vector import VectorEnv

from trajcore.errors import InvalidArgumentError
from trajcore.record.env_wrapper import RecordEpisodes
from trajcore.record.make_env import Vectorization, make_env
from trajcore.record.options import SMALL_RING_BYTES
from trajcore.record.vector_wrapper import RecordVectorEpisodes

__all__ = [
    "EnvLoop",
    "make_env",
    "measure_overhead",
    "peak_rss_bytes",
    "peak_rss_reset",
    "rss_bytes",
    "run_interleaved",
]

Progress = Callable[[int, int], None]

# Distinct pre-drawn actions (cycled): enough to look random, few enough to cost no memory.
_ACTIONS = 1024


def rss_bytes() -> int:
    """Resident memory of this process now (0 where /proc is missing)."""
    return _status_kib("VmRSS") * 1024


def peak_rss_reset() -> bool:
    """Resets the peak resident memory to the current one (Linux: /proc/self/clear_refs); False
    where that is not possible, and `peak_rss_bytes` is then the peak since the process started."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_bytes() -> int:
    """Peak resident memory since the process started or since `peak_rss_reset`."""
    hwm = _status_kib("VmHWM")
    if hwm:
        return hwm * 1024
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # KiB on Linux


def _status_kib(field: str) -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class EnvLoop:
    """Steps one env (single or vector) with a shared action sequence (cycled) or a policy.

    `run` is the timed loop: nothing in it but the step (and a single env's reset at episode end),
    so two loops differ only by what their envs do. `benches/` times other recorders with it.
    """

    def __init__(
        self, env: Any, single: bool, actions: Sequence[Any], policy: Callable[[Any], Any] | None, obs: Any
    ) -> None:
        self.env, self.single, self.actions, self.policy, self.obs = env, single, actions, policy, obs
        self.i = 0

    def capture(self, steps: int) -> list[tuple[Any, ...]]:
        """Takes `steps` steps like `run`, returning (copies of) what the env returned."""
        captured = []
        for _ in range(steps):
            action = self.policy(self.obs) if self.policy else self.actions[self.i % len(self.actions)]
            result = self.env.step(action)
            captured.append(copy.deepcopy(result))
            self.i += 1
            self.obs = result[0]
            if self.single and (result[2] or result[3]):
                self.obs, _ = self.env.reset()
        return captured

    def run(self, steps: int) -> float:
        """Seconds for `steps` steps (a single env is reset when its episode ends)."""
        env, actions, policy, n = self.env, self.actions, self.policy, len(self.actions)
        i, obs = self.i, self.obs
        start = time.perf_counter()
        if self.single:
            for _ in range(steps):
                obs, _, terminated, truncated, _ = env.step(policy(obs) if policy else actions[i % n])
                i += 1
                if terminated or truncated:
                    obs, _ = env.reset()
        else:
            for _ in range(steps):
                obs, _, _, _, _ = env.step(policy(obs) if policy else actions[i % n])
                i += 1
        elapsed = time.perf_counter() - start
        self.i, self.obs = i, obs
        return elapsed


def run_interleaved(
    plain: EnvLoop, recorded: EnvLoop, steps: int, repeats: int, progress: Progress | None = None
) -> tuple[list[float], list[float]]:
    """Seconds per step of `repeats` segments of `steps // repeats` steps of each loop,
    alternating which goes first; `progress(done, total)` is called after each segment."""
    seg = max(1, steps // repeats)
    done, total = 0, 2 * seg * repeats
    without: list[float] = []
    with_: list[float] = []
    for r in range(repeats):
        order = (plain, recorded) if r % 2 == 0 else (recorded, plain)
        for loop in order:
            t = loop.run(seg) / seg
            (without if loop is plain else with_).append(t)
            done += seg
            if progress is not None:
                progress(done, total)
    return without, with_


class _Replay:
    """Replays captured (reset, step) results: an env that does no work, with `env`'s spaces."""

    def __init__(self, env: Any, single: bool, reset: Any, steps: list[tuple[Any, ...]]) -> None:
        self._reset, self._steps, self._i = reset, steps, 0
        self.base: Any = _ReplayEnv(env, self) if single else _ReplayVectorEnv(env, self)

    def reset(self) -> Any:
        return self._reset

    def step(self) -> tuple[Any, ...]:
        out = self._steps[self._i % len(self._steps)]
        self._i += 1
        return out


class _ReplayEnv(gym.Env[Any, Any]):
    def __init__(self, env: Any, replay: _Replay) -> None:
        self.observation_space, self.action_space = env.observation_space, env.action_space
        self.spec, self._replay = env.spec, replay

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        out: tuple[Any, dict[str, Any]] = self._replay.reset()
        return out

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        out: tuple[Any, Any, bool, bool, dict[str, Any]] = self._replay.step()
        return out


class _ReplayVectorEnv(VectorEnv[Any, Any, Any]):
    def __init__(self, env: Any, replay: _Replay) -> None:
        self.num_envs = env.num_envs
        self.observation_space, self.action_space = env.observation_space, env.action_space
        self.single_observation_space = env.single_observation_space
        self.single_action_space = env.single_action_space
        self.metadata, self.spec, self._replay = dict(env.metadata), env.spec, replay

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        out: tuple[Any, dict[str, Any]] = self._replay.reset()
        return out

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        out: tuple[Any, Any, Any, Any, dict[str, Any]] = self._replay.step()
        return out


def _spread(values: Sequence[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def _wrap(env: Any, single: bool, path: str, record_kwargs: Mapping[str, Any]) -> Any:
    if single:
        return RecordEpisodes(env, path, **record_kwargs)
    return RecordVectorEpisodes(env, path, **record_kwargs)


def measure_overhead(
    env: str | Callable[[], gym.Env[Any, Any]],
    num_envs: int = 1,
    vectorization: Vectorization = None,
    steps: int = 20_000,
    repeats: int = 5,
    policy: Callable[[Any], Any] | None = None,
    record_kwargs: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
    *,
    seed: int = 0,
    path: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Runs the env loop with and without recording, interleaved, and compares them.

    Args:
        env: a registered gymnasium id, "module:callable" (a function returning a `gym.Env`), or
            such a callable.
        num_envs: sub-envs of the vector env.
        vectorization: "sync", "async", or None (a single env when `num_envs` is 1, else "sync").
        steps: (vector) steps taken with recording, and as many without, split into `repeats`
            segments per loop (plus a short warm-up of each).
        repeats: segments per loop; the spread of the figures is over them.
        policy: maps (batched) observations to (batched) actions; default: random actions drawn
            once from the action space seeded with `seed`, the same sequence for both loops.
        record_kwargs: options of `RecordEpisodes` / `RecordVectorEpisodes` (e.g. ``zstd_level``,
            ``codecs``).
        progress: called as ``progress(done, total)`` (vector steps) between segments.
        seed: seeds the envs' reset and the action space.
        path: directory to record into (default: a temporary directory, removed afterwards).

    Returns:
        A dict of plain numbers: ``env``, ``num_envs``, ``vectorization``, ``steps``, ``repeats``;
        ``{"median", "min", "max"}`` over the segments for ``env_steps_per_s_without``,
        ``env_steps_per_s_with``, ``overhead_us_per_vector_step``, ``overhead_us_per_env_step``,
        ``overhead_pct`` and (replayed steps, see the module doc) ``call_us_per_vector_step``,
        ``call_us_per_env_step``; then ``bytes_raw`` (values as numpy holds them),
        ``bytes_written`` (on disk), ``compression_ratio``, ``episodes``, ``ring_waits`` (times
        the loop waited for the writer) and ``peak_rss_growth_bytes`` (peak resident memory
        during recording, over the memory before the recorder was made).

    Raises:
        InvalidArgumentError: an argument is invalid.
    """
    if steps < 1 or repeats < 1:
        raise InvalidArgumentError(f"steps and repeats must be >= 1, got {steps} and {repeats}")
    kwargs = dict(record_kwargs or {})
    single = vectorization is None and num_envs == 1
    mode = None if single else (vectorization or "sync")
    seg = max(1, steps // repeats)
    warmup = min(seg, 200)
    tmp = tempfile.TemporaryDirectory(prefix="trajcore-bench-") if path is None else None
    out = os.fspath(path) if path is not None else os.path.join(tmp.name if tmp else "", "rec")
    plain_env = make_env(env, num_envs, mode)
    recorded_env = None
    try:
        space = plain_env.action_space
        space.seed(seed)
        actions = [space.sample() for _ in range(min(_ACTIONS, steps))]
        reset = plain_env.reset(seed=seed)
        plain = EnvLoop(plain_env, single, actions, policy, reset[0])
        # The plain loop's warm-up steps are kept for the replay measurement.
        reset = copy.deepcopy(reset)
        captured = plain.capture(warmup)

        peak_rss_reset()
        rss_before = rss_bytes()
        recorded_env = _wrap(make_env(env, num_envs, mode), single, out, kwargs)
        recorded = EnvLoop(recorded_env, single, actions, policy, recorded_env.reset(seed=seed)[0])
        recorded.run(warmup)
        without, with_ = run_interleaved(plain, recorded, steps, repeats, progress)
        recorded_env.close()
        peak_growth = max(0, peak_rss_bytes() - rss_before)
        stats = recorded_env.stats()
        call_without, call_with = _replay_cost(plain_env, single, reset, captured, seg, repeats, kwargs)
    finally:
        if recorded_env is not None:
            recorded_env.close()  # idempotent; here for errors on the way
        plain_env.close()
        if tmp is not None:
            tmp.cleanup()

    n = num_envs
    overhead = [w - p for w, p in zip(with_, without, strict=True)]
    call = [w - p for w, p in zip(call_with, call_without, strict=True)]
    raw, written = int(stats.get("bytes_raw", 0)), int(stats.get("bytes_written", 0))
    return {
        "env": env if isinstance(env, str) else getattr(env, "__name__", repr(env)),
        "num_envs": n,
        "vectorization": mode,
        "steps": seg * repeats,
        "repeats": repeats,
        "env_steps_per_s_without": _spread([n / t for t in without]),
        "env_steps_per_s_with": _spread([n / t for t in with_]),
        "overhead_us_per_vector_step": _spread([o * 1e6 for o in overhead]),
        "overhead_us_per_env_step": _spread([o * 1e6 / n for o in overhead]),
        "overhead_pct": _spread([100 * o / p for o, p in zip(overhead, without, strict=True)]),
        "call_us_per_vector_step": _spread([c * 1e6 for c in call]),
        "call_us_per_env_step": _spread([c * 1e6 / n for c in call]),
        "bytes_raw": raw,
        "bytes_written": written,
        "compression_ratio": raw / written if written else None,
        "episodes": int(stats.get("episodes", 0)),
        "ring_waits": int(stats.get("ring_waits", 0)),
        "peak_rss_growth_bytes": peak_growth,
    }


def _replay_cost(
    env: Any,
    single: bool,
    reset: Any,
    captured: list[tuple[Any, ...]],
    seg: int,
    repeats: int,
    kwargs: Mapping[str, Any],
) -> tuple[list[float], list[float]]:
    """Seconds per step of a replay env alone and recorded, `repeats` interleaved segments each.

    The segments are kept short enough (half the ring in total) that the loop never waits for the
    writer: this measures the loop's own cost, not the writer's throughput."""
    ring = int(kwargs.get("ring_bytes") or SMALL_RING_BYTES)  # the smallest default
    step_bytes = max(1, sum(_nbytes(x) for x in captured[0]))
    n = max(1, min(seg, 5_000, ring // 2 // step_bytes // repeats))
    actions = [env.action_space.sample() for _ in range(min(_ACTIONS, n))]
    plain_env = _Replay(env, single, reset, captured).base
    plain = EnvLoop(plain_env, single, actions, None, plain_env.reset()[0])
    with tempfile.TemporaryDirectory(prefix="trajcore-bench-replay-") as tmp:
        rec_env = _wrap(_Replay(env, single, reset, captured).base, single, tmp, kwargs)
        try:
            recorded = EnvLoop(rec_env, single, actions, None, rec_env.reset()[0])
            plain.run(n)
            recorded.run(n)
            return run_interleaved(plain, recorded, n * repeats, repeats)
        finally:
            rec_env.close()


def _nbytes(value: Any) -> int:
    if isinstance(value, Mapping):
        return sum(_nbytes(v) for v in value.values())
    if isinstance(value, tuple | list):
        return sum(_nbytes(v) for v in value)
    return int(getattr(value, "nbytes", 8))
