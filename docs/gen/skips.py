"""The skip reasons' tables on the troubleshooting page, one row per member of the enums the services count
with (`ServiceSkip`, shared by `tracescore alert` and `tracescore conversations`; `ConversationSkip`,
conversations' own), in the enums' order: a reason added to an enum without a row here fails the check."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from gen import GENERATED, Undocumented, cell, code, table
from tracescore.conversations import ConversationSkip
from tracescore.model import ServiceSkip

# reason -> (meaning, what to do): Markdown, one table cell each.
EXPLAINED: dict[StrEnum, tuple[str, str]] = {
    ServiceSkip.INVALID_RECORD: (
        "not JSON, not a JSON object, or not the record's fields "
        "(`not an evaluation record: missing trace_id, ...`)",
        "keep other producers off the evaluations topic",
    ),
    ServiceSkip.UNKNOWN_SCHEMA_VERSION: (
        "a record of a `schema_version` this version does not read (or none)",
        "run the same tracescore version as the consumers",
    ),
    ServiceSkip.OVERSIZED_RECORD: (
        "(alert) a record too large for the routes topic: only names of hundreds of KB get there",
        "shorten service and route names",
    ),
    ServiceSkip.INVALID_STATE: (
        "(alert) an entry of the state topic that tracescore did not write (not JSON, no `schema_version`, "
        "not the state's fields, a key that is no alert's): that key starts anew",
        "keep other producers off `tracescore.alert.changelog`",
    ),
    ServiceSkip.FUTURE_STATE_VERSION: (
        "(alert) a state saved by a newer tracescore (a higher `schema_version`): skipped, that key starts "
        "anew",
        "run one tracescore version across the group; roll back only to a version that reads it",
    ),
    ServiceSkip.OLD_STATE_VERSION: (
        "(alert) a state of a version this one no longer reads",
        "let the version that wrote it finish, or delete the key",
    ),
    ConversationSkip.NO_CONVERSATION: (
        "a turn's record has no `session_id`: its interaction carries no `session.id` / "
        "`gen_ai.conversation.id` (AutoGen records none); it is scored, never part of a conversation",
        "set the session on the spans (`tracescore.attributes(session_id=...)`)",
    ),
    ConversationSkip.RECORDS_PAST_CAP: (
        "records of turns beyond `max_turns` in one conversation (a session id shared by unrelated users), "
        "ignored; the record says how many",
        "give each conversation its own id, or raise `max_turns`",
    ),
    ConversationSkip.EVICTED: (
        "conversations written early and forgotten past `max_conversations` held by one instance",
        "raise `max_conversations`, or run more instances",
    ),
    ConversationSkip.STATE_TOO_LARGE: (
        "a conversation whose state does not fit `max_message_bytes` even without its turns' reasons: "
        "written, but a restart resumes it without its turns read so far; a turn held for grounding that "
        "does not fit is saved without its documents",
        "lower `max_turns` (or `evidence_chars`)",
    ),
    ConversationSkip.INVALID_EVIDENCE: (
        "a message on `evidence_topic` that is not a turn's documents as `tracescore consume` writes them "
        "(another producer, another version): skipped, nothing is grounded on it",
        "point `evidence_topic` at consume's `conversation_evidence_topic` only",
    ),
}


def _table(reasons: type[StrEnum], explained: Mapping[StrEnum, tuple[str, str]] = EXPLAINED) -> str:
    missing = [
        f"{reasons.__name__}.{r.name}: no row in docs/gen/skips.py" for r in reasons if r not in explained
    ]
    if missing:
        raise Undocumented(missing)
    rows = [[code(r.value), cell(explained[r][0]), cell(explained[r][1])] for r in reasons]
    return GENERATED + table(["reason", "meaning", "what to do"], rows)


def service_table() -> str:
    """The reasons both services count (`tracescore tail` the record ones)."""
    return _table(ServiceSkip)


def conversations_table() -> str:
    """The reasons `tracescore conversations` alone counts."""
    return _table(ConversationSkip)
