"""What the service base counts about its state, in `tracescore alert`'s and `tracescore conversations`'
closing summary (`state: restored=3, ...`) and their stats' `state`. The values are what users read there
and in the docs (partitions_read in the contributing guide, the storm benchmark): never rename one.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["StateCount"]


class StateCount(StrEnum):
    RESTORED = "restored"  # keys read back from the state topic at an assignment
    MIGRATED = "migrated"  # keys carried over from the old single-partition state topic
    RECREATED = "recreated"  # the state topic found deleted (or remade) and written again
    PARTITIONS_READ = "partitions_read"  # partitions whose state was read back (each assignment's)
    RECOVERED = "recovered"  # outputs found already written before a restart (conversations)
