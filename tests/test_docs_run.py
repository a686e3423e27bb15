"""Every python and bash code block of README.md and docs/*.md runs as written.

Each page's blocks run in order, in a temporary working directory of their own: python blocks in
one interpreter (so a later block uses what an earlier one made), bash blocks through ``bash -e``
from it, the ``trajcore`` command being this checkout's CLI. A failure names the page and line.

What the test fills in (the docs' placeholders, nothing else):
- ``s3://my-bucket/...``: a bucket of the moto S3 server on loopback (tests/s3_server.py); the
  endpoints the docs name (``http://minio:9000``, ``http://127.0.0.1:9000``) become the server's,
  and its credentials are in the environment as ``AWS_*`` (as the docs say a user's are). The
  bucket holds ``runs/cp16`` (the dataset the pages read) and one of its shards where the README
  reads one over plain HTTP (``https://example.org/...``).
- ``/shared/runs/...`` (a filesystem every node of a Ray cluster shares): ``runs/...``.
- A page that reads ``runs/cp16`` without recording it finds the dataset the README's command
  records (``trajcore record CartPole-v1 --num-envs 16``), recorded once for the session.
- Step counts: see `SHRUNK` (only where the docs' values would take minutes on 2 cores).
- ``pip install X && command``: ``command`` (the test runs against this checkout).

Commands not run, each with its reason: `SKIPPED` (a block left with no command is not run).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trajcore

ROOT = Path(__file__).resolve().parent.parent
PAGES = ["README.md", *(f"docs/{p.name}" for p in sorted((ROOT / "docs").glob("*.md")))]

# (page, text in a line): why the line does not run here.
SKIPPED = {
    ("README.md", "python -m pytest -q tests"): "runs the whole test suite (the test is part of it)",
    ("README.md", "maturin"): "installs maturin and builds a wheel (minutes of cargo)",
    ("README.md", "pip install dist/"): "installs the wheel over the checkout under test",
    ("docs/object-storage.md", "benches/test_store_recording.py"): "runs a benchmark (minutes)",
}

# The docs' step counts that would take minutes here, and what the test runs instead: the
# commands and loops are the same, over fewer steps.
SHRUNK = {
    # README, cli.md: 1.6M CartPole transitions record in 20 s, but the pages that read runs/cp16
    # export it to CSV, Parquet and Minari (minutes at 69k episodes).
    "--steps 100000": "--steps 5000",
    "for _ in range(100_000):": "for _ in range(5_000):",  # recording.md: the same, by hand
    "steps=10_000": "steps=500",  # ray.md: 8 actors x 16 sub-envs x 10,000 steps on 2 CPUs
}

# Pages whose blocks read runs/cp16 without recording it first.
READS_CP16 = {
    "docs/reading.md",
    "docs/exports.md",
    "docs/damage-and-files.md",
    "docs/viewer-and-plots.md",
    "docs/object-storage.md",
}


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # of the block's first code line in the page
    lang: str
    code: str


def blocks(page: str) -> list[Block]:
    """The python and bash blocks of `page`, in order."""
    lines = (ROOT / page).read_text().split("\n")
    found, at = [], 0
    while at < len(lines):
        fence = re.fullmatch(r"```(\w*)\s*", lines[at])
        if fence is None:
            at += 1
            continue
        end = next(j for j in range(at + 1, len(lines)) if lines[j].startswith("```"))
        if fence.group(1) in ("python", "bash"):
            found.append(Block(page, at + 2, fence.group(1), "\n".join(lines[at + 1 : end])))
        at = end + 1
    return found


def runnable(block: Block) -> Block | None:
    """`block` without its `SKIPPED` lines; None if no command is left."""
    texts = [text for page, text in SKIPPED if page == block.page]
    lines = [line for line in block.code.split("\n") if not any(t in line for t in texts)]
    if not any(line.strip() and not line.lstrip().startswith("#") for line in lines):
        return None
    # A skipped line is left blank, so that the others keep their line numbers.
    kept = "\n".join(line if line in lines else "" for line in block.code.split("\n"))
    return Block(block.page, block.line, block.lang, kept)


def filled(code: str, bucket: str, endpoint: str) -> str:
    """`code` with the placeholders the docs use filled (see the module's docstring)."""
    code = re.sub(r"pip install [^&\n]*&& ", "", code)
    for docs_value, test_value in SHRUNK.items():
        code = code.replace(docs_value, test_value)
    code = code.replace("s3://my-bucket/", f"s3://{bucket}/").replace("/shared/runs/", "runs/")
    code = code.replace("http://minio:9000", endpoint).replace("http://127.0.0.1:9000", endpoint)
    code = code.replace("AWS_ENDPOINT_URL=...", f"AWS_ENDPOINT_URL={endpoint}")
    return re.sub(r"https://example\.org/(\S+?\.trj)", rf"{endpoint}/{bucket}/\1", code)


def run_blocks(plan_path: str) -> None:
    """Runs the planned blocks (called in the page's own interpreter, see `test_page_runs`)."""
    plan = json.loads(Path(plan_path).read_text())
    namespace: dict[str, Any] = {"__name__": "__main__"}
    for block in plan:
        print(f"--- {block['page']}:{block['line']} ({block['lang']})", flush=True)
        if block["lang"] == "python":
            # Padded so that a traceback gives the page's own line numbers.
            source = "\n" * (block["line"] - 1) + block["code"]
            exec(compile(source, block["page"], "exec"), namespace)
        else:
            subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block["code"]], check=True)


