"""Collection from many processes into one dataset: `collect` runs N Ray actors, each recording
its own vector env into the same directory.

No coordination is needed beyond file names: every recorder writes its own shards, named by its
start time and a random recording id (``20261121T062507.123456Z-1a2b3c4d-00000.trj``) and
created with ``O_EXCL``, so two recorders never write one file; a reader lists every recording
of the directory, including shards still being written. Each recording's metadata carries
``{"ray": {"actor_index", "actor_id", "host", "node_id", "pid", "start_time", ...}}``.

Any other set of processes can do the same: give each a `RecordVectorEpisodes` (or
`RecordEpisodes`) on the shared directory, with ``metadata={"ray": process_identity()}``.

Into a store (``s3://bucket/prefix``) nodes need share nothing but the store: each actor records
into a staging directory of its own (under its ``$TMPDIR``) and uploads its shards there, with
the `storage_options` it was given (its process has none of the driver's); the driver then opens
the prefix.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any, Unpack

import gymnasium as gym
import ray

from trajcore._store import configure, is_store_url
from trajcore.errors import InvalidArgumentError, TrajcoreFileNotFoundError
from trajcore.ray._identity import process_identity
from trajcore.read.dataset import Dataset
from trajcore.record.make_env import make_env
from trajcore.record.session import RecordingOptions
from trajcore.record.vector_wrapper import RecordVectorEpisodes
from trajcore.tools.to_store import shards_under

__all__ = ["Collector", "collect"]

EnvFn = str | Callable[[], gym.Env[Any, Any]]
Policy = Callable[[Any], Any]


class Collector:
    """One actor's work: a vector env of `num_envs` sub-envs recorded into `path` (made a Ray
    actor by `collect`; usable alone in any process).

    Args:
        env_fn: a registered gymnasium id, "module:callable", or a callable returning a `gym.Env`.
        path: the dataset directory (shared by every actor), or a store prefix (a URL).
        actor_index: this actor's number (0 .. N-1), stored in the metadata.
        num_envs: sub-envs of its (sync) vector env.
        seed: its sub-envs are reset with ``seed`` .. ``seed + num_envs - 1``, and random actions
            drawn from the action space seeded with ``seed``; None: unseeded.
        metadata: dataset metadata of its recording; ``"ray"`` is added.
        options: `RecordingOptions` of its recorder.
        storage_options: for a URL, options of its store over those of this process's
            environment (see `trajcore.open`).
    """

    def __init__(
        self,
        env_fn: EnvFn,
        path: str,
        actor_index: int,
        num_envs: int,
        seed: int | None,
        metadata: Mapping[str, Any],
        options: Mapping[str, Any],
        storage_options: Mapping[str, str] | None = None,
    ) -> None:
        self.env_fn, self.path, self.actor_index, self.num_envs = env_fn, path, actor_index, num_envs
        self.seed, self.metadata, self.options = seed, dict(metadata), dict(options)
        self.storage_options = dict(storage_options) if storage_options else None

    def run(self, steps: int, policy: Policy | None = None) -> dict[str, Any]:
        """Steps the vector env `steps` times (random actions, or `policy` from the batched
        observations) and closes the recording.

        Returns:
            ``{"actor_index", "identity", "env_steps", "episodes", "evicted_steps", "shards",
            "seconds"}``: seconds from the reset to the close (everything written; for a URL,
            uploaded), shards as paths or URLs (with `capacity_steps`, those it kept).
        """
        store = is_store_url(self.path)
        if store:
            configure(self.path, self.storage_options)
        identity = {"actor_index": self.actor_index, **process_identity()}
        envs = make_env(self.env_fn, self.num_envs, "sync")
        started = time.perf_counter()
        with RecordVectorEpisodes(envs, self.path, {**self.metadata, "ray": identity}, **self.options) as rec:
            obs, _ = rec.reset(seed=self.seed)
            rec.action_space.seed(self.seed)
            for _ in range(steps):
                actions = policy(obs) if policy is not None else rec.action_space.sample()
                obs, *_ = rec.step(actions)
        seconds = time.perf_counter() - started
        stats = rec.stats()
        shards = shards_under(self.path, rec.shard_paths) if store else rec.shard_paths
        if self.options.get("capacity_steps") is not None and store:
            # Less the ones it evicted: what the prefix lists (readers leave out what its logs name).
            with Dataset(self.path, storage_options=self.storage_options) as listing:
                kept = set(listing.shards)
            shards = [url for url in shards if url in kept]
        elif self.options.get("capacity_steps") is not None:
            shards = [p for p in shards if os.path.exists(p)]  # less the ones it evicted
        return {
            "actor_index": self.actor_index,
            "identity": identity,
            "env_steps": steps * self.num_envs,
            "episodes": int(stats.get("episodes", 0)),
            "evicted_steps": int(stats.get("evicted_steps", 0)),
            "shards": shards,
            "seconds": seconds,
        }


def _run_all(actors: list[Any], steps: int, policy: Policy | None) -> tuple[list[dict[str, Any]], list[Exception]]:
    """Runs every actor and waits for all (each closes its recording before an error is raised),
    killing each as soon as its run ended: a finished actor gives its resources back, so actors
    Ray could not place yet (more actors than the cluster's CPUs) start as others finish."""
    running = {a.run.remote(steps, policy): a for a in actors}
    results: list[dict[str, Any]] = []
    errors: list[Exception] = []
    while running:
        [done], _ = ray.wait(list(running), num_returns=1)
        actor = running.pop(done)
        try:
            results.append(ray.get(done))
        except Exception as e:
            errors.append(e)
        ray.kill(actor)
    results.sort(key=lambda r: r["actor_index"])
    return results, errors


def _check_fits(actor_options: Mapping[str, Any]) -> None:
    """Refuses actors that no node of the cluster, as it is now, could ever place (Ray would
    wait for them forever): one actor's resources above the cluster's whole."""
    wanted = {"CPU": actor_options.get("num_cpus"), "GPU": actor_options.get("num_gpus")}
    wanted.update(actor_options.get("resources") or {})
    have = ray.cluster_resources()
    for name, amount in wanted.items():
        if amount and amount > have.get(name, 0):
            raise InvalidArgumentError(
                f"each actor asks for {amount} {name} (actor_options), but the Ray cluster has "
                f"{have.get(name, 0)} {name} in all: no actor could start"
            )


def _positive(name: str, value: Any, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise InvalidArgumentError(f"{name} must be an int >= {least}, got {value!r}")
    return value


def collect(
    env_fn: EnvFn,
    path: str | os.PathLike[str],
    *,
    num_actors: int = 2,
    num_envs_per_actor: int = 1,
    steps: int,
    policy: Policy | None = None,
    seed: int | None = 0,
    metadata: Mapping[str, Any] | None = None,
    actor_options: Mapping[str, Any] | None = None,
    **options: Unpack[RecordingOptions],
) -> Dataset:
    """Records with `num_actors` Ray actors into one dataset directory (or store prefix) and
    opens it.

    Each actor makes a sync vector env of `num_envs_per_actor` sub-envs from `env_fn`, steps it
    `steps` times and records every sub-env episode (its own recording, its own shards). Ray is
    started (``ray.init()``) if it is not running. On a cluster `path` must be on a filesystem
    every node shares, or a store URL (``s3://bucket/prefix``): each actor then records into a
    local staging directory of its own and uploads its shards (see `RecordVectorEpisodes`).

    Args:
        env_fn: a registered gymnasium id (``"CartPole-v1"``), ``"module:callable"``, or a
            callable returning a `gym.Env` (pickled to the actors).
        path: the dataset directory (created if missing; recordings already there are kept), or
            a store prefix (``s3://bucket/prefix``).
        num_actors: actors, each recording its own env: as many at once as the cluster's
            resources hold (each holds its `actor_options` resources, 1 CPU by default, while it
            runs), the others as earlier ones finish.
        num_envs_per_actor: sub-envs of each actor's vector env.
        steps: vector steps per actor (so ``num_actors * num_envs_per_actor * steps`` env steps).
        policy: maps a batch of observations to a batch of actions (pickled to the actors);
            default random actions.
        seed: actor k resets its sub-envs with seeds from ``seed + k * num_envs_per_actor`` and
            seeds its action space with that; None: unseeded.
        metadata: dataset metadata of every recording; each gets ``"ray"`` added (actor index
            and id, host, node, pid, start time).
        actor_options: Ray actor options (default ``{"num_cpus": 1}``).
        **options: `trajcore.RecordingOptions` of every actor's recorder. `capacity_steps` is
            one capacity per actor: each actor's recording keeps at most that many transitions
            (plus a shard), counting its own shards and those recordings no longer running left
            in the directory (deleted first), never another running actor's; the directory then
            holds at most ``num_actors * capacity_steps`` (pass ``N // num_actors`` to bound it
            at N). A store prefix is bounded the same way: each actor's recording holds a lease
            there while it records instead of a shard lock (docs/replay-buffer.md, "Several
            recorders on one store prefix"). Among them, for a URL,
            `storage_options` (its store's client options, see `trajcore.open`) go to every
            actor and to the driver's open; without them each process takes its own
            environment's ``AWS_*`` variables (on a cluster, give them to the workers, e.g. in
            ``actor_options={"runtime_env": {"env_vars": ...}}``).

    Returns:
        The dataset (`trajcore.open(path)`), every actor's recording in it.

    Raises:
        InvalidArgumentError: a bad argument or recording option; an actor's resources
            (`actor_options`) above the whole cluster's (an autoscaling cluster: start its nodes
            first).
        TrajcoreFileNotFoundError: a shard an actor wrote is not visible here (`path` is not on
            a shared filesystem, or not in the store the driver reads).
        RecorderError: an actor's upload to the store failed (naming the URL).
        Any error an actor raised (after every actor finished), e.g. `SchemaError`.
    """
    _positive("num_actors", num_actors, 1)
    _positive("num_envs_per_actor", num_envs_per_actor, 1)
    _positive("steps", steps, 0)
    if not (isinstance(env_fn, str) or callable(env_fn)):
        raise InvalidArgumentError(f"env_fn must be an env id or a callable returning an env, got {env_fn!r}")
    if policy is not None and not callable(policy):
        raise InvalidArgumentError(f"policy must be callable (batched observations -> actions), got {policy!r}")
    unknown = sorted(set(options) - set(RecordingOptions.__annotations__))
    if unknown:
        raise InvalidArgumentError(f"unknown recording option(s) {unknown}")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise InvalidArgumentError(f"metadata must be a mapping, got {type(metadata).__name__}")
    store = is_store_url(path)
    directory = str(path).rstrip("/") if store else os.path.abspath(os.fspath(path))
    storage_options = options.get("storage_options")
    if store:
        configure(directory, storage_options)  # a bad option fails here, before any actor starts
    wanted = {"num_cpus": 1, **(actor_options or {})}
    if not ray.is_initialized():
        ray.init()
    _check_fits(wanted)
    actor_class = ray.remote(Collector).options(**wanted)
    actors = [
        actor_class.remote(
            env_fn,
            directory,
            k,
            num_envs_per_actor,
            None if seed is None else seed + k * num_envs_per_actor,
            dict(metadata or {}),
            dict(options),
            storage_options,
        )
        for k in range(num_actors)
    ]
    results, errors = _run_all(actors, steps, policy)
    if errors:
        raise errors[0]
    # In a store the driver sees what the listing shows; in a directory, what exists.
    ds = Dataset(directory, storage_options=storage_options) if store else None
    listed = set(ds.shards) if ds is not None else set()
    for result in results:
        for shard in result["shards"]:
            if shard not in listed and not (ds is None and os.path.exists(shard)):
                if ds is not None:
                    ds.close()
                raise TrajcoreFileNotFoundError(
                    f"{shard}, written by actor {result['actor_index']} on {result['identity']['host']}, is not "
                    f"visible here: on a cluster the dataset must be in a store (a URL) or on a filesystem every "
                    "node shares"
                )
    return ds if ds is not None else Dataset(directory)
