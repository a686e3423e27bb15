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
