"""Every export shows a widened info key (issue 23, point 3) as the reader gives it: one column
per key, in the wider dtype, with every step's value, and no column of the writer's own
(``<name>%W<dtype>``, FORMAT.md "Widened columns") in the output. Each format is read back with
its own reader (pyarrow, pandas, json, minari) and compared with the values the env gave."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import trajcore
from gymnasium import spaces
from test_widening import record_gym

STEPS = 6  # per episode
EPISODES = 3
GAP = 3  # `prob` is not given at this step: the widened key keeps its mask


def given(t: int) -> dict[str, Any]:
    """The info at step t (0: reset): `prob` int, then float; `flag` bool, then int; `name` a
    short str, then longer ones. Each key keeps its narrow type for the reset and step 1, so the
    step table (which starts at step 1's info) holds values written before the widening."""
    info: dict[str, Any] = {
        "prob": t + 1 if t < 2 else t / 4,
        "flag": t % 2 == 1 if t < 2 else t * 1000,
        "name": "ab"[t % 2] if t < 2 else "n" * (t + 5),
    }
    if t == GAP:
        del info["prob"]
    return info


class WideningEnv(gym.Env[Any, Any]):
    def __init__(self) -> None:
        self.observation_space, self.action_space = spaces.Discrete(2), spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        self.t = 0
        return 0, given(0)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self.t += 1
        return 0, 0.0, False, self.t == STEPS, given(self.t)


# The step table's rows of one episode: step t holds the info step t + 1 returned.
PROB = [given(t).get("prob") for t in range(1, STEPS + 1)]
FLAG = [given(t)["flag"] for t in range(1, STEPS + 1)]
NAME = [given(t)["name"] for t in range(1, STEPS + 1)]
WANT: dict[str, tuple[str, list[Any]]] = {"prob": ("float64", PROB), "flag": ("int64", FLAG), "name": ("str", NAME)}


@pytest.fixture(scope="module")
def widened(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("widened") / "run"
    env = trajcore.RecordEpisodes(WideningEnv(), path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", trajcore.TrajcoreWarning)  # every value fits, by widening
        for e in range(EPISODES):
            env.reset(seed=e)
            for _ in range(STEPS):
                env.step(0)
        env.close()
    with trajcore.open(path) as ds:
        names = {c["name"] for c in ds._core.columns(0)}
        assert any("%W" in n for n in names), f"the writer widened no column: {sorted(names)}"
        infos = ds.episodes[0].infos
        assert infos["prob"].dtype == np.float64 and infos["flag"].dtype == np.int64
    return path


def export(src: Path, dst: Path, fmt: str, cli: bool) -> None:
    if cli:
        command = [sys.executable, "-m", "trajcore", "export", str(src), str(dst), "--format", fmt]
        subprocess.run(command, check=True, capture_output=True)
    else:
        trajcore.export(src, dst, fmt)


def assert_no_writer_columns(names: Any) -> None:
    leaked = [n for n in names if "%W" in n or "%25W" in n]
    assert not leaked, f"the writer's widened columns leak: {leaked}"


def assert_rows(got: list[Any], want: list[Any], dtype: str, key: str) -> None:
    """`got`: one episode's rows, None where not given."""
    assert len(got) == len(want), key
    for t, (g, w) in enumerate(zip(got, want, strict=True)):
        if w is None:
            assert g is None, f"{key} step {t}: {g!r} where nothing was given"
        elif dtype == "str":
            assert g == w, f"{key} step {t}"
        else:
            assert np.asarray(g).dtype == np.dtype(dtype), f"{key} step {t}: {np.asarray(g).dtype}"
            assert g == np.asarray(w).astype(dtype), f"{key} step {t}: {g!r} != {w!r}"


@pytest.mark.parametrize("cli", [False, True], ids=["api", "cli"])
def test_parquet_has_one_column_per_key_in_the_wider_type(widened: Path, tmp_path: Path, cli: bool) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    export(widened, tmp_path / "out.parquet", "parquet", cli)
    table = pq.read_table(tmp_path / "out.parquet")
    info = table.schema.field("info").type
    assert_no_writer_columns(info.names)
    assert sorted(info.names) == sorted(WANT)
    arrow = {"float64": pa.float64(), "int64": pa.int64(), "str": pa.string()}
    for key, (dtype, want) in WANT.items():
        assert info.field(key).type == arrow[dtype], key
        values = table.column("info").combine_chunks().field(key).to_numpy(zero_copy_only=False)
        for e in range(EPISODES):
            rows = values[e * STEPS : (e + 1) * STEPS]
            nulls = table.column("info").combine_chunks().field(key).is_null().to_numpy(zero_copy_only=False)
            got = [None if n else v for v, n in zip(rows, nulls[e * STEPS : (e + 1) * STEPS], strict=True)]
            assert_rows(got, want, dtype, f"episode {e} info/{key}")


def _csv_cell(text: str, dtype: str) -> Any:
    if text == "":
        return None
    return text if dtype == "str" else np.asarray(json.loads(text)).astype(dtype)


@pytest.mark.parametrize("cli", [False, True], ids=["api", "cli"])
def test_csv_has_one_column_per_key_with_every_value(widened: Path, tmp_path: Path, cli: bool) -> None:
    export(widened, tmp_path / "out.csv", "csv", cli)
    with open(tmp_path / "out.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert_no_writer_columns(rows[0])
    assert {c for c in rows[0] if c.startswith("info/")} == {f"info/{k}" for k in WANT}
    for key, (dtype, want) in WANT.items():
        if dtype == "float64":
            assert all("." in r[f"info/{key}"] or r[f"info/{key}"] == "" for r in rows), f"{key} written as floats"
        if dtype == "int64":
            assert all(r[f"info/{key}"].lstrip("-").isdigit() for r in rows), f"{key} written as integers"
        for e in range(EPISODES):
            got = [_csv_cell(r[f"info/{key}"], dtype) for r in rows[e * STEPS : (e + 1) * STEPS]]
            assert_rows(got, want, dtype, f"episode {e} info/{key}")
    pd = pytest.importorskip("pandas")
    frame = pd.read_csv(tmp_path / "out.csv")
    assert frame["info/prob"].dtype == np.float64 and frame["info/flag"].dtype == np.int64


def test_pandas_has_one_column_per_key_in_the_wider_type(widened: Path) -> None:
    pytest.importorskip("pandas")
    with trajcore.open(widened) as ds:
        frame = trajcore.to_pandas(ds)
    assert_no_writer_columns(frame.columns)
    assert {c for c in frame.columns if c.startswith("info/")} == {f"info/{k}" for k in WANT}
    assert str(frame["info/prob"].dtype).lower() == "float64"
    assert str(frame["info/flag"].dtype).lower() == "int64"
    for key, (dtype, want) in WANT.items():
        column = frame[f"info/{key}"]
        for e in range(EPISODES):
            rows = column.iloc[e * STEPS : (e + 1) * STEPS]
            cells = zip(rows, rows.isna(), strict=True)
            got = [None if m else (v if dtype == "str" else np.asarray(v).astype(dtype)) for v, m in cells]
            assert_rows(got, want, dtype, f"episode {e} info/{key}")


@pytest.mark.parametrize("cli", [False, True], ids=["api", "cli"])
def test_jsonl_infos_hold_the_key_once_with_every_value(widened: Path, tmp_path: Path, cli: bool) -> None:
    export(widened, tmp_path / "out.jsonl", "jsonl", cli)
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert len(lines) == EPISODES
    for e, line in enumerate(lines):
        infos = line["infos"]
        assert_no_writer_columns(k for info in infos for k in info)
        for key, (dtype, want) in WANT.items():
            got = [info.get(key) for info in infos]
            assert got == want, f"episode {e} {key}"
            # JSON keeps the kind: floats stay floats (2.0, not 2), ints stay ints (not bools).
            kind = {"float64": float, "int64": int, "str": str}[dtype]
            assert all(type(g) is kind for g in got if g is not None), f"episode {e} {key}: {got}"


def test_minari_infos_hold_the_key_once_in_the_wider_type(
    widened: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    minari = pytest.importorskip("minari")
    pytest.importorskip("h5py")
    pytest.importorskip("PIL")
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    trajcore.export(widened, "trajcore-test/widened-v0", "minari")
    loaded = minari.load_dataset("trajcore-test/widened-v0")
    reset = given(0)
    for e, episode in enumerate(loaded.iterate_episodes()):
        infos = episode.infos
        assert_no_writer_columns(infos)
        assert infos["prob"].dtype == np.float64 and infos["flag"].dtype == np.int64
        # Minari keeps the reset's info as row 0 (T + 1 rows), in the wider type too.
        assert infos["prob"][0] == reset["prob"] and infos["flag"][0] == int(reset["flag"])
        for key, (dtype, want) in WANT.items():
            values, mask = infos[key][1:], infos["_" + key][1:]
            got = [
                (v.decode() if isinstance(v, bytes) else v) if m else None for v, m in zip(values, mask, strict=True)
            ]
            assert_rows(got, want, dtype, f"episode {e} {key}")


def test_ray_data_reads_the_key_once_in_the_wider_type(widened: Path, ray_local: Any) -> None:
    pytest.importorskip("ray.data")
    import trajcore.ray

    data = trajcore.ray.read_transitions(widened, columns=["info"])
    assert_no_writer_columns(data.columns())
    batch = next(iter(data.iter_batches(batch_size=EPISODES * STEPS, batch_format="numpy")))
    order = np.lexsort((batch["step"], batch["episode"]))
    for key, (dtype, want) in WANT.items():
        values, mask = batch[f"info/{key}"][order], batch[f"mask/info/{key}"][order]
        if dtype != "str":
            assert values.dtype == np.dtype(dtype), key
        for e in range(EPISODES):
            rows = slice(e * STEPS, (e + 1) * STEPS)
            got = [v if m else None for v, m in zip(values[rows], mask[rows], strict=True)]
            assert_rows(got, want, dtype, f"episode {e} info/{key}")


def _parquet_probs(path: Path) -> list[Any]:
    import pyarrow.parquet as pq

    values: list[Any] = pq.read_table(path).column("info").combine_chunks().field("prob").to_pylist()
    return values


def _csv_probs(path: Path) -> list[Any]:
    with open(path, newline="") as f:
        return [json.loads(r["info/prob"]) for r in csv.DictReader(f)]


def _jsonl_probs(path: Path) -> list[Any]:
    return [info["prob"] for line in path.read_text().splitlines() for info in json.loads(line)["infos"]]


PROBS: dict[str, Callable[[Path], list[Any]]] = {"parquet": _parquet_probs, "csv": _csv_probs, "jsonl": _jsonl_probs}


@pytest.mark.parametrize("fmt", sorted(PROBS))
def test_frozenlake_prob_exports_as_one_float_column(tmp_path: Path, fmt: str) -> None:
    """The issue's case: gymnasium's FrozenLake gives `prob` as 1 at reset, 0.333 at each step."""
    if fmt == "parquet":
        pytest.importorskip("pyarrow")
    probs = record_gym(tmp_path / "run", "FrozenLake-v1", 100)
    export(tmp_path / "run", tmp_path / f"out.{fmt}", fmt, cli=False)
    got = PROBS[fmt](tmp_path / f"out.{fmt}")
    assert got == [p for episode in probs for p in episode[1:]]
    assert all(isinstance(g, float) for g in got), "every step's prob, as a float"


def test_recordings_that_widened_and_did_not_share_one_column(tmp_path: Path) -> None:
    """Two recordings in one directory, one whose `x` widened to float and one whose values all
    stayed ints: one column, the promoted type, each recording's values in it. Types that no
    recording widened still do not mix (one table cannot hold both)."""
    from test_widening import InfoEnv

    def record(values: list[Any]) -> None:
        env = trajcore.RecordEpisodes(InfoEnv(values), tmp_path / "run")
        env.reset(seed=0)
        for _ in values[1:]:
            env.step(0)
        env.close()

    record([1, 2, 0.5])
    record([1, 2, 3])
    export(tmp_path / "run", tmp_path / "out.parquet", "parquet", cli=False)
    pq = pytest.importorskip("pyarrow.parquet")
    info = pq.read_table(tmp_path / "out.parquet").column("info").combine_chunks()
    assert info.type.names == ["x"]
    values = info.field("x")
    assert str(values.type) == "double"
    assert values.to_pylist() == [2.0, 0.5, 2.0, 3.0]


def _widened(base: str, wider: str | None) -> list[dict[str, Any]]:
    """Column specs of an info key `x` of dtype `base`, widened to `wider` (ids 1 to 4 after the
    observation's 0, as `test_export_columns.recording` numbers them)."""
    from test_export_columns import col

    specs = [
        col("obs", "float32", [2]),
        col("info/x", base, [], mask=2),
        col("info/_x", "bool", [], mask_of=1),
    ]
    if wider is not None:
        specs += [
            col(f"info/x%W{wider}", wider, [], mask=4, widens=1),
            col(f"info/_x%W{wider}", "bool", [], mask_of=3),
        ]
    return specs


@pytest.mark.parametrize(
    ("recordings", "dtype"),
    [
        ([("int64", "float64")], "float64"),
        ([("bool", "int64")], "int64"),
        ([("int64", "float64"), ("int64", None)], "float64"),
        ([("int64", None), ("int64", "float64")], "float64"),
        ([("bool", "int64"), ("int64", "float64")], "float64"),
        ([("int64", "float64"), ("str", None)], None),
        ([("int64", "float64"), ("int64", None), ("float32", None)], "float64"),
    ],
)
def test_the_plan_has_one_leaf_per_widened_key(recordings: list[tuple[str, str | None]], dtype: str | None) -> None:
    """Plain values: the step-table plan of recordings whose key `x` did (base, wider) or did not
    (base, None) widen. None: one table cannot hold them."""
    from test_export_columns import recording
    from trajcore.formats._columns import make_plan

    specs = [recording({"leaf": "obs"}, _widened(base, wider)) for base, wider in recordings]
    if dtype is None:
        with pytest.raises(trajcore.SchemaError, match="'info/x'"):
            make_plan(specs)
        return
    infos = [leaf for leaf in make_plan(specs).leaves if leaf.group == "info"]
    assert [(leaf.name, leaf.dtype, leaf.mask) for leaf in infos] == [("info/x", dtype, "info/_x")]
    widened = {f"info/x%W{wider}" for _, wider in recordings if wider}
    assert {column for column, _ in infos[0].wider} == widened
