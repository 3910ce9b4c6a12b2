"""The bookkeeping shared by the links `tracescore conversations` keeps on the turns topic beside its
conversations (a chain of response ids' links, `_chains`; a sliding window's, `_windows`): each link a state
entry of its own on the state topic, saved at the checkpoint after it changed, the turns topic committed no
further than the oldest change not saved; forgotten `forget_seconds` after its last change (by its
partition's stream time), at most `max_conversations` held (the least recently changed dropped, counted)."""

from __future__ import annotations

import hashlib
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from tracescore._service import Output, Saved
from tracescore.conversations._config import ConversationsConfig
from tracescore.conversations._counts import GroundingCount
from tracescore.conversations._index import Partitions
from tracescore.conversations._stored import json_bytes
from tracescore.model import EvaluationRecord, TurnEvidence

__all__ = ["Key", "LinkBook", "evidence_mark", "hold_evidence", "hold_record", "record_mark"]

Key = tuple[str, str]  # (service, link id)


class _Holder(Protocol):
    """A turn held at a link until it is written again elsewhere: its latest records and documents not
    written yet, and the marks of what was."""

    trace_id: str
    span_id: str
    records: list[EvaluationRecord]
    evidence: TurnEvidence | None
    sent: list[str]


Headers = tuple[tuple[str, bytes], ...]


def digest_of(value: bytes) -> str:
    return hashlib.blake2b(value, digest_size=8).hexdigest()


def record_mark(record: EvaluationRecord) -> str:
    return f"record:{record.metric}:{record.judge}:{record.selection}:{record.revision}"


def evidence_mark(evidence: TurnEvidence) -> str:
    return f"evidence:{evidence.revision}"


def hold_record(holder: _Holder, record: EvaluationRecord) -> None:
    """`record` held to be written, unless an older revision read late or one already written."""
    tier = (record.metric, record.judge, record.selection)
    kept = [r for r in holder.records if (r.metric, r.judge, r.selection) == tier]
    if record_mark(record) not in holder.sent and all(r.revision < record.revision for r in kept):
        holder.records = [r for r in holder.records if r not in kept] + [record]


def hold_evidence(holder: _Holder, evidence: TurnEvidence) -> None:
    """`evidence` held to be written, unless an older revision read late or one already written."""
    held = holder.evidence
    if evidence_mark(evidence) not in holder.sent and (held is None or held.revision < evidence.revision):
        holder.evidence = evidence


class _Link(Protocol):
    through: int
    arrival_ms: int

    @property
    def key(self) -> bytes: ...


LinkT = TypeVar("LinkT", bound=_Link)


