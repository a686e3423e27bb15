"""The episode viewer as a person uses it: ``trajcore view`` writes the page, headless chromium
opens it from disk, and the test moves the slider, presses the arrow keys and plays, checking
each time that the canvas shows exactly the recorded frame of the chosen row and that the values
beside it and the plot cursors are that row's. A screenshot is kept (pytest's tmp dir). Without
a browser these tests fail: see tests/browser.py."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import trajcore
from browser import canvas_pixels, cell, chromium, cursor_columns, open_page, wait_drawn
from trajcore.cli import main
from trajcore.viewer._content import format_row, page_content
from trajcore.viewer._episode import read_episode


@pytest.fixture(scope="module")
def breakout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Breakout with frames, ALE's infos and a custom scalar ("speed"): one episode."""
    import ale_py

    gym.register_envs(ale_py)
    path = tmp_path_factory.mktemp("breakout") / "ds"
    env = gym.make("ALE/Breakout-v5", render_mode="rgb_array", max_episode_steps=120)
    rec = trajcore.RecordEpisodes(env, path, render_frames=True)
    rec.action_space.seed(0)
    rec.reset(seed=3)
    for t in range(200):
        rec.record(speed=0.5 * t)
        _, _, terminated, truncated, _ = rec.step(rec.action_space.sample())
        if terminated or truncated:
            break
    rec.close()
    return path


def plot_value(driver: Any, plot: str) -> str:
    """The value a plot's label shows for the current row."""
    text: str = driver.execute_script(
        "return document.querySelector(`[data-plot='${arguments[0]}'] .value`).textContent", plot
    )
    return text


def _check_row(driver: Any, ep: trajcore.Episode, row: int) -> None:
    """The page shows row `row` of `ep`: frame, values, plot cursors."""
    wait_drawn(driver, row)
    assert np.array_equal(canvas_pixels(driver), ep.frames[row]), f"frame of row {row}"
    assert cell(driver, "observation") == format_row(ep.observations[row])
    assert cell(driver, "info/lives") == format_row(ep.infos["lives"][row])
    last = ep.length
    if row < last:
        assert cell(driver, "action") == format_row(ep.actions[row])
        assert cell(driver, "reward") == format_row(ep.rewards[row])
        assert cell(driver, "terminated") == format_row(ep.terminations[row])
        assert cell(driver, "data/speed") == format_row(ep.data["speed"][row])
        assert float(plot_value(driver, "return so far")) == pytest.approx(float(np.sum(ep.rewards[: row + 1])))
        assert float(plot_value(driver, "data/speed")) == pytest.approx(0.5 * row)
    else:
        assert cell(driver, "action") == "—", "the final observation has no step"
    position = driver.execute_script("return document.getElementById('position').textContent")
    assert position.startswith(f"row {row} of {last}")
    # One cursor line per plot, where the row is (viewer.js: 46 px left, 8 px right of the axes).
    width = driver.execute_script("return document.querySelector(\"[data-plot='reward'] canvas\").width")
    x = 46 + row / last * (width - 46 - 8)
    columns = cursor_columns(driver, "reward")
    assert columns and columns[-1] - columns[0] <= 2 and abs((columns[0] + columns[-1]) / 2 - x) <= 1.5, columns


