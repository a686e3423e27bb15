"""Where a recording came from, gathered once when a recorder starts (no per-step cost) and stored
in the recording's Meta record (``meta()["user"]["provenance"]``): the env's spec and wrapper
chain, the vector env's kind and autoreset mode, the host, the Python and package versions, the
command line and the git commit of the code that runs. The seed and options of each reset go to
the episodes that reset started (`reset_metadata`), the policy behind them to those begun after
`set_policy` (`policy_metadata`).

Nothing secret is recorded: no environment variables, and the git part holds the commit and
whether the tree is dirty, never a remote URL. Git is asked at most once per recorder, by one
``git status`` with a timeout; without a git binary the commit is read from ``.git`` directly.
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from trajcore import _core
from trajcore.errors import InvalidArgumentError
from trajcore.read.records.provenance_keys import POLICY_KEY, RESET_KEY

__all__ = [
    "PARTS",
    "ProvenanceOption",
    "gather",
    "policy_metadata",
    "reset_metadata",
    "resolve_parts",
]

PARTS = ("env", "vector", "seeds", "host", "versions", "command", "git")
"""What `provenance=[...]` may name: the env's spec and wrappers, the vector env, the reset seeds
and options (per episode), the host, the versions, the command line and the git commit."""

ProvenanceOption = bool | Sequence[str]

# Packages whose version is recorded when the program already imported them (never imported here).
_PACKAGES = ("gymnasium", "numpy", "torch", "jax", "ray", "pettingzoo", "stable_baselines3")
_GIT_TIMEOUT_S = 2.0
_ARRAY_MAX = 256  # larger arrays among env arguments are described, not stored


def resolve_parts(option: Any) -> frozenset[str]:
    """The parts a ``provenance=`` option asks for: all (True), none (False) or those listed.

    Raises:
        InvalidArgumentError: the option is neither a bool nor a list of known part names.
    """
    if isinstance(option, bool | np.bool_):
        return frozenset(PARTS) if option else frozenset()
    if isinstance(option, str) or not isinstance(option, Sequence | set | frozenset):
        raise InvalidArgumentError(
            f"provenance must be True, False or a list of parts ({', '.join(PARTS)}), got {option!r}"
        )
    unknown = [p for p in option if p not in PARTS]
    if unknown:
        raise InvalidArgumentError(f"provenance: unknown part {unknown[0]!r} (parts: {', '.join(PARTS)})")
    return frozenset(option)


def _plain(value: Any, depth: int = 0) -> Any:
    """`value` as JSON-able data: what JSON cannot hold (a class, a function) as its repr."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int | float):
        return value if isinstance(value, int) or np.isfinite(value) else repr(value)
    if isinstance(value, np.generic):
        return _plain(value.item(), depth)
    if isinstance(value, np.ndarray):
        if value.size > _ARRAY_MAX:  # an env argument such as a map: its shape, not its values
            return f"array(shape={value.shape}, dtype={value.dtype})"
        return _plain(value.tolist(), depth)
    if depth < 8 and isinstance(value, Mapping):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if depth < 8 and isinstance(value, list | tuple):
        return [_plain(v, depth + 1) for v in value]
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    return repr(value)


def _spec(env: Any) -> dict[str, Any] | None:
    spec = getattr(env, "spec", None)
    if spec is None:
        return None
    out = {
        key: _plain(getattr(spec, key, None))
        for key in ("id", "entry_point", "kwargs", "version", "namespace", "max_episode_steps")
    }
    wrappers = getattr(spec, "additional_wrappers", None) or ()
    out["additional_wrappers"] = [
        {"name": w.name, "entry_point": w.entry_point, "kwargs": _plain(w.kwargs)} for w in wrappers
    ]
    return out