@pytest.fixture(scope="module")
def cp16(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """runs/cp16 as the README records it (steps as `SHRUNK`)."""
    where = tmp_path_factory.mktemp("cp16")
    command = filled("python -m trajcore record CartPole-v1 --num-envs 16 --steps 100000 runs/cp16", "", "")
    subprocess.run(command.split(), cwd=where, check=True, env=_python_env(), capture_output=True, timeout=300)
    return where / "runs" / "cp16"


@pytest.fixture(scope="module")
def store(s3: Any, cp16: Path) -> tuple[Any, str]:
    """The bucket the pages' ``s3://my-bucket`` stands for, holding runs/cp16 and, for the
    object storage page's plain HTTP example, one of its shards under cp16/ (under the page's
    name)."""
    bucket = s3.bucket()
    s3.upload(cp16, bucket, "runs/cp16")
    first = sorted(cp16.glob("*.trj"))[0]
    page = (ROOT / "docs" / "object-storage.md").read_text()
    name = re.search(r"https://example\.org/cp16/(\S+?\.trj)", page)
    assert name is not None, "the object storage page's plain HTTP example moved: update this fixture"
    s3.client.upload_file(str(first), bucket, f"cp16/{name.group(1)}", ExtraArgs={"ACL": "public-read"})
    return s3, bucket


def _python_env() -> dict[str, str]:
    env = dict(os.environ)
    # The trajcore these tests import (an install, or a checkout's python/ with its extension
    # built in place), first: a bare checkout's python/ has no extension.
    package_root = str(Path(trajcore.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([package_root, str(ROOT / "tests"), env.get("PYTHONPATH", "")])
    env["MPLBACKEND"] = "Agg"
    env["BROWSER"] = "true"  # `trajcore view` opens its page with a command that does nothing
    return env


@pytest.mark.parametrize("page", [p for p in PAGES if blocks(p)])
def test_page_runs(page: str, tmp_path: Path, store: tuple[Any, str], cp16: Path) -> None:
    s3, bucket = store
    planned = [r for r in map(runnable, blocks(page)) if r is not None]
    plan = [{**b.__dict__, "code": filled(b.code, bucket, s3.endpoint)} for b in planned]
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    work = tmp_path / "work"
    work.mkdir()
    if page in READS_CP16:
        shutil.copytree(cp16, work / "runs" / "cp16")
    bin_dir = tmp_path / "bin"  # `trajcore`: the CLI of the trajcore these tests import
    bin_dir.mkdir()
    (bin_dir / "trajcore").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m trajcore "$@"\n')
    (bin_dir / "trajcore").chmod(0o755)
    env = _python_env()
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env['PATH']}",
        AWS_ENDPOINT_URL=s3.endpoint,
        AWS_ALLOW_HTTP="true",
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_REGION="us-east-1",
        MINARI_DATASETS_PATH=str(tmp_path / "minari"),
    )
    runner = "import sys, test_docs_run; test_docs_run.run_blocks(sys.argv[1])"  # tests/ is on PYTHONPATH
    # In a session of its own, so that a page that runs past its time (a regression that hangs)
    # is killed with every process it started (Ray's among them).
    page_run = subprocess.Popen(
        [sys.executable, "-c", runner, str(tmp_path / "plan.json")],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = page_run.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        os.killpg(page_run.pid, signal.SIGKILL)
        stdout, stderr = page_run.communicate()
        pytest.fail(f"{page}: still running after 600 s\n{stdout[-3000:]}\n{stderr[-3000:]}")
    assert page_run.returncode == 0, f"{page}: a block failed\n{stdout[-6000:]}\n{stderr[-6000:]}"
    assert stdout.count("--- ") == len(plan)
