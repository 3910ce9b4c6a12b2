"""Conversations: the turns' evaluation records -> one record per conversation when it goes quiet.

`ConversationService` (`tracescore conversations`) gathers the records of a conversation's turns (its
interactions sharing a `session_id`) from every scoring consumer of the group and writes a
`ConversationRecord` per metric and judge tier once no turn arrived for `quiet_seconds`; a later turn
revises it. `ConversationTracker` is the same logic without Kafka. `ConversationSkip` names what it alone
skips (beside `tracescore.model.ServiceSkip`), `GroundingCount` what grounding across turns counts
(`ConversationStats.grounding.counts`).
"""

from tracescore.conversations._config import (
    ConversationsConfig,
    ConversationsConfigError,
    load_conversations_config,
)
from tracescore.conversations._counts import GroundingCount
from tracescore.conversations._service import ConversationService, ConversationStats
from tracescore.conversations._skips import SKIP_REASONS, ConversationSkip
from tracescore.conversations._state import Conversation, wilson
from tracescore.conversations._tracker import ConversationTracker, key_of

__all__ = [
    "SKIP_REASONS",
    "Conversation",
    "ConversationService",
    "ConversationSkip",
    "ConversationStats",
    "ConversationTracker",
    "ConversationsConfig",
    "ConversationsConfigError",
    "GroundingCount",
    "key_of",
    "load_conversations_config",
    "wilson",
]
