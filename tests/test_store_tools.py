"""The tools with store URLs, against a real S3 server on loopback (moto's standalone server):
`convert` to, from and between stores, `export` from a store, `import_minari` into one, every
CLI command that takes a dataset (configured by the standard AWS variables alone), a clear error
where a command needs a local path, and the torch stream reading from a store in DataLoader
workers. Every result is compared value for value with the same done on the local copy."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import trajcore
from export_data import steps
from helpers import assert_tree_equal
from trajcore.cli import main

if TYPE_CHECKING:
    from s3_server import S3


def assert_same_steps(got: trajcore.Dataset, want: trajcore.Dataset, where: str) -> None:
    assert (got.num_episodes, got.num_steps) == (want.num_episodes, want.num_steps) != (0, 0)
    for i, (g, w) in enumerate(zip(steps(got), steps(want), strict=True)):
        assert_tree_equal(g, w, f"{where} step {i}")
    for g_ep, w_ep in zip(got.episodes, want.episodes, strict=True):
        assert g_ep.metadata == w_ep.metadata, where


def in_store(s3: S3, local: Path, prefix: str = "run") -> tuple[str, str]:
    """Puts the dataset `local` in a new bucket: (the bucket, the dataset's URL)."""
    bucket = s3.bucket()
    s3.upload(local, bucket, prefix)
    return bucket, f"s3://{bucket}/{prefix}"


def keys(s3: S3, bucket: str, prefix: str) -> list[str]:
    listed = s3.client.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/").get("Contents", [])
    return sorted(f"s3://{bucket}/{o['Key']}" for o in listed)


def test_convert_to_from_and_between_stores(s3: S3, recorded: Any, tmp_path: Path) -> None:
    local = recorded("nested")
    opts = s3.options
    bucket, _ = in_store(s3, local)
    up, across, down = f"s3://{bucket}/raw", f"s3://{bucket}/again", tmp_path / "down"
    with trajcore.open(local) as want:
        result = trajcore.convert(local, up, codecs="raw", chunk_bytes=8_000, storage_options=opts)
        assert result["shards"] == keys(s3, bucket, "raw") != []
        assert (result["episodes"], result["steps"]) == (want.num_episodes, want.num_steps)
        with trajcore.open(up, storage_options=opts) as raw:
            assert_same_steps(raw, want, "local to store")
            assert raw.meta(0)["user"]["converted_from"]["path"] == str(local)
        trajcore.convert(up, across, storage_options=opts)
        trajcore.convert(up, down, storage_options=opts)
        for url in (across, down):
            with trajcore.open(url, storage_options=opts if url == across else None) as copy:
                assert_same_steps(copy, want, str(url))
        # A selection of a dataset in a store, into a store.
        with trajcore.open(up, storage_options=opts) as raw:
            longest = raw.select(min_length=int(raw.summaries()["length"].max()))
            trajcore.convert(longest, f"s3://{bucket}/complete")
        with trajcore.open(f"s3://{bucket}/complete") as some:
            assert some.num_episodes == len(longest) < want.num_episodes
            assert_tree_equal(some.episodes[0].observations, want.episodes[longest.indices[0]].observations, "sel")
    # A prefix that holds shards is not written over, force or not; a shard is no prefix.
    before = keys(s3, bucket, "raw")
    with pytest.raises(trajcore.InvalidArgumentError, match=f"{up} already holds shards"):
        trajcore.convert(local, up, storage_options=opts)
    with pytest.raises(trajcore.InvalidArgumentError, match="not a shard"):
        trajcore.convert(local, f"{up}/x.trj", storage_options=opts)
    with pytest.raises(trajcore.InvalidArgumentError, match=r"https://host/run: HTTP\(S\) URLs are read-only"):
        trajcore.convert(local, "https://host/run")
    assert keys(s3, bucket, "raw") == before


def test_export_from_a_store_equals_the_local_export(s3: S3, recorded: Any, tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    local = recorded("nested")
    _, url = in_store(s3, local)
    for name in ("x.parquet", "x.jsonl", "x.csv"):
        (tmp_path / "remote").mkdir(exist_ok=True)
        (tmp_path / "local").mkdir(exist_ok=True)
        got = trajcore.export(url, tmp_path / "remote" / name, storage_options=s3.options)
        want = trajcore.export(local, tmp_path / "local" / name)
        assert {**got, "out": None} == {**want, "out": None} and got["steps"] > 0
        remote_file, local_file = tmp_path / "remote" / name, tmp_path / "local" / name
        if name.endswith(".parquet"):
            assert pq.read_table(remote_file).equals(pq.read_table(local_file))
        else:
            assert remote_file.read_bytes() == local_file.read_bytes()
    with pytest.raises(trajcore.InvalidArgumentError, match=r"s3://b/x\.csv: the output needs a local path"):
        trajcore.export(local, "s3://b/x.csv")


def test_import_minari_into_a_store(s3: S3, recorded: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("minari", reason="minari is optional")
    pytest.importorskip("h5py", reason="h5py is optional")
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    local = recorded("nested")
    trajcore.export(local, "trajcore-store/nested-v0", "minari")
    bucket = s3.bucket()
    url = f"s3://{bucket}/imported"
    result = trajcore.import_minari("trajcore-store/nested-v0", url, storage_options=s3.options)
    trajcore.import_minari("trajcore-store/nested-v0", tmp_path / "imported")
    assert result["shards"] == keys(s3, bucket, "imported") != []
    with trajcore.open(url, storage_options=s3.options) as got, trajcore.open(tmp_path / "imported") as want:
        assert_same_steps(got, want, "import-minari")
    with pytest.raises(trajcore.InvalidArgumentError, match="s3://b/m: a Minari dataset to import needs a local path"):
        trajcore.import_minari("s3://b/m", tmp_path / "x")


@pytest.fixture
def aws_env(s3: S3, monkeypatch: pytest.MonkeyPatch) -> None:
    """The standard variables pointing a client at the test server: how the CLI is configured."""
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": s3.endpoint,
        "AWS_ALLOW_HTTP": "true",
    }.items():
        monkeypatch.setenv(key, value)


def cli(capsys: pytest.CaptureFixture[str], *args: str, status: int = 0) -> tuple[str, str]:
    """Runs the command line in this process: (stdout, stderr), after checking its status."""
    code = main(list(args))
    out, err = capsys.readouterr()
    assert code == status, err
    return out, err


@pytest.mark.usefixtures("aws_env")
def test_every_cli_command_on_a_dataset_takes_a_url(
    s3: S3, recorded: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """record, convert, export, import-minari, view and plot with URLs (info, ls and verify:
    test_object_store.py), each giving what it gives for the local copy."""
    local = recorded("vector")
    bucket, url = in_store(s3, local)
    # record: the same seeded run into the store and into a directory.
    record = ["record", "CartPole-v1", "--num-envs", "2", "--steps", "300", "--seed", "3"]
    cli(capsys, *record, f"s3://{bucket}/rec")
    cli(capsys, *record, str(tmp_path / "rec"))
    with trajcore.open(f"s3://{bucket}/rec") as got, trajcore.open(tmp_path / "rec") as want:
        assert_same_steps(got, want, "record")
    # convert: store to store, and a directory into the store.
    cli(capsys, "convert", url, f"s3://{bucket}/raw", "--codecs", "raw")
    cli(capsys, "convert", str(local), f"s3://{bucket}/up", "--select", "complete=true")
    with trajcore.open(local) as want:
        with trajcore.open(f"s3://{bucket}/raw") as got:
            assert_same_steps(got, want, "convert")
        with trajcore.open(f"s3://{bucket}/up") as got:
            assert got.num_episodes == int(want.summaries()["complete"].sum()) > 0
    # export from the store: jsonl and parquet (csv: test_object_store.py).
    for name in ("x.jsonl", "x.parquet"):
        cli(capsys, "export", url, str(tmp_path / f"remote-{name}"))
        cli(capsys, "export", str(local), str(tmp_path / f"local-{name}"))
        assert (tmp_path / f"remote-{name}").stat().st_size > 0
        if name.endswith(".jsonl"):
            assert (tmp_path / f"remote-{name}").read_text() == (tmp_path / f"local-{name}").read_text()
    # view and plot read the store and write local files.
    cli(capsys, "view", url, "--episode", "2", "-o", str(tmp_path / "remote.html"))
    cli(capsys, "view", str(local), "--episode", "2", "-o", str(tmp_path / "local.html"))
    page = (tmp_path / "remote.html").read_text()
    assert page.replace(url, "PATH") == (tmp_path / "local.html").read_text().replace(str(local), "PATH")
    pytest.importorskip("matplotlib", reason="plot needs matplotlib")
    remote_plots, _ = cli(capsys, "plot", url, "-o", str(tmp_path / "remote-plots"))
    local_plots, _ = cli(capsys, "plot", str(local), "-o", str(tmp_path / "local-plots"))
    assert [Path(p).name for p in remote_plots.split()] == [Path(p).name for p in local_plots.split()] != []


@pytest.mark.usefixtures("aws_env")
def test_import_minari_cli_into_a_store(
    s3: S3, recorded: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("minari", reason="minari is optional")
    pytest.importorskip("h5py", reason="h5py is optional")
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    local = recorded("cartpole")
    cli(capsys, "export", str(local), "trajcore-cli/cp-v0", "--format", "minari")
    bucket = s3.bucket()
    cli(capsys, "import-minari", "trajcore-cli/cp-v0", f"s3://{bucket}/cp")
    cli(capsys, "import-minari", "trajcore-cli/cp-v0", str(tmp_path / "cp"))
    with trajcore.open(f"s3://{bucket}/cp") as got, trajcore.open(tmp_path / "cp") as want:
        assert_same_steps(got, want, "import-minari")


@pytest.mark.usefixtures("aws_env")
def test_outputs_that_need_a_local_path_refuse_a_url_clearly(
    s3: S3, recorded: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One line naming the URL, exit status 2, no traceback; nothing written."""
    local = str(recorded("cartpole"))
    for args, names in (
        (["export", local, "s3://out/x.parquet"], "s3://out/x.parquet: the output"),
        (["view", local, "-o", "s3://out/page.html"], "s3://out/page.html: the output"),
        (["plot", local, "-o", "s3://out/plots"], "s3://out/plots: plot's output (-o)"),
        (["plot", "--timelog", "s3://out/t.json"], "s3://out/t.json: --timelog"),
        (["import-minari", "s3://out/minari", str(tmp_path / "m")], "s3://out/minari: a Minari dataset to import"),
    ):
        _, err = cli(capsys, *args, status=2)
        assert f"error: InvalidArgumentError: {names} needs a local path, not a store URL" in err, err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_the_torch_stream_reads_from_the_store_in_workers(s3: S3, recorded: Any, context: str) -> None:
    """`TransitionStream` over a dataset in a store, in DataLoader workers: each worker draws
    what it draws from the local copy."""
    torch = pytest.importorskip("torch", reason="trajcore.torch needs torch")
    from trajcore.torch import TransitionStream

    local = recorded("cartpole")
    _, url = in_store(s3, local)

    def drawn(source: Any) -> list[Any]:
        loader = torch.utils.data.DataLoader(
            TransitionStream(source, 32, seed=5, batches=6),
            batch_size=None,
            num_workers=2,
            multiprocessing_context=context,
        )
        return list(loader)

    with trajcore.open(local) as want, trajcore.open(url, storage_options=s3.options) as remote:
        got, expected = drawn(remote), drawn(want)
    assert len(got) == len(expected) == 6
    for i, (g, w) in enumerate(zip(got, expected, strict=True)):
        assert_tree_equal(as_numpy(g), as_numpy(w), f"{context} batch {i}")


def as_numpy(tree: Any) -> Any:
    if isinstance(tree, dict):
        return {k: as_numpy(v) for k, v in tree.items()}
    return tree.numpy() if hasattr(tree, "numpy") else tree
