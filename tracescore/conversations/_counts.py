"""What `tracescore conversations` counts while grounding a follow-up in earlier turns: its closing summary's
`grounding across turns` line and `ConversationStats.grounding.counts`. The values are what users read there
and in the docs (conversations page, settings reference): never rename one.
"""

from __future__ import annotations

from enum import StrEnum

from tracescore.model import NotRejudgedReason

__all__ = ["GroundingCount"]


class GroundingCount(StrEnum):
    # Outcomes of judging a held turn again.
    REJUDGED = "rejudged"  # judged again with its earlier turns' documents
    GROUNDED = "grounded"  # ... and those supported its claims: a revision written
    UNSUPPORTED = "unsupported"  # ... and still unsupported
    JUDGE_ERRORS = "judge_errors"  # ... and the judge failed
    NOT_REJUDGED_NOT_CAPTURED = "not_rejudged_not_captured"  # see `NotRejudgedReason` (`not_rejudged`)
    NOT_REJUDGED_NO_JUDGE = "not_rejudged_no_judge"
    OTHER_USER_TURNS_LEFT_OUT = "other_user_turns_left_out"  # another user's turns, not evidence
    # An inferred conversation's turns this turn's resent history does not hold: another chat with the same
    # opening, not evidence.
    TURNS_NOT_IN_HISTORY = "turns_not_in_history"
    # A history the model's service keeps (`_chains`): follow-ups joined to their chain of response ids, and
    # those forgotten (forget_seconds) before the chain's first turn was known (its documents never came).
    CHAIN_TURNS_JOINED = "chain_turns_joined"
    CHAIN_TURNS_NOT_JOINED = "chain_turns_not_joined"
    # A sliding window (`_windows`): turns whose resent history no longer holds their chat's first turn joined
    # to the conversation they continue, and those no known conversation claimed (their window's own).
    WINDOW_TURNS_JOINED = "window_turns_joined"
    WINDOW_TURNS_APART = "window_turns_apart"
    # A follow-up's documents held where its pair's window starts (a window fallen to one pair), left out of a
    # turn's grounding there: another turn of that pair is held too (two chats share it).
    WINDOW_PAIRS_SHARED = "window_pairs_shared"
    # Cuts: each bound's drops.
    RECORD_TOO_LARGE = "record_too_large"  # a revision too large to write
    TURNS_PAST_CAP = "turns_past_cap"  # turns beyond max_turns in one conversation
    DOCUMENTS_DROPPED = "documents_dropped"  # documents past evidence_chars in one conversation
    EVIDENCE_EVICTED = "evidence_evicted"  # conversations' turns dropped past max_evidence_chars
    FORGOTTEN = "forgotten"  # conversations forgotten forget_seconds after their last turn
    CHAIN_LINKS_EVICTED = "chain_links_evicted"  # links of response chains dropped past max_conversations
    WINDOW_LINKS_EVICTED = "window_links_evicted"  # links of sliding windows dropped past max_conversations

    @classmethod
    def not_rejudged(cls, why: NotRejudgedReason) -> GroundingCount:
        """The count of turns not judged again for `why` (a member per `NotRejudgedReason`)."""
        return cls(f"not_rejudged_{why.value}")
