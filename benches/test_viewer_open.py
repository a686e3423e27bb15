"""The viewer page of long Atari episodes: its size, the time to write it, and in headless
chromium the time from opening the file to the first frame drawn, to the last frame after a
jump (a block decoded from scratch), and per row while scrubbing back and forth; at zlib levels
1, 6 (the default) and 9.

Episodes: Enduro with frameskip 1 (the road scrolls every frame: harder for frame differences
than most Atari games) truncated at 1,000 and 10,000 steps, and Enduro-v5 as gymnasium makes it
(frameskip 4: frames differ more) truncated at 1,000, all with ``render_frames=True`` and
random actions.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
import trajcore
import trajcore.viewer
from trajcore.viewer import _frames

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from browser import chromium, open_page, wait_drawn

EPISODES = [
    ("ALE/Enduro-v5 frameskip 1", {"frameskip": 1}, 1_000, (6,)),
    ("ALE/Enduro-v5 frameskip 1", {"frameskip": 1}, 10_000, (1, 6, 9)),
    ("ALE/Enduro-v5", {}, 1_000, (6,)),
]


def _record(env_id: str, kwargs: dict[str, Any], steps: int, out: Path) -> None:
    import ale_py

    gym.register_envs(ale_py)
    env = gym.make(env_id.split()[0], render_mode="rgb_array", max_episode_steps=steps, **kwargs)
    rec = trajcore.RecordEpisodes(env, out, render_frames=True)
    rec.action_space.seed(0)
    rec.reset(seed=0)
    for _ in range(steps):
        _, _, terminated, truncated, _ = rec.step(rec.action_space.sample())
        if terminated or truncated:
            break
    rec.close()


@pytest.mark.parametrize(("name", "kwargs", "steps", "levels"), EPISODES, ids=[f"{e[0]}-{e[2]}" for e in EPISODES])
def test_viewer_open(
    benchmark: Any,
    report: list[dict[str, Any]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    kwargs: dict[str, Any],
    steps: int,
    levels: tuple[int, ...],
) -> None:
    _record(name, kwargs, steps, tmp_path / "ds")

    def run() -> list[dict[str, Any]]:
        rows = []
        with trajcore.open(tmp_path / "ds") as ds:
            ep = ds.episodes[0]
            for level in levels:
                monkeypatch.setattr(_frames, "DEFLATE_LEVEL", level)
                page = tmp_path / f"page-{level}.html"
                start = time.perf_counter()
                trajcore.viewer.write_html(ep, page)
                write_s = time.perf_counter() - start
                with chromium() as driver:
                    open_page(driver, page, timeout=120)
                    first_ms = driver.execute_script("return window.trajcoreViewer.firstDrawMs")
                    start = time.perf_counter()
                    driver.execute_script("window.trajcoreViewer.goto(arguments[0])", ep.length)
                    wait_drawn(driver, ep.length, timeout=60)
                    last_ms = (time.perf_counter() - start) * 1e3
                    # Scrub: 50 rows spread over the episode, each drawn before the next.
                    rows_to = [(k * 7919) % (ep.length + 1) for k in range(50)]
                    start = time.perf_counter()
                    for r in rows_to:
                        driver.execute_script("window.trajcoreViewer.goto(arguments[0])", r)
                        wait_drawn(driver, r, timeout=60)
                    scrub_ms = (time.perf_counter() - start) * 1e3 / len(rows_to)
                rows.append(
                    {
                        "group": "viewer page",
                        "name": f"{name}, {ep.length} steps, zlib {level}" + (" (default)" if level == 6 else ""),
                        "page_MB": os.path.getsize(page) / 1e6,
                        "raw_frames_MB": ep.frames.nbytes / 1e6,
                        "write_s": write_s,
                        "open_to_first_frame_ms": first_ms,
                        "jump_to_last_ms": last_ms,
                        "random_row_ms": scrub_ms,
                    }
                )
        return rows

    rows = benchmark.pedantic(run, rounds=1, iterations=1)
    report.extend(rows)
    benchmark.extra_info["rows"] = rows
