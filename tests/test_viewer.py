"""The viewer page without a browser: what it shows (decided from plain values), how frames are
packed (decoded here the way the page decodes them), the size cap, the page being one file with
no reference outside it, the notebook form and ``trajcore view``. The browser tests are in
test_viewer_browser.py."""

from __future__ import annotations

import base64
import json
import re
import zlib
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import pytest
import trajcore
from gymnasium import spaces
from trajcore.cli import main
from trajcore.viewer import episode_html, notebook_html, write_html
from trajcore.viewer._content import MAX_PLOTS, EpisodeArrays, Leaf, format_row, page_content
from trajcore.viewer._frames import encode_frames, image_shape


def _decode(packed: Any) -> np.ndarray:
    """The page's decoding (viewer.js), in numpy: inflate each block, add each frame to the one
    before it (mod 256)."""
    frames = []
    for _, count, text in packed.blocks:
        raw = np.frombuffer(zlib.decompress(base64.b64decode(text)), np.uint8).reshape(count, -1)
        frames.append(np.cumsum(raw, axis=0, dtype=np.uint8))  # uint8 wraps like the page's Uint8Array
    return np.concatenate(frames).reshape(-1, packed.height, packed.width, packed.channels)


@pytest.mark.parametrize(
    ("shape", "dtype", "layout"),
    [
        ((210, 160, 3), np.uint8, "hwc"),
        ((84, 84), np.uint8, "hw"),
        ((84, 84, 1), np.float32, "hwc"),
        ((4, 84, 84), np.uint8, "chw"),
        ((64, 64, 4), np.uint8, "hwc"),
        ((4,), np.float32, None),
        ((3, 3), np.float32, None),  # too small to be an image: shown as numbers
        ((10, 10, 7), np.uint8, None),
        ((32, 32), np.bool_, None),
        ((7, 7, 3), np.uint8, "hwc"),  # MiniGrid's view: small, but uint8 with colour channels
        ((4, 4, 1), np.uint8, "hwc"),
        ((7, 7, 3), np.float32, None),
        ((3, 3, 3), np.uint8, None),
        ((6, 7, 2), np.int8, None),  # connect four's planes: numbers, not an image
    ],
)
def test_which_arrays_are_images(shape: tuple[int, ...], dtype: Any, layout: str | None) -> None:
    assert image_shape(shape, np.dtype(dtype)) == layout


