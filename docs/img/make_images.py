"""Makes the images of docs/viewer-and-plots.md with trajcore's own commands: records Breakout
with frames and a CartPole vector env, writes the viewer page (``trajcore view``) and screenshots
it in headless chromium, writes the plots (``trajcore plot``, with the recorder's timelog).

    python docs/img/make_images.py      # needs ale-py, matplotlib, chromium (Debian's package)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import gymnasium as gym
import trajcore
import trajcore.plots

HERE = Path(__file__).resolve().parent


def main() -> None:
    import ale_py

    gym.register_envs(ale_py)
    work = Path(tempfile.mkdtemp(prefix="trajcore-images-"))
    env = gym.make("ALE/Breakout-v5", render_mode="rgb_array")
    rec = trajcore.RecordEpisodes(env, work / "breakout", render_frames=True)
    rec.action_space.seed(1)
    rec.reset(seed=1)
    for _ in range(2000):
        rec.record(action_prob=0.25)
        _, _, terminated, truncated, _ = rec.step(rec.action_space.sample())
        if terminated or truncated:
            break
    rec.close()
    page = work / "breakout.html"
    subprocess.run([sys.executable, "-m", "trajcore", "view", str(work / "breakout"), "-o", str(page)], check=True)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("needs chromium for the screenshot")
    subprocess.run(
        [
            chromium,
            "--headless=new",
            "--no-sandbox",
            "--hide-scrollbars",
            "--window-size=1400,1060",
            "--virtual-time-budget=4000",
            f"--screenshot={HERE / 'viewer.png'}",
            page.as_uri() + "#row=140",
        ],
        check=True,
    )

    envs = gym.make_vec("CartPole-v1", num_envs=8, vectorization_mode="sync", render_mode="rgb_array")
    rec = trajcore.RecordVectorEpisodes(envs, work / "cp8", render_frames=True)
    rec.action_space.seed(0)
    rec.reset(seed=0)
    for _ in range(3000):
        rec.step(rec.action_space.sample())
    rec.close()
    trajcore.plots.save_timelog(rec, work / "timelog.json")
    plots = work / "plots"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "trajcore",
            "plot",
            str(work / "cp8"),
            "--timelog",
            str(work / "timelog.json"),
            "-o",
            str(plots),
        ],
        check=True,
    )
    for name in ("returns", "timelog"):
        shutil.copy(plots / f"{name}.png", HERE / f"{name}.png")
    print(f"images in {HERE} (work files in {work})")


if __name__ == "__main__":
    main()
