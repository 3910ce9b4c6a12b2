"""Turns of a support chat for the grounding tests, scored by the real offline judge as `tracescore consume`
scores them, and `Harness`: the conversation service's logic without Kafka (stage 1's re-keying, stage 2's
apply, tick, outputs, written and saves), a turn's revised record read back as the evaluations topic would
bring it."""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from kafka.consumer.fetcher import ConsumerRecord

from tracescore.conversations import ConversationsConfig, ConversationStats, ConversationTracker
from tracescore.conversations._grounder import Grounder
from tracescore.conversations._logic import EVIDENCE_HEADER, ConversationLogic, Written
from tracescore.conversations._service import rekeyed
from tracescore.emit import evaluation_record
from tracescore.model import (
    DecodedSpan,
    EvaluationRecord,
    EvidenceDocument,
    FaithfulnessDetails,
    Interaction,
    RagRecord,
    TurnEvidence,
)
from tracescore.score import evaluate
from tracescore.score.judges import Judge
from tracescore.testing.judge_server import default_responder, fenced_data, task_of

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
PRICES = (
    "Aurora Basic costs 9 euros a month, billed monthly.",
    "Aurora Plus costs 19 euros a month and includes phone support.",
)
SUPPORT = (
    "Basic includes email support, answered within two working days; phone support comes only with Plus.",
)
ADD_ON = (
    "The weekend add-on extends support to Saturdays and Sundays and costs the same as the Basic plan.",
)
TURNS = {
    1: ("What does the Basic plan cost?", PRICES, "The Basic plan costs 9 euros a month."),
    2: ("Does it include phone support?", SUPPORT, "No. Phone support comes only with Plus."),
    3: ("And the weekend add-on?", ADD_ON, "The weekend add-on costs 9 euros a month."),
}
INVENTED = "The weekend add-on costs 5 euros a month."
RESTATED = "The Basic plan costs 7 euros a month."


def trace_of(n: int, conversation: str = "c-1") -> str:
    return hashlib.blake2b(conversation.encode(), digest_size=6).hexdigest() + f"{n:020x}"


def interaction(
    n: int, conversation: str = "c-1", user: str | None = "u-1", answer: str | None = None,
    at: datetime | None = None, documents: Sequence[str] | None = None, service: str = "support-chat",
) -> Interaction:  # fmt: skip
    """Turn `n` of `conversation` as extract reads it (its own trace and span)."""
    question, docs, default = TURNS.get(n, TURNS[2])
    started = at or T0 + timedelta(minutes=n)
    span = DecodedSpan(
        trace_id=trace_of(n, conversation), span_id=f"{n:016x}", name="support_turn", service_name=service,
        scope_name="app", attributes={}, end_time_unix_nano=int(started.timestamp() * 1e9) + 10**9,
        start_time_unix_nano=int(started.timestamp() * 1e9),
    )  # fmt: skip
    record = RagRecord(query=question, contexts=tuple(documents or docs), answer=answer or default)
    return Interaction(span=span, record=record, route="/chat", session_id=conversation, user_id=user)


def scored(turn: Interaction, judge: str = "offline", **fields: object) -> EvaluationRecord:
    """Its faithfulness record, judged by the offline judge as consume writes it."""
    [result] = evaluate(turn.record, ["faithfulness"])
    record = evaluation_record(turn, result, None, now=T0 + timedelta(hours=1))
    return record.model_copy(update={"judge": judge, **fields}) if judge != "offline" or fields else record


def evidence_of(turn: Interaction) -> TurnEvidence:
    started = datetime.fromtimestamp(turn.span.start_time_unix_nano / 1e9, UTC)
    texts = turn.record.contexts
    return TurnEvidence(
        trace_id=turn.span.trace_id, span_id=turn.span.span_id, service_name=turn.span.service_name,
        route=turn.route, session_id=turn.session_id or "", user_id=turn.user_id, question=turn.record.query,
        span_started_at=started, documents_total=len(turn.record.contexts), timestamp=started,
        documents=[EvidenceDocument(text=t, kind="retriever", span_id="a" * 16) for t in texts],
    )  # fmt: skip


