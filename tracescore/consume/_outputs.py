"""What the loop sends: the records and evaluation spans of each judged interaction and the dead letters,
through the sink; each held in the checkpoint until Kafka acknowledged it, then counted and handed to the
other sinks (`RecordSink`s, `on_evaluation`, the metrics).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from kafka import KafkaProducer
from kafka.errors import KafkaError

from tracescore._kafka import LogOnce
from tracescore._service import close_shares
from tracescore.consume._checkpoint import Checkpoint, OutputNotAcknowledged
from tracescore.consume._judging import Judged
from tracescore.consume._pipeline import DeadLetter
from tracescore.consume._revise import Revision
from tracescore.consume._settings import ConsumerSettings
from tracescore.consume._status import ConsumerStats, StatusLine
from tracescore.consume._stopping import Wait
from tracescore.emit import EvaluationMetrics, KafkaEvaluationSink, KafkaOutputSettings, Output, RecordSink
from tracescore.model import EvaluationRecord, Interaction, MetricResult, MetricStatus, annotator_kind
from tracescore.sample import SkipReason
from tracescore.score.judges import Judge

__all__ = ["EvaluationSink", "Outputs", "default_sink"]

_log = logging.getLogger("tracescore.consume")

# (judge, kind of failure) pairs explained in the log at most: a judge's reasons are its own text.
_MOST_FAILURE_KINDS = 64
# The cascade's skips (above its floor, not sent to the LLM judge): the summary's `not admitted` counts them.
_HELD_BACK = frozenset({SkipReason.UNSELECTED, SkipReason.BUDGET})
_HTTP_STATUS = re.compile(r"HTTP \d{3}")
_KIND_CHARS = 40


def _failure_kind(failed: MetricResult) -> str:
    """What a judge failure is, from a small set whatever its reason says: the exception's class where the
    metric recorded one, the HTTP status, else the reason's start up to its first colon, digits masked and
    cut short (`timeout after # attempts`, `judge refused`): a judge whose reasons name the claim or the
    reply, or count attempts, is still one kind. A judge's own wording may still make new kinds: the kinds
    explained are capped (_MOST_FAILURE_KINDS)."""
    error_type = failed.details.get("error_type")
    if isinstance(error_type, str):
        return error_type[:_KIND_CHARS]
    reason = failed.reason or ""
    status = _HTTP_STATUS.match(reason)
    if status:
        return status.group(0)
    return re.sub(r"\d+", "#", reason.split(":", 1)[0])[:_KIND_CHARS]


# What to do about a model judge's failure, by kind: a 429 or a timeout is the provider's load or quota,
# which checking the address, model and key (a wrong one fails every call) does not help.
_RETRIED = "retried up to TRACESCORE_JUDGE_MAX_RETRIES times (default 3) with backoff first"
_RATE_LIMITED = (
    "; the provider is rate-limiting the judge (its requests or tokens a minute, or its quota), "
    f"{_RETRIED}: lower TRACESCORE_JUDGE_CONCURRENCY (default 8 requests in flight) or "
    "[sampling.llm_budget], or raise the provider's limit; with the cascade, the answer keeps its offline "
    "record"
)
_TIMED_OUT = (
    "; the judge did not answer within TRACESCORE_JUDGE_TIMEOUT_S (default 30 s) a call, "
    f"{_RETRIED}: a slow or overloaded endpoint; raise TRACESCORE_JUDGE_TIMEOUT_S or lower "
    "TRACESCORE_JUDGE_CONCURRENCY. A call timed out may still be billed by the provider, and its tokens are "
    "counted nowhere (no reply came)"
)
_CHECK_SETTINGS = (
    "; when every call fails, check the judge's address (--base-url, TRACESCORE_JUDGE_BASE_URL), model "
    "(--model, TRACESCORE_JUDGE_MODEL) and API key (TRACESCORE_JUDGE_API_KEY)"
)


def _what_to_do(kind: str) -> str:
    """The advice for a model judge's failure of `kind` (`_failure_kind`)."""
    if kind in ("HTTP 429", "RateLimitError"):
        return _RATE_LIMITED
    if kind.lower().startswith(("timeout", "apitimeouterror")):
        return _TIMED_OUT
    return _CHECK_SETTINGS


