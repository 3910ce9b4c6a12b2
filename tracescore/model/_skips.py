"""Why something was not scored or read: `ExtractSkip`, why `tracescore consume` did not score an
interaction in a trace (a recogniser's `Skip.reason`); `ServiceSkip`, why `tracescore alert` or `tracescore
conversations` skipped a message, the reasons both count (in their closing summary's `skipped`, their log
lines and metrics, and `tracescore tail`'s summary for the record ones). The values are what users read
there, in metrics' `reason` labels and in the docs' tables (docs/gen/skips.py writes them from these enums):
never rename one. Reasons one service alone counts live in that service
(`tracescore.conversations.ConversationSkip`).
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ExtractSkip", "ServiceSkip"]


class ExtractSkip(StrEnum):
    """Why extract skipped an interaction (counted in consume's `skipped` and the metric
    `tracescore.spans.skipped`), or, for the last two, read it partly and scored it all the same
    (`Skip.scored`: counted in `read_partly` and `tracescore.interactions.read_partly`)."""

    NOT_RAG = "not_rag"  # no interaction: no span of a known convention, or a producer's background work
    MISSING_ANSWER = "missing_answer"  # no answer text, or a program repr as the answer
    EMPTY_CONTEXT = "empty_context"  # an answer but no retrieved documents to check it against
    CONTENT_NOT_CAPTURED = "content_not_captured"  # the producer's content capture is off
    NO_RETRIEVAL = "no_retrieval"  # documents only inside the prompt, under no label that names them
    INTERLEAVED_RUNS = "interleaved_runs"  # steps of runs at once that nothing on the spans tells apart
    # Scored all the same, from what was read:
    SPAN_EVENTS_DROPPED = "span_events_dropped"  # span events the answer was read from were lost
    SESSION_ID_SCRUBBED = "session_id_scrubbed"  # a redacting exporter replaced the session id


class ServiceSkip(StrEnum):
    # An evaluations (or conversations) topic message: `UnreadableRecord.reason`.
    INVALID_RECORD = "invalid_record"  # not JSON, not an object, or not the record's fields
    UNKNOWN_SCHEMA_VERSION = "unknown_schema_version"  # a schema_version this version does not read
    OVERSIZED_RECORD = "oversized_record"  # too large to re-key onto the service's own topic
    # A state topic value (the service base's `UnreadableState.reason`).
    INVALID_STATE = "invalid_state"  # not a state (or a key) this service writes
    FUTURE_STATE_VERSION = "future_state_version"  # written by a newer tracescore
    OLD_STATE_VERSION = "old_state_version"  # of a version this one no longer reads