def _class_name(obj: Any) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def wrapper_chain(env: Any) -> list[dict[str, Any]]:
    """The wrappers around `env`'s base env in the order they were stacked (innermost first),
    each with its class and the arguments gymnasium saved for it, then the base env."""
    chain: list[dict[str, Any]] = []
    seen: set[int] = set()
    while env is not None and id(env) not in seen:
        seen.add(id(env))
        entry: dict[str, Any] = {"class": _class_name(env)}
        kwargs = getattr(env, "_saved_kwargs", None)
        if isinstance(kwargs, Mapping):
            entry["kwargs"] = _plain(kwargs)
        chain.append(entry)
        env = getattr(env, "env", None)
    chain.reverse()
    return chain


def _versions() -> dict[str, Any]:
    versions: dict[str, Any] = {
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "trajcore": _core.__version__,
    }
    for name in _PACKAGES:
        module = sys.modules.get(name)
        version = getattr(module, "__version__", None) if module is not None else None
        if isinstance(version, str):
            versions[name] = version
    return versions


def _host() -> dict[str, Any]:
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
    }


def code_directory() -> Path:
    """Where the running program's code is: the directory of ``sys.argv[0]`` when it names a
    file (a script), else the working directory (an interactive session, ``python -c``)."""
    script = sys.argv[0] if sys.argv else ""
    if script and script not in ("-c", "-m") and os.path.isfile(script):
        return Path(script).resolve().parent
    return Path.cwd()


def _git_dir(start: Path) -> Path | None:
    """The git directory of the repository holding `start` (a ``.git`` folder, or the folder a
    ``.git`` file of a worktree points to), or None."""
    for folder in (start, *start.parents):
        dot_git = folder / ".git"
        if dot_git.is_dir():
            return dot_git
        if dot_git.is_file():
            text = dot_git.read_text(errors="replace").strip()
            if text.startswith("gitdir:"):
                target = Path(text[len("gitdir:") :].strip())
                return target if target.is_absolute() else (folder / target).resolve()
    return None


def _head_commit(git_dir: Path) -> str | None:
    """The commit HEAD names, read from the files (a detached HEAD, a loose or a packed ref)."""
    try:
        head = (git_dir / "HEAD").read_text().strip()
        if not head.startswith("ref:"):
            return head or None
        ref = head[len("ref:") :].strip()
        common = git_dir
        if (git_dir / "commondir").is_file():
            common = (git_dir / (git_dir / "commondir").read_text().strip()).resolve()
        for base in (git_dir, common):
            if (base / ref).is_file():
                return (base / ref).read_text().strip() or None
        packed = common / "packed-refs"
        if packed.is_file():
            for line in packed.read_text().splitlines():
                sha, _, name = line.partition(" ")
                if name.strip() == ref:
                    return sha
    except OSError:
        return None
    return None


