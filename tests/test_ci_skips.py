"""The CI rule on skips (ci_skips.py): a skip that names a package the test extra installs fails
when ``CI`` is set; one that names a system package or a device still skips; outside CI both skip."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from ci_skips import extra_packages, package_named

HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize(
    ("reason", "named"),
    [
        ("trajcore.torch needs torch", "torch"),
        ("the object storage tests need moto[server] (pip install '.[test]')", "moto"),
        ("trajcore.ray needs ray[data] (CI installs ray[data,rllib])", "ray"),
        ("could not import 'PIL': No module named 'PIL'", "pillow"),
        ("ale-py is not installed (.ci/run installs it)", "ale-py"),
        ("gymnasium[mujoco] is not installed", "gymnasium"),
        ("could not import 'moto.server': No module named 'moto'", "moto"),
        ("RLlib's PPO needs torch", "torch"),
        # A system package, a device, a platform: no Python package of the extra.
        ("needs the Debian packages chromium chromium-driver (apt-get install -y chromium)", None),
        ("needs the Debian packages libegl1: /usr/lib/python3/site-packages/gymnasium/x.so: no EGL", None),
        ("no CUDA device", None),
        ("SIGKILL is POSIX", None),
        ("trajcore is imported from the source tree, not installed: there is no console script", None),
    ],
)
def test_which_package_a_skip_names(reason: str, named: str | None) -> None:
    assert package_named(reason, extra_packages()) == named


def _run(tmp_path: Path, ci: bool) -> subprocess.CompletedProcess[str]:
    (tmp_path / "conftest.py").write_text(
        "from ci_skips import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401\n"
    )
    (tmp_path / "test_skips.py").write_text(
        "import pytest\n"
        "def test_a_python_package() -> None:\n"
        "    pytest.skip('trajcore.torch needs torch')\n"
        "def test_a_system_package() -> None:\n"
        "    pytest.skip('needs the Debian package chromium-driver')\n"
        "@pytest.mark.xfail(reason='torch is expected to fail here')\n"
        "def test_an_expected_failure() -> None:\n"
        "    raise AssertionError\n"
    )
    (tmp_path / "test_module_skip.py").write_text(
        "import pytest\n"
        "pytest.importorskip('no_such_module_xyz', reason='needs boto3')\n"
        "def test_never() -> None:\n"
        "    pass\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    if ci:
        env["CI"] = "1"
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rA",
            "-p",
            "no:cacheprovider",
            "--continue-on-collection-errors",
            "--rootdir",
            str(tmp_path),
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )


def test_in_ci_a_skip_for_an_installable_package_fails(tmp_path: Path) -> None:
    result = _run(tmp_path, ci=True)
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert "FAILED test_skips.py::test_a_python_package" in out, out
    assert "skipped in CI for torch, which the test extra installs" in out, out
    assert "SKIPPED [1] test_skips.py" in out and "chromium-driver" in out, out
    assert "XFAIL test_skips.py::test_an_expected_failure" in out, out
    # A module skipped at collection (a module-level importorskip) fails as well.
    assert "ERROR test_module_skip.py" in out and "skipped in CI for boto3" in out, out


def test_outside_ci_both_skip(tmp_path: Path) -> None:
    result = _run(tmp_path, ci=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 skipped, 1 xfailed" in result.stdout, result.stdout
