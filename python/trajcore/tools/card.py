"""A dataset card: a ``README.md`` beside the data, after Hugging Face's dataset-card conventions (a
YAML header with license, tags, task and size category; then markdown), made of the facts
`trajcore info --json` gives (`trajcore.tools.report`): spaces, episode and step counts, return
statistics, provenance and policies, and how to load the data with trajcore, pandas and Minari."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from trajcore import _core
from trajcore._store import is_store_url
from trajcore.errors import InvalidArgumentError
from trajcore.read.dataset import Dataset
from trajcore.read.dataset import open as open_dataset
from trajcore.tools.report import dataset_report

__all__ = ["CARD_NAME", "dataset_card", "size_category", "write_card"]

CARD_NAME = "README.md"

# Hugging Face's size categories, by number of rows (here transitions).
_SIZES = (
    (10**3, "n<1K"),
    (10**4, "1K<n<10K"),
    (10**5, "10K<n<100K"),
    (10**6, "100K<n<1M"),
    (10**7, "1M<n<10M"),
    (10**8, "10M<n<100M"),
    (10**9, "100M<n<1B"),
    (10**10, "1B<n<10B"),
    (10**11, "10B<n<100B"),
    (10**12, "100B<n<1T"),
)


def size_category(rows: int) -> str:
    """The Hugging Face size category of a dataset of `rows` rows."""
    for bound, name in _SIZES:
        if rows < bound:
            return name
    return "n>1T"


def _yaml_scalar(value: Any) -> str:
    # JSON's strings, numbers, booleans and null are YAML too: no YAML writer is needed.
    return json.dumps(value)


def _yaml(header: dict[str, Any]) -> str:
    lines = []
    for key, value in header.items():
        if isinstance(value, list):
            lines.append(f"{key}:")
            lines += [f"- {_yaml_scalar(item)}" for item in value]
        else:
            lines.append(f"{key}: {_yaml_scalar(value)}")
    return "\n".join(lines)


def _stats_line(stats: dict[str, Any]) -> str:
    if not stats or "mean" not in stats:
        return "-"
    return " | ".join(f"{stats[k]:.4g}" for k in ("mean", "std", "min", "median", "max"))


def _minari_name(env_ids: list[str]) -> str:
    base = env_ids[0].split("/")[-1].rsplit("-v", 1)[0] if env_ids else "dataset"
    return "".join(c if c.isalnum() else "-" for c in base.lower()) + "/recorded"


def dataset_card(
    ds: Dataset,
    *,
    license: str = "unknown",
    pretty_name: str | None = None,
    tags: Sequence[str] = (),
    header: Mapping[str, Any] | None = None,
    intro: Sequence[str] = (),
    loading: Sequence[str] | None = None,
) -> str:
    """The card of an open dataset, as text (YAML header, then markdown).

    Args:
        tags: more tags for the header (after trajcore's).
        header: more header keys (a list's items may be mappings: written as YAML flow mappings).
        intro: markdown lines after the title (what an export made of the data).
        loading: the lines of the "Loading" section (default: with trajcore, pandas and Minari).
    """
    report, _ = dataset_report(ds)
    env_ids = [e for e in report["env_ids"] if e]
    name = pretty_name or (f"{', '.join(env_ids)} trajectories" if env_ids else Path(str(report["path"])).name)
    all_tags = ["trajcore", "reinforcement-learning", *env_ids, *(["multi-agent"] if report["agents"] else []), *tags]
    yaml_header = {
        "license": license,
        "pretty_name": name,
        "task_categories": ["reinforcement-learning"],
        "tags": list(dict.fromkeys(all_tags)),
        "size_categories": [size_category(int(report["steps"]))],
        **(header or {}),
    }
    where = os.path.basename(str(report["path"]).rstrip("/")) or str(report["path"])
    out = [f"---\n{_yaml(yaml_header)}\n---", f"# {name}", "", *intro, *([""] if intro else [])]
    out.append(
        f"Recorded with [trajcore](https://pypi.org/project/trajcore/) (this card by {_core.__version__}): "
        f"{report['episodes']:,} episodes ({report['complete_episodes']:,} complete: {report['terminated']:,} "
        f"terminated, {report['truncated']:,} truncated), {report['steps']:,} transitions, in "
        f"{report['shards']} shard file(s) of {report['recordings']} recording(s)."
    )
    out += ["", "## Spaces", ""]
    if report["agent_spaces"]:
        out += [f"- `{a}`: observations `{o}`, actions `{act}`" for a, (o, act) in report["agent_spaces"].items()]
    else:
        out += [f"- observations: `{report['observation_space']}`", f"- actions: `{report['action_space']}`"]
    out += [
        f"- sub-envs per recording: {', '.join(map(str, report['num_envs']))}; autoreset: "
        f"{', '.join(report['autoreset_modes'])}",
        "",
        "## Episodes",
        "",
        "| | mean | std | min | median | max |",
        "|---|---|---|---|---|---|",
    ]
    for what in ("return", "length"):
        for part in ("complete", "incomplete"):
            if report[what][part]:
                out.append(f"| {what} ({part}) | {_stats_line(report[what][part])} |")
    if report["policies"]:
        out += ["", "Policies behind the episodes:", ""]
        for p in report["policies"]:
            steps = p["steps"]
            out.append(
                f"- `{p['name']}`: {p['episodes']:,} episode(s)"
                + (f", steps {steps[0]:,} to {steps[1]:,}" if steps else "")
            )
    out += ["", "## Provenance", ""]
    for r, prov in enumerate(report["provenance"]):
        out += [f"Recording {r}:", "", "```json", json.dumps(prov, indent=2, sort_keys=True), "```", ""]
    if not report["provenance"]:
        out += ["No recording.", ""]
    if loading is not None:
        return "\n".join([*out, "## Loading", "", *loading, ""])
    out += [
        "## Loading",
        "",
        "With trajcore (`pip install trajcore`):",
        "",
        "```python",
        "import trajcore",
        f'ds = trajcore.open("{where}")',
        "ep = ds.episodes[0]                       # observations, actions, rewards as numpy arrays",
        "batch = ds.sample_transitions(256, seed=0)",
        "```",
        "",
        "As a pandas table (a row per step):",
        "",
        "```python",
        f'df = trajcore.to_pandas(trajcore.open("{where}"))',
        "```",
        "",
        "As a Minari dataset:",
        "",
        "```bash",
        f"python -m trajcore export {where} trajcore/{_minari_name(env_ids)}-v0 --format minari",
        "```",
        "",
        "`python -m trajcore info --json` gives the facts above to programs.",
        "",
    ]
    return "\n".join(out)


def write_card(
    path: str | os.PathLike[str],
    *,
    output: str | os.PathLike[str] | None = None,
    license: str = "unknown",
    pretty_name: str | None = None,
    overwrite: bool = False,
) -> Path:
    """Writes the card of the dataset at `path` to `output` (default: ``README.md`` in the
    dataset's directory) and returns where.

    Raises:
        InvalidArgumentError: the file exists (without `overwrite`), or `path` is a URL or a
            shard file and no `output` was given.
    """
    if output is None:
        if is_store_url(os.fspath(path)) or not Path(path).is_dir():
            raise InvalidArgumentError(f"{path} is not a local directory: name the card's file with output=")
        output = Path(path) / CARD_NAME
    target = Path(output)
    if target.exists() and not overwrite:
        raise InvalidArgumentError(f"{target} exists: pass overwrite=True (--force) to replace it")
    with open_dataset(path) as ds:
        text = dataset_card(ds, license=license, pretty_name=pretty_name)
    target.write_text(text, encoding="utf-8")
    return target
