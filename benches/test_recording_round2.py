"""(h) The recording side of issue 14: the step call with gymnasium's vector
`RecordEpisodeStatistics` infos against the call without infos, the writer's throughput on pixels
(raw storage: copies and checksums, no compression to hide them), and the installed extension.

    python -m pytest benches/test_recording_round2.py -p no:cacheprovider --benchmark-only -s
"""

from __future__ import annotations

import copy
import gc
import statistics
import struct
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import trajcore
from gymnasium.wrappers.vector import RecordEpisodeStatistics
from trajcore import _core

try:
    from trajcore.tools.bench import EnvLoop, _Replay
except ImportError:  # a revision before the package's rooms (ab_revisions.py runs those too)
    from trajcore.bench import EnvLoop, _Replay  # type: ignore[import-not-found,no-redef]
from workloads import OBS_BYTES, PixelEnv, pixel_vector

GROUP = "recording round 2"
STAGES = ("copy", "encode", "compress", "write")  # the writer's timelog stages shown


def _replayed(wrap: bool, steps: int = 1_000, work: Path | None = None) -> tuple[Any, Any]:
    """(replay env, the same replay recorded by trajcore into a new directory under `work`) of 16
    CartPole sub-envs, with `RecordEpisodeStatistics` if `wrap`: the captured steps of the real
    env, replayed at no cost."""
    env = gym.make_vec("CartPole-v1", num_envs=16, vectorization_mode="sync")
    if wrap:
        env = RecordEpisodeStatistics(env)
    env.action_space.seed(0)
    reset = copy.deepcopy(env.reset(seed=0))
    actions = [env.action_space.sample() for _ in range(steps)]
    captured = EnvLoop(env, False, actions, None, reset[0]).capture(steps)
    env.close()
    plain = _Replay(env, False, reset, captured).base
    recorded = trajcore.RecordVectorEpisodes(_Replay(env, False, reset, captured).base, tempfile.mkdtemp(dir=work))
    for e in (plain, recorded):
        e.reset()
    return EnvLoop(plain, False, actions, None, None), EnvLoop(recorded, False, actions, None, None)


def recorder_calls(loops: dict[str, tuple[EnvLoop, EnvLoop]], rounds: int, seg: int = 1_000) -> dict[str, list[float]]:
    """Per (plain, recorded) loop pair: the recorder call in µs per vector step (recorded minus
    plain), each round's segments run in alternating order, flushed between rounds."""
    for plain, recorded in loops.values():
        plain.run(seg)
        recorded.run(seg)
    call: dict[str, list[float]] = {k: [] for k in loops}
    gc.collect()
    for r in range(rounds):
        for name, (plain, recorded) in loops.items():
            order = (plain, recorded) if r % 2 == 0 else (recorded, plain)
            t = {id(loop): loop.run(seg) / seg for loop in order}
            call[name].append((t[id(recorded)] - t[id(plain)]) * 1e6)
            recorded.env.flush()
    return call


def test_infos_call(benchmark: Any, report: list[dict[str, Any]]) -> None:
    """The recorder call (recorded replay minus replay alone, µs per vector step) with and
    without infos, every loop in turn in each round. Segments of 1,000 steps, flushed between
    rounds (outside the timing): the loop never waits for the writer."""
    loops = {"none": _replayed(False), "res": _replayed(True)}
    call = benchmark.pedantic(lambda: recorder_calls(loops, 41), rounds=1, iterations=1)
    waits = {k: rec.env.stats()["ring_waits"] for k, (_, rec) in loops.items()}
    for _, rec in loops.values():
        rec.env.close()
    labels = {"none": "no infos (CartPole's own: {})", "res": "RecordEpisodeStatistics infos"}
    rows = _call_rows("CartPole x16", call, labels, {"vs without infos": "none"})
    for row, name in zip(rows, labels, strict=True):
        row["ring_waits"] = waits[name]
    benchmark.extra_info.update(rows[-1])
    report.extend(rows)


