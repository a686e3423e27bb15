"""The trajcore error hierarchy, rooted at `TrajcoreError`.

The classes live in the Rust extension (one mapping from the core's error type to Python, in
the bindings) and are re-exported here so users catch `trajcore.SchemaError` and friends.
Each also derives from the builtin a user would reach for: `SchemaError`, `CorruptFileError`
and `InvalidArgumentError` (a bad option) are `ValueError`s, `RecorderError` is a
`RuntimeError`, `TrajcoreIOError` is an `OSError` and `TrajcoreFileNotFoundError` a
`FileNotFoundError`. An index out of range, from any entry point, is a `TrajcoreIndexError`:
an `IndexError` and also an `InvalidArgumentError`.

`MissingDependencyError` is the one class defined here rather than in the extension: it is
raised only by Python code (an optional package such as pandas or pyarrow is not installed), and
it is also an `ImportError`, which is what a user checking for optional packages catches.
"""

from trajcore._core import (
    CorruptFileError,
    InvalidArgumentError,
    RecorderError,
    SchemaError,
    TrajcoreError,
    TrajcoreFileNotFoundError,
    TrajcoreIndexError,
    TrajcoreIOError,
    TrajcoreWarning,
)

__all__ = [
    "CorruptFileError",
    "InvalidArgumentError",
    "MissingDependencyError",
    "RecorderError",
    "SchemaError",
    "TrajcoreError",
    "TrajcoreFileNotFoundError",
    "TrajcoreIndexError",
    "TrajcoreIOError",
    "TrajcoreWarning",
]


class MissingDependencyError(TrajcoreError, ImportError):
    """An optional package a feature needs is not installed; the message names it and the pip
    command that installs it."""
