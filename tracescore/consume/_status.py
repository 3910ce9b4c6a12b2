"""What the service is doing, for its operator: counters, a periodic status line, quiet client logs."""

from __future__ import annotations

import logging
import statistics
import time
import warnings
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from tracescore._plural import counted
from tracescore.alert import EstimateWindow
from tracescore.consume._counts import AssemblyCounts
from tracescore.consume._spend import JudgeSpend
from tracescore.emit import LABEL_THRESHOLD
from tracescore.model import EvaluationRecord, ExtractSkip
from tracescore.sample import LiftReading

__all__ = ["ConsumerStats", "RateLimitedLogs", "StatusLine", "describe_lift"]

_log = logging.getLogger("tracescore.consume")
_WINDOW = 100_000  # interactions per route and metric between two lines, at most
_CONFIDENCE = 0.975  # one-sided: each bound of a 95% interval
_LIFT_SHOWN = 10  # routes and shapes whose lift the line shows (the most recently judged)
# What the status line and the closing summary say of `ConsumerStats.read_partly`, by reason.
_PARTLY_READ = {
    ExtractSkip.SESSION_ID_SCRUBBED: "with their session id scrubbed: read as one-turn interactions",
    ExtractSkip.SPAN_EVENTS_DROPPED: (
        "whose spans lost span events past the limits: messages written there not read"
    ),
}