def _call_rows(
    workload: str, call: dict[str, list[float]], labels: dict[str, str], ratios: dict[str, str]
) -> list[dict[str, Any]]:
    """A row per loop of `call` (µs per round, keyed as `labels`): the median and spread; the
    last loop's row also has, per `ratios` entry (column: baseline loop), the median of its
    per-round ratios to that baseline."""
    rows = []
    for name, label in labels.items():
        c = call[name]
        rows.append(
            {
                "group": GROUP,
                "name": f"recorder call, {workload}, {label}",
                "call_us_per_vector_step": statistics.median(c),
                "spread_us": f"{min(c):.2f}..{max(c):.2f}",
            }
        )
    last = list(labels)[-1]
    for key, base in ratios.items():
        rows[-1][key] = statistics.median(a / b for a, b in zip(call[last], call[base], strict=True))
    return rows


def _handed(wrap: bool) -> tuple[Any, list[Any], Any, Any]:
    """A real env of 16 CartPole sub-envs (with `RecordEpisodeStatistics` if `wrap`), and two
    envs that hand on what it returned last (put in the list): one alone, one recorded."""
    env = gym.make_vec("CartPole-v1", num_envs=16, vectorization_mode="sync")
    if wrap:
        env = RecordEpisodeStatistics(env)
    env.action_space.seed(0)
    reset = env.reset(seed=0)
    handed: list[Any] = [None]
    plain = _Replay(env, False, reset, handed).base
    recorded = trajcore.RecordVectorEpisodes(_Replay(env, False, reset, handed).base, tempfile.mkdtemp())
    for e in (plain, recorded):
        e.reset()
    return env, handed, plain, recorded


# The real env loops: CartPole's own infos ({}), RecordEpisodeStatistics's infos left out (the
# recorder gets {}: the same env work between calls, which evicts the recorder's state from this
# core's caches, without infos), and its infos.
REAL_LOOPS = {"none": (False, False), "res env, infos left out": (True, True), "res": (True, False)}


def real_env_calls(
    rounds: int, seg: int = 1_000, clock: Callable[[], float] = time.perf_counter
) -> dict[str, list[float]]:
    """The recorder call on a real env loop, µs per vector step (see `REAL_LOOPS`): each step of
    the real env is handed to the recorded env and to the env alone, each call timed by itself
    (in alternating order), recorded minus alone. The recorder reads arrays the env has just
    made, in this core's cache, unlike a long replay's; but its own state is no longer there.
    Segments of `seg` steps, flushed between rounds."""
    loops = {name: (_handed(wrap), strip) for name, (wrap, strip) in REAL_LOOPS.items()}
    actions = [loops["none"][0][0].action_space.sample() for _ in range(seg)]
    call: dict[str, list[float]] = {k: [] for k in loops}
    for r in range(-1, rounds):  # round -1 warms up (columns made, caches filled)
        for name, ((env, handed, plain, recorded), strip) in loops.items():
            first, second = (plain, recorded) if r % 2 == 0 else (recorded, plain)
            spent = {id(first): 0.0, id(second): 0.0}
            for action in actions:
                out = env.step(action)
                handed[0] = (*out[:4], {}) if strip else out
                t0 = clock()
                first.step(action)
                t1 = clock()
                second.step(action)
                t2 = clock()
                spent[id(first)] += t1 - t0
                spent[id(second)] += t2 - t1
            if r >= 0:
                call[name].append((spent[id(recorded)] - spent[id(plain)]) / seg * 1e6)
            recorded.flush()
    for (env, _, _, recorded), _ in loops.values():
        recorded.close()
        env.close()
    return call


def test_infos_call_real_env(benchmark: Any, report: list[dict[str, Any]]) -> None:
    """`test_infos_call` on real env loops (see `real_env_calls`): the recorder reads what the
    env has just made, as in training. The ratio against CartPole's own loop also counts what
    RecordEpisodeStatistics's work does to the recorder's caches; the ratio against the same
    loop with the infos left out counts the infos alone."""
    call = benchmark.pedantic(lambda: real_env_calls(41), rounds=1, iterations=1)
    labels = {
        "none": "no infos (CartPole's own: {})",
        "res env, infos left out": "RecordEpisodeStatistics env, infos left out",
        "res": "RecordEpisodeStatistics infos",
    }
    ratios = {"vs without infos": "none", "vs infos left out": "res env, infos left out"}
    rows = _call_rows("CartPole x16 real env loop", call, labels, ratios)
    benchmark.extra_info.update(rows[-1])
    report.extend(rows)