def git_state(directory: Path) -> dict[str, Any] | None:
    """The commit and dirtiness of the git repository holding `directory`, or None outside one.

    One ``git status`` (a timeout bounds it) says both; without a git binary, or if it fails,
    the commit is read from ``.git`` and ``dirty`` is None (unknown). ``dirty`` counts changes
    to tracked files, staged or not (untracked files are not code that ran from the commit)."""
    git_dir = _git_dir(directory)
    if git_dir is None:
        return None
    state: dict[str, Any] = {"commit": _head_commit(git_dir), "dirty": None}
    try:
        done = subprocess.run(
            ["git", "-C", str(directory), "status", "--porcelain=v2", "--branch", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=_GIT_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return state
    if done.returncode != 0:
        return state
    changed = False
    for line in done.stdout.splitlines():
        if line.startswith("# branch.oid "):
            oid = line.split()[2]
            state["commit"] = None if oid == "(initial)" else oid
        elif line.startswith("# branch.head "):
            head = line.split(maxsplit=2)[2]
            state["branch"] = None if head == "(detached)" else head
        elif line and not line.startswith("#"):
            changed = True
    state["dirty"] = changed
    return state


def _vector(recorded_num_envs: int, autoreset_mode: str, env: Any) -> dict[str, Any]:
    base = getattr(env, "unwrapped", env)
    return {"kind": _class_name(base), "num_envs": recorded_num_envs, "autoreset_mode": autoreset_mode}


def gather(parts: frozenset[str], env: Any, *, num_envs: int = 1, autoreset_mode: str | None = None) -> dict[str, Any]:
    """The recording's provenance: the `parts` asked for (see `PARTS`) of `env` (None for a loop
    without one: `Writer`); `autoreset_mode` is given for vector envs."""
    out: dict[str, Any] = {}
    if "env" in parts and env is not None:
        out["env"] = {"spec": _spec(env), "wrappers": wrapper_chain(env)}
        sub_envs = getattr(getattr(env, "unwrapped", None), "envs", None)  # a SyncVectorEnv's own envs
        if isinstance(sub_envs, list | tuple) and sub_envs:
            out["env"]["sub_env_wrappers"] = wrapper_chain(sub_envs[0])
        name = (getattr(env, "metadata", None) or {}).get("name")
        if isinstance(name, str):
            out["env"]["name"] = name  # PettingZoo's envs name themselves here, with no spec
    if "vector" in parts and autoreset_mode is not None:
        out["vector"] = _vector(num_envs, autoreset_mode, env)
    if "host" in parts:
        out["host"] = _host()
    if "versions" in parts:
        out["versions"] = _versions()
    if "command" in parts:
        out["command"] = {"argv": list(sys.argv), "cwd": os.getcwd()}
    if "git" in parts:
        out["git"] = git_state(code_directory())
    return out


def reset_metadata(seed: Any, options: Mapping[str, Any] | None, env_index: int, num_envs: int) -> dict[str, Any]:
    """The metadata of the episode sub-env `env_index` starts at a reset given `seed` and
    `options` (gymnasium's rule: an int seed gives sub-env i the seed ``seed + i``, a list its
    i-th): ``{RESET_KEY: {"seed": ..., "options": ...}}`` with those given; empty without."""
    out: dict[str, Any] = {}
    if seed is not None:
        if isinstance(seed, int | np.integer):
            out["seed"] = int(seed) + (env_index if num_envs > 1 else 0)
        elif isinstance(seed, Sequence) and len(seed) > env_index:
            if seed[env_index] is not None:
                out["seed"] = _plain(seed[env_index])
        else:
            out["seed"] = _plain(seed)
    if options:
        kept = {k: v for k, v in options.items() if k != "reset_mask"}  # which sub-envs: not an option of theirs
        if kept:
            out["options"] = _plain(kept)
    return {RESET_KEY: out} if out else {}


def policy_metadata(name: Any, step: Any, checkpoint: Any, extra: Mapping[str, Any]) -> dict[str, Any]:
    """The episode metadata `set_policy` gives the episodes begun after it: ``{"policy": {...}}``
    with the values given.

    Raises:
        InvalidArgumentError: `name` is not a str, `step` not an int, `checkpoint` not a str or
            path.
    """
    if name is not None and not isinstance(name, str):
        raise InvalidArgumentError(f"set_policy: name must be a str, got {type(name).__name__}: {name!r}")
    if step is not None and (isinstance(step, bool | np.bool_) or not isinstance(step, int | np.integer)):
        raise InvalidArgumentError(f"set_policy: step must be an int, got {type(step).__name__}: {step!r}")
    if checkpoint is not None and not isinstance(checkpoint, str | os.PathLike):
        raise InvalidArgumentError(
            f"set_policy: checkpoint must be a str or a path, got {type(checkpoint).__name__}: {checkpoint!r}"
        )
    policy: dict[str, Any] = dict(extra)
    if name is not None:
        policy["name"] = name
    if step is not None:
        policy["step"] = int(step)
    if checkpoint is not None:
        policy["checkpoint"] = os.fspath(checkpoint)
    return {POLICY_KEY: policy}
