"""What a scored batch adds up to, and the CI gate on it: means, share below threshold, judge spend."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tracescore.score._types import MetricResult, Usage

__all__ = ["BatchSummary", "parse_fail_under"]


@dataclass
class BatchSummary:
    """Filled one record at a time (`add`), so a long batch never keeps its results to be summarised."""

    threshold: float = 0.5
    records: int = 0
    invalid: int = 0
    scores: dict[str, list[float]] = field(default_factory=dict)
    unscored: dict[str, int] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)

    def add(self, results: Sequence[MetricResult] | None, *, metric_names: Sequence[str] = ()) -> None:
        """One record's results; None for an input that could not be read."""
        self.records += 1
        for name in metric_names:
            self.scores.setdefault(name, [])
            self.unscored.setdefault(name, 0)
        if results is None:
            self.invalid += 1
            return
        for result in results:
            self.scores.setdefault(result.metric, [])
            self.unscored.setdefault(result.metric, 0)
            if result.score is None:
                self.unscored[result.metric] += 1
            else:
                self.scores[result.metric].append(result.score)
            self.usage += result.usage

    @property
    def scored(self) -> dict[str, int]:
        return {name: len(values) for name, values in self.scores.items()}

    @property
    def anything_scored(self) -> bool:
        return any(self.scores.values())

    def mean(self, metric: str) -> float | None:
        values = self.scores.get(metric) or []
        return statistics.fmean(values) if values else None

    def below_share(self, metric: str) -> float | None:
        values = self.scores.get(metric) or []
        return sum(v < self.threshold for v in values) / len(values) if values else None

    def gate(self, fail_under: Mapping[str, float]) -> list[str]:
        """One line per failed condition of the CI gate; empty when the batch passes."""
        failures = []
        for metric, minimum in fail_under.items():
            mean = self.mean(metric)
            if mean is None:
                failures.append(f"{metric}: no record could be scored (--fail-under {metric}={minimum:g})")
            elif mean < minimum:
                failures.append(f"{metric}: mean {mean:.3f} is below {minimum:g}")
        return failures

    def lines(self) -> list[str]:
        """The closing summary, as printed by `tracescore score`."""
        out = [f"{self.records} records ({self.invalid} invalid)"]
        for metric, values in self.scores.items():
            mean = self.mean(metric)
            share = self.below_share(metric)
            stats = "no score" if mean is None else f"mean {mean:.3f}, {share:.0%} below {self.threshold:g}"
            out.append(f"  {metric}: {len(values)} scored, {self.unscored.get(metric, 0)} unscored; {stats}")
        spend = f"judge calls {self.usage.calls}, tokens {self.usage.prompt_tokens} prompt + "
        spend += f"{self.usage.completion_tokens} completion"
        if self.usage.cost_usd:
            spend += f", cost ${self.usage.cost_usd:.4f}"
        out.append("  " + spend)
        return out


def parse_fail_under(specs: Sequence[str]) -> dict[str, float]:
    """`["faithfulness=0.8", ...]` -> {"faithfulness": 0.8}; ValueError with the bad spec otherwise."""
    parsed: dict[str, float] = {}
    for spec in specs:
        metric, sep, value = spec.partition("=")
        try:
            minimum = float(value)
        except ValueError:
            minimum = float("nan")
        if not sep or not metric.strip() or not 0.0 <= minimum <= 1.0:
            raise ValueError(f"--fail-under {spec!r}: expected METRIC=MIN with MIN within 0..1")
        parsed[metric.strip()] = minimum
    return parsed
