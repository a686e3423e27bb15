"""Spaces -> columns, layout trees and JSON (pure Python, no file involved)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import trajcore
from gymnasium import spaces
from trajcore.spaces import escape_key, space_columns, space_from_json, space_to_json, unescape_key

NESTED = spaces.Dict(
    {
        "pos": spaces.Box(-np.inf, np.inf, (2, 3), np.float32),
        "a/b%c": spaces.Discrete(3, start=-1),
        "inner": spaces.Tuple(
            [
                spaces.MultiBinary([2, 2]),
                spaces.Text(4),
                spaces.Dict({"md": spaces.MultiDiscrete([[2, 3], [4, 5]], dtype=np.int32)}),
            ]
        ),
        "big": spaces.Box(
            np.array([0, 1], dtype=np.uint64), np.array([5, 2**64 - 1], dtype=np.uint64), dtype=np.uint64
        ),
        "half": spaces.Box(-1, np.array([1.5, 2.0], dtype=np.float16), dtype=np.float16),
        "flag": spaces.Box(0, 1, (3,), dtype=np.bool_),
    }
)


def test_bare_leaf_is_named_by_the_prefix() -> None:
    columns, tree = space_columns(spaces.Box(0, 1, (4,), np.float32), "obs", "obs")
    assert columns == [{"name": "obs", "dtype": "float32", "shape": [4], "timeline": "obs"}]
    assert tree == {"leaf": "obs"}
    columns, tree = space_columns(spaces.Discrete(2), "action", "step")
    assert columns == [{"name": "action", "dtype": "int64", "shape": [], "timeline": "step"}]


def test_nested_columns_follow_space_order_and_escape_keys() -> None:
    columns, tree = space_columns(NESTED, "obs", "obs")
    by_name = {c["name"]: (c["dtype"], c["shape"]) for c in columns}
    assert by_name == {
        "obs/a%2Fb%25c": ("int64", []),
        "obs/big": ("uint64", [2]),
        "obs/flag": ("bool", [3]),
        "obs/half": ("float16", [2]),
        "obs/inner/0": ("int8", [2, 2]),
        "obs/inner/1": ("str", []),
        "obs/inner/2/md": ("int32", [2, 2]),
        "obs/pos": ("float32", [2, 3]),
    }
    # The tree keeps the space's key order (gymnasium sorts plain-dict keys) and real key text.
    assert [k for k, _ in tree["dict"]] == list(NESTED.spaces.keys())
    inner = dict(tree["dict"])["inner"]
    assert inner == {
        "tuple": [{"leaf": "obs/inner/0"}, {"leaf": "obs/inner/1"}, {"dict": [["md", {"leaf": "obs/inner/2/md"}]]}]
    }
    assert dict(tree["dict"])["a/b%c"] == {"leaf": "obs/a%2Fb%25c"}


@pytest.mark.parametrize("key", ["a/b", "%2F", "%", "x%25/y", "", "plain", "%%//"])
def test_key_escaping_round_trips(key: str) -> None:
    assert "/" not in escape_key(key)
    assert unescape_key(escape_key(key)) == key


def test_json_round_trip_is_exact() -> None:
    text = json.dumps(space_to_json(NESTED), allow_nan=False)  # strict JSON: the core's parser
    back = space_from_json(json.loads(text))
    assert back == NESTED
    assert list(back.spaces) == list(NESTED.spaces)
    big = back["big"]
    assert isinstance(big, spaces.Box)
    assert big.high.tolist() == [5, 2**64 - 1]
    pos = back["pos"]
    assert isinstance(pos, spaces.Box)
    assert np.isneginf(pos.low).all()


@pytest.mark.parametrize(
    "space",
    [
        spaces.Box(0.0, np.array([[1.0, 2.5], [3.0, np.inf]]), dtype=np.float64),
        spaces.Box(-3, 7, (5,), dtype=np.int16),
        spaces.Box(0, 255, (4, 4, 3), dtype=np.uint8),
        spaces.Discrete(7, start=2),
        spaces.MultiDiscrete([3, 4, 5]),
        spaces.MultiBinary(5),
        spaces.Text(10, min_length=2, charset="abc%/"),
        spaces.Tuple([]),
        spaces.Dict({}),
    ],
)
def test_json_round_trip_each_space(space: spaces.Space) -> None:  # type: ignore[type-arg]
    assert space_from_json(json.loads(json.dumps(space_to_json(space), allow_nan=False))) == space


@pytest.mark.parametrize(
    ("space", "kind"),
    [
        (spaces.Sequence(spaces.Discrete(2)), "Sequence"),
        (spaces.Graph(spaces.Box(0, 1, (2,)), None), "Graph"),
        (spaces.OneOf([spaces.Discrete(2)]), "OneOf"),
    ],
)
def test_variable_size_spaces_are_refused_with_their_path(space: spaces.Space, kind: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(trajcore.SchemaError, match=rf"'obs': {kind} spaces are not supported"):
        space_columns(space, "obs", "obs")
    nested = spaces.Dict({"x": spaces.Tuple([spaces.Discrete(2), space])})
    with pytest.raises(trajcore.SchemaError, match=rf"'obs/x/1': {kind}"):
        space_columns(nested, "obs", "obs")


def test_unknown_space_is_refused() -> None:
    class Weird(spaces.Space):  # type: ignore[type-arg]
        pass

    with pytest.raises(trajcore.SchemaError, match="'action': Weird is not one of the spaces trajcore records"):
        space_columns(Weird(), "action", "step")


def test_bad_description_raises_schema_error() -> None:
    with pytest.raises(trajcore.SchemaError, match="unknown space type"):
        space_from_json({"type": "Nope"})
    with pytest.raises(trajcore.SchemaError, match="invalid space description"):
        space_from_json({"type": "Box", "dtype": "float32"})
