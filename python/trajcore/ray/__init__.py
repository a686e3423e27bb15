"""trajcore on Ray: record from many processes into one dataset, record RLlib's episodes, read
datasets as Ray Data. Needs ``pip install "ray[data]"`` (``"ray[data,rllib]"`` for RLlib);
``import trajcore`` never imports Ray.

- `collect`: N Ray actors, each recording its own vector env into one dataset directory.
- `RecordRLlibEpisodes` (`trajcore.ray.rllib`): an RLlib callback recording every episode each
  EnvRunner completes, one recording per EnvRunner; `record_step` / `set_episode_metadata` give
  it per-step and per-episode custom data from your own callbacks.
- `read_transitions` / `read_episodes`: a `ray.data.Dataset` of steps or episodes through
  `TrajcoreDatasource`, one read task per shard (or per run of episodes of a big shard).

`trajcore.ray.rllib` (and the names above that come from it) imports RLlib on first use only.
"""

from __future__ import annotations

from typing import Any

from trajcore._deps import require

require("ray.data", "trajcore.ray", '"ray[data]"')

from trajcore.ray._identity import process_identity  # noqa: E402
from trajcore.ray.collect import Collector, collect  # noqa: E402
from trajcore.ray.datasource import TrajcoreDatasource  # noqa: E402
from trajcore.ray.read import read_episodes, read_transitions  # noqa: E402

__all__ = [
    "Collector",
    "RecordRLlibEpisodes",
    "TrajcoreDatasource",
    "collect",
    "process_identity",
    "read_episodes",
    "read_transitions",
    "record_step",
    "set_episode_metadata",
]

_FROM_RLLIB = ("RecordRLlibEpisodes", "record_step", "set_episode_metadata")


def __getattr__(name: str) -> Any:
    # RLlib (and the torch it pulls in) is imported only when its callback is asked for.
    if name in _FROM_RLLIB:
        require("ray.rllib", f"trajcore.ray.{name}", '"ray[rllib]"')
        from trajcore.ray import rllib

        return getattr(rllib, name)
    raise AttributeError(f"module 'trajcore.ray' has no attribute {name!r}")
