"""`trajcore card` (issue 35, item 5): a README.md beside the data, a YAML header in Hugging Face's
dataset-card conventions then markdown, parsed back here; the same facts as `info --json`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest
import trajcore
import yaml
from trajcore.cli import main
from trajcore.errors import InvalidArgumentError
from trajcore.tools.card import size_category, write_card


def _record(path: Path) -> None:
    env = trajcore.RecordEpisodes(gym.make("CartPole-v1"), path)
    env.action_space.seed(0)
    env.set_policy(name="random", step=7)
    for seed in range(5):
        env.reset(seed=seed)
        done = False
        while not done:
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            done = terminated or truncated
    env.close()


def _split(card: str) -> tuple[dict[str, object], str]:
    match = re.match(r"---\n(.*?)\n---\n(.*)", card, re.S)
    assert match is not None, card[:200]
    return yaml.safe_load(match.group(1)), match.group(2)


def test_the_card_parses_as_yaml_and_markdown_with_the_facts_of_info(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "cartpole"
    _record(data)
    assert main(["card", str(data), "--license", "mit"]) == 0
    capsys.readouterr()
    header, body = _split((data / "README.md").read_text())
    assert main(["info", "--json", str(data)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert header == {
        "license": "mit",
        "pretty_name": "CartPole-v1 trajectories",
        "task_categories": ["reinforcement-learning"],
        "tags": ["trajcore", "reinforcement-learning", "CartPole-v1"],
        "size_categories": ["n<1K" if info["steps"] < 1000 else "1K<n<10K"],
    }
    assert body.startswith("# CartPole-v1 trajectories\n")
    assert f"{info['episodes']:,} episodes" in body and f"{info['steps']:,} transitions" in body
    assert f"- actions: `{info['action_space']}`" in body
    mean = info["return"]["complete"]["mean"]
    assert f"| return (complete) | {mean:.4g} |" in body
    assert "- `random`: 5 episode(s), steps 7 to 7" in body
    # The provenance block is the dataset's, as JSON.
    [block] = re.findall(r"```json\n(.*?)```", body, re.S)
    assert json.loads(block) == info["provenance"][0]
    # The loading snippet runs as written, from the directory holding the dataset.
    snippet = re.findall(r"```python\n(.*?)```", body, re.S)[0]
    done = subprocess.run(
        [sys.executable, "-c", snippet + "\nprint(ds.num_episodes)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        check=True,
    )
    assert done.stdout.split() == [str(info["episodes"])]
    # The dataset still opens with the card beside its shards.
    with trajcore.open(data) as ds:
        assert ds.num_episodes == info["episodes"]


def test_an_existing_card_is_kept_unless_forced(tmp_path: Path) -> None:
    data = tmp_path / "d"
    _record(data)
    (data / "README.md").write_text("mine")
    with pytest.raises(InvalidArgumentError, match="exists"):
        write_card(data)
    assert (data / "README.md").read_text() == "mine"
    write_card(data, overwrite=True, pretty_name="Mine")
    header, _ = _split((data / "README.md").read_text())
    assert header["pretty_name"] == "Mine" and header["license"] == "unknown"
    with pytest.raises(InvalidArgumentError, match="output="):
        write_card("s3://bucket/prefix")
    out = write_card(data, output=tmp_path / "card.md")
    assert out == tmp_path / "card.md" and out.read_text().startswith("---\n")


@pytest.mark.parametrize(
    ("rows", "category"),
    [
        (0, "n<1K"),
        (999, "n<1K"),
        (1000, "1K<n<10K"),
        (99_999, "10K<n<100K"),
        (10**6, "1M<n<10M"),
        (10**10, "10B<n<100B"),
        (10**12, "n>1T"),
    ],
)
def test_size_categories(rows: int, category: str) -> None:
    assert size_category(rows) == category
