"""Who is recording: the metadata every recording made under Ray carries, so a dataset written
by many processes says which process wrote which recording."""

from __future__ import annotations

import os
import socket
import time
from typing import Any

import ray

__all__ = ["process_identity"]


def process_identity() -> dict[str, Any]:
    """This process as recording metadata: ``host``, ``pid``, ``start_time`` (now, seconds since
    the Unix epoch) and, inside Ray, ``node_id``, ``actor_id`` (None outside an actor) and
    ``job_id``."""
    out: dict[str, Any] = {"host": socket.gethostname(), "pid": os.getpid(), "start_time": time.time()}
    if ray.is_initialized():
        context = ray.get_runtime_context()
        out["node_id"] = context.get_node_id()
        out["actor_id"] = context.get_actor_id()
        out["job_id"] = context.get_job_id()
    return out
