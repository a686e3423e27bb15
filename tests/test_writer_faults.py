"""The recorder under faults: a writer thread that dies, Ctrl-C while waiting, fork, threads, a
directory deleted while recording. Anything that could hang runs in a child process with a
deadline, so a regression fails the test instead of hanging the suite."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import trajcore
from helpers import SpaceEnv

HERE = Path(__file__).parent


def run_child(code: str, tmp_path: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Runs `code` in a fresh interpreter (tests/ on its path, the directory as argv[1])."""
    script = tmp_path / "child.py"
    # Ctrl-C as in a terminal, even when this suite runs in the background (`cmd &` in a shell
    # without job control starts it with SIGINT ignored, and children inherit that).
    restore = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    script.write_text(restore + textwrap.dedent(code))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, str(script), str(tmp_path / "d")], capture_output=True, text=True, timeout=timeout, env=env
    )


# The wrappers' core recorders get `faults` through the extension's test-only keyword.
FAULTS = """
import functools, json, types, trajcore, trajcore.record.session as r
def with_faults(faults):
    recorder = functools.partial(trajcore._core.Recorder, test_faults=json.dumps(faults))
    r._core = types.SimpleNamespace(**{**vars(trajcore._core), "Recorder": recorder})
"""


def test_a_writer_thread_panic_reaches_python_and_nothing_hangs(tmp_path: Path) -> None:
    result = run_child(
        FAULTS
        + """
import sys, time, gymnasium as gym
with_faults({"panic_at_step": 5})
env = trajcore.RecordEpisodes(gym.make("CartPole-v1"), sys.argv[1])
env.reset(seed=0)
seen = []
# Steps until one raises (the writer thread reached step 5 and panicked), however long the
# writer takes to get there on a loaded machine, within a bound; then flush and close.
deadline = time.monotonic() + 30
while not seen and time.monotonic() < deadline:
    try:
        env.step(0)
    except trajcore.RecorderError as e:
        seen.append(("step", str(e)))
    time.sleep(0.005)
for call in ["flush", "close"]:
    try:
        getattr(env, call)()
    except trajcore.RecorderError as e:
        seen.append((call, str(e)))
print("SEEN", len(seen), seen[0][0], seen[0][1], seen[-1][0], sep="|")
""",
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("SEEN"))
    _, count, first_call, message, last_call = line.split("|")
    assert first_call == "step" and "panicked: test fault: panic at step 5" in message
    assert last_call == "close" and int(count) >= 2


