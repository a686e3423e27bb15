"""The episode metadata keys the recorders write for provenance (`trajcore.record.provenance`) and
the readers take back (`trajcore.read.records.provenance`)."""

from __future__ import annotations

__all__ = ["POLICY_KEY", "RESET_KEY"]

POLICY_KEY = "policy"
"""The policy behind the episode (`set_policy`): shown in `Episode.metadata`, as the user named it."""

RESET_KEY = "trajcore.reset"
"""The seed and options of the reset that started the episode (``{"seed": ..., "options": ...}``,
each where given): kept out of `Episode.metadata`, which holds what the user set, and shown in
`Episode.provenance` as ``reset_seed`` and ``reset_options``."""
