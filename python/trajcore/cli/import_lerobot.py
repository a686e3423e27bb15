"""``trajcore import-lerobot``: write a local LeRobot v3.0 dataset as a trajcore dataset."""

from __future__ import annotations

from trajcore.cli._common import import_command

HELP = "write a local LeRobot v3.0 dataset as a trajcore dataset"
DESCRIPTION = (
    "Read a LeRobot v3.0 dataset on this machine (Parquet and MP4; LeRobot itself is not needed, nothing is "
    "downloaded) into a new trajcore dataset: an episode per LeRobot episode, its task in the episode's "
    "metadata; 'trajcore export DST OUT --format lerobot' writes the same features back."
)
EXAMPLES = ("~/.cache/huggingface/lerobot/lerobot/pusht runs/pusht",)

run, add_arguments = import_command(
    "from_lerobot",
    source=("ROOT", "the LeRobot dataset's directory (holding meta/info.json)"),
    dst="the trajcore dataset directory to create",
)
