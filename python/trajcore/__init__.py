"""trajcore: record reinforcement-learning episodes from gymnasium envs into an append-only,
checksummed, indexed file format (a Rust core), and read them back as numpy arrays.

    env = trajcore.RecordEpisodes(gym.make("CartPole-v1"), "runs/cartpole")
    envs = trajcore.RecordVectorEpisodes(gym.make_vec("CartPole-v1", 16), "runs/cp16")
    with trajcore.open("runs/cp16") as ds:
        ep = ds.episodes[0]
        ep.observations, ep.actions, ep.rewards, ep.infos
"""

from trajcore import _core
from trajcore.dataset import Dataset, Episode, Episodes, open
from trajcore.errors import (
    CorruptFileError,
    InvalidArgumentError,
    RecorderError,
    SchemaError,
    TrajcoreError,
    TrajcoreFileNotFoundError,
    TrajcoreIOError,
    TrajcoreWarning,
)
from trajcore.recorder import EpisodeInfo, RecordEpisodes
from trajcore.vector import RecordVectorEpisodes

__version__: str = _core.__version__
FORMAT_VERSION: tuple[int, int] = _core.FORMAT_VERSION

__all__ = [
    "FORMAT_VERSION",
    "CorruptFileError",
    "Dataset",
    "Episode",
    "EpisodeInfo",
    "Episodes",
    "InvalidArgumentError",
    "RecordEpisodes",
    "RecordVectorEpisodes",
    "RecorderError",
    "SchemaError",
    "TrajcoreError",
    "TrajcoreFileNotFoundError",
    "TrajcoreIOError",
    "TrajcoreWarning",
    "__version__",
    "open",
]
