"""A pytest helper: assert that a record scores well enough, with the failed claims in the message."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tracescore.model import FAITHFULNESS, FaithfulnessDetails, MetricResult, RagRecord, Verdict
from tracescore.score._evaluate import evaluate
from tracescore.score.judges._protocol import Judge
from tracescore.score.metrics._protocol import Metric

__all__ = ["ScoreAssertionError", "assert_scores"]

_SHOWN = 200


class ScoreAssertionError(AssertionError):
    """A record scored below its minimum; `results` holds every metric's result."""

    def __init__(self, message: str, results: list[MetricResult]) -> None:
        super().__init__(message)
        self.results = results


def assert_scores(
    record: RagRecord | Mapping[str, Any],
    minimums: Mapping[str, float] | None = None,
    *,
    metrics: Sequence[Metric | str] | None = None,
    judge: Judge | None = None,
    column_map: Mapping[str, str] | None = None,
) -> list[MetricResult]:
    """Score `record` and fail when a metric is below its minimum (default: faithfulness >= 0.5) or could
    not be scored. The message lists each failing metric with its reason and the claims that failed with
    their evidence. Scores only the metrics named in `minimums` unless `metrics` is given."""
    __tracebackhide__ = True  # pytest shows the failure at the test's call, not inside this function
    minimums = dict(minimums or {FAITHFULNESS: 0.5})
    results = evaluate(record, list(metrics or minimums), judge, column_map=column_map)
    by_name = {r.metric: r for r in results}
    unknown = sorted(set(minimums) - set(by_name))
    if unknown:
        raise ValueError(f"minimums name metric(s) not scored: {', '.join(unknown)}")
    failures = []
    for name, minimum in minimums.items():
        result = by_name[name]
        if result.score is None:
            failures.append(f"{name}: not scored ({result.status.value}): {result.reason}")
        elif result.score < minimum:
            failures.append(f"{name}: {result.score:.2f} < {minimum:g}" + _explain(result))
    if failures:
        raise ScoreAssertionError(_message(record, failures), results)
    return results


def _explain(result: MetricResult) -> str:
    lines = []
    for claim in FaithfulnessDetails.of(result).claims:
        if claim.verdict is not Verdict.FULLY_SUPPORTED:
            line = f"\n    - [{claim.verdict}] {_cut(claim.claim)}: {claim.reason}"
            if claim.evidence:
                line += f'\n      evidence: "{_cut(claim.evidence)}"'
            lines.append(line)
    if not lines and result.reason:
        lines.append(f"\n    reason: {result.reason}")
    return "".join(lines)


def _message(record: RagRecord | Mapping[str, Any], failures: list[str]) -> str:
    record_id = record.id if isinstance(record, RagRecord) else record.get("id")
    head = f"record {record_id!r} scored too low" if record_id is not None else "record scored too low"
    return head + ":\n  " + "\n  ".join(failures)


def _cut(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "…"
