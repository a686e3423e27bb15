"""``trajcore.to_lerobot`` and ``trajcore export PATH OUT --format lerobot``: a dataset (or some of its
episodes) as a LeRobot v3.0 dataset (`trajcore.formats.to_lerobot` writes the files) with its
dataset card, ``README.md`` with the Hub's YAML header (`trajcore.tools.card` writes it), so that
``huggingface-cli upload REPO_ID OUT --repo-type dataset`` is the only step left."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from trajcore.formats._read import Progress, opened_for_pass
from trajcore.formats.to_lerobot import CODEBASE_VERSION, write_lerobot
from trajcore.read.dataset import Dataset
from trajcore.read.episodes import Episodes
from trajcore.tools.card import CARD_NAME, dataset_card, size_category
from trajcore.tools.output import staged
from trajcore.video import av_module

__all__ = ["to_lerobot"]


def _card(ds: Dataset, result: dict[str, Any], root: str, license: str) -> str:
    repo_id = result["repo_id"]
    intro = [
        f"A [LeRobot](https://github.com/huggingface/lerobot) {CODEBASE_VERSION} dataset exported by trajcore: "
        f"{result['episodes']:,} episodes, {result['steps']:,} frames, features "
        + ", ".join(f"`{f}`" for f in result["features"])
        + f"; tasks: {', '.join(repr(t) for t in result['tasks'])}. The trajcore recording it came from:",
    ]
    loading = [
        "With LeRobot (`pip install lerobot`):",
        "",
        "```python",
        "from lerobot.datasets.lerobot_dataset import LeRobotDataset",
        f'ds = LeRobotDataset("{repo_id}")',
        "```",
        "",
        "Back into trajcore (no LeRobot needed):",
        "",
        "```bash",
        f"python -m trajcore import-lerobot {os.path.basename(os.path.normpath(root))} runs/imported",
        "```",
    ]
    header = {
        "task_categories": ["robotics", "reinforcement-learning"],
        "size_categories": [size_category(int(result["steps"]))],  # the rows exported
        "configs": [{"config_name": "default", "data_files": "data/*/*.parquet"}],
    }
    return dataset_card(ds, license=license, tags=["LeRobot"], header=header, intro=intro, loading=loading)


def to_lerobot(
    src: str | os.PathLike[str] | Dataset | Episodes,
    root: str | os.PathLike[str],
    *,
    repo_id: str,
    fps: float | None = None,
    video: bool = True,
    pix_fmt: str = "yuv444p",
    task: str | None = None,
    task_key: str | None = "task",
    mapping: Mapping[str, str | None] | None = None,
    robot_type: str | None = None,
    license: str = "unknown",
    force: bool = False,
    data_file_mb: float = 100.0,
    video_file_mb: float = 200.0,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Writes a dataset, or a selection of its episodes, as a LeRobot v3.0 dataset with its
    dataset card (``README.md``): what the module docstring describes.

    Args:
        src: a dataset (path, or `Dataset`), or `Episodes` (``ds.select(...)``).
        root: the directory to create (written beside it, renamed into place when complete).
        repo_id: the Hub id the dataset will have (``user/name``): in the card.
        fps: frames per second (default: a dataset imported from LeRobot's own, else the
            recording's ``render_fps``, else 30).
        video: camera features as MP4 video (True) or as PNG images in the Parquet rows (False;
            a dataset imported from LeRobot keeps its ``image`` features as images either way).
        pix_fmt: the videos' pixel format, one of `PIX_FMTS`.
        task: the task text of every episode whose metadata has no `task_key` (default: the
            recording's env id).
        task_key: the episode metadata key holding an episode's task text (None: `task` only).
        mapping: leaf name -> LeRobot feature name, or None to leave a leaf out (over the default).
        robot_type: ``robot_type`` of ``meta/info.json``.
        license: the card's license identifier (``mit``, ``cc-by-4.0``, ...).
        force: replace `root` if it exists.
        data_file_mb, video_file_mb: sizes past which a new data file / video file starts.
        progress: called with the number of steps written, as they are.

    Returns:
        ``{"episodes", "steps", "features": [LeRobot names], "left_out": [trajcore values
        with no feature], "skipped": episodes of no step (not written), "tasks", "repo_id", "out"}``.

    Raises:
        InvalidArgumentError: `root` exists (without `force`), no episode, a bad `fps`, a
            mapping naming no value or a value LeRobot cannot hold (strings, frame stacks).
        MissingDependencyError: pyarrow, PyAV (video) or Pillow (images) is not installed.
    """
    out = os.path.normpath(os.fspath(root))
    with opened_for_pass(src) as (ds, indices):
        if video:
            av_module("the lerobot export with video=True")  # before anything is made
        with staged(out, force) as tmp:
            result = write_lerobot(
                ds,
                indices,
                tmp,
                repo_id=repo_id,
                fps=fps,
                video=video,
                pix_fmt=pix_fmt,
                task=task,
                task_key=task_key,
                mapping=mapping,
                robot_type=robot_type,
                data_file_mb=data_file_mb,
                video_file_mb=video_file_mb,
                progress=progress,
            )
            with open(os.path.join(tmp, CARD_NAME), "w", encoding="utf-8") as f:
                f.write(_card(ds, result, out, license))
    result["out"] = out
    return result
