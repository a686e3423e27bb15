"""Episode selection from the command line: ``--select KEY=VALUE`` expressions parsed into plain
values (`parse_select`, no I/O), then applied to a dataset (`apply_select`).

Keys (every given one must hold):

- ``env_index=0,3`` / ``recording=1``: the sub-env(s) / recording(s);
- ``agent=NAME`` or ``agent=NAME,NAME``: the agent(s) of a multi-agent dataset;
- ``policy=NAME`` or ``policy=NAME,NAME``, ``policy_step=LOW:HIGH`` (inclusive integers, either
  end open): the policy the episodes were recorded under (``set_policy``);
- ``complete=true``, ``terminated=false``, ``truncated=yes``: the summary flags;
- ``min_return=``, ``max_return=``, ``min_length=``, ``max_length=``: inclusive bounds;
- ``episodes=0:100`` (a Python slice over the dataset, negatives from the end) or
  ``episodes=3,5,8``: dataset indexes;
- ``metadata.KEY=VALUE`` (``metadata.cfg.lr=0.1`` for nested keys): episode metadata equal to
  VALUE, read as JSON when it parses (``1``, ``true``, ``"x"``), else as a string;
- ``metric.NAME.STAT=LOW:HIGH`` (``metric.data/logp.mean=-1:``, either end open): an episode
  metric's statistic (count, mean, sum, min, max) within inclusive bounds.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from trajcore.errors import InvalidArgumentError, TrajcoreIndexError
from trajcore.read.dataset import Dataset
from trajcore.read.episodes import Episodes
from trajcore.read.select.filters import BOUND_FILTERS, FLAG_FILTERS, EpisodeFilters
from trajcore.read.select.metrics import STATS as METRIC_STATS

__all__ = ["SELECT_HELP", "Selection", "apply_select", "parse_select"]

# The keys `select` takes are named once (`trajcore.read.select.filters`); the command line adds recording,
# episodes, metadata.KEY and metric.NAME.STAT (for `select`'s metrics and where).
SELECT_HELP = (
    "KEY=VALUE, repeatable, all must hold: env_index=0,3  recording=0  agent=NAME,NAME  "
    "policy=NAME,NAME  policy_step=LOW:HIGH  "
    + "  ".join(f"{key}=true" for key in FLAG_FILTERS)
    + "  "
    + "  ".join(f"{key}={'N' if kind is int else 'X'}" for key, kind in BOUND_FILTERS.items())
    + "  episodes=0:100 or episodes=3,5,8  metadata.KEY=VALUE (VALUE as JSON, else a string)  "
    f"metric.NAME.STAT=LOW:HIGH (STAT: {', '.join(METRIC_STATS)}; an end may be left open: metric.data/logp.mean=-1:)"
)

_BOOLS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


@dataclass
class Selection:
    """A parsed selection: summary filters, recordings, dataset indexes and metadata equalities."""

    filters: EpisodeFilters = field(default_factory=lambda: EpisodeFilters())
    recording: list[int] | None = None
    episodes: slice | list[int] | None = None
    metadata: list[tuple[tuple[str, ...], Any]] = field(default_factory=list)


def _ints(key: str, text: str) -> list[int]:
    try:
        return [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise InvalidArgumentError(f"--select {key}={text}: expected integers separated by commas") from None


def _number(key: str, text: str, kind: type[int] | type[float]) -> Any:
    try:
        return kind(text)
    except ValueError:
        raise InvalidArgumentError(
            f"--select {key}={text}: expected {'an integer' if kind is int else 'a number'}"
        ) from None


def _slice(text: str) -> slice:
    parts = text.split(":")
    if len(parts) > 3:
        raise InvalidArgumentError(f"--select episodes={text}: expected START:STOP[:STEP] or N,N,...")
    try:
        bounds = [int(p) if p.strip() else None for p in parts]
    except ValueError:
        raise InvalidArgumentError(f"--select episodes={text}: expected START:STOP[:STEP] or N,N,...") from None
    return slice(*bounds)


def _range(key: str, text: str) -> tuple[float | None, float | None]:
    low, sep, high = text.partition(":")
    if not sep:
        raise InvalidArgumentError(f"--select {key}={text}: expected LOW:HIGH (an end may be empty)")
    return tuple(  # type: ignore[return-value]
        _number(key, part, float) if part.strip() else None for part in (low, high)
    )


def parse_select(expressions: Sequence[str] | None) -> Selection:
    """Parses ``KEY=VALUE`` expressions (see the module docstring).

    Raises:
        InvalidArgumentError: an expression without '=', an unknown key, or a bad value; the
            message names it and the keys known.
    """
    sel = Selection()
    metric_bounds: dict[str, dict[str, tuple[float | None, float | None]]] = {}
    for expr in expressions or ():
        key, sep, value = expr.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            raise InvalidArgumentError(f"--select {expr!r}: expected KEY=VALUE ({SELECT_HELP})")
        if key == "env_index":
            sel.filters["env_index"] = _ints(key, value)
        elif key == "recording":
            sel.recording = _ints(key, value)
        elif key == "agent":
            sel.filters["agent"] = [name.strip() for name in value.split(",")]
        elif key == "policy":
            sel.filters["policy"] = [name.strip() for name in value.split(",")]
        elif key == "policy_step":
            low, sep, high = value.partition(":")
            if not sep:
                raise InvalidArgumentError(f"--select {key}={value}: expected LOW:HIGH (an end may be empty)")
            sel.filters["policy_step"] = (
                _number(key, low, int) if low.strip() else None,
                _number(key, high, int) if high.strip() else None,
            )
        elif key in FLAG_FILTERS:
            flag = _BOOLS.get(value.lower())
            if flag is None:
                raise InvalidArgumentError(f"--select {key}={value}: expected true or false")
            sel.filters[key] = flag  # type: ignore[literal-required]
        elif key in BOUND_FILTERS:
            sel.filters[key] = _number(key, value, BOUND_FILTERS[key])  # type: ignore[literal-required]
        elif key == "episodes":
            sel.episodes = _slice(value) if ":" in value else _ints(key, value)
        elif key.startswith("metadata.") and len(key) > len("metadata."):
            try:
                parsed: Any = json.loads(value)
            except ValueError:
                parsed = value
            sel.metadata.append((tuple(key.split(".")[1:]), parsed))
        elif key.startswith("metric."):
            name, dot, stat = key[len("metric.") :].rpartition(".")
            if not dot or not name or stat not in METRIC_STATS:
                raise InvalidArgumentError(
                    f"--select {expr!r}: expected metric.NAME.STAT=LOW:HIGH, STAT one of {', '.join(METRIC_STATS)}"
                )
            metric_bounds.setdefault(name, {})[stat] = _range(key, value)
        else:
            raise InvalidArgumentError(f"--select {expr!r}: unknown key {key!r} ({SELECT_HELP})")
    if metric_bounds:
        sel.filters["metrics"] = metric_bounds
    return sel


def _lookup(meta: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(meta, dict) or part not in meta:
            return _MISSING
        meta = meta[part]
    return meta


_MISSING = object()


def apply_select(ds: Dataset, sel: Selection) -> Episodes:
    """The episodes of `ds` a selection keeps, in dataset order.

    Raises:
        TrajcoreIndexError: an ``episodes=`` index out of range (an `InvalidArgumentError`).
    """
    n = ds.num_episodes
    if isinstance(sel.episodes, slice):
        candidates: Sequence[int] = range(n)[sel.episodes]
    elif sel.episodes is not None:
        bad = [i for i in sel.episodes if not -n <= i < n]
        if bad:
            raise TrajcoreIndexError(f"--select episodes: {bad[0]} is out of range ({n} episodes)")
        candidates = sorted({i % n for i in sel.episodes})
    else:
        candidates = range(n)
    chosen = Episodes(ds, candidates).select(**sel.filters)
    indices = chosen.indices
    if sel.recording is not None:
        recording = ds.summaries()["recording"]
        keep = set(sel.recording)
        indices = [i for i in indices if int(recording[i]) in keep]
    for path, value in sel.metadata:
        indices = [i for i in indices if _equal(_lookup(ds._reads.episode_metadata(i), path), value)]
    return Episodes(ds, indices)


def _equal(got: Any, want: Any) -> bool:
    if got is _MISSING:
        return False
    if isinstance(got, bool) or isinstance(want, bool):
        return type(got) is type(want) and got == want  # True is not the episode number 1
    return bool(got == want)
