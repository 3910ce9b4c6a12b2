"""A chat whose app resends only its last turns (a sliding window: LangChain's `trim_messages`, a window
memory, LlamaIndex's `ChatMemoryBuffer` token limit, `history[-6:]`), kept one conversation once its first
turn falls out of the resent history.

An inferred conversation is named by the first pair its follow-ups resent (`history_conversation_id`, computed
by `tracescore consume` with no state). Once the window slides, a follow-up names the conversation its first
resent pair t_j would open, W; nothing in it says that t_j was turn j of a known conversation R. Here they are
joined on the turns topic hop by hop, as a chain of responses is (`_chains`):

* a tail: when R holds the documents of a turn t_{j+1} whose resent history ends with t_j, it writes a tail
  message to W's link, (t_{j+1}, R): in R, t_j is followed by t_{j+1};
* a turn at W whose first two resent pairs are (t_j, t_{j+1}), with a tail (t_{j+1}, R), continues R: its
  records and documents are written again under R (`session_id` R), where it is a turn of R like any other,
  grounded in the turns its history holds; its own documents write the next tail;
* a turn at W is W's own when W holds the documents of the turn its history resent after t_j or of the
  last one it resent (the chat that opened with t_j goes on), or when no tail claimed it for
  `quiet_seconds` after this instance read it (by its partition's stream time): written again under W, as
  it was before windows were joined.

So two consecutive (question, answer) pairs join, never one: two chats that share a greeting ("hi" / "hello")
or a common question and answer share one pair, and a turn joins the chat whose next pair it resent too.
Without `user.id`, two chats that share two consecutive pairs are one conversation (as two that open with the
same pair are); another chat's turns never ground a turn that did not resend them. Until it is decided, a
turn waits (counted nowhere); a window of one pair never joins. Links are saved as chain links are
(`WindowState`, schema version 4), forgotten `forget_seconds` after their last change, at most
`max_conversations` held.

A window that falls to one pair (LlamaIndex's `ChatMemoryBuffer` token limit after a long answer) joins
nothing, but its turns are still grounded in the turns their history holds: each follow-up's documents are
held also where a window starting with its own pair is read (`window_start`, a copy re-keyed by stage 1,
`WINDOW_START_HEADER`), so a later turn whose resent history starts with that pair finds them. The copy is
held for grounding only: it names no turn of that conversation, announces no tail and decides no join; where
two turns of its pair are held there (two chats that share a "thanks" -> "You're welcome!"), it is left out
(`_regrounding`).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Sequence

from tracescore._service import Output
from tracescore.conversations._config import ConversationsConfig
from tracescore.conversations._counts import GroundingCount
from tracescore.conversations._links import Key, LinkBook, digest_of, hold_evidence, hold_record
from tracescore.conversations._stored import (
    WindowState,
    WindowTail,
    WindowTurn,
    encode_key,
    json_bytes,
    window_key,
)
from tracescore.model import EvaluationRecord, TurnEvidence, history_conversation_id

__all__ = [
    "WINDOW_DECIDED_HEADER",
    "WINDOW_OVERLAP",
    "WINDOW_START_HEADER",
    "WINDOW_TAIL_HEADER",
    "Windows",
    "in_window",
    "is_window_start",
    "window_start",
]

# A tail message: in a known conversation, the turn the key names is followed by `next`.
WINDOW_TAIL_HEADER = "tracescore.window.tail"
# A window turn's record or documents written again where it was decided (never held again).
WINDOW_DECIDED_HEADER = "tracescore.window.decided"
# A follow-up's documents held also where a window starting with its own pair is read (`window_start`).
WINDOW_START_HEADER = "tracescore.window.start"
# Consecutive (question, answer) pairs a resent history must share with a known conversation to continue it:
# one is not distinctive (a greeting, a common first question).
WINDOW_OVERLAP = 2
_MAX_TAILS = 16  # tails held per link (two chats without user.id that share a turn: a few)
_DECIDED = ((WINDOW_DECIDED_HEADER, b"1"),)
_TAIL = ((WINDOW_TAIL_HEADER, b"1"),)


def in_window(key: Key, history: Sequence[str], user_id: str | None) -> bool:
    """Whether a turn read at `key` that resent `history` may be a sliding window's (decided here): it resent
    enough pairs, and is under the id its first pair names (not written again under the one it joined)."""
    return len(history) >= WINDOW_OVERLAP and key[1] == history_conversation_id(key[0], user_id, history[0])


def window_start(evidence: TurnEvidence) -> str | None:
    """For a follow-up's documents (an inferred conversation's, its pair's digest known): the id of the
    conversation a history starting with its own pair names, where a later window's turn resending it is
    read; None for another turn's, or where its documents are held there already."""
    if not evidence.history_turns or evidence.turn_digest is None:
        return None
    start = history_conversation_id(evidence.service_name, evidence.user_id, evidence.turn_digest)
    return None if start == evidence.session_id else start


