"""A conversation inferred from the history an app resends, where the app named none (no `session.id`, no
thread id): the words both sides agree on, so that extract (which reads a turn's history), consume (which
writes its records and documents) and `tracescore conversations` (which grounds a follow-up) compute the
same ids without sharing any state.

A turn is known by the digest of its (question, answer) pair (`turn_digest`); a follow-up's history, by the
digests of the (question, answer) pairs its prompt resends. The conversation is named by its first pair:
`history_conversation_id` of the service, the end user (where recorded) and the first pair's digest is
computable at turn 1 from its own question and answer and at turn N from the first pair of its history, on
any instance, so conversations route by key as named ones do.

A history the model's service keeps (the OpenAI Responses API: each request names the previous response,
`previous_response_id`, and resends nothing) is a chain of response ids: a turn names the one before it, never
the first. `response_chain_id` of a turn's own response id is the id of the chain that turn would open;
`tracescore conversations` joins the chain hop by hop and names it by its first turn's
(`conversation_source` `response_chain`)."""

from __future__ import annotations

import hashlib
from enum import StrEnum
from typing import NamedTuple

__all__ = [
    "HISTORY_ID_PREFIX",
    "HISTORY_TURNS_KEPT",
    "RESPONSE_CHAIN_ID_PREFIX",
    "RESPONSE_ID_PREFIX",
    "ChatTurn",
    "ConversationSource",
    "InferredConversation",
    "history_conversation_id",
    "inferred_conversation",
    "response_chain_id",
    "turn_digest",
]

# An inferred id says so, and cannot be mistaken for an id an app named (which is never rewritten).
HISTORY_ID_PREFIX = "history:"
RESPONSE_CHAIN_ID_PREFIX = "responses:"
# What the OpenAI Responses API's response ids start with (its conversations' ids, `conv_`, are named ones).
RESPONSE_ID_PREFIX = "resp_"
_DIGEST_BYTES = 12
# A record names at most this many of the pairs its prompt resent, the most recent: a prompt of any length
# gives a record of bounded size (~27 bytes a digest), and a follow-up is grounded in its nearest turns first.
HISTORY_TURNS_KEPT = 200


# Words of the evaluation record's format (`conversation_source`): readers refuse one they do not know, so a
# new one is a change of the format.
class ConversationSource(StrEnum):
    """Where a record's conversation id came from."""

    NAMED = "named"  # the app, the producer or the tracescore SDK named it (session.id, a thread id)
    HISTORY = "history"  # inferred from the question/answer history the app resent in the prompt
    RESPONSE_CHAIN = "response_chain"  # joined from the chain of response ids the model's service keeps


def _digest(*parts: str) -> str:
    raw = "\x1f".join(parts).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(raw, digest_size=_DIGEST_BYTES).hexdigest()


def turn_digest(question: str, answer: str) -> str:
    """The digest of one (question, answer) pair, blanks collapsed: a turn's own, or one its follow-up
    resent (a history keeps the texts the app was given, the spacing may differ)."""
    return _digest(" ".join(question.split()), " ".join(answer.split()))


def history_conversation_id(service: str, user_id: str | None, first_turn: str) -> str:
    """The id of the conversation whose first turn's digest is `first_turn`, of `service` and `user_id`."""
    return HISTORY_ID_PREFIX + _digest(service, user_id or "", first_turn)


def response_chain_id(service: str, response_id: str) -> str:
    """The id of the chain a turn of `service` whose answer is `response_id` would open (its first turn's)."""
    return RESPONSE_CHAIN_ID_PREFIX + _digest(service, response_id)


class ChatTurn(NamedTuple):
    """What a turn no app named shows of its chat, read from its trace (extract's `read_turn`): the digest of
    its own (question, answer), those of the pairs its prompt resent (oldest first; none for a possible first
    turn), and, where nothing was resent, the responses the model's service keeps (the one that answered and
    the one the request named before it)."""

    digest: str
    history: tuple[str, ...] = ()
    response_id: str | None = None
    previous_response_id: str | None = None

    @property
    def follows(self) -> tuple[str, ...]:
        """What shows the turn is not its chat's first: the pairs it resent, or the response it named."""
        if self.history:
            return self.history
        return () if self.previous_response_id is None else (self.previous_response_id,)

    @property
    def known_by(self) -> tuple[str, ...]:
        """What a later turn of its chat names it by: its pair, and the response that answered it."""
        return (self.digest,) if self.response_id is None else (self.digest, self.response_id)


class InferredConversation(NamedTuple):
    """Where a turn no app named belongs (`inferred_conversation`): a follow-up's conversation
    (`session_id`, `conversation_source`), or the one a possible first turn would open (its documents',
    never its records'), with the response ids a chain the model's service keeps is joined by."""

    session_id: str | None
    conversation_source: ConversationSource | None
    opens_conversation: str | None
    response_id: str | None
    previous_response_id: str | None


def inferred_conversation(service: str, user_id: str | None, turn: ChatTurn) -> InferredConversation:
    """The rule, one for extract (which sets it on a turn as it reads it) and consume (which sets it on a
    turn it held before it knew the service resends its chats): a turn that resent pairs is in the
    conversation its first pair opened; one that resent none may open one, or follow a response the model's
    service keeps (its documents then go with the chain its own response would open)."""
    opened = history_conversation_id(service, user_id, turn.history[0] if turn.history else turn.digest)
    if turn.history:
        return InferredConversation(opened, ConversationSource.HISTORY, None, None, None)
    own, previous = turn.response_id, turn.previous_response_id
    if own is not None and previous is not None:
        opened = response_chain_id(service, own)
    return InferredConversation(None, None, opened, own, previous)
