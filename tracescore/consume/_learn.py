"""`infer_conversations` auto (the default): infer conversations no app named only for the services whose
traffic shows chats that resend their history, learned per service by each instance from what it reads.

Why learn: inferring writes the documents of every interaction that names no conversation to the evidence
topic (a first turn cannot be told from a one-shot until a later turn resends it), which a one-shot RAG
service would pay for every interaction, for follow-ups it never has. So a service starts as off (its records
and documents as with the setting off) and is switched on once a turn of it is proven a follow-up of a turn
this instance read:

- **The proof**: a turn that resent a (question, answer) pair this instance read as a turn of the same
  service (or named, as the Responses API does, the response that answered one), or a turn whose own pair an
  earlier turn of the service resent (traces of one chat read out of order). Every key is a digest of what
  the app's users asked and were answered, so a prompt's fixed example pairs (a few-shot prompt) prove
  nothing: no interaction answered them. A turn whose own pair its prompt also holds (it answered exactly as
  an example does) is left out, so a one-shot app asked one of its examples never proves a chat either.
- **What a one-shot service pays**: its turns are held and known only while it is watched (`watches`: for
  `hold_seconds` from when the instance first reads it and after each of its turns that resent something);
  past that, the reading of its prompts only.
- **The first conversations**: until its service is learned, each possible turn's documents are held
  (`LearnerBounds`: the newest, for `hold_seconds`, within `hold_chars`); when the service is learned they
  are handed back with the conversation each would have named (`inferred_conversation`), written to the
  evidence topic as the setting on writes them, so the chats that taught it are grounded too. A crash (or a
  stop) in that window loses those documents, never a record; each instance learns on its own.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from tracescore.consume._revise import Revision
from tracescore.extract import Found
from tracescore.model import (
    ChatTurn,
    ContextSource,
    DecodedSpan,
    Interaction,
    RagRecord,
    inferred_conversation,
)

__all__ = ["INFER_AUTO", "ChatLearner", "InferConversations", "LearnerBounds", "with_conversation"]

INFER_AUTO = "auto"
# The setting: on (true), off (false), or learned per service (auto, the default).
InferConversations = bool | Literal["auto"]


@dataclass(frozen=True)
class LearnerBounds:
    """The learner's bounds, per instance: the defaults, in one place."""

    # Turns of unlearned services known by their digests (and response ids), the newest: ~230 bytes each.
    known_turns: int = 100_000
    # Documents (and question and answer) of possible turns held until their service is learned: ~1.6 bytes
    # a character of English text with their objects, about 13 MB at most.
    hold_chars: int = 8_000_000
    # How long a possible turn is held: a chat's follow-up comes within minutes of the turn it follows.
    hold_seconds: float = 300.0


# A held turn, one flat tuple (built for every interaction of a one-shot service: no NamedTuple's call):
# (when, service, characters, its ChatTurn, its span's fields, route, user id, (question, documents, answer),
# its documents' sources, revision, supersedes); `_placed` builds its interaction when its service is learned.
_Held = tuple[Any, ...]
_AT, _SERVICE, _CHARS = range(3)


def _placed(
    at: float, service: str, chars: int, turn: ChatTurn, fields: tuple[Any, ...], route: str,
    user_id: str | None, texts: tuple[str | None, tuple[str, ...], str], sources: tuple[ContextSource, ...],
    revision: int, supersedes: str | None,
) -> Revision[Interaction]:  # fmt: skip
    """A held turn's interaction, as its documents' message needs it, placed in its conversation."""
    trace_id, span_id, name, service, scope, end, parent, start = fields
    span = DecodedSpan(trace_id, span_id, name, service, scope, {}, end, parent, start)
    question, documents, answer = texts
    record = RagRecord(id=f"{trace_id}:{span_id}", query=question, contexts=documents, answer=answer)
    interaction = Interaction(span, record, route, context_sources=sources, user_id=user_id)
    return Revision(with_conversation(interaction, turn), revision, supersedes)


_KNOWN, _RESENT = True, False  # what a key in `_keys` was seen as: a turn's own, or one a follow-up resent