def test_ctrl_c_while_waiting_for_ring_space_raises_keyboard_interrupt(tmp_path: Path) -> None:
    result = run_child(
        FAULTS
        + """
import sys, os, signal, threading, time, numpy as np, gymnasium as gym
from gymnasium import spaces
from helpers import SpaceEnv
with_faults({"slow_step_ms": 300})
env = trajcore.RecordEpisodes(
    SpaceEnv(spaces.Box(0, 255, (100, 100), np.uint8), max_steps=10_000, p_terminate=0),
    sys.argv[1], ring_bytes=1 << 16,
)
env.reset(seed=0)
threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
start = time.monotonic()
try:
    for _ in range(1000):
        env.step(0)
    print("NO INTERRUPT")
except KeyboardInterrupt:
    print("INTERRUPTED after", round(time.monotonic() - start, 2))
env.close()
print("CLOSED", trajcore.open(sys.argv[1]).num_episodes)
""",
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "INTERRUPTED after" in out, out
    waited = float(out.split("INTERRUPTED after")[1].split()[0])
    assert waited < 3.0, "Ctrl-C took effect within the 20 ms polling, not when the writer caught up"
    assert "CLOSED 1" in out, out  # the interrupted step ended the episode, incomplete; it is kept


def test_ctrl_c_during_flush(tmp_path: Path) -> None:
    result = run_child(
        FAULTS
        + """
import sys, os, signal, threading, time, numpy as np
from gymnasium import spaces
from helpers import SpaceEnv
with_faults({"slow_step_ms": 100})
env = trajcore.RecordEpisodes(SpaceEnv(max_steps=10_000, p_terminate=0), sys.argv[1])
env.reset(seed=0)
for _ in range(40):
    env.step(0)  # the writer needs ~4 s for these
threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
start = time.monotonic()
try:
    env.flush()
    print("FLUSHED")
except KeyboardInterrupt:
    print("INTERRUPTED after", round(time.monotonic() - start, 2))
env.close()
print("STEPS", trajcore.open(sys.argv[1]).num_steps)
""",
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "INTERRUPTED after 0.5" in result.stdout, result.stdout
    assert "STEPS 40" in result.stdout, result.stdout  # close still wrote everything


def test_fork_child_calls_raise_and_the_parent_keeps_recording(tmp_path: Path) -> None:
    result = run_child(
        """
import os, sys, trajcore, gymnasium as gym
env = trajcore.RecordVectorEpisodes(gym.make_vec("CartPole-v1", 4, vectorization_mode="sync"), sys.argv[1])
env.action_space.seed(0)
env.reset(seed=0)
for _ in range(50):
    env.step(env.action_space.sample())
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    said = []
    for call in ("flush", "stats", "close"):
        try:
            getattr(env, call)()
            said.append(call + ":ok")
        except trajcore.RecorderError as e:
            said.append(call + ":" + ("owner" if f"belongs to process {os.getppid()}" in str(e) else str(e)))
    try:
        env.step(env.action_space.sample())
        said.append("step:ok")
    except trajcore.RecorderError as e:
        said.append("step:owner" if "belongs to process" in str(e) else "step:" + str(e))
    os.write(w, " ".join(said).encode())
    os.close(w)
    del env
    sys.exit(0)  # a normal exit: finalizers run, and must not touch the parent's recorder
os.close(w)
child_said = os.read(r, 4096).decode()
_, status = os.waitpid(pid, 0)
for _ in range(50):
    env.step(env.action_space.sample())
env.close()
ds = trajcore.open(sys.argv[1])
print("CHILD", child_said)
print("STATUS", status)
print("STEPS", ds.num_steps > 0, ds.problems)
""",
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "CHILD flush:owner stats:owner close:owner step:owner" in out, out
    assert "STATUS 0" in out, out
    assert "STEPS True []" in out, out
    assert "panicked" not in result.stderr and "PanicException" not in result.stderr, result.stderr


def test_two_threads_step_and_monitor(tmp_path: Path) -> None:
    envs = trajcore.RecordVectorEpisodes(gym.make_vec("CartPole-v1", 8, vectorization_mode="sync"), tmp_path / "d")
    errors: list[BaseException] = []
    calls = 0
    stop = threading.Event()

    def monitor() -> None:
        nonlocal calls
        while not stop.is_set():
            try:
                envs.stats()
                if calls % 10 == 0:
                    envs.flush()
                calls += 1
            except BaseException as e:
                errors.append(e)
                return

    t = threading.Thread(target=monitor)
    envs.action_space.seed(0)
    envs.reset(seed=0)
    t.start()
    for _ in range(3000):
        envs.step(envs.action_space.sample())
    stop.set()
    t.join()
    envs.close()
    assert not errors, errors
    assert calls >= 50
    ds = trajcore.open(tmp_path / "d")
    assert ds.num_episodes > 100 and not ds.problems


def test_a_deleted_directory_raises(tmp_path: Path) -> None:
    import shutil

    env = trajcore.RecordEpisodes(SpaceEnv(max_steps=10, p_terminate=0), tmp_path / "d", flush_interval=0.1)
    env.reset(seed=0)
    env.step(0)
    env.flush()
    shutil.rmtree(tmp_path / "d")
    deadline = time.monotonic() + 10
    with pytest.raises(trajcore.RecorderError, match="deleted or replaced"):  # noqa: PT012
        while time.monotonic() < deadline:
            _, _, te, tr, _ = env.step(0)
            if te or tr:
                env.reset()
            time.sleep(0.01)
    with pytest.raises(trajcore.RecorderError, match="deleted or replaced"):
        env.close()


def test_a_replaced_shard_raises_at_close(tmp_path: Path) -> None:
    env = trajcore.RecordEpisodes(SpaceEnv(max_steps=10, p_terminate=0), tmp_path / "d")
    env.reset(seed=0)
    env.step(0)
    (shard,) = env.shard_paths
    os.replace(shard, shard + ".moved")
    Path(shard).write_bytes(b"someone else's file")
    with pytest.raises(trajcore.RecorderError, match="deleted or replaced"):
        env.close()


def test_step_path_memory_stays_flat(tmp_path: Path) -> None:
    """A million vector-step rows with infos: RSS after warm-up stays within a bound."""
    resource = pytest.importorskip("resource", reason="needs the resource module (Unix)")
    del resource

    def rss_mib() -> float:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    n = 16
    env = trajcore.RecordVectorEpisodes(
        gym.make_vec("CartPole-v1", n, vectorization_mode="sync"), tmp_path / "d", zstd_level=1
    )
    obs = np.zeros((n, 4), np.float32)
    actions = np.zeros(n, np.int64)
    rewards = np.ones(n)
    done = np.zeros(n, bool)
    infos: dict[str, Any] = {"x": np.arange(n, dtype=np.float32), "_x": np.ones(n, bool)}
    core = env._native
    assert core is not None
    core.reset(obs, {})
    samples = []
    for i in range(1_000_000 // n):
        done[i % n] = i % 13 == 0
        core.step(actions, obs, rewards, done, np.zeros(n, bool), infos)
        done[i % n] = False
        if i % 5000 == 0:
            samples.append(rss_mib())
    env.close()
    warm = samples[2]
    assert max(samples[2:]) - warm < 64, f"RSS grew: {[round(s) for s in samples]} MiB"


def test_control_messages_wait_without_the_gil(tmp_path: Path) -> None:
    """While the step path waits for a slow writer, another Python thread keeps running."""
    script = (
        FAULTS
        + """
import sys, threading, time
from helpers import SpaceEnv
with_faults({"slow_step_ms": 50})
env = trajcore.RecordEpisodes(SpaceEnv(max_steps=10_000, p_terminate=0), sys.argv[1])
env.reset(seed=0)
for _ in range(30):
    env.step(0)
ticks = 0
def spin():
    global ticks
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        ticks += 1
t = threading.Thread(target=spin)
t.start()
env.set_episode_metadata(tag=1)  # the ring is busy: a control message waits
env.flush()                       # waits ~1.5 s for the writer
t.join()
env.close()
print("TICKS", ticks)
"""
    )
    result = run_child(script, tmp_path)
    assert result.returncode == 0, result.stderr
    ticks = int(result.stdout.split("TICKS")[1])
    assert ticks > 10_000, "the other thread barely ran: the GIL was held while waiting"


def test_a_slow_writer_paces_the_env_so_a_kill_loses_little(tmp_path: Path) -> None:
    """The writer takes 10 ms a step; the env could push thousands of steps into the ring in
    that time. Pacing keeps the unwritten backlog near 2 flush intervals: the env waits, and a
    SIGKILL loses only that much."""
    script = (
        FAULTS
        + """
import sys, time
from helpers import SpaceEnv
with_faults({"slow_step_ms": 10})
env = trajcore.RecordEpisodes(SpaceEnv(max_steps=10**9, p_terminate=0), sys.argv[1], flush_interval=0.1)
env.reset(seed=0)
start = time.monotonic()
steps = 0
while time.monotonic() - start < 2.0:
    env.step(0)
    steps += 1
print("STEPS", steps, env.stats()["backlog_waits"], flush=True)
time.sleep(60)
"""
    )
    (tmp_path / "child.py").write_text(textwrap.dedent(script))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen(
        [sys.executable, str(tmp_path / "child.py"), str(tmp_path / "d")], stdout=subprocess.PIPE, text=True, env=env
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    child.kill()
    child.wait(timeout=30)
    _, steps, waits = line.split()
    assert int(waits) > 0, "the env never waited for the writer"
    assert int(steps) < 2000, f"{steps} steps in 2 s against a writer of 100 steps/s: the backlog was not bounded"
    # The episode never ended, so no episode is listed; its rows tell how much reached the file.
    from format_decoder import DecodedDataset

    decoded = DecodedDataset(tmp_path / "d")
    (rid,) = decoded.recordings
    action = decoded.spec(rid, "action")
    written = sum(ref.n_rows for ref, _ in decoded.chunks.get((rid, 0, action["id"]), []))
    # At 100 steps/s the limit (2 x 0.1 s) plus one cycle is about 30 steps; allow for a slow CI.
    assert int(steps) - written <= 80, f"{int(steps) - written} of {steps} steps were lost"