def _record_pixels(out: Path, steps: int, codec: Any) -> tuple[float, dict[str, Any]]:
    env = trajcore.RecordVectorEpisodes(pixel_vector(8), out, codecs={"obs": codec})
    env.reset(seed=0)
    actions = np.zeros(8, dtype=np.int64)
    start = time.perf_counter()
    for _ in range(steps):
        env.step(actions)
    env.close()
    return time.perf_counter() - start, env.stats()


def test_writer_throughput_pixels(benchmark: Any, report: list[dict[str, Any]], tmp_path: Path) -> None:
    """8 x (4, 84, 84) uint8 frames recorded raw and with zstd 1 (MB/s of frames, until close),
    against writing the same number of bytes raw to a file, rounds interleaved; and the writer
    thread's seconds per GB of frames in each stage (from its timelog): copying rows out of the
    ring, encoding records (framing, checksums), compressing and writing."""
    PixelEnv.stacks()
    steps, rounds = 3_000, 5
    step_bytes = 8 * OBS_BYTES
    block = np.random.default_rng(0).integers(0, 255, 1 << 20, dtype=np.uint8).tobytes()
    rates: dict[str, list[float]] = {"raw write": [], "trajcore raw": [], "trajcore zstd 1": []}
    waits: dict[str, int] = {}
    # The writer thread's seconds per stage (its timelog), summed over the rounds.
    stages: dict[str, dict[str, float]] = {}

    def one_round(r: int) -> None:
        gc.collect()
        start = time.perf_counter()
        with open(tmp_path / "raw", "wb") as f:
            for _ in range(steps * step_bytes // len(block)):
                f.write(block)
        rates["raw write"].append(steps * step_bytes / (time.perf_counter() - start))
        (tmp_path / "raw").unlink()
        for name, codec in (("trajcore raw", {"zstd_level": None}), ("trajcore zstd 1", {"zstd_level": 1})):
            out = tmp_path / f"{name}{r}".replace(" ", "_")
            seconds, stats = _record_pixels(out, steps, codec)
            rates[name].append(steps * step_bytes / seconds)
            waits[name] = waits.get(name, 0) + stats["ring_waits"]
            spent = stages.setdefault(name, {})
            for sample in stats["timelog"]:
                for stage in STAGES:
                    spent[stage] = spent.get(stage, 0.0) + sample[f"{stage}_s"]
            for f in out.iterdir():
                f.unlink()

    benchmark.pedantic(one_round, args=(0,), rounds=1, iterations=1)
    for r in range(1, rounds):
        one_round(r)
    for name, values in rates.items():
        row: dict[str, Any] = {
            "group": GROUP,
            "name": f"writer throughput, pixels, {name}",
            "MB_per_s": statistics.median(values) / 1e6,
            "MB_per_s_spread": f"{min(values) / 1e6:.0f}..{max(values) / 1e6:.0f}",
            "vs raw write": statistics.median(a / b for a, b in zip(values, rates["raw write"], strict=True)),
        }
        if name in waits:
            row["ring_waits"] = waits[name]
            frames_gb = rounds * steps * step_bytes / 1e9
            for stage in STAGES:
                row[f"writer {stage} s/GB"] = stages[name][stage] / frames_gb
        report.append(row)


def _elf_sections(path: str) -> list[str]:
    """Section names of an ELF64 little-endian file (the Linux extension)."""
    data = Path(path).read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return []
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]
    return [data[names_at + h[0] : data.index(b"\0", names_at + h[0])].decode() for h in headers]


def test_extension_size(benchmark: Any, report: list[dict[str, Any]]) -> None:
    path = _core.__file__
    sections = benchmark.pedantic(_elf_sections, args=(path,), rounds=1, iterations=1)
    debug = sorted(s for s in sections if s.startswith((".debug", ".zdebug")))
    report.append(
        {
            "group": GROUP,
            "name": "installed extension",
            "MB": Path(path).stat().st_size / 1e6,
            "debug_sections": ", ".join(debug),
            "symtab": ".symtab" in sections,
            "path": path,
        }
    )