def is_window_start(evidence: TurnEvidence | None) -> bool:
    """Whether `evidence` is the copy `window_start` names: a follow-up's documents held where its own pair's
    window starts, not in the conversation it is a turn of."""
    if evidence is None or not evidence.history_turns or evidence.turn_digest is None:
        return False
    service, user = evidence.service_name, evidence.user_id
    own = history_conversation_id(service, user, evidence.turn_digest)
    first = history_conversation_id(service, user, evidence.history_turns[0])
    return own == evidence.session_id != first


class Windows(LinkBook[WindowState]):
    ID_PREFIX = "window"

    def __init__(
        self,
        config: ConversationsConfig,
        counts: Counter[GroundingCount],
        evidence_headers: tuple[tuple[str, bytes], ...],
        holds: Callable[[Key, str], bool],
    ) -> None:
        """`holds(key, digest)`: whether the conversation `key` holds the documents of a turn of `digest`."""
        super().__init__(config, counts, GroundingCount.WINDOW_LINKS_EVICTED)
        self._holds = holds
        self._evidence_headers = (*evidence_headers, *_DECIDED)
        self._due: set[Key] = set()  # links with a decided turn not written yet
        self._waiting: set[Key] = set()  # links with a turn not decided yet
        self._orphans: list[tuple[Key, WindowTurn]] = []  # turns of links dropped: written as their own
        self._tails: dict[str, Output] = {}  # tails to write

    def open(self) -> int:
        return len(self._due) + len(self._waiting) + len(self._orphans) + len(self._tails)

    # -- apply ------------------------------------------------------------------------------------------
    def take(
        self, key: Key, item: EvaluationRecord | TurnEvidence, partition: int, offset: int, at: int
    ) -> bool:
        """A window turn's record or documents read at `key`; False when applied there as usual (the
        conversation's own), True when taken here (held, or written again where it was decided)."""
        turn = self._turn(key, item.trace_id, item.span_id, item.history_turns, partition, offset, at)
        if turn is None:
            return False
        if isinstance(turn, WindowTurn):
            if isinstance(item, TurnEvidence):
                hold_evidence(turn, item)
            else:
                hold_record(turn, item)
            self._touched(key, turn, partition, offset, at)
        return True

    def _turn(
        self, key: Key, trace_id: str, span_id: str, history: Sequence[str], partition: int, offset: int,
        at: int,
    ) -> WindowTurn | bool | None:  # fmt: skip
        """The held turn to take the message; True: a replay, nothing to do; None: apply it as usual."""
        link = self._links.get(key)
        turn = None if link is None else next(
            (t for t in link.turns if (t.trace_id, t.span_id) == (trace_id, span_id)), None
        )  # fmt: skip
        if link is not None and offset <= link.through:
            return None if turn is None or turn.own else True  # a replay: what was applied, applied again
        if turn is not None:
            return None if turn.own and not (turn.records or turn.evidence) else turn
        following, last = history[1], history[-1]
        if (link is None or not link.tails) and (self._holds(key, following) or self._holds(key, last)):
            return None  # the conversation the history opens holds turns it resent: its own turn
        if link is not None and len(link.turns) >= self.config.max_turns:
            return None  # a pair that opens more turns than a conversation holds: as usual
        link = self._held(key, partition, lambda: WindowState(service=key[0], window_id=key[1]))
        turn = WindowTurn(trace_id=trace_id, span_id=span_id, next=following, last=last)
        link.turns.append(turn)
        if not self._decide(key, link, turn):
            self._waiting.add(key)
        elif turn.own:
            self._changed(key, link, partition, offset, at)
            return None
        return turn

    def _decide(self, key: Key, link: WindowState, turn: WindowTurn) -> bool:
        """Decide `turn`, if it can be: True when it is (now or before)."""
        if turn.decided:
            return True
        roots = {t.root for t in link.tails if t.next == turn.next}
        if self._holds(key, turn.next) or self._holds(key, turn.last) or len(roots) > 1:
            # The chat the pair opened goes on with it: it holds the turn after that pair, or the one just
            # before this (a long chat whose early turns were dropped). Or two chats would claim it.
            turn.own = True
        elif roots:
            [turn.root] = roots
            self.counts[GroundingCount.WINDOW_TURNS_JOINED] += 1
        else:
            return False
        self._due.add(key)
        return True

    def _touched(self, key: Key, turn: WindowTurn, partition: int, offset: int, at: int) -> None:
        link = self._links[key]
        if turn.decided:
            self._due.add(key)
        self._changed(key, link, partition, offset, at)

    def tail(self, key: Key, value: bytes | None, partition: int, offset: int, at: int) -> bool:
        """A tail message read: False when it is not one this service writes."""
        try:
            tail = WindowTail.model_validate_json(value or b"")
        except ValueError:
            return False
        link = self._held(key, partition, lambda: WindowState(service=key[0], window_id=key[1]))
        if offset <= link.through:
            return True  # a replay
        if tail not in link.tails:
            link.tails = [*link.tails, tail][-_MAX_TAILS:]
            self._decide_waiting(key)
        self._changed(key, link, partition, offset, at)
        return True

    def turn_held(self, key: Key, digest: str | None) -> None:
        """The documents of a turn of `digest` now held in the conversation `key`: the turns waiting there
        that resent it after the pair are its own."""
        if digest is not None and key in self._waiting:
            self._decide_waiting(key)

    def _decide_waiting(self, key: Key) -> None:
        link = self._links.get(key)
        if link is None or key not in self._waiting:
            return
        for turn in link.turns:
            self._decide(key, link, turn)
        if all(t.decided for t in link.turns):
            self._waiting.discard(key)
        self._save[key] = self._partition[key]

    def announce(self, evidence: TurnEvidence, topic: str) -> None:
        """`evidence`, held in its conversation: where a window that opens with the pair before it would
        start, a tail says which conversation goes on with it."""
        history, digest = evidence.history_turns, evidence.turn_digest
        if not history or digest is None:
            return
        service = evidence.service_name
        window = history_conversation_id(service, evidence.user_id, history[-1])
        if window == evidence.session_id:
            return  # the pair before it opened this conversation: a window starting there is this one
        value = WindowTail(next=digest, root=evidence.session_id).model_dump_json().encode()
        identity = hashlib.blake2b(json_bytes(["tail", service, window, digest]), digest_size=16).hexdigest()
        key = encode_key((service, window))
        self._tails[identity] = Output(topic, key, value, identity, digest_of(value), _TAIL, verified=False)

    # -- write ------------------------------------------------------------------------------------------
    def outputs(self, topic: str) -> list[Output]:
        """Each decided turn's records and documents not written yet, where it was decided; the tails."""
        out: list[Output] = list(self._tails.values())
        self._writing.clear()
        decided = [
            (key, turn)
            for key in sorted(self._due, key=lambda k: self._links[k].arrival_ms if k in self._links else 0)
            for turn in (self._links[key].turns if key in self._links else ())
            if turn.decided
        ]
        for key, turn in self._orphans:
            turn.own = True
            decided.append((key, turn))
        for key, turn in decided:
            target = turn.root or key[1]
            where = encode_key((key[0], target))
            update = {"session_id": target}
            out += self._held_outputs(
                topic, where, key, turn, target, update, _DECIDED, self._evidence_headers
            )
        self._due.clear()
        self._orphans.clear()
        return out

    def _written_other(self, output: Output) -> None:
        self._tails.pop(output.id, None)

    # -- forget -----------------------------------------------------------------------------------------
    def tick(self, now_of: Callable[[int], int]) -> None:
        """Turns no tail claimed for `quiet_seconds` are their window's own; links forgotten as chains'."""
        quiet_ms = int(self.config.quiet_seconds * 1000)
        for key in list(self._waiting):
            link = self._links[key]
            now = now_of(self._partition[key])
            for turn in link.turns:
                if not turn.decided and not turn.waits_from_ms:
                    # From what this instance read: a turn read again after a restart, or restored, waits
                    # anew (the conversation it continues may still be on its way: hops written since).
                    turn.waits_from_ms = now
                elif not turn.decided and now - turn.waits_from_ms >= quiet_ms:
                    turn.own = True
                    self.counts[GroundingCount.WINDOW_TURNS_APART] += 1
                    self._due.add(key)
                    self._save[key] = self._partition[key]
            if all(t.decided for t in link.turns):
                self._waiting.discard(key)
        super().tick(now_of)

    def _forgotten(self, key: Key, link: WindowState) -> None:
        self._due.discard(key)
        self._waiting.discard(key)
        for turn in link.turns:
            if not turn.decided or turn.records or turn.evidence is not None:
                if not turn.decided:
                    self.counts[GroundingCount.WINDOW_TURNS_APART] += 1
                self._orphans.append((key, turn))  # written as the window's own, never lost

    def _dropped(self, key: Key) -> None:
        self._due.discard(key)
        self._waiting.discard(key)
        self._orphans = [(k, t) for k, t in self._orphans if k != key]

    # -- state ------------------------------------------------------------------------------------------
    def restore(self, partition: int, state: WindowState) -> None:
        key = (state.service, state.window_id)
        if not self._restore(key, partition, state):
            return
        if any(t.decided and (t.records or t.evidence is not None) for t in state.turns):
            self._due.add(key)  # what a crash left unwritten is written now
        if any(not t.decided for t in state.turns):
            self._waiting.add(key)
            for turn in state.turns:
                turn.waits_from_ms = 0

    def restored(self) -> None:
        """After a restore: a turn saved undecided may be decided by what was restored beside it."""
        for key in list(self._waiting):
            self._decide_waiting(key)

    def _state_key(self, key: Key) -> bytes:
        return window_key(*key)
