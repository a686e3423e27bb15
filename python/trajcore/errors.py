"""The trajcore error hierarchy, rooted at `TrajcoreError`.

The classes live in the Rust extension (one mapping from the core's error type to Python, in
the bindings) and are re-exported here so users catch `trajcore.SchemaError` and friends.
Each also derives from the builtin a user would reach for: `SchemaError`, `CorruptFileError`
and `InvalidArgumentError` (a bad option) are `ValueError`s, `RecorderError` is a
`RuntimeError`, `TrajcoreIOError` is an `OSError` and `TrajcoreFileNotFoundError` a
`FileNotFoundError`.
"""

from trajcore._core import (
    CorruptFileError,
    InvalidArgumentError,
    RecorderError,
    SchemaError,
    TrajcoreError,
    TrajcoreFileNotFoundError,
    TrajcoreIOError,
    TrajcoreWarning,
)

__all__ = [
    "CorruptFileError",
    "InvalidArgumentError",
    "RecorderError",
    "SchemaError",
    "TrajcoreError",
    "TrajcoreFileNotFoundError",
    "TrajcoreIOError",
    "TrajcoreWarning",
]