class LinkBook(Generic[LinkT]):
    """`evicted`: what a link dropped past `max_conversations` counts. `ID_PREFIX` tells its outputs' ids
    from another kind of link's."""

    ID_PREFIX: ClassVar[str]

    def __init__(
        self, config: ConversationsConfig, counts: Counter[GroundingCount], evicted: GroundingCount
    ) -> None:
        self.config = config
        self.counts = counts
        self._evicted = evicted
        self._links: OrderedDict[Key, LinkT] = OrderedDict()  # least recently changed first
        self._partition: dict[Key, int] = {}
        self._partitions = Partitions()
        self._save: dict[Key, int] = {}  # key -> partition; a key no longer held is deleted
        self._unsaved_from: dict[int, int] = {}  # partition -> lowest offset applied and not saved
        self._unsorted = False  # restored links were appended out of order
        self._writing: dict[str, tuple[Key, Any, str]] = {}  # output id -> (link, its turn, mark)

    def __len__(self) -> int:
        return len(self._links)

    def get(self, key: Key) -> LinkT | None:
        return self._links.get(key)

    def _held(self, key: Key, partition: int, new: Callable[[], LinkT]) -> LinkT:
        link = self._links.get(key)
        if link is None:
            link = self._links[key] = new()
            self._partition[key] = partition
            self._partitions.add(partition, key)
        return link

    def _changed(self, key: Key, link: LinkT, partition: int, offset: int, at: int) -> None:
        link.through = max(link.through, offset)
        link.arrival_ms = max(link.arrival_ms, at)
        self._links.move_to_end(key)
        self._save[key] = partition
        self._unsaved_from[partition] = min(self._unsaved_from.get(partition, offset), offset)
        while len(self._links) > self.config.max_conversations:
            self._forget(next(iter(self._links)))
            self.counts[self._evicted] += 1

    def _forgotten(self, key: Key, link: LinkT) -> None:
        """A link no longer held (forgotten or evicted): what the subclass keeps of it goes too."""

    def _dropped(self, key: Key) -> None:
        """A link of a revoked partition dropped (its next owner reads it back)."""

    # -- write ------------------------------------------------------------------------------------------
    def _held_outputs(
        self, topic: str, where: bytes, link: Key, holder: _Holder, target: str,
        record_update: dict[str, Any], record_headers: Headers, evidence_headers: Headers,
    ) -> list[Output]:  # fmt: skip
        """`holder`'s records and documents not written yet, written again under `where` (the conversation
        `target`), `record_update` applied to the records."""
        out = []
        for record in holder.records:
            value = record.model_copy(update=record_update).model_dump_json().encode()
            mark = record_mark(record)
            out.append(self._output(topic, where, value, record_headers, link, holder, mark, target))
        if holder.evidence is not None:
            value = holder.evidence.model_copy(update={"session_id": target}).model_dump_json().encode()
            mark = evidence_mark(holder.evidence)
            out.append(self._output(topic, where, value, evidence_headers, link, holder, mark, target))
        return out

    def _output(
        self, topic: str, key: bytes, value: bytes, headers: Headers, link: Key, holder: _Holder, mark: str,
        target: str,
    ) -> Output:  # fmt: skip
        parts = [self.ID_PREFIX, link[0], link[1], holder.trace_id, holder.span_id, mark, target]
        identity = hashlib.blake2b(json_bytes(parts), digest_size=16).hexdigest()
        self._writing[identity] = (link, holder, mark)
        # Not looked for after a crash: one written again is absorbed where it is read (same revision).
        return Output(topic, key, value, identity, digest_of(value), headers, verified=False)

    def written(self, outputs: Sequence[Output]) -> None:
        for output in outputs:
            writing = self._writing.pop(output.id, None)
            if writing is None:
                self._written_other(output)
                continue
            key, holder, mark = writing
            self._sent(holder, mark)
            if key in self._links:
                self._save[key] = self._partition[key]
        self._writing.clear()

    def _sent(self, holder: Any, mark: str) -> None:
        """What `mark` names of `holder` is written: not written again."""
        if mark.startswith("record:"):
            holder.records = [r for r in holder.records if record_mark(r) != mark]
        elif holder.evidence is not None and evidence_mark(holder.evidence) == mark:
            holder.evidence = None
        holder.sent.append(mark)

    def _written_other(self, output: Output) -> None:
        """An output written that holds no turn of a link (another service part's, or the subclass's own)."""

    # -- forget -----------------------------------------------------------------------------------------
    def tick(self, now_of: Callable[[int], int]) -> None:
        """Links without a change for `forget_seconds` (by their partition's stream time) forgotten."""
        forget_ms = int(self.config.forget_seconds * 1000)
        if self._unsorted:
            self._links = OrderedDict(sorted(self._links.items(), key=lambda item: item[1].arrival_ms))
            self._unsorted = False
        for key, link in list(self._links.items()):
            if now_of(self._partition[key]) - link.arrival_ms < forget_ms:
                break  # the rest changed later
            self._forget(key)

    def _forget(self, key: Key) -> None:
        link = self._links.pop(key)
        partition = self._partition.pop(key)
        self._partitions.discard(partition, key)
        self._save[key] = partition
        self._forgotten(key, link)

    def forget_partitions(self, partitions: Iterable[int]) -> None:
        gone = set(partitions)
        for key in self._partitions.pop(gone):
            del self._links[key], self._partition[key]
            self._dropped(key)
        self._save = {k: p for k, p in self._save.items() if p not in gone}
        for partition in gone:
            self._unsaved_from.pop(partition, None)

    # -- state ------------------------------------------------------------------------------------------
    def _restore(self, key: Key, partition: int, state: LinkT) -> bool:
        """False when a newer state of the link is held already."""
        held = self._links.get(key)
        if held is not None and held.through >= state.through:
            return False  # one already held keeps its own, newer state
        self._links[key] = state
        self._partition[key] = partition
        self._partitions.add(partition, key)
        self._unsorted = True
        return True

    def to_save(self) -> list[Saved]:
        out: list[Saved] = [(p, self._state_key(k), self._links.get(k)) for k, p in self._save.items()]
        self._save.clear()
        self._unsaved_from.clear()
        return out

    def everything(self) -> list[Saved]:
        self._save.clear()
        return [(self._partition[k], link.key, link) for k, link in self._links.items()]

    def _state_key(self, key: Key) -> bytes:
        raise NotImplementedError

    def commit_floors(self, positions: dict[int, int]) -> dict[int, int]:
        return {p: min(offset, self._unsaved_from.get(p, offset)) for p, offset in positions.items()}