def test_frames_round_trip_and_thin_to_fit() -> None:
    rng = np.random.default_rng(0)
    frames = np.zeros((300, 40, 30, 3), np.uint8)
    for t in range(300):  # a moving square on noise that changes slowly
        frames[t] = rng.integers(0, 4, (40, 30, 3)) if t % 50 == 0 else frames[t - 1]
        frames[t, t % 30 : t % 30 + 5, 3:8] = 200
    present = np.ones(300, np.bool_)
    present[7] = False
    packed = encode_frames(frames, present)
    assert packed is not None and packed.stride == 1 and len(packed.blocks) > 1
    assert np.array_equal(_decode(packed), frames)
    assert packed.present[7] is False and packed.present[6] is True
    capped = encode_frames(frames, present, max_bytes=packed.nbytes // 3)
    assert capped is not None and capped.stride > 1 and capped.nbytes <= packed.nbytes // 3
    assert np.array_equal(_decode(capped), frames[:: capped.stride])
    assert capped.present == [bool(p) for p in present[:: capped.stride]]
    assert encode_frames(frames, present, max_bytes=10) is None, "not even one frame fits"


def _arrays(**overrides: Any) -> EpisodeArrays:
    t = 5
    fields: dict[str, Any] = {
        "title": "test",
        "summary": {"episode": 0},
        "observations": [Leaf("observation", np.arange(t + 1, dtype=np.float32) / 4)],
        "actions": [Leaf("action", np.arange(t, dtype=np.int64))],
        "rewards": np.array([1.0, 0.5, -2.0, 0.0, 3.25]),
        "terminations": np.array([False] * 4 + [True]),
        "truncations": np.zeros(t, np.bool_),
        "infos": [
            Leaf("info/lives", np.array([3, 3, 2, 2, 1, 1]), np.array([1, 1, 1, 0, 1, 1], np.bool_)),
            Leaf("info/label", ["a", "b", "", "d", "e", "f"], np.ones(6, np.bool_)),
            Leaf("info/pos", np.zeros((6, 2))),
        ],
        "data": [Leaf("data/logp", np.array([-0.1, -0.2, 0.0, -0.4, -0.5]), np.array([1, 1, 0, 1, 1], np.bool_))],
    }
    fields.update(overrides)
    return EpisodeArrays(**fields)


def test_page_content_shows_every_value_of_every_row() -> None:
    content = page_content(_arrays())
    model = content.model
    assert model["rows"] == 6 and model["image"] is None and content.blocks == []
    fields = {f["name"]: f for f in model["fields"]}
    assert fields["observation"]["timeline"] == "obs" and fields["observation"]["text"][2] == "0.5"
    assert fields["reward"]["timeline"] == "step" and fields["reward"]["text"] == ["1", "0.5", "-2", "0", "3.25"]
    assert fields["terminated"]["text"][-1] == "True"
    assert fields["info/lives"]["text"] == ["3", "3", "2", None, "1", "1"], "a masked row is missing, not 0"
    assert fields["info/pos"]["text"][0] == "[0, 0]"
    assert fields["data/logp"]["text"][2] is None
    assert [f["group"] for f in model["fields"]] == ["observation", "step", "step", "step", "step", "step"] + [
        "info"
    ] * 3
    plots = {p["name"]: p for p in model["plots"]}
    assert list(plots) == ["reward", "return so far", "info/lives", "data/logp"], "scalar numbers only"
    assert plots["return so far"]["values"] == [1.0, 1.5, -0.5, -0.5, 2.75]
    assert plots["info/lives"]["values"] == [3.0, 3.0, 2.0, None, 1.0, 1.0]


def test_large_values_are_summarised_and_many_plots_noted() -> None:
    image = np.arange(6 * 8 * 8, dtype=np.uint8).reshape(6, 8, 8)
    many = [Leaf(f"info/k{i}", np.arange(6, dtype=np.float64)) for i in range(MAX_PLOTS + 3)]
    content = page_content(_arrays(observations=[Leaf("observation", image)], infos=many))
    text = {f["name"]: f for f in content.model["fields"]}["observation"]["text"][1]
    assert text == "uint8 (8, 8): min 64, max 127, mean 95.5" == format_row(image[1])
    assert len(content.model["plots"]) == 2 + MAX_PLOTS
    note = "4 more scalar columns are not plotted: info/k12, info/k13, info/k14, data/logp"
    assert note in content.notes
    assert content.model["image"]["source"] == "observation", "an image-shaped observation is shown"


def test_frames_are_preferred_and_budget_thins_them() -> None:
    frames = np.random.default_rng(1).integers(0, 255, (6, 16, 16, 3), dtype=np.uint8)
    content = page_content(_arrays(frames=frames, frame_mask=np.ones(6, np.bool_)))
    assert content.model["image"]["source"] == "rendered frames" and content.model["image"]["stride"] == 1
    size = len(json.dumps(content.model)) + sum(map(len, content.blocks))
    capped = page_content(_arrays(frames=frames, frame_mask=np.ones(6, np.bool_)), max_bytes=size - 300)
    assert capped.model["image"]["stride"] > 1
    assert any("kept to stay within the size cap" in n for n in capped.notes)
    nothing = page_content(_arrays(frames=frames, frame_mask=np.ones(6, np.bool_)), max_bytes=100)
    assert nothing.model["image"] is None
    assert any("left out: even one does not fit" in n for n in nothing.notes)


class _Tiny(gym.Env[Any, Any]):
    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"]}
    observation_space = spaces.Box(-1, 1, (2,), np.float32)
    action_space = spaces.Discrete(2)
    render_mode = "rgb_array"

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        self.t = 0
        return np.zeros(2, np.float32), {"note": "</script><b>x</b>"}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self.t += 1
        return np.full(2, self.t / 10, np.float32), 1.0, self.t == 6, False, {"note": "&amp; <!--"}

    def render(self) -> Any:
        return np.random.default_rng(self.t).integers(0, 255, (12, 10, 3), dtype=np.uint8)  # does not compress


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    rec = trajcore.RecordEpisodes(_Tiny(), tmp_path / "tiny", render_frames=True)
    for k in range(2):
        rec.reset(seed=k)
        rec.set_episode_metadata(tag="</script>", k=k)
        for _ in range(6):
            rec.step(0)
    rec.close()
    return tmp_path / "tiny"


def _data_of(page: str) -> Any:
    match = re.search(r'<script type="application/json" id="trajcore-data">(.*?)</script>', page, re.S)
    assert match is not None
    return json.loads(match.group(1))


def test_the_page_is_one_file_and_its_data_survives_html(tiny: Path) -> None:
    with trajcore.open(tiny) as ds:
        page = episode_html(ds.episodes[1])
    # Nothing outside the file: no src/href to anything, no import, no fetch of a URL.
    assert not re.search(r"""(src|href)\s*=\s*["']?[a-z]+:""", page, re.I)
    assert not re.search(r"https?://", page)
    assert page.count("</script>") == page.count("<script")
    model = _data_of(page)
    assert model["summary"]["metadata"] == {"tag": "</script>", "k": 1}
    notes = {f["name"]: f["text"] for f in model["fields"]}["info/note"]
    assert notes == ["</script><b>x</b>"] + ["&amp; <!--"] * 6
    assert model["image"]["height"] == 12 and model["image"]["width"] == 10


def test_view_writes_or_opens_the_page(tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []
    monkeypatch.setattr("webbrowser.open", lambda url, *a, **k: opened.append(url) or True)
    out = tmp_path / "ep.html"
    assert main(["view", str(tiny), "--episode", "-1", "-o", str(out)]) == 0
    assert opened == [] and _data_of(out.read_text())["summary"]["episode"] == 1
    out.write_text("old")
    assert main(["view", str(tiny), "-o", str(out)]) == 0, "an existing page is replaced"
    assert _data_of(out.read_text())["summary"]["episode"] == 0
    assert main(["view", str(tiny), "--episode", "1"]) == 0
    assert len(opened) == 1 and opened[0].startswith("file://") and opened[0].endswith(".html")
    assert _data_of(Path(opened[0][len("file://") :]).read_text())["summary"]["episode"] == 1


def test_view_usage_errors(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["view", str(tiny), "--episode", "7", "-o", "x.html"]) == 2
    assert "episode index 7 out of range" in capsys.readouterr().err
    assert main(["view", str(tiny), "--max-mb", "0"]) == 2


def test_notebook_form_is_capped_and_says_what_it_left_out(tiny: Path) -> None:
    with trajcore.open(tiny) as ds:
        ep = ds.episodes[0]
        html = ep._repr_html_()
        assert html.startswith("<div") and "<iframe srcdoc=" in html and "trajcore viewer:" not in html
        full = len(episode_html(ep).encode())
        capped = notebook_html(ep, max_bytes=full - 1000)
        assert "trajcore viewer:" in capped and "kept to stay within the size cap" in capped
        assert len(episode_html(ep, max_bytes=full - 1000).encode()) <= full - 1000


def test_write_html_returns_its_path(tiny: Path, tmp_path: Path) -> None:
    with trajcore.open(tiny) as ds:
        out = write_html(ds.episodes[0], tmp_path / "sub" / "page.html")
    assert Path(out).read_text().startswith("<!DOCTYPE html>")


# --- image leaves of Dict observations, and the agents of an env episode ----------------------


def _images_of(page: str) -> dict[str, np.ndarray]:
    """Every image the page draws (``agent source`` -> its kept frames), decoded from the page's
    own blocks the way viewer.js decodes them (each image's blocks from its offset on)."""
    model = _data_of(page)
    blocks = dict(re.findall(r'<script type="text/plain" id="trajcore-block-(\d+)">(.*?)</script>', page))
    out = {}
    for image in [model["image"], *model["more_images"]]:
        frames = []
        for k, b in enumerate(image["blocks"]):
            raw = zlib.decompress(base64.b64decode(blocks[str(image["offset"] + k)]))
            frames.append(np.cumsum(np.frombuffer(raw, np.uint8).reshape(b["count"], -1), axis=0, dtype=np.uint8))
        shape = (image["height"], image["width"], image["channels"])
        name = image["source"] if image["agent"] is None else f"{image['agent']} {image['source']}"
        out[name] = np.concatenate(frames).reshape(-1, *shape)
    return out


class _TwoCameras(gym.Env[Any, Any]):
    """A Dict observation with two image leaves (RGB and grey, one in a nested Tuple) beside
    numbers, and rendered frames."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"]}
    observation_space = spaces.Dict(
        {
            "rgb": spaces.Box(0, 255, (10, 12, 3), np.uint8),
            "pair": spaces.Tuple((spaces.Box(0, 255, (9, 9, 1), np.uint8), spaces.Discrete(3))),
            "pos": spaces.Box(-1, 1, (2,), np.float32),
        }
    )
    action_space = spaces.Discrete(2)
    render_mode = "rgb_array"

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        self.t = 0
        return self.observation_space.sample(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self.t += 1
        return self.observation_space.sample(), 0.5, self.t == 5, False, {}

    def render(self) -> Any:
        return np.full((8, 8, 3), 40 * self.t, np.uint8)


def record_two_cameras(path: Path) -> Path:
    """One episode of `_TwoCameras`, with its frames (also for test_viewer_browser.py)."""
    env = _TwoCameras()
    env.observation_space.seed(0)
    rec = trajcore.RecordEpisodes(env, path, render_frames=True)
    rec.reset(seed=0)
    for _ in range(5):
        rec.step(0)
    rec.close()
    return path


def test_image_leaves_of_dict_observations_are_drawn(tmp_path: Path) -> None:
    with trajcore.open(record_two_cameras(tmp_path / "cams")) as ds:
        ep = ds.episodes[0]
        page = episode_html(ep)
        images = _images_of(page)
        # In the observation's order (gymnasium's Dict sorts its keys).
        assert list(images) == ["rendered frames", "observation/pair/0", "observation/rgb"]
        np.testing.assert_array_equal(images["rendered frames"], ep.frames)
        np.testing.assert_array_equal(images["observation/rgb"], ep.observations["rgb"])
        np.testing.assert_array_equal(images["observation/pair/0"], ep.observations["pair"][0])
        model = _data_of(page)
        fields = {f["name"]: f["text"] for f in model["fields"]}
        assert fields["observation/pos"][1] == format_row(ep.observations["pos"][1]), "other leaves as before"
        assert fields["observation/pair/1"][2] == format_row(ep.observations["pair"][1][2])
        # A size cap thins every image, and the page still holds each one.
        full = len(page.encode())
        capped = episode_html(ep, max_bytes=full - 700)
        assert len(capped.encode()) <= full - 700
        strides = [i["stride"] for i in [_data_of(capped)["image"], *_data_of(capped)["more_images"]]]
        assert len(strides) == 3 and max(strides) > 1


def test_an_image_observation_is_not_drawn_again_beside_the_frames() -> None:
    """Atari with frames: its observation is mostly the frame again; only Dict/Tuple leaves are
    drawn beside frames."""
    frames = np.random.default_rng(2).integers(0, 255, (6, 16, 16, 3), dtype=np.uint8)
    content = page_content(_arrays(observations=[Leaf("observation", frames.copy())], frames=frames))
    assert content.model["image"]["source"] == "rendered frames" and content.model["more_images"] == []
    leaf = page_content(_arrays(observations=[Leaf("observation/cam", frames.copy())], frames=frames))
    assert [i["source"] for i in leaf.model["more_images"]] == ["observation/cam"]


def test_minigrid_image_leaf_is_drawn(tmp_path: Path) -> None:
    import minigrid  # noqa: F401  (registers the MiniGrid envs)

    rec = trajcore.RecordEpisodes(gym.make("MiniGrid-Empty-5x5-v0", max_steps=12), tmp_path / "mg")
    rec.action_space.seed(1)
    rec.reset(seed=1)
    for _ in range(12):
        _, _, terminated, truncated, _ = rec.step(rec.action_space.sample())
        if terminated or truncated:
            break
    rec.close()
    with trajcore.open(tmp_path / "mg") as ds:
        ep = ds.episodes[0]
        grid = ep.observations["image"]
        assert grid.shape[1:] == (7, 7, 3) and grid.max() < 32
        page = episode_html(ep)
        ((source, drawn),) = _images_of(page).items()
        # Object, colour and state codes: stretched so that they can be told apart.
        assert source == f"observation/image (codes 0..{grid.max()}, stretched to be seen)"
        np.testing.assert_array_equal(drawn, grid * (255 // grid.max()))
        fields = {f["name"]: f["text"] for f in _data_of(page)["fields"]}
        assert fields["observation/mission"][0] == "get to the green goal square"
        assert fields["observation/direction"][0] == format_row(ep.observations["direction"][0])


@pytest.fixture
def arrivals(tmp_path: Path) -> Path:
    """Agents that join late and leave early, with their own spaces (the worker's an image)."""
    from test_agents import Arrivals, run_parallel

    env = trajcore.RecordParallelEpisodes(Arrivals(), tmp_path / "arr")
    run_parallel(env, episodes=2, seed=4)
    env.close()
    return tmp_path / "arr"


def test_the_page_of_an_env_episode_shows_every_agent_on_the_env_steps(arrivals: Path) -> None:
    with trajcore.open(arrivals) as ds:
        joint = ds.env_episodes[1]
        model = _data_of(episode_html(joint))
        assert model["agents"] == joint.agents == ["leader", "worker", "scout"]
        assert model["rows"] == joint.length + 1
        for agent, ep in joint.episodes.items():  # which episode of the dataset each agent's part is
            assert model["summary"][agent] == f"episode {ep.index}, {ep.length} steps, return {ep.episode_return:g}"
        for agent, ep in joint.episodes.items():
            fields = {f["name"]: f for f in model["fields"] if f["agent"] == agent}
            steps = ep.data["env_step"].tolist()
            want = [None] * joint.length
            for i, k in enumerate(steps):
                want[k] = format_row(ep.rewards[i])
            assert fields["reward"]["text"] == want, agent
            assert fields["reward"]["timeline"] == "step"
            # Its observations at the rows of its steps, the last one after its last step.
            observed = [*steps, steps[-1] + 1]
            text = fields[
                "observation" if agent == "worker" else "observation/0" if agent == "scout" else "observation/note"
            ]
            values = (
                ep.observations
                if agent == "worker"
                else ep.observations[0]
                if agent == "scout"
                else ep.observations["note"]
            )
            assert [text["text"][k] for k in observed] == [format_row(values[i]) for i in range(ep.length + 1)]
            assert sum(t is not None for t in text["text"]) == ep.length + 1, "missing where it did not observe"
            plots = [p["name"] for p in model["plots"] if p["agent"] == agent]
            assert plots[:2] == ["reward", "return so far"] and "data/env_step" not in plots, "the row is the env step"
        # The worker's image observation, drawn at its rows and missing at the others.
        worker = joint.episodes["worker"]
        image = model["image"]
        assert (image["agent"], image["source"]) == ("worker", "observation")
        observed = [*worker.data["env_step"].tolist(), int(worker.data["env_step"][-1]) + 1]
        assert [k for k, p in enumerate(image["present"]) if p] == observed
        drawn = _images_of(episode_html(joint))["worker observation"]
        np.testing.assert_array_equal(drawn[observed], worker.observations)


def test_one_agents_episode_says_whose_it_is(arrivals: Path) -> None:
    with trajcore.open(arrivals) as ds:
        ep = ds.select(agent="scout")[0]
        model = _data_of(episode_html(ep))
        assert model["summary"]["agent"] == "scout" and model["summary"]["env_episode"] == ep.env_episode
        assert model["title"].startswith("scout: ") and "agents" not in model
        assert all("agent" not in f for f in model["fields"]), "one episode's page: no agent tags"


def test_view_an_env_episode_or_one_agent_of_it(
    arrivals: Path, tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "joint.html"
    assert main(["view", str(arrivals), "--env-episode", "1", "-o", str(out)]) == 0
    assert _data_of(out.read_text())["agents"] == ["leader", "worker", "scout"]
    assert main(["view", str(arrivals), "--env-episode", "1", "--agent", "worker", "-o", str(out)]) == 0
    with trajcore.open(arrivals) as ds:
        worker = ds.env_episodes[1].episodes["worker"]
        model = _data_of(out.read_text())
        assert model["summary"]["episode"] == worker.index and model["summary"]["agent"] == "worker"
        assert main(["view", str(arrivals), "--agent", "scout", "--episode", "1", "-o", str(out)]) == 0
        assert _data_of(out.read_text())["summary"]["episode"] == ds.select(agent="scout")[1].index
    assert main(["view", str(arrivals), "--agent", "nobody", "-o", str(out)]) == 2
    assert "'nobody': not an agent of this dataset" in capsys.readouterr().err
    assert main(["view", str(arrivals), "--env-episode", "5", "-o", str(out)]) == 2
    assert "env episode 5 out of range" in capsys.readouterr().err
    assert main(["view", str(tiny), "--env-episode", "0", "-o", str(out)]) == 2
    assert "this dataset has no agents" in capsys.readouterr().err


def test_turns_of_an_aec_game_alternate_on_the_page(tmp_path: Path) -> None:
    """Tic-tac-toe (AEC): one agent acts per turn, so at each row one agent's step is shown and
    the other's is missing; its moves are the actions the game got, at its turns."""
    from pettingzoo.classic import tictactoe_v3
    from test_agents import run_aec

    env = trajcore.RecordAECEpisodes(tictactoe_v3.env(), tmp_path / "ttt")
    (turns,) = run_aec(env, episodes=1, seed=3)
    env.close()
    out = tmp_path / "ttt.html"
    assert main(["view", str(tmp_path / "ttt"), "--env-episode", "0", "-o", str(out)]) == 0
    model = _data_of(out.read_text())
    with trajcore.open(tmp_path / "ttt") as ds:
        joint = ds.env_episodes[0]
        assert model["agents"] == ["player_1", "player_2"] and model["rows"] == joint.length + 1
        actions = {f["agent"]: f["text"] for f in model["fields"] if f["name"] == "action"}
        for k, (who,) in enumerate(joint.order):
            assert actions[who][k] == format_row(joint.actions[who][k]), k
            assert all(actions[other][k] is None for other in actions if other != who), k
        for agent, want in turns.items():
            assert [actions[agent][k] for k in want.env_steps] == [str(a) for a in want.actions]
        # The board is (3, 3, 2) int8 planes: numbers, not an image.
        assert model["image"] is None
