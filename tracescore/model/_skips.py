"""Why `tracescore alert` or `tracescore conversations` skipped a message: the reasons both count (in their
closing summary's `skipped`, their log lines and metrics, and `tracescore tail`'s summary for the record
ones). The values are what users read there and in the docs' tables (docs/gen/skips.py writes them from
this enum): never rename one. Reasons one service alone counts live in that service
(`tracescore.conversations.ConversationSkip`).
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ServiceSkip"]


class ServiceSkip(StrEnum):
    # An evaluations (or conversations) topic message: `UnreadableRecord.reason`.
    INVALID_RECORD = "invalid_record"  # not JSON, not an object, or not the record's fields
    UNKNOWN_SCHEMA_VERSION = "unknown_schema_version"  # a schema_version this version does not read
    OVERSIZED_RECORD = "oversized_record"  # too large to re-key onto the service's own topic
    # A state topic value (the service base's `UnreadableState.reason`).
    INVALID_STATE = "invalid_state"  # not a state (or a key) this service writes
    FUTURE_STATE_VERSION = "future_state_version"  # written by a newer tracescore
    OLD_STATE_VERSION = "old_state_version"  # of a version this one no longer reads