class Harness:
    """The service's logic on one partition; `feed` is stage 1 then stage 2's apply, `checkpoint` a tick and
    the checkpoint's outputs (the revised records read back, as Kafka brings them to stage 1 again)."""

    # Closed after each test (conftest): a grounder that judged holds an event loop until closed.
    created: ClassVar[list[Harness]] = []

    def __init__(self, llm_judge: Judge | None = None, **config: object) -> None:
        values: dict[str, object] = {"spans_topic": None, "quiet_seconds": 60, **config}
        self.config = ConversationsConfig(**values)  # type: ignore[arg-type]
        self.stats = ConversationStats()
        self.tracker = ConversationTracker(self.config)
        self.skipped: Counter[str] = Counter()
        self.grounder = Grounder(
            self.config, self.stats.grounding, llm_judge=llm_judge, recorded=self.tracker.turns_of
        )
        self.written: list[Written] = []
        self.logic = ConversationLogic(
            self.config, self.tracker, self.stats, skip=self._skip, on_written=self.written.append,
            clock=lambda: T0, grounder=self.grounder,
        )  # fmt: skip
        self.offset = 0
        self.now = T0
        Harness.created.append(self)

    def close(self) -> None:
        self.grounder.close()

    def _skip(self, reason: str, detail: str, count: int = 1) -> None:
        self.skipped[reason] += count

    def feed(
        self, *items: TurnEvidence | EvaluationRecord, arrival: datetime | None = None,
        also: Sequence[tuple[str, bytes]] = (),
    ) -> None:  # fmt: skip
        """`also`: more headers of the documents (a copy stage 1 re-keyed)."""
        for item in items:
            if isinstance(item, TurnEvidence):
                value, headers = item.model_dump_json().encode(), [(EVIDENCE_HEADER, b"1"), *also]
            else:
                value, headers = rekeyed(item, grounding=True), []
            at = int((arrival or self.now).timestamp() * 1000)
            message = ConsumerRecord(
                "turns", 0, 0, self.offset, at, 0, None, value, headers, None, -1, len(value), -1
            )
            self.offset += 1
            self.logic.apply(message, replay=False)

    def checkpoint(
        self, now: datetime | None = None, caught_up: bool = True, found: dict[str, str] | None = None
    ) -> list[EvaluationRecord]:
        """One tick and checkpoint at `now`; the turns' revised records written (then read back)."""
        self.now = now or self.now
        # Read up: the stream time past every change; else short of the changes read.
        read_to = int(self.now.timestamp() * 1000) + 1 if caught_up else 0
        self.logic.tick(self.now, lambda partition: read_to)
        outputs = self.logic.outputs(found or {})
        self.logic.written(outputs, found or {})
        self.logic.to_save()
        revised = [r for w in self.written[-1:] for r in w.revised]
        for record in revised:  # every revision's details hold to the model, `earlier_turns` included
            assert FaithfulnessDetails.model_validate(record.details).earlier_turns is not None
        self.feed(*revised)
        return revised

    def outcome(self, record: EvaluationRecord) -> tuple[int, str, float | None, str | None]:
        """What the conversation tracker counts for `record`'s turn and tier: (revision, status, score,
        label)."""
        conversation = self.tracker.get((record.service_name, record.session_id or ""))
        assert conversation is not None
        outcome = conversation.turns[(record.trace_id, record.span_id)][
            (record.metric, record.judge, record.selection)
        ]
        return outcome[0], outcome[1], outcome[2], outcome[3]


def grounded_in(record: EvaluationRecord) -> list[dict[str, object]]:
    """The earlier-turn sources of a record's claims."""
    return [
        c["evidence_source"]
        for c in record.details.get("claims", [])
        if isinstance(c, dict)
        and isinstance(c.get("evidence_source"), dict)
        and "trace_id" in c["evidence_source"]
    ]


def figures_judge(body: dict[str, Any]) -> dict[str, Any]:
    """The local judge server's LLM judge for these chats: a claim is supported when the context holds each
    of its figures (quoting the sentence that does), else there is no evidence for it."""
    task, data = task_of(body) or "", fenced_data(body)
    if not task.endswith("verdicts"):
        return default_responder(body)
    context = str(data.get("context", ""))
    sentences = [s.strip() for s in re.split(r"(?<=\.)\s+", context) if s.strip()]
    verdicts = []
    for index, claim in enumerate(data.get("claims", [])):
        figures = re.findall(r"\d+", claim)
        quoted = [s for s in sentences if any(re.search(rf"\b{f}\b", s) for f in figures)]
        held = bool(figures) and all(re.search(rf"\b{f}\b", context) for f in figures)
        verdicts.append(
            {
                "claim_index": index,
                "verdict": "FULLY_SUPPORTED" if held else "NO_EVIDENCE",
                "reason": "The context states the figures." if held else "No figure of it in the context.",
                "evidence": " … ".join(quoted[:2]) if held else "",
            }
        )
    return {"verdicts": verdicts}
