"""``trajcore import-minari``: write a local minari dataset as a trajcore dataset."""

from __future__ import annotations

from trajcore.cli._common import import_command

HELP = "write a local minari dataset as a trajcore dataset"
DESCRIPTION = (
    "Replay every episode of a Minari dataset on this machine (nothing is downloaded) into a new trajcore "
    "dataset; a dataset trajcore exported comes back with its custom data and metadata."
)
EXAMPLES = ("trajcore/cartpole/random-v0 runs/cp16-back", "~/.minari/datasets/D4RL/door/human-v2 runs/door")

run, add_arguments = import_command(
    "import_minari",
    source=("NAME_OR_PATH", "a minari dataset id found locally, or its directory"),
    dst="the trajcore dataset directory (or s3:// prefix) to create",
)
