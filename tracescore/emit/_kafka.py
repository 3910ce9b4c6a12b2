"""The Kafka side of emit: evaluation records, evaluation spans and dead letters, each sized to fit.

Every write returns `Output`s: the Kafka future of what was sent, and what to send instead if Kafka still
rejects it as too large (a small explained record), so the caller can wait for acknowledgements before it
commits input offsets, and no output, however large its input, can stop the service.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kafka import KafkaProducer
from kafka.errors import KafkaError, MessageSizeTooLargeError
from pydantic import BaseModel, Field

from tracescore._kafka_config import SPANS_TOPIC, max_message_bytes_field
from tracescore.emit._evidence import EVIDENCE_CHARS, turn_evidence
from tracescore.emit._fit import clip, fit_record
from tracescore.emit._records import evaluation_record
from tracescore.emit._spans import evaluation_span
from tracescore.export import encode_trace_messages
from tracescore.model import EVALUATIONS_TOPIC, EvaluationRecord, Interaction, MetricResult

__all__ = ["DLQ_TOPIC", "KafkaEvaluationSink", "KafkaOutputSettings", "Output"]

_log = logging.getLogger("tracescore.emit")

# Marks our own evaluation-span messages, so a consumer reading them back skips them without decoding.
EVALUATION_SPANS_HEADER = "tracescore.evaluation-spans"
# Where the messages that could not be decoded go, with why.
DLQ_TOPIC = "tracescore.dlq"


class KafkaOutputSettings(BaseModel):
    evaluations_topic: str = EVALUATIONS_TOPIC
    dlq_topic: str = DLQ_TOPIC
    spans_topic: str = SPANS_TOPIC
    max_message_bytes: int = max_message_bytes_field("Largest output message; bigger records are cut to fit.")
    dlq_prefix_bytes: int = Field(
        default=64 * 1024, ge=0, description="Kept of a dead letter too big to copy."
    )
    # A conversation turn's documents for `tracescore conversations`; None: not written.
    evidence_topic: str | None = None
    evidence_chars: int = Field(default=EVIDENCE_CHARS, ge=1_000)


@dataclass
class Output:
    """One message sent: its Kafka future, what it is, and the smaller message to send if Kafka rejects it
    for its size (None: nothing smaller would say more)."""

    future: Any
    what: str
    fallback: Callable[[], Output] | None = None
    # May be dropped (with a warning) if Kafka rejects it for its size: evaluation spans, whose content the
    # records carry too. A record or dead letter never is.
    droppable: bool = False

    @property
    def done(self) -> bool:
        return bool(self.future.is_done)

    @property
    def error(self) -> Exception | None:
        """Why Kafka did not acknowledge it (None while pending or once acknowledged)."""
        return self.future.exception if self.future.is_done and self.future.failed() else None

    @property
    def too_large(self) -> bool:
        return isinstance(self.error, MessageSizeTooLargeError)


class KafkaEvaluationSink:
    """Writes the results of one interaction (records + evaluation spans) and dead letters."""

    def __init__(self, producer: KafkaProducer, settings: KafkaOutputSettings) -> None:
        self._producer = producer
        self.settings = settings
        self.truncated = 0

    def write(
        self,
        interaction: Interaction,
        results: Sequence[MetricResult],
        start_ns: int,
        selection: Callable[[MetricResult], str | None] = lambda _: None,
        weighting: Callable[[MetricResult], dict[str, float | str | None]] = lambda _: {},
        revision: int = 0,
        supersedes: str | None = None,
    ) -> tuple[list[EvaluationRecord], list[Output]]:
        """Records and evaluation spans for `results`; `selection` says, per result, why it was scored
        (cascade / baseline / uniform for an LLM judge behind the sampling policy), `weighting` the record's
        `inclusion_probability`, `offline_score`, `offline_label` and `targeted_share` (LLM judge behind the
        policy); `revision`, which revision of the interaction this is (late spans changed it) and the key
        of the one it supersedes."""
        records, spans, outputs = [], [], []
        for result in results:
            chosen = selection(result)
            span = evaluation_span(
                interaction, _bounded(result), start_ns=start_ns, selection=chosen, revision=revision
            )
            spans.append(span)
            record = evaluation_record(
                interaction,
                result,
                format(span.context.span_id, "016x"),
                selection=chosen,
                revision=revision,
                supersedes=supersedes,
                **weighting(result),
            )
            records.append(record)
            outputs.append(self._record(record))
        for key, value in encode_trace_messages(spans):
            headers = [(EVALUATION_SPANS_HEADER, b"1")]
            what = f"evaluation spans of trace {interaction.span.trace_id}"
            output = self._send(self.settings.spans_topic, key, value, headers, what=what)
            output.droppable = True
            outputs.append(output)
        return records, outputs

    def dead_letter(
        self, topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None,
        headers: Sequence[tuple[str, bytes]], error: str,
    ) -> Output:  # fmt: skip
        value = value or b""
        source = f"{topic}[{partition}]@{offset}"
        ours = [("tracescore.error", clip(error, 2000).encode()), ("tracescore.source", source.encode())]
        theirs = [(k, v[:4096]) for k, v in list(headers)[:64]]
        budget = self.settings.max_message_bytes - sum(len(k) + len(v) for k, v in (*ours, *theirs)) - 1024
        if len(value) > budget:
            # Too big to copy: keep a prefix and say how big it was, so it can still be found and judged.
            kept = value[: max(0, min(self.settings.dlq_prefix_bytes, budget))]
            ours += [("tracescore.original-size", str(len(value)).encode()), ("tracescore.truncated", b"1")]
            value = kept
        return self._send(
            self.settings.dlq_topic, key, value, [*ours, *theirs], what=f"dead letter of {source}"
        )

    def evidence(self, interaction: Interaction, revision: int) -> Output | None:
        """The documents of a conversation turn (None without a conversation id, or with no evidence topic),
        whether or not it is scored: a later turn may rest on them."""
        topic = self.settings.evidence_topic
        if topic is None or (interaction.session_id or interaction.opens_conversation) is None:
            return None
        evidence = turn_evidence(interaction, self.settings.evidence_chars, revision)
        assert evidence is not None
        value = evidence.model_dump_json().encode()
        what = f"documents of conversation turn {interaction.span.trace_id}"
        return self._send(topic, interaction.span.trace_id.encode(), value, [], what=what)

    def _record(self, record: EvaluationRecord) -> Output:
        value, cut = fit_record(record, self.settings.max_message_bytes)
        if cut:
            self.truncated += 1
        key = record.trace_id.encode()

        def smaller() -> Output:
            # Kafka rejected even the fitted record (a topic with a lower max.message.bytes): say so in
            # the smallest record that still tells which span and metric were scored.
            note = record.model_copy(
                update={
                    "details": {"truncated": {"rejected_bytes": len(value), "details_dropped": True}},
                    "reason": clip(record.reason or "", 200) or None,
                }
            )
            return self._send(
                self.settings.evaluations_topic, key, note.model_dump_json().encode(), [], what="record (cut)"
            )

        what = f"record {record.metric} of {record.span_id}"
        return self._send(self.settings.evaluations_topic, key, value, [], what=what, fallback=smaller)

    def _send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes,
        headers: list[tuple[str, bytes]],
        what: str,
        fallback: Callable[[], Output] | None = None,
    ) -> Output:
        try:
            future = self._producer.send(topic, key=key, value=value, headers=headers)
        except KafkaError as exc:
            # kafka-python raises some rejections (too large for max.request.size, metadata timeouts) from
            # send() itself; they become failed outputs like any other, never an exception in the loop.
            return Output(_Failed(exc), what, fallback)
        return Output(future, what, fallback)

    def flush(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        self._producer.flush(timeout=max(0.0, deadline - time.monotonic()))


class _Failed:
    """A failed kafka-python Future look-alike (`is_done`, `exception`, `failed()`) for a send that raised."""

    def __init__(self, exc: Exception) -> None:
        self.exception = exc
        self.is_done = True

    def failed(self) -> bool:
        return True

    def succeeded(self) -> bool:
        return False


def _bounded(result: MetricResult) -> MetricResult:
    # Span attributes travel with every span export: keep the reason short there (the record has it whole).
    if result.reason and len(result.reason) > 2000:
        return result.model_copy(update={"reason": clip(result.reason, 2000)})
    return result