def test_slider_keys_and_play_show_the_chosen_rows(breakout: Path, tmp_path: Path) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    page = tmp_path / "episode.html"
    assert main(["view", str(breakout), "--episode", "0", "-o", str(page)]) == 0
    with trajcore.open(breakout) as ds:
        ep = ds.episodes[0]
        assert ep.length > 40
        with chromium() as driver:
            open_page(driver, page)
            _check_row(driver, ep, 0)

            # Drag the slider's thumb to about two thirds of its track.
            slider = driver.find_element(By.ID, "slider")
            width = slider.size["width"]
            ActionChains(driver).click_and_hold(slider).move_by_offset(width // 6, 0).release().perform()
            row = driver.execute_script("return window.trajcoreViewer.row")
            assert ep.length // 2 < row < ep.length, row
            _check_row(driver, ep, row)

            body = driver.find_element(By.TAG_NAME, "body")
            for keys, moved in (
                ((Keys.ARROW_RIGHT,), 1),
                ((Keys.ARROW_LEFT,), -1),
                ((Keys.ARROW_LEFT,), -1),
                ((Keys.SHIFT, Keys.ARROW_LEFT), -10),
            ):
                if len(keys) == 1:
                    body.send_keys(keys[0])
                else:
                    ActionChains(driver).key_down(keys[0]).send_keys(keys[1]).key_up(keys[0]).perform()
                row += moved
                _check_row(driver, ep, row)
            body.send_keys(Keys.END)
            _check_row(driver, ep, ep.length)
            body.send_keys(Keys.HOME)
            _check_row(driver, ep, 0)

            # Play for a moment, then pause: it moved on, and shows the row it stopped at.
            driver.find_element(By.ID, "play").click()
            time.sleep(0.6)
            driver.find_element(By.ID, "play").click()
            row = driver.execute_script("return window.trajcoreViewer.row")
            assert row > 3
            _check_row(driver, ep, row)

            # Clicking a plot (offsets from its centre) moves the cursor there.
            plot = driver.find_element(By.CSS_SELECTOR, "[data-plot='reward'] canvas")
            ActionChains(driver).move_to_element_with_offset(plot, -plot.size["width"] // 4, 0).click().perform()
            row = driver.execute_script("return window.trajcoreViewer.row")
            assert 0 < row < ep.length // 2
            _check_row(driver, ep, row)

            shot = tmp_path / "viewer.png"
            driver.save_screenshot(str(shot))
            assert shot.stat().st_size > 10_000
            print(f"screenshot: {shot}")
            assert not [e for e in driver.get_log("browser") if e["level"] == "SEVERE"], "no errors in the page"


def test_image_observations_are_shown_without_frames(tmp_path: Path) -> None:
    """No render_frames: the grey 84x84 observation (AtariPreprocessing) is the image."""
    import ale_py

    gym.register_envs(ale_py)
    env = gym.wrappers.AtariPreprocessing(gym.make("ALE/Pong-v5", frameskip=1), frame_skip=4, screen_size=84)
    rec = trajcore.RecordEpisodes(env, tmp_path / "pong")
    rec.action_space.seed(0)
    rec.reset(seed=0)
    for _ in range(30):
        rec.step(rec.action_space.sample())
    rec.close()
    page = tmp_path / "pong.html"
    assert main(["view", str(tmp_path / "pong"), "-o", str(page)]) == 0
    with trajcore.open(tmp_path / "pong") as ds, chromium() as driver:
        ep = ds.episodes[0]
        open_page(driver, page)
        for row in (0, 17, 30):
            driver.execute_script("window.trajcoreViewer.goto(arguments[0])", row)
            wait_drawn(driver, row)
            grey = ep.observations[row]
            assert np.array_equal(canvas_pixels(driver), np.repeat(grey[..., None], 3, axis=2)), row
        driver.get(page.resolve().as_uri() + "#row=21")  # a link to a row opens there
        wait_drawn(driver, 21)
        assert np.array_equal(canvas_pixels(driver)[..., 0], ep.observations[21])


def test_thinned_and_missing_frames_say_so(tmp_path: Path) -> None:
    """A size-capped page keeps every k-th frame (a row between shows the one before, and says
    so); a same-step vector episode's final row has no frame (and says so)."""
    from gymnasium.vector import AutoresetMode

    envs = gym.make_vec(
        "CartPole-v1",
        num_envs=2,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
        render_mode="rgb_array",
        max_episode_steps=30,
    )
    rec = trajcore.RecordVectorEpisodes(envs, tmp_path / "cp", render_frames=True)
    rec.action_space.seed(0)
    rec.reset(seed=0)
    for _ in range(40):
        rec.step(rec.action_space.sample())
    rec.close()
    with trajcore.open(tmp_path / "cp") as ds:
        ep = next(e for e in ds.episodes if e.complete)
        assert not ep.frame_mask[-1]
        frames = sum(map(len, page_content(read_episode(ep)).blocks))
        cap = len(trajcore.viewer.episode_html(ep).encode()) - 2 * frames // 3  # room for a third of the frames
        page = tmp_path / "capped.html"
        trajcore.viewer.write_html(ep, page, max_bytes=cap)
        with chromium() as driver:
            open_page(driver, page)
            model = driver.execute_script("return JSON.parse(document.getElementById('trajcore-data').textContent)")
            stride = model["image"]["stride"]
            assert stride > 1
            notes = driver.execute_script("return document.getElementById('notes').textContent")
            assert f"every {stride}th of {ep.length + 1} kept" in notes
            row = stride + 1
            driver.execute_script("window.trajcoreViewer.goto(arguments[0])", row)
            wait_drawn(driver, row)
            assert np.array_equal(canvas_pixels(driver), ep.frames[stride])
            note = driver.execute_script("return document.getElementById('frame-note').textContent")
            assert note == f"frame of row {stride} (every {stride}th frame kept)"
        page = tmp_path / "full.html"
        trajcore.viewer.write_html(ep, page)
        with chromium() as driver:
            open_page(driver, page)
            driver.execute_script("window.trajcoreViewer.goto(arguments[0])", ep.length)
            wait_drawn(driver, ep.length)
            note = driver.execute_script("return document.getElementById('frame-note').textContent")
            assert note.startswith(f"no frame at row {ep.length}")


def _agent_cell(driver: Any, agent: str, field: str) -> str:
    script = (
        "return document.querySelector(`tr[data-agent='${arguments[0]}'][data-field='${arguments[1]}'] td`).textContent"
    )
    text: str = driver.execute_script(script, agent, field)
    return text


def _shown(driver: Any, selector: str) -> list[str]:
    """data-agent of the elements matching `selector` that are shown."""
    script = (
        "return [...document.querySelectorAll(arguments[0])]"
        ".filter((e) => e.offsetParent !== null).map((e) => e.dataset.agent)"
    )
    agents: list[str] = driver.execute_script(script, selector)
    return agents


def test_env_episode_page_shows_every_agent_and_picks_one(tmp_path: Path) -> None:
    """Agents joining late and leaving early (tests/test_agents.py's Arrivals): at each env step
    every agent's values (or "—" where it did not act), the worker's image observation drawn at
    its rows; the picker and #agent= show one agent only."""
    from selenium.webdriver.support.ui import Select
    from test_agents import Arrivals, run_parallel

    env = trajcore.RecordParallelEpisodes(Arrivals(), tmp_path / "arr")
    run_parallel(env, episodes=1, seed=4)
    env.close()
    page = tmp_path / "joint.html"
    assert main(["view", str(tmp_path / "arr"), "--env-episode", "0", "-o", str(page)]) == 0
    with trajcore.open(tmp_path / "arr") as ds, chromium() as driver:
        joint = ds.env_episodes[0]
        open_page(driver, page)
        assert sorted(set(_shown(driver, "tr[data-agent]"))) == sorted(joint.agents)
        worker = joint.episodes["worker"]
        steps = worker.data["env_step"].tolist()
        for row in range(joint.length + 1):
            driver.execute_script("window.trajcoreViewer.goto(arguments[0])", row)
            wait_drawn(driver, row)
            for agent, ep in joint.episodes.items():
                at = ep.data["env_step"].tolist()
                want = format_row(ep.rewards[at.index(row)]) if row in at else "—"
                assert _agent_cell(driver, agent, "reward") == want, (agent, row)
            observed = [*steps, steps[-1] + 1]
            if row in observed:
                assert np.array_equal(canvas_pixels(driver), worker.observations[observed.index(row)]), row
            else:
                note = driver.execute_script("return document.getElementById('frame-note').textContent")
                assert note.startswith(f"no frame at row {row}"), note
        Select(driver.find_element("id", "agent")).select_by_value("scout")
        assert set(_shown(driver, "tr[data-agent]")) == {"scout"}
        assert set(_shown(driver, ".plot")) == {"scout"}
        assert _shown(driver, "#screen") == [], "the worker's image is hidden with the worker"
        driver.get(page.resolve().as_uri() + "#agent=leader&row=2")
        wait_drawn(driver, 2)
        assert set(_shown(driver, "tr[data-agent]")) == {"leader"}
        assert driver.find_element("id", "agent").get_attribute("value") == "leader"
        assert not [e for e in driver.get_log("browser") if e["level"] == "SEVERE"], "no errors in the page"


def test_image_leaves_are_drawn_beside_the_frames(tmp_path: Path) -> None:
    """Rendered frames large, each image leaf of the Dict observation in its own canvas."""
    from test_viewer import record_two_cameras

    path = record_two_cameras(tmp_path / "cams")
    page = tmp_path / "cams.html"
    assert main(["view", str(path), "-o", str(page)]) == 0
    with trajcore.open(path) as ds, chromium() as driver:
        ep = ds.episodes[0]
        open_page(driver, page)
        assert driver.execute_script("return document.getElementById('agent-pick').offsetParent") is None
        for row in (0, 3, 5):
            driver.execute_script("window.trajcoreViewer.goto(arguments[0])", row)
            wait_drawn(driver, row)
            assert np.array_equal(canvas_pixels(driver), ep.frames[row])
            grey = ep.observations["pair"][0][row]
            assert np.array_equal(canvas_pixels(driver, "#frame-1"), np.repeat(grey, 3, axis=2))
            assert np.array_equal(canvas_pixels(driver, "#frame-2"), ep.observations["rgb"][row])
        captions = driver.execute_script(
            "return [...document.querySelectorAll('#more-images figcaption')].map((e) => e.textContent)"
        )
        assert captions == ["observation/pair/0", "observation/rgb"]
