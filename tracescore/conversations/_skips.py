"""Why `tracescore conversations` alone skipped (or dropped) something: counted in its closing summary's
`skipped`, its log lines and the `tracescore.conversations.skipped` metric's `reason`, beside the reasons it
shares with `tracescore alert` (`tracescore.model.ServiceSkip`). The values are what users read there and in
the docs' table (docs/gen/skips.py writes it from this enum): never rename one.
"""

from __future__ import annotations

from enum import StrEnum

from tracescore.model import ServiceSkip

__all__ = ["SKIP_REASONS", "ConversationSkip"]


class ConversationSkip(StrEnum):
    NO_CONVERSATION = "no_conversation"  # a turn's record without a session id: scored, in no conversation
    RECORDS_PAST_CAP = "records_past_cap"  # turns beyond max_turns in one conversation
    EVICTED = "evicted"  # conversations written early and forgotten past max_conversations (metric only)
    STATE_TOO_LARGE = "state_too_large"  # a state saved without its reasons or documents, or not at all
    INVALID_EVIDENCE = "invalid_evidence"  # an evidence topic message that is no turn's documents


# Every reason `tracescore conversations` counts: its summary's `skipped` and its metric's `reason`.
SKIP_REASONS: tuple[ServiceSkip | ConversationSkip, ...] = (*ServiceSkip, *ConversationSkip)
