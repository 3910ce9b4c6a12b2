"""A conversation record and a conversation alert, from the code `tracescore conversations` and `tracescore
alert` run, fed here without Kafka with the records `tracescore consume` writes for each turn."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tracescore.alert import AlertConfig, AlertEvaluator, RuleConfig
from tracescore.conversations import ConversationsConfig, ConversationTracker
from tracescore.emit import explanation
from tracescore.model import ConversationRecord, EvaluationRecord, RagRecord
from tracescore.score import evaluate

DOCUMENTS = ("The Aurora X2 battery lasts 14 hours on a single charge.", "The Aurora X2 weighs 1.2 kg.")
BATTERY = ("How long does the Aurora X2 battery last?", "The Aurora X2 battery lasts 14 hours.")
WEIGHT = "And how much does it weigh?"
T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def turn(conversation: int, n: int, question: str, answer: str) -> EvaluationRecord:
    """Turn `n` of a conversation, scored by the offline judge, as `tracescore consume` writes its record."""
    [result] = evaluate(RagRecord(query=question, contexts=DOCUMENTS, answer=answer), ["faithfulness"])
    at = T0 + timedelta(minutes=conversation, seconds=20 * n)
    return EvaluationRecord(
        trace_id=f"{conversation:016x}{n:016x}", span_id=f"{n + 1:016x}", service_name="support-chat",
        route="/chat", metric=result.metric, score=result.score, label=result.label, status=result.status,
        reason=explanation(result), judge=result.judge, session_id=f"session-{conversation}",
        timestamp=at + timedelta(seconds=1), span_started_at=at,
    )  # fmt: skip


def conversations(first: int, unfaithful_every: int) -> list[EvaluationRecord]:
    """Twelve conversations of two turns; in every `unfaithful_every`th the second answer invents a weight."""
    weights = {True: "The Aurora X2 weighs 3 kg.", False: "The Aurora X2 weighs 1.2 kg."}
    return [
        record
        for c in range(first, first + 12)
        for record in (turn(c, 0, *BATTERY), turn(c, 1, WEIGHT, weights[c % unfaithful_every == 1]))
    ]


tracker = ConversationTracker(ConversationsConfig())  # quiet_seconds: 900
offsets = iter(range(1_000))


def written(turns: list[EvaluationRecord], now: datetime) -> list[ConversationRecord]:
    """The turns read from the turns topic, then the records of the conversations quiet at `now`."""
    for record in turns:
        arrived = record.timestamp + timedelta(seconds=2)  # when it reached the turns topic
        tracker.apply(record, partition=0, offset=next(offsets), arrival_ms=int(arrived.timestamp() * 1000))
    quiet = tracker.quiet(lambda _: int(now.timestamp() * 1000))
    out = [record for c in quiet for _, record, _ in c.due(0.95, now)]
    for conversation in quiet:
        conversation.written(conversation.due(0.95, now))
    return out


# Twelve conversations, every other one with an unfaithful answer; an hour later all are quiet.
an_hour_later = T0 + timedelta(hours=1)
records = written(conversations(0, unfaithful_every=2), an_hour_later)
flagged = next(record for record in records if record.label == "flagged")
print("--8<-- [start:record]")  # the sections of this output the docs include
print(flagged.model_dump_json(indent=2, exclude={"span_ids", "worst_turn"}))
print("--8<-- [end:record]")

# A rule on the share of conversations without an unfaithful turn: half of them, while 75% of the answers
# are faithful (an answer rule at the same threshold would stay quiet). Then twelve clean conversations.
rule = RuleConfig(
    signal="conversation_label", window_count=12, window_seconds=7200, min_samples=12, warning=0.7,
    critical=None,
)  # fmt: skip
alerts = AlertEvaluator(AlertConfig(rules=[rule]))
print("--8<-- [start:alert]")
half_an_hour_later = an_hour_later + timedelta(minutes=30)
clean = written(conversations(60, unfaithful_every=1_000), half_an_hour_later)
for now, batch in ((an_hour_later, records), (half_an_hour_later, clean)):
    for record in batch:
        key = alerts.add(record)
        for note in alerts.evaluate(key, now) if key else []:
            print(f"{note.state.upper():9} {note.alertname} {note.severity}: {note.summary}")
print("--8<-- [end:alert]")
