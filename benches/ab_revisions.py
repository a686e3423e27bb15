"""Two revisions of trajcore, A (the baseline) and B, on the same workloads in one run: each
workload runs in a fresh subprocess per revision (its own python package and extension, from
`<worktree>/python`), in the order A,B then B,A then A,B ... for N rounds, so a slow moment of a
shared machine falls on both sides alike. Reports each figure's median per revision, the ratio
B/A of the medians and the spread of the per-round ratios, with the clock it was read on.

    python benches/ab_revisions.py /work/wt/base /work/wt/new [--rounds 5] [--only reads,bulk]

Each worktree needs its extension built alike (`python/trajcore/_core.abi3.so`: the same cargo
profile on both sides). The datasets are recorded once, by revision A (each revision is checked
to read a file the other wrote), and both read the same files; they fit in the page cache here,
so reads are warm-cache reads of the files (the figures say nothing of a disk). The S3 server is
the tests' loopback one (`tests/s3_server.py`), run in this (parent) process: its work does not
count in a child's CPU time.

Workloads (`--only`, comma-separated):
- `recorder`: the recorder call of `benches/infos_call_clocks.py` (16 CartPole sub-envs
  replayed, recorded replay minus replay alone, with and without `RecordEpisodeStatistics`
  infos), on the env loop's thread clock; and the recorded replay's CPU time including the
  writer thread and close, on the process clock.
- `reads`: random 256-transition gathers and whole-episode reads of a CartPole and a pixel
  dataset (`test_read_scale.py`'s and `test_reading.py`'s reads), in one process.
- `bulk`: convert, verify and a parquet export of the README's CartPole recording
  (`test_bulk_tools.py`'s size: 16 sub-envs, 96,000 vector steps).
- `store_reads`: open, random batches and a scan from the loopback S3 server
  (`test_object_store_reads.py`); the scan once, as a first scan (its block faulted in), then
  three more (median).
- `store_recording`: CartPole x16 recorded to the S3 server (`test_store_recording.py`), a
  fixed number of vector steps.

Clocks: `thread` is the CPU time of the timed thread, `process` the CPU time of every thread of
the child (the reader's decode pool and the writer thread included), `wall` elapsed time.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# A figure: (value, unit, clock). Lower is better for every figure.
Figure = tuple[float, str, str]
WORKLOADS = ("recorder", "reads", "bulk", "store_reads", "store_recording")
BULK_VECTOR_STEPS = int(os.environ.get("TRAJCORE_AB_BULK_STEPS", "96000"))  # x16 sub-envs
PIXEL_STEPS = 20_000  # (4, 84, 84) uint8 stacks of benches/workloads.PixelEnv, 8 sub-envs
STORE_RECORDING_STEPS = 6_000  # vector steps of CartPole x16
BATCH = 256
KEYS = ["observations", "next_observations", "actions", "rewards"]
BENCHES = Path(__file__).resolve().parent


# --- the children: each runs one workload of one revision and prints its figures as JSON ---


@contextmanager
def _clocked(figures: dict[str, Figure], name: str, per: int, unit: str, clocks: tuple[str, ...]) -> Iterator[None]:
    """Times the block on each of `clocks`, adding a figure per clock (value divided by `per`)."""
    read: dict[str, Callable[[], float]] = {
        "thread": time.thread_time,
        "process": time.process_time,
        "wall": time.perf_counter,
    }
    start = {c: read[c]() for c in clocks}
    yield
    for c in clocks:
        scale = 1e6 if unit == "us" else 1e3 if unit == "ms" else 1.0
        figures[f"{name} [{c}]"] = ((read[c]() - start[c]) / per * scale, unit, c)


def recorder(work: Path, tag: str) -> dict[str, Figure]:
    """The recorder call (µs per vector step, thread clock of the env loop: the writer thread and
    the machine's other load drop out), rounds of 1,000-step segments in alternating order,
    flushed between rounds; then the recorded replay's whole cost, writer thread and close
    included (process clock), minus the replay alone."""
    # The bench's own harness (imported here: the child runs with the revision's package), timed
    # by the env loop's thread clock (EnvLoop.run reads time.perf_counter).
    from test_recording_round2 import _replayed, recorder_calls

    loops = {
        "no infos": _replayed(False, 1_000, work),
        "RecordEpisodeStatistics infos": _replayed(True, 1_000, work),
    }
    perf_counter, time.perf_counter = time.perf_counter, time.thread_time
    try:
        call = recorder_calls(loops, 15)
    finally:
        time.perf_counter = perf_counter
    figures: dict[str, Figure] = {
        f"recorder call, {name} [thread]": (statistics.median(c), "us/step", "thread") for name, c in call.items()
    }
    plain, rec = loops["RecordEpisodeStatistics infos"]
    steps = 4_000
    start = time.process_time()
    plain.run(steps)
    alone = time.process_time() - start
    start = time.process_time()
    rec.run(steps)
    rec.env.close()
    whole = time.process_time() - start - alone
    figures["recorded replay minus replay, RES infos, writer and close included [process]"] = (
        whole / steps * 1e6,
        "us/step",
        "process",
    )
    loops["no infos"][1].env.close()
    return figures


def _reads_of(ds: Any, name: str, batches: int, episodes: int, figures: dict[str, Figure]) -> None:
    """Random 256-transition gathers (warmed by a tenth of them first) and whole-episode reads."""
    import numpy as np

    rng = np.random.default_rng(0)
    n = ds.num_steps
    rows = [rng.integers(0, n, BATCH) for _ in range(batches)]
    for idx in rows[: batches // 10]:
        ds.transitions.gather(idx, keys=KEYS)
    with _clocked(figures, f"{name}: random batch of {BATCH}", batches, "ms", ("process", "wall")):
        for idx in rows:
            ds.transitions.gather(idx, keys=KEYS)
    ids = rng.choice(ds.num_episodes, min(episodes, ds.num_episodes), replace=False)
    with _clocked(figures, f"{name}: whole episode", len(ids), "ms", ("process", "wall")):
        for e in ids.tolist():
            ep = ds.episodes[e]
            ep.observations, ep.actions, ep.rewards  # noqa: B018 (the reads)


def reads(work: Path, tag: str) -> dict[str, Figure]:
    import trajcore

    figures: dict[str, Figure] = {}
    with trajcore.open(work / "cp16") as ds:
        _reads_of(ds, "CartPole 1.5M", 1_500, 1_500, figures)
    with trajcore.open(work / "cp16", cache_bytes=0) as ds:
        _reads_of(ds, "CartPole 1.5M, no chunk cache", 300, 1_000, figures)
    with trajcore.open(work / "pixels") as ds:
        _reads_of(ds, "pixels 20k", 150, 40, figures)
    return figures


def bulk(work: Path, tag: str) -> dict[str, Figure]:
    import trajcore

    figures: dict[str, Figure] = {}
    src = work / "cp16"
    out = work / f"bulk-{tag}"
    with _clocked(figures, "convert to raw columns", 1, "s", ("process", "wall")):
        trajcore.convert(src, out / "raw", codecs="raw")
    with _clocked(figures, "verify", 1, "s", ("process", "wall")):
        report = trajcore.verify(src)
    assert report.intact, report
    with _clocked(figures, "export parquet", 1, "s", ("process", "wall")), trajcore.open(src) as ds:
        trajcore.export(ds, out / "cp16.parquet", "parquet", force=True)
    shutil.rmtree(out)
    return figures


def store_reads(work: Path, tag: str, url: str, options: dict[str, str]) -> dict[str, Figure]:
    import trajcore

    figures: dict[str, Figure] = {}
    with _clocked(figures, "open CartPole 1.5M (cold)", 1, "ms", ("process", "wall")):
        cp = trajcore.open(f"{url}/cp16", storage_options=options, cache_bytes=0)
    with cp:
        _reads_of(cp, "S3 CartPole 1.5M", 300, 300, figures)
    with trajcore.open(f"{url}/pixels", storage_options=options, cache_bytes=0) as px:
        _reads_of(px, "S3 pixels 20k", 40, 10, figures)
        with _clocked(figures, "S3 pixels 20k: scan in order, 1,024-step blocks", 1, "s", ("process", "wall")):
            _scan(px, 1024)
        # The first scan's figure swings widely from round to round on a shared machine (it
        # includes faulting in its first block): the scans after it reuse that block.
        again = []
        for _ in range(3):
            scan: dict[str, Figure] = {}
            with _clocked(scan, "again", 1, "s", ("process",)):
                _scan(px, 1024)
            again.append(scan["again [process]"])
        name = "S3 pixels 20k: scan in order, 1,024-step blocks, again (median of 3) [process]"
        figures[name] = sorted(again)[1]
    return figures


def _scan(ds: Any, block: int) -> None:
    for start in range(0, ds.num_steps, block):
        ds.transitions[start : min(start + block, ds.num_steps)]


def store_recording(work: Path, tag: str, url: str, options: dict[str, str]) -> dict[str, Figure]:
    import gymnasium as gym
    import numpy as np
    import trajcore

    figures: dict[str, Figure] = {}
    env = gym.make_vec("CartPole-v1", num_envs=16, vectorization_mode="sync")
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 2, (STORE_RECORDING_STEPS, 16))
    name = "record CartPole x16 to S3, close included"
    with _clocked(figures, name, STORE_RECORDING_STEPS, "us", ("process", "wall")):
        rec = trajcore.RecordVectorEpisodes(env, f"{url}/rec-{tag}", storage_options=options)
        rec.reset(seed=0)
        for a in actions:
            rec.step(a)
        rec.close()
    return figures


# --- preparing the datasets, with revision A ---


def prepare(work: Path) -> None:
    """The README's CartPole recording (by the CLI, as users make it) and a pixel dataset."""
    import numpy as np
    import trajcore

    sys.path.insert(0, str(BENCHES))
    from workloads import pixel_vector

    record = ["record", "CartPole-v1", "--num-envs", "16", "--steps", str(BULK_VECTOR_STEPS), str(work / "cp16")]
    subprocess.run([sys.executable, "-m", "trajcore", *record], check=True, capture_output=True)
    rec = trajcore.RecordVectorEpisodes(pixel_vector(8), work / "pixels")
    rec.reset(seed=0)
    for a in np.random.default_rng(0).integers(0, 4, (PIXEL_STEPS // 8, 8)):
        rec.step(a)
    rec.close()


def format_check(work: Path, tag: str) -> dict[str, Figure]:
    """Records a small file in `work/written-<tag>`, and reads every other revision's file there."""
    import gymnasium as gym
    import numpy as np
    import trajcore

    cartpole = gym.make_vec("CartPole-v1", 4, vectorization_mode="sync")
    env = trajcore.RecordVectorEpisodes(cartpole, work / f"written-{tag}")
    env.reset(seed=0)
    for a in np.random.default_rng(0).integers(0, 2, (500, 4)):
        env.step(a)
    env.close()
    for other in work.glob("written-*"):
        with trajcore.open(other) as ds:
            batch = ds.transitions.gather(np.arange(ds.num_steps), keys=KEYS)
            assert len(batch["actions"]) == ds.num_steps > 1_900, other  # 2,000 less autoresets
    return {}


def child(args: argparse.Namespace) -> None:
    work = Path(args.work)
    if args.child == "prepare":
        prepare(work)
        figures: dict[str, Figure] = {}
    elif args.child == "format_check":
        figures = format_check(work, args.tag)
    elif args.child in ("store_reads", "store_recording"):
        figures = globals()[args.child](work, args.tag, args.url, json.loads(args.options))
    else:
        figures = globals()[args.child](work, args.tag)
    print(json.dumps(figures))


# --- the parent: rounds, interleaved, and the report ---


def _run(
    worktree: Path, workload: str, work: Path, tag: str, s3: tuple[str, dict[str, str]] | None
) -> dict[str, Figure]:
    env = {
        **os.environ,
        "PYTHONPATH": str(worktree / "python"),
        "OPENBLAS_NUM_THREADS": "1",  # as benches/conftest.py: no spinning BLAS threads
        "TRAJCORE_REMOTE_CACHE_BYTES": str(64 << 20),  # as test_object_store_reads.py
        "PYTHONWARNINGS": "ignore::DeprecationWarning",  # the baseline's import paths, moved since
    }
    command = [sys.executable, __file__, str(worktree), str(worktree), "--child", workload, "--work", str(work)]
    command += ["--tag", tag]
    if s3:
        command += ["--url", s3[0], "--options", json.dumps(s3[1])]
    done = subprocess.run(command, env=env, cwd=work, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{workload} of {worktree} failed:\n{done.stderr[-3000:]}")
    return {k: tuple(v) for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}


def _report(results: dict[str, dict[str, list[Figure]]], loads: dict[str, list[float]]) -> None:
    """A table per figure: medians of A and B, B/A of the medians, per-round ratios' spread."""
    print("\n| workload | figure | clock | A median | B median | B/A | per-round B/A | load avg |")
    print("|---|---|---|---|---|---|---|---|")
    for workload, per_figure in results.items():
        load = statistics.mean(loads[workload])
        for figure in sorted({f for f in per_figure if not f.startswith("B ")}):
            a, b = per_figure[figure], per_figure[f"B {figure}"]
            va, vb = [x[0] for x in a], [x[0] for x in b]
            ratios = [y / x for x, y in zip(va, vb, strict=True)]
            name, clock = figure.rsplit(" [", 1)
            unit = a[0][1]
            ma, mb = statistics.median(va), statistics.median(vb)
            print(
                f"| {workload} | {name} | {clock[:-1]} | {ma:.4g} {unit} | {mb:.4g} {unit} | {mb / ma:.3f} "
                f"| {min(ratios):.3f}..{max(ratios):.3f} | {load:.1f} |",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", type=Path, help="worktree of revision A (the baseline)")
    parser.add_argument("b", type=Path, help="worktree of revision B")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", default=",".join(WORKLOADS))
    parser.add_argument("--work", help="where the datasets go (default: a new temporary directory)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--tag", default="", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--options", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    a, b = args.a.resolve(), args.b.resolve()
    work = Path(args.work or tempfile.mkdtemp(prefix="ab_revisions-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    workloads = args.only.split(",")
    started = time.monotonic()
    if not (work / "cp16").exists():
        _run(a, "prepare", work, "prepare", None)
    for old in work.glob("written-*"):
        shutil.rmtree(old)
    for tag, worktree in (("a", a), ("b", b), ("a2", a)):  # each reads the other's file
        _run(worktree, "format_check", work, tag, None)
    print(f"datasets ready in {work} ({time.monotonic() - started:.0f} s); each revision reads the other's files")

    sys.path.insert(0, str(BENCHES.parent / "tests"))
    from s3_server import s3_server  # type: ignore[import-not-found]

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server logs every request

    results: dict[str, dict[str, list[Figure]]] = {w: {} for w in workloads}
    loads: dict[str, list[float]] = {w: [] for w in workloads}
    with s3_server() as server:
        bucket = server.bucket()
        for name in ("cp16", "pixels"):
            server.upload(work / name, bucket, name)
        s3 = (f"s3://{bucket}", server.options)
        for r in range(args.rounds):
            for workload in workloads:
                order = ((a, ""), (b, "B ")) if r % 2 == 0 else ((b, "B "), (a, ""))
                for worktree, prefix in order:
                    loads[workload].append(os.getloadavg()[0])
                    store = s3 if workload.startswith("store") else None
                    got = _run(worktree, workload, work, f"{r}{prefix.strip()}", store)
                    for figure, value in got.items():
                        results[workload].setdefault(prefix + figure, []).append(value)
            print(f"round {r + 1}/{args.rounds} done at {time.monotonic() - started:.0f} s", flush=True)
    _report(results, loads)
    print(f"\nA = {a}, B = {b}; {args.rounds} rounds; {time.monotonic() - started:.0f} s in all")


if __name__ == "__main__":
    main()