class EvaluationSink(Protocol):
    """What Outputs needs of `KafkaEvaluationSink`: each call returns the sent messages' `Output`s."""

    truncated: int

    def write(
        self,
        interaction: Interaction,
        results: Sequence[MetricResult],
        start_ns: int,
        selection: Callable[[MetricResult], str | None],
        weighting: Callable[[MetricResult], dict[str, float | str | None]],
        revision: int,
        supersedes: str | None,
    ) -> tuple[list[EvaluationRecord], list[Output]]: ...

    def dead_letter(
        self, topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None,
        headers: Sequence[tuple[str, bytes]], error: str,
    ) -> Output: ...  # fmt: skip

    def flush(self, timeout_s: float) -> None: ...

    def evidence(self, interaction: Interaction, revision: int) -> Output | None: ...


def default_sink(producer: KafkaProducer, settings: ConsumerSettings) -> KafkaEvaluationSink:
    """The records, evaluation spans and dead letters on the configured topics."""
    return KafkaEvaluationSink(
        producer,
        KafkaOutputSettings(
            evaluations_topic=settings.evaluations_topic,
            dlq_topic=settings.dlq_topic,
            spans_topic=settings.spans_out_topic,
            max_message_bytes=settings.max_message_bytes,
            evidence_topic=settings.conversation_evidence_topic,
            evidence_chars=settings.conversation_evidence_chars,
        ),
    )


