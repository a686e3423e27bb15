"""``trajcore import-lerobot``: write a local LeRobot v3.0 dataset as a trajcore dataset."""

from __future__ import annotations

from trajcore.cli._common import Commands


def add_to(commands: Commands) -> None:
    """Adds the command to the parser."""
    m = commands.command(
        "import-lerobot",
        "write a local LeRobot v3.0 dataset as a trajcore dataset",
        "Read a LeRobot v3.0 dataset on this machine (Parquet and MP4; LeRobot itself is not needed, nothing is "
        "downloaded) into a new trajcore dataset: an episode per LeRobot episode, its task in the episode's "
        "metadata; 'trajcore export DST OUT --format lerobot' writes the same features back.",
        "~/.cache/huggingface/lerobot/lerobot/pusht runs/pusht",
    )
    commands.import_args(
        m,
        "from_lerobot",
        source=("ROOT", "the LeRobot dataset's directory (holding meta/info.json)"),
        dst="the trajcore dataset directory to create",
    )
