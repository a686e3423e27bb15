"""trajcore: record reinforcement-learning episodes from gymnasium envs into an append-only,
checksummed, indexed file format (a Rust core), and read them back as numpy arrays.

    env = trajcore.RecordEpisodes(gym.make("CartPole-v1"), "runs/cartpole")
    envs = trajcore.RecordVectorEpisodes(gym.make_vec("CartPole-v1", 16), "runs/cp16")
    with trajcore.open("runs/cp16") as ds:
        ep = ds.episodes[0]
        ep.observations, ep.actions, ep.rewards, ep.infos
        batch = ds.sample_transitions(256, seed=0)      # training reads, gathered in Rust
        seq = ds.select(complete=True).sample_sequences(32, length=20, seed=0)

    trajcore.to_pandas(ds); trajcore.export(ds, "cp16.parquet")  # also csv, jsonl (RLlib), minari

Any other loop writes through `trajcore.Writer` (whole episodes as arrays, or step by step);
PettingZoo envs record with `trajcore.RecordParallelEpisodes` and `trajcore.RecordAECEpisodes`
(needs pettingzoo), an episode per agent (`ds.agents`, `ds.select(agent=...)`).
    trajcore.verify("runs/cp16"); trajcore.recover("runs/damaged", "runs/saved")

Looking at episodes and getting them out are functions over a dataset (or `Episodes`, or an
`Episode`): `trajcore.viewer` writes an episode's page (``trajcore view``), `trajcore.plots` the
figures (``trajcore plot``, ``trajcore.plots.per_episode(ds, "return")``), `trajcore.formats`
the exports and pandas tables. `trajcore.torch` (needs torch) wraps datasets for
`torch.utils.data.DataLoader`.
"""

import importlib
from typing import TYPE_CHECKING, Any

from trajcore import _core, _moved, errors

# The error classes: `trajcore.errors` names them once, and every one is public here too.
from trajcore.errors import *  # noqa: F403
from trajcore.read.dataset import Dataset, open
from trajcore.read.episode import Episode
from trajcore.read.episodes import Episodes
from trajcore.read.integrity import Damage, VerifyReport, recover, verify
from trajcore.read.train.mix import Mixture, mix
from trajcore.read.train.transitions import Batch, Sequences, Transitions
from trajcore.record.env_wrapper import RecordEpisodes
from trajcore.record.manual import Writer
from trajcore.record.session import EpisodeInfo, RecordingOptions
from trajcore.record.vector_wrapper import RecordVectorEpisodes

if TYPE_CHECKING:
    from trajcore import plots, viewer
    from trajcore.formats import export, import_minari, summaries_frame, to_pandas
    from trajcore.formats.from_lerobot import from_lerobot
    from trajcore.tools.annotate import annotate
    from trajcore.tools.convert import convert
    from trajcore.tools.lerobot import to_lerobot

# Imported when first asked for: getting data out (the exports and pandas tables, LeRobot's video,
# image and statistics modules), the plots, the viewer and the tools over files are never used by
# recording and reading (an `import trajcore` in every data-loader worker).
_LAZY = {
    "annotate": "trajcore.tools.annotate",
    "convert": "trajcore.tools.convert",
    "export": "trajcore.formats",
    "from_lerobot": "trajcore.formats",
    "import_minari": "trajcore.formats",
    "summaries_frame": "trajcore.formats",
    "to_lerobot": "trajcore.tools.lerobot",
    "to_pandas": "trajcore.formats",
}
# Subpackages an `import trajcore` imported (and so made attributes) before they were left to
# their first use: `trajcore.plots.per_episode(...)` after `import trajcore` alone still works.
_SUBMODULES = ("formats", "images", "plots", "spaces", "tools", "video", "viewer")

# The module paths of the previous version (`trajcore.dataset`, `trajcore.bench`, ...) import
# their new homes, with a DeprecationWarning.
_moved.install()

__version__: str = _core.__version__
FORMAT_VERSION: tuple[int, int] = _core.FORMAT_VERSION

__all__ = [
    "FORMAT_VERSION",
    "Batch",
    "Damage",
    "Dataset",
    "Episode",
    "EpisodeInfo",
    "Episodes",
    "Mixture",
    "RecordEpisodes",
    "RecordVectorEpisodes",
    "RecordingOptions",
    "Sequences",
    "Transitions",
    "VerifyReport",
    "__version__",
    "annotate",
    "convert",
    "export",
    "from_lerobot",
    "import_minari",
    "mix",
    "open",
    "plots",
    "recover",
    "set_num_threads",
    "summaries_frame",
    "to_lerobot",
    "to_pandas",
    "verify",
    "viewer",
    "Writer",
]
__all__ += errors.__all__


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # asked once
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"trajcore.{name}")  # the import makes it an attribute
    # The PettingZoo recorders import pettingzoo: only when asked for.
    if name in ("RecordParallelEpisodes", "RecordAECEpisodes"):
        from trajcore.record import pettingzoo

        return getattr(pettingzoo, name)
    # A module of the previous version's path as an attribute (``trajcore.dataset``), as its
    # import made it: the module, with the DeprecationWarning of its path.
    if f"trajcore.{name}" in _moved.MOVED:
        return importlib.import_module(f"trajcore.{name}")
    raise AttributeError(f"module 'trajcore' has no attribute {name!r}")


def __dir__() -> list[str]:
    # The names imported when first asked for are listed before that, as the public names they are.
    return sorted({*globals(), *_LAZY, *_SUBMODULES})


def set_num_threads(n: int) -> None:
    """Bounds the threads one batched read may use to decode and copy (0: the default, the
    machine's cores up to 8). `trajcore.torch` sets 1 in data-loader workers."""
    _core.num_threads(int(n))
