"""The Metric seam and the helper that runs several metrics on one record."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from tracescore.model import MetricResult, RagRecord, has_question
from tracescore.score.judges._memo import SharedCallsJudge
from tracescore.score.judges._protocol import Judge

__all__ = [
    "Metric",
    "UsesContexts",
    "as_contexts_use",
    "contexts_use",
    "evaluate",
    "evaluate_each",
    "evaluate_record",
    "needing_contexts",
    "question_missing",
    "uses_judge",
]

_log = logging.getLogger("tracescore.score")
# (metric, exception type) already logged with its traceback: a metric that raises on every record (a custom
# metric's bug) is one traceback, not one per record; each result still says it (status=error, its reason).
_failures_logged: set[tuple[str, str]] = set()


class UsesContexts(StrEnum):
    """How a metric uses the retrieved contexts: its `uses_contexts` attribute. A record read from a file
    (or a dict) with no contexts column is not judged by a metric that NEEDS them: its result is
    `not_applicable` naming the column, and a CI gate on the metric counts the record as not scored. A
    metric that reads them IF_PRESENT is scored from the rest (with a warning naming the column)."""

    NO = "no"
    IF_PRESENT = "if_present"  # reads them when there, scores without them (quality)
    NEEDED = "needed"  # scores nothing without them (faithfulness, context relevance)


@runtime_checkable
class Metric(Protocol):
    """Scores one record. Stateless and async: one instance is shared by all concurrent records. A metric
    that reads the retrieved contexts says how with `uses_contexts` (a `UsesContexts`; `True` is short for
    `UsesContexts.NEEDED`; a metric without the attribute reads none), read by `contexts_use`."""

    @property
    def name(self) -> str: ...

    async def score(self, record: RagRecord, judge: Judge) -> MetricResult: ...


def uses_judge(metric: Metric) -> bool:
    """Whether `metric` calls its judge: its `uses_judge` attribute, True without one. A metric that does not
    (a Python metric, a run signal) gives the same result under any judge, so the cascade's LLM judge does
    not score it again (a second record of it, under the LLM judge's name, would read as an LLM's)."""
    return getattr(metric, "uses_judge", True) is not False


def contexts_use(metric: Metric) -> UsesContexts:
    """`metric`'s `uses_contexts`: a `UsesContexts` (or its value), `True` for NEEDED, `False`, None or no
    attribute for NO; ValueError for anything else."""
    return as_contexts_use(getattr(metric, "uses_contexts", None), metric.name)


def as_contexts_use(declared: Any, metric: str) -> UsesContexts:
    """A declared `uses_contexts` (see `contexts_use`) as a UsesContexts."""
    if declared is True:
        return UsesContexts.NEEDED
    if declared is None or declared is False:
        return UsesContexts.NO
    try:
        return UsesContexts(declared)
    except ValueError:
        valid = ", ".join(f"UsesContexts.{u.name}" for u in UsesContexts)
        raise ValueError(
            f"metric {metric!r}: uses_contexts={declared!r}: expected True, False or {valid}"
        ) from None


def needing_contexts(metrics: Sequence[Metric]) -> frozenset[str]:
    """The names of the metrics that need the retrieved contexts (`UsesContexts.NEEDED`). A record whose file
    had no contexts column is not judged by them: a gate counts it, where an empty list (nothing retrieved)
    is the record's own."""
    return frozenset(m.name for m in metrics if contexts_use(m) is UsesContexts.NEEDED)


def question_missing(metric: str, record: RagRecord, judge: Judge, why_needed: str) -> MetricResult | None:
    """The `not_applicable` result of a metric that needs the user's question, on a record without one (it
    was not recorded: faithfulness still checks the answer against the documents); None when it has one."""
    if has_question(record):
        return None
    return MetricResult.not_applicable(
        metric,
        f"the question was not recorded: {why_needed}",
        judge=judge.name,
        details={"question_recorded": False},
    )


async def evaluate_record(record: RagRecord, metrics: Sequence[Metric], judge: Judge) -> list[MetricResult]:
    """Every metric's result for `record`, in `metrics` order, sharing identical judge calls between the
    metrics (see SharedCallsJudge). One broken metric never loses the others' scores."""
    return await evaluate_each(record, metrics, SharedCallsJudge(judge))


# The former name, kept for code written against it; `tracescore.score.evaluate` is the synchronous,
# name-resolving entry point.
evaluate = evaluate_record


async def evaluate_each(record: RagRecord, metrics: Sequence[Metric], judge: Judge) -> list[MetricResult]:
    """The metrics run concurrently on `judge` as given; a metric that raises becomes an ERROR result with
    the exception as its reason."""
    outcomes = await asyncio.gather(*(m.score(record, judge) for m in metrics), return_exceptions=True)
    results = []
    for metric, outcome in zip(metrics, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            if not isinstance(outcome, Exception):
                raise outcome
            _log_failure(metric.name, record.id, outcome)
            outcome = MetricResult.error(
                metric.name,
                f"{type(outcome).__name__}: {outcome}",
                judge=judge.name,
                details={"error_type": type(outcome).__name__},
            )
        results.append(outcome)
    return results


def _log_failure(metric: str, record_id: str, error: Exception) -> None:
    kind = (metric, type(error).__name__)
    if kind in _failures_logged:
        _log.debug("metric %s failed on record %s: %r", metric, record_id, error)
        return
    _failures_logged.add(kind)
    _log.error(
        "metric %s raised %s on record %s; its result says status=error with the exception as its reason "
        "(further %s from this metric are logged at DEBUG)",
        metric, kind[1], record_id, kind[1], exc_info=error,
    )  # fmt: skip
