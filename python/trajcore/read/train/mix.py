"""Batches drawn from several datasets at fixed proportions (`trajcore.mix`): offline data and
a live replay buffer, as offline-to-online methods (RLPD) sample them, each batch taking an
exact share of its rows from each source, with a ``source`` column saying which."""

from __future__ import annotations

import math
import os
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from trajcore.errors import InvalidArgumentError, SchemaError
from trajcore.read.dataset import Dataset, members
from trajcore.read.dataset import open as open_dataset
from trajcore.read.episodes import Episodes
from trajcore.read.train.transitions import Batch, keys_of

__all__ = ["Mixture", "mix", "shares"]

MixSource = Dataset | Episodes | str | os.PathLike[str]


def shares(weights: Sequence[float], n: int) -> list[int]:
    """The rows of a batch of `n` each source gives, by the largest remainder rule: each gets
    ``floor(w_i * n)`` (weights normalized to sum to 1), and the rows left over go one each to
    the sources with the largest remainders ``w_i * n - floor(w_i * n)`` (the first source on a
    tie). The counts sum to `n`, and each is ``round(w_i * n)`` whenever those sum to `n`.

    Raises:
        InvalidArgumentError: a weight that is negative or not finite, weights summing to 0, or
            a negative `n`.
    """
    if n < 0:
        raise InvalidArgumentError(f"a batch size must be >= 0, got {n}")
    w = [float(x) for x in weights]
    bad = [x for x in w if not (math.isfinite(x) and x >= 0)]
    if bad or not w or sum(w) <= 0:
        raise InvalidArgumentError(f"weights must be finite, >= 0 and sum to more than 0, got {list(weights)!r}")
    exact = [x / sum(w) * n for x in w]
    counts = [math.floor(e) for e in exact]
    order = sorted(range(len(w)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[: n - sum(counts)]:
        counts[i] += 1
    return counts


def _name_of(source: MixSource) -> str:
    if isinstance(source, Dataset):
        return source.path
    if isinstance(source, Episodes):
        return f"{members(source)[0].path} ({len(source)} episodes)"
    return os.fspath(source)


def _spaces(source: Dataset | Episodes) -> tuple[Any, Any]:
    ds = members(source)[0]
    return ds.observation_space, ds.action_space


class Mixture:
    """Several sources sampled as one: `sample_transitions` takes a fixed share of each batch
    from each (see `shares`). Made by `mix`."""

    def __init__(
        self, sources: list[Dataset | Episodes], names: list[str], weights: list[float], keys: list[str] | None
    ) -> None:
        self.sources = sources
        self.names = names
        self.weights = weights
        self.keys = keys

    def refresh(self) -> int:
        """Refreshes every source that is a `Dataset` (a live replay buffer); returns the new
        episodes in all."""
        return sum(s.refresh() for s in self.sources if isinstance(s, Dataset))

    def sample_transitions(self, n: int, seed: int | None = None, *, keys: Sequence[str] | None = None) -> Batch:
        """`n` transitions: ``shares(weights, n)[i]`` drawn uniformly (with replacement) from
        source i (as its `sample_transitions` draws them), source 0's rows first. The batch
        has the sources' keys (those `keys` named, or the default ones) and ``source``, the
        name of each row's source (a str array), and ``source_index`` (int64).

        Args:
            seed: the same seed draws the same batch from the same sources (each source draws
                with a seed derived from it and its position); None: random.
            keys: the keys wanted (None: those the mixture was made with).

        Raises:
            InvalidArgumentError: a source with a share of the batch holds no step.
            SchemaError: the sources' values for a key differ in dtype or shape (possible
                only with `keys`: sources with other spaces are refused by `mix`).
        """
        counts = shares(self.weights, int(n))
        base = secrets.randbits(64) if seed is None else int(seed) & 0xFFFF_FFFF_FFFF_FFFF
        parts: list[Batch] = []
        taken: list[int] = []
        for i, (source, count) in enumerate(zip(self.sources, counts, strict=True)):
            if count == 0:
                continue
            sub_seed = int(np.random.SeedSequence([base, i]).generate_state(1, np.uint64)[0])
            parts.append(source.sample_transitions(count, sub_seed, keys=self.keys if keys is None else keys_of(keys)))
            taken.append(i)
        if not parts:
            raise InvalidArgumentError("a batch of 0 transitions has nothing to mix")
        batch: Batch = _concat(parts, [self.names[i] for i in taken], "")
        index = np.repeat(np.asarray(taken, dtype=np.int64), [counts[i] for i in taken])
        batch["source_index"] = index
        batch["source"] = np.asarray(self.names, dtype=str)[index]
        return batch

    def __repr__(self) -> str:
        inner = ", ".join(f"{name!r}: {w:g}" for name, w in zip(self.names, self.weights, strict=True))
        return f"<trajcore.Mixture {{{inner}}}>"


def _concat(parts: list[Any], names: list[str], key: str) -> Any:
    """The values of one key over the sources' batches, concatenated along axis 0."""
    first = parts[0]
    if isinstance(first, dict):
        keys = list(first)
        for part, name in zip(parts, names, strict=True):
            if not isinstance(part, dict) or list(part) != keys:
                got = list(part) if isinstance(part, dict) else type(part).__name__
                raise SchemaError(f"{key or 'the batch'}: source {name!r} has {got}, source {names[0]!r} has {keys}")
        return {k: _concat([p[k] for p in parts], names, f"{key}/{k}" if key else k) for k in keys}
    if isinstance(first, list):
        return [x for part in parts for x in part]
    arrays = [np.asarray(p) for p in parts]
    for a, name in zip(arrays, names, strict=True):
        if a.dtype != arrays[0].dtype or a.shape[1:] != arrays[0].shape[1:]:
            raise SchemaError(
                f"{key}: source {name!r} gives {a.dtype} rows of shape {a.shape[1:]}, source {names[0]!r} "
                f"{arrays[0].dtype} rows of shape {arrays[0].shape[1:]}: select keys whose values match"
            )
    return np.concatenate(arrays)


def mix(
    sources: Sequence[MixSource] | Mapping[str, MixSource],
    weights: Sequence[float],
    *,
    keys: Sequence[str] | None = None,
) -> Mixture:
    """Sources sampled together at fixed proportions: each batch of `Mixture.sample_transitions`
    takes exactly ``shares(weights, n)[i]`` rows from source i (the largest remainder rule:
    ``round(w_i * n)``, adjusted so the counts sum to n), with a ``source`` column naming it.

    Args:
        sources: datasets (`Dataset`, `Episodes` of a `select`, a path or URL to open), as a
            list (each named by its path) or a mapping from the names the ``source`` column
            gives. A `Dataset` a recorder is still writing is followed by `Mixture.refresh`.
        weights: one per source, >= 0 (normalized; a 0 never samples its source).
        keys: the keys the batches hold (as `Dataset.sample_transitions` takes them). Sources
            whose observation or action spaces differ are refused unless `keys` is given; the
            batches then check that each key's values match (dtype and shape).

    Raises:
        InvalidArgumentError: no source, as many weights as sources, a bad weight.
        SchemaError: sources with different observation or action spaces, without `keys`
            (the message names both).
    """
    if isinstance(sources, Mapping):
        names, given = [str(k) for k in sources], list(sources.values())
    else:
        given = list(sources)
        names = [_name_of(s) for s in given]
    if not given:
        raise InvalidArgumentError("mix needs at least one source")
    if len(weights) != len(given):
        raise InvalidArgumentError(f"mix: {len(given)} sources but {len(weights)} weights")
    shares(weights, 0)  # checks the weights
    if len(set(names)) != len(names):
        names = [f"{name}#{i}" for i, name in enumerate(names)]
    opened = [s if isinstance(s, Dataset | Episodes) else open_dataset(s) for s in given]
    if keys is None:
        first = _spaces(opened[0])
        for name, source in zip(names[1:], opened[1:], strict=True):
            for what, ours, theirs in zip(("observation", "action"), first, _spaces(source), strict=True):
                if ours != theirs:
                    raise SchemaError(
                        f"mix: source {name!r} has {what} space {theirs}, source {names[0]!r} has {ours}: "
                        "give keys=[...] to mix only keys whose values match"
                    )
    return Mixture(opened, names, [float(w) for w in weights], keys_of(keys))