@dataclass
class ConsumerStats:
    messages: int = 0
    spans: int = 0
    traces: int = 0
    interactions: int = 0  # interactions recognised (formerly `rag_spans`)
    without_question: int = 0  # of those, interactions whose question was not recorded (faithfulness only)
    # Of those, interactions scored without part of what they carried, by reason (session_id_scrubbed: a
    # session id Logfire's scrubbing replaced, so the turn is read as a one-turn interaction;
    # span_events_dropped: spans read for their events lost some past the decoder's or the producer's limits).
    read_partly: Counter[str] = field(default_factory=Counter)
    # Interactions with a record the judge gave (a score, or not applicable) for at least one metric; those
    # whose every metric the judge failed on are `unscored`, and each of their failed records counts in
    # `judge_errors` (a count of records, as `evaluations`).
    scored: int = 0
    unscored: int = 0
    sampled_out: int = 0
    evaluations: int = 0
    judge_errors: int = 0
    dead_letters: int = 0
    truncated_outputs: int = 0
    pauses: int = 0  # times the partitions were paused because scoring was full (back-pressure)
    conversation_evidence: int = 0  # conversation turns whose documents went to the evidence topic
    # infer_conversations auto: services this instance learned resend their chat history (inferred since).
    services_learned: int = 0
    # Partitions the group assigned this member over the run, and whether it was ever in a settled generation
    # of its group: in one with none assigned (`given_no_partition`), it was a member beyond the topic's
    # partitions, idle while the others held them all.
    partitions_assigned: int = 0
    given_no_partition: bool = False
    # Interactions the sampling policy did not admit, by reason (rate, filter, thinned, rate_limit), or
    # admitted but kept from the LLM judge (budget).
    not_admitted: Counter[str] = field(default_factory=Counter)
    # Interactions the LLM judge scored too, by why (cascade, baseline).
    escalated: Counter[str] = field(default_factory=Counter)
    # Traces (or interactions in them) not scored, by reason; and by (service, scope, reason) to show whose.
    skipped: Counter[str] = field(default_factory=Counter)
    skipped_by_source: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    # How traces were read, by `AssemblyCount` (late_spans, duplicate_spans, ..., released_<why>).
    assembly: AssemblyCounts = field(default_factory=AssemblyCounts)
    # What the model judges' records cost, by service and selection (the offline judge's cost nothing).
    judge_spend: JudgeSpend = field(default_factory=JudgeSpend)

    def partly_read(self) -> str:
        """` (N with their session id scrubbed: ...)` per reason of `read_partly`; "" without (most runs)."""
        return "".join(f" ({n} {_PARTLY_READ.get(r, r)})" for r, n in sorted(self.read_partly.items()))

    @property
    def rag_spans(self) -> int:
        """Deprecated: `interactions` (it counts interactions of every convention, not spans)."""
        warnings.warn(
            "ConsumerStats.rag_spans is deprecated: use ConsumerStats.interactions",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.interactions

    @property
    def sampling(self) -> Counter[str]:
        """The former name of `not_admitted` (it counts what the policy did not let through)."""
        return self.not_admitted

    @property
    def handled(self) -> int:
        """Interactions dealt with: scored, unscored, sampled out, or skipped with a logged reason."""
        skipped = sum(n for r, n in self.skipped.items() if r != ExtractSkip.NOT_RAG)
        return self.scored + self.unscored + self.sampled_out + skipped


class StatusLine:
    """Logs, every `interval_s`, rates since the last line, lag, work in flight, skips, judge health and the
    estimate per route (both judges, each interaction once, with its 95% interval), how the two judges
    agree on the baseline, and the cascade's lift and split per route and answer shape (`lift`): what an
    operator needs to see that the service keeps up, what it finds and whether targeting pays."""

    def __init__(
        self,
        stats: ConsumerStats,
        interval_s: float,
        clock: Callable[[], float] = time.monotonic,
        *,
        lift: Callable[[], Sequence[LiftReading]] | None = None,
    ):
        self._stats = stats
        self._lift = lift
        self._interval_s = interval_s
        self._clock = clock
        self._last_at = clock()
        self._last = (0, 0, 0)
        self._latencies: deque[float] = deque(maxlen=2000)
        # Per service, route and metric (two services may share a route's name: never one estimate), the mean
        # score and the share of answers the label rule passes (what alerts use by default), so the line and
        # the alerts show the same number.
        self._scores: dict[tuple[str, str, str], tuple[EstimateWindow, EstimateWindow]] = {}

    def judged(self, latency_s: float) -> None:
        self._latencies.append(latency_s)

    def recorded(self, record: EvaluationRecord) -> None:
        key = (record.service_name, record.route, record.metric)
        windows = self._scores.get(key)
        if windows is None:
            windows = self._scores[key] = (EstimateWindow(_WINDOW), EstimateWindow(_WINDOW, signal="label"))
        for window in windows:
            window.add(record)

    def due(self) -> bool:
        return self._interval_s > 0 and self._clock() - self._last_at >= self._interval_s

    def log(self, lag: Mapping[str, int | None], in_flight: int, queued: int, buffered: int) -> None:
        now = self._clock()
        elapsed = max(now - self._last_at, 1e-9)
        s = self._stats
        messages, spans, scored = (s.messages, s.spans, s.scored)
        rates = (
            f"{(messages - self._last[0]) / elapsed:.1f} msg/s, "
            f"{(spans - self._last[1]) / elapsed:.1f} spans/s, "
            f"{(scored - self._last[2]) / elapsed:.2f} scored/s"
        )
        lags = ", ".join(f"{p}={'?' if n is None else n}" for p, n in sorted(lag.items())) or "none assigned"
        skipped = ", ".join(f"{r}={n}" for r, n in sorted((s.skipped + s.not_admitted).items())) or "none"
        escalated = ", ".join(f"{r}={n}" for r, n in sorted(s.escalated.items())) or "none"
        if s.judge_spend.by:  # since the start; said only once a model judge was called
            escalated += f", LLM judge spent {s.judge_spend.describe()}"
        latency = "n/a"
        if self._latencies:
            ordered = sorted(self._latencies)
            p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
            latency = f"mean {statistics.fmean(ordered):.3f}s p95 {p95:.3f}s"
        means = ", ".join(
            _describe(f"{service} {route}", metric, *windows)
            for (service, route, metric), windows in sorted(self._scores.items())
        )
        lift = describe_lift(self._lift() if self._lift is not None else ())
        # Said only when it happens: most apps record their questions.
        unasked = f" ({s.without_question} without a recorded question)" if s.without_question else ""
        unasked += s.partly_read()
        _log.info(
            "status: %s | lag %s | scoring %d, queued %d, traces buffered %d | scored %d%s, unscored %d, "
            "skipped %s, to the LLM judge %s, dead letters %d, judge errors %d, judge latency %s | estimate "
            "since last: %s | cascade lift: %s",
            rates, lags, in_flight, queued, buffered, s.scored, unasked, s.unscored, skipped, escalated,
            s.dead_letters, s.judge_errors, latency, means or "none", lift,
        )  # fmt: skip
        self._last_at = now
        self._last = (messages, spans, scored)
        self._latencies.clear()
        self._scores.clear()


def describe_lift(readings: Sequence[LiftReading]) -> str:
    """The cascade's lift and split of the most recently judged routes and shapes, on one line."""
    text = "; ".join(r.describe() for r in readings[-_LIFT_SHOWN:]) or "none"
    if len(readings) > _LIFT_SHOWN:
        more = counted(len(readings) - _LIFT_SHOWN, "more route and shape", "more routes and shapes")
        text += f"; {more} not shown"
    return text


def _describe(where: str, metric: str, window: EstimateWindow, passing: EstimateWindow) -> str:
    estimate = window.estimate(_CONFIDENCE)
    if estimate is None:
        return f"{where} {metric} no scores"
    shown = min(1.0, max(0.0, estimate.value))
    text = f"{where} {metric} {shown:.2f} (n={estimate.n}) 95% [{estimate.lower:.2f}, {estimate.upper:.2f}]"
    share = passing.estimate(_CONFIDENCE)
    if share is not None:
        text += (
            f", passing {min(1.0, max(0.0, share.value)):.2f} 95% [{share.lower:.2f}, {share.upper:.2f}]"
            " (label rule, as alerts)"
        )
    text += f", {estimate.offline_n} offline + {estimate.llm_n} LLM"
    if not estimate.calibrated:
        text += ", uncalibrated"
    if estimate.excluded:
        text += f", {estimate.excluded} LLM scores without inclusion probability left out"
    agreement = window.agreement(LABEL_THRESHOLD)
    if agreement.pairs:
        recall = "n/a" if agreement.recall is None else f"{agreement.recall:.2f}"
        text += (
            f"; judges agree {agreement.agreement:.2f} on {agreement.pairs} baseline pairs, mean LLM-offline "
            f"{agreement.mean_difference:+.2f}, offline recall {recall} of "
            f"{agreement.llm_failures} LLM-judged failures"
        )
    return text


class RateLimitedLogs(logging.Filter):
    """For a log handler: lets each distinct warning/error template of the `kafka` client loggers through
    once per `every_s`, with a count of what was held back — a broker outage makes kafka-python log the same
    connection error many times a second."""

    def __init__(self, every_s: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._every_s = every_s
        self._clock = clock
        self._last: dict[tuple[str, object], float] = {}
        self._held: Counter[tuple[str, object]] = Counter()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or not record.name.startswith("kafka"):
            return True
        key = (record.name, record.msg)
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self._every_s:
            self._held[key] += 1
            return False
        self._last[key] = now
        if held := self._held.pop(key, 0):
            record.msg = f"{record.msg} [{held} similar messages in the last {self._every_s:.0f}s not shown]"
        return True