class Outputs:
    def __init__(
        self,
        sink: EvaluationSink,
        checkpoint: Checkpoint,
        stats: ConsumerStats,
        status: StatusLine,
        metrics_out: EvaluationMetrics,
        *,
        dlq_topic: str,
        on_evaluation: Callable[[EvaluationRecord], object] | None = None,
        sinks: Sequence[RecordSink] = (),
        judges: Sequence[Judge] = (),
    ) -> None:
        self._sink = sink
        # Where each judge's calls go (an LLM judge's base URL), for the failure it explains: a wrong address
        # is the first thing to rule out when every call fails.
        self._addresses = {j.name: url for j in judges if (url := getattr(j, "base_url", None))}
        self._checkpoint = checkpoint
        self._stats = stats
        self._status = status
        self._metrics_out = metrics_out
        self._dlq_topic = dlq_topic
        self._on_evaluation = on_evaluation
        self._sinks = tuple(sinks)
        self._explained = LogOnce(_log, most=_MOST_FAILURE_KINDS)

    def write(self, judged: Judged) -> None:
        """Count one judged interaction and send its outputs; its work waits for their acknowledgements."""
        self._status.judged(time.monotonic() - judged.started)
        self._count(judged)
        scored = judged.scored
        assert scored is not None

        def selection(result: MetricResult) -> str | None:
            return scored.selection if result.judge == scored.llm_judge else None

        records, outputs = self._sink.write(
            judged.interaction,
            scored.results,
            judged.started_ns,
            selection,
            scored.weighting,
            judged.revision.revision,
            judged.revision.supersedes,
        )
        self._checkpoint.scored(judged.work, records, outputs)

    def _count(self, judged: Judged) -> None:
        scored = judged.scored
        assert scored is not None
        failures = [r for r in scored.results if r.status is MetricStatus.ERROR]
        # An interaction whose every metric failed has records, but no score: not counted as scored.
        if failures and len(failures) == len(scored.results):
            self._stats.unscored += 1
        else:
            self._stats.scored += 1
        for failed in failures:
            self._stats.judge_errors += 1
            self._explain_judge_error(failed)
        if scored.selection is not None:
            self._stats.escalated[scored.selection] += 1
        if scored.escalation is not None:
            self._metrics_out.escalation(scored.escalation, judged.interaction.span.service_name)
            if scored.escalation in _HELD_BACK:
                self._stats.not_admitted[scored.escalation] += 1

    def _explain_judge_error(self, failed: MetricResult) -> None:
        """The first failure of each kind per judge, in the log: a count alone does not say that the judge's
        address, model or key is wrong. A flood of failures is a few lines (`_failure_kind`)."""
        reason = (failed.reason or "no reason given").rstrip(".")  # the line goes on after its own period
        kind = _failure_kind(failed)
        # The offline judge has no address, model or key.
        todo = "" if annotator_kind(failed.judge) == "CODE" else _what_to_do(kind)
        address = self._addresses.get(failed.judge)
        at = f" at {address}" if address else ""
        self._explained(
            (failed.judge, kind),
            "judge %s%s could not score %s: %s. Its record says status=error and judge_errors counts it%s "
            "[logged once per judge and kind of error]",
            failed.judge, at, failed.metric, reason, todo,
        )  # fmt: skip

    def evidence(self, turns: Sequence[Revision]) -> list[Output]:
        """The documents of conversation turns, for `tracescore conversations`; their trace's offsets wait
        for them as for its records."""
        sent = [self._sink.evidence(turn.interaction, turn.revision) for turn in turns]
        outputs = [output for output in sent if output is not None]
        self._stats.conversation_evidence += len(outputs)
        return outputs

    def dead_letter(self, dead_letters: Sequence[DeadLetter]) -> None:
        """Each message that could not be read goes to the DLQ; its offset is held until Kafka has it."""
        for dead in dead_letters:
            message = dead.message
            _log.warning(
                "dead-lettered %s[%d]@%d to %s: %s",
                message.topic, message.partition, message.offset, self._dlq_topic, dead.error,
            )  # fmt: skip
            output = self._sink.dead_letter(
                message.topic, message.partition, message.offset, message.key, message.value,
                list(message.headers or ()), str(dead.error),
            )  # fmt: skip
            self._checkpoint.hold({dead.partition: message.offset}, outputs=[output])

    def settle(self) -> None:
        """Work whose outputs are all acknowledged reaches the other sinks (its offsets are finished).
        Raises OutputNotAcknowledged when Kafka refused an output (see Checkpoint.settle)."""
        for work in self._checkpoint.settle():
            self._stats.evaluations += len(work.records)
            for record in work.records:
                self._metrics_out.evaluated(record)
                self._status.recorded(record)
                self._stats.judge_spend.add(record)
                if self._on_evaluation is not None:
                    self._on_evaluation(record)
            if work.records:
                for extra in self._sinks:
                    extra.send(work.records)

    def flush(self, timeout_s: float) -> None:
        """Wait (bounded) for the acknowledgements of what was sent. Raises KafkaTimeoutError past it."""
        self._sink.flush(timeout_s)

    def finish(self, wait: Wait) -> None:
        """On the way out: wait (within `wait`) for the acknowledgements of work already emitted, so its
        offsets can be committed; anything not acknowledged stays uncommitted."""
        if not self._checkpoint.settling:
            return
        try:
            self._sink.flush(wait.s)
        except KafkaError as exc:  # the broker gone: what was acknowledged is still committed below
            _log.warning(
                "outputs not all acknowledged within %s on the way out (%s); their traces are not committed "
                "and are read and scored again on restart (at least once, nothing lost)",
                wait, exc,
            )  # fmt: skip
        try:
            self.settle()
        except OutputNotAcknowledged as exc:
            _log.warning("%s", exc)

    def close(self, wait: Wait) -> None:
        """Close the other sinks within `wait` (what the stop's budget has left): each gets an even share of
        what is left as it starts, so one slow to deliver (Phoenix slow but accepting) does not take the
        others' time nor push the stop past its budget; each counts and says what it could not deliver."""
        shares = close_shares(time.monotonic() + wait.s, len(self._sinks))
        for extra, share in zip(self._sinks, shares, strict=True):
            extra.close(timeout_s=share)
        self._stats.truncated_outputs = self._sink.truncated