class ChatLearner:
    """Which services resend their chats' history (`learns`), and the documents of their possible turns held
    until then (`hold`, handed back by `learns`)."""

    def __init__(self, bounds: LearnerBounds | None = None, clock: Callable[[], float] = time.monotonic):
        self.bounds = bounds or LearnerBounds()
        self._clock = clock
        self._learned: set[str] = set()
        # (service, key) -> how it was seen, the most recent last.
        self._keys: OrderedDict[tuple[str, str], bool] = OrderedDict()
        self._held: deque[_Held] = deque()
        self.held_chars = 0
        # Service -> until when its possible turns are held and known (`watches`).
        self._watching: dict[str, float] = {}

    def learned(self, service: str) -> bool:
        return service in self._learned

    @property
    def services(self) -> frozenset[str]:
        return frozenset(self._learned)

    def watches(self, service: str, resends: bool) -> bool:
        """Whether `service`'s possible turns are held and known now, given that this one `resends` earlier
        pairs (or names a previous response): from when the instance first reads the service, and for
        `hold_seconds` after each of its turns that resent something (a possible follow-up). A service none
        of whose turns resent anything for that long (a one-shot RAG service) costs only the reading of its
        prompts from then on: a chat's follow-up must come within `hold_seconds` of the turn it follows to
        ground it in the held documents anyway."""
        now, watching = self._clock(), self._watching
        if resends:
            watching[service] = now + self.bounds.hold_seconds
            return True
        until = watching.get(service)
        if until is None:
            until = watching[service] = now + self.bounds.hold_seconds
        return now < until

    def learns(self, service: str, turn: ChatTurn) -> list[Revision[Interaction]] | None:
        """Whether `turn` proves `service` resends its chats (None: not yet, and it is remembered); when it
        does, the service is learned and the held turns of it are handed back, each with its conversation."""
        keys = self._keys
        if not turn.history and turn.previous_response_id is None:  # most turns: a possible first turn
            key = (service, turn.digest)
            if keys.get(key) is _RESENT or (
                turn.response_id is not None and keys.get((service, turn.response_id)) is _RESENT
            ):
                return self._learn(service)
            self._known(key)
            if turn.response_id is not None:
                self._known((service, turn.response_id))
            return None
        follows, known_by = turn.follows, turn.known_by
        if any(key in follows for key in known_by):
            return None  # its own pair resent to it: a fixed example it happened to answer, never a proof
        if any(keys.get((service, key)) is _KNOWN for key in follows) or any(
            keys.get((service, key)) is _RESENT for key in known_by
        ):
            return self._learn(service)
        for key in known_by:
            self._known((service, key))
        for key in follows:
            if keys.get((service, key)) is not _KNOWN:
                keys[service, key] = _RESENT
                keys.move_to_end((service, key))
        while len(keys) > self.bounds.known_turns:
            keys.popitem(last=False)
        return None

    def _known(self, key: tuple[str, str]) -> None:
        keys = self._keys
        if key in keys:
            keys.move_to_end(key)
        keys[key] = _KNOWN
        if len(keys) > self.bounds.known_turns:
            keys.popitem(last=False)

    def _learn(self, service: str) -> list[Revision[Interaction]]:
        self._learned.add(service)
        self._watching.pop(service, None)
        self._forget(service)
        return self._release(service)

    def hold(self, service: str, turn: ChatTurn, read: Found, revision: int, supersedes: str | None) -> None:
        """Hold a possible turn's documents until its service is learned (the oldest let go past the
        bounds): only what its documents' message needs, never the interaction built (every interaction of a
        one-shot service comes here) nor its spans (held for minutes, they would be most of the memory and
        none of the bound)."""
        question, documents, answer = read.texts
        chars = sum(map(len, documents)) + len(question or "") + len(answer)
        held = self._held
        if held and held[0][_AT] < self._clock() - self.bounds.hold_seconds:
            self._expire()
        if chars > self.bounds.hold_chars:
            return
        span = read.span
        fields = (span.trace_id, span.span_id, span.name, service, span.scope_name, span.end_time_unix_nano,
                  span.parent_span_id, span.start_time_unix_nano)  # fmt: skip
        texts, sources = read.texts, read.context_sources
        held.append((self._clock(), service, chars, turn, fields, read.route, read.user_id, texts, sources,
                     revision, supersedes))  # fmt: skip
        self.held_chars += chars
        while self.held_chars > self.bounds.hold_chars:
            self.held_chars -= held.popleft()[_CHARS]

    @property
    def held(self) -> int:
        self._expire()
        return len(self._held)

    def _expire(self) -> None:
        held, oldest = self._held, self._clock() - self.bounds.hold_seconds
        while held and held[0][_AT] < oldest:
            self.held_chars -= held.popleft()[_CHARS]

    def _release(self, service: str) -> list[Revision[Interaction]]:
        self._expire()
        mine = [held for held in self._held if held[_SERVICE] == service]
        if mine:
            self._held = deque(held for held in self._held if held[_SERVICE] != service)
            self.held_chars -= sum(held[_CHARS] for held in mine)
        return [_placed(*held) for held in mine]

    def _forget(self, service: str) -> None:
        """A learned service's keys: not needed any more."""
        for key in [key for key in self._keys if key[0] == service]:
            del self._keys[key]


def with_conversation(interaction: Interaction, turn: ChatTurn) -> Interaction:
    """`interaction` (read with no conversation) placed in the one its chat turn shows, as the setting on
    would have read it."""
    inferred = inferred_conversation(interaction.span.service_name, interaction.user_id, turn)
    return replace(interaction, history=turn.history, turn_digest=turn.digest, **inferred._asdict())
