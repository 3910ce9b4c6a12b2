"""What a scored batch adds up to, and the CI gate on it: means, flagged records, judge spend."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tracescore.model import FAITHFULNESS, UNLABELLED_THRESHOLD, MetricResult, Usage, is_flagged

__all__ = ["FLAGGED_METRIC", "BatchSummary", "parse_fail_under", "parse_max_flagged"]

# The metric whose flags `--max-flagged` counts: a hallucination is a faithfulness failure.
FLAGGED_METRIC = FAITHFULNESS


@dataclass
class BatchSummary:
    """Filled one record at a time (`add`), so a long batch never keeps its results to be summarised."""

    # Set by the caller (--threshold): scores below it count as flagged too; None: each result's label.
    threshold: float | None = None
    records: int = 0
    invalid: int = 0
    scores: dict[str, list[float]] = field(default_factory=dict)
    unscored: dict[str, int] = field(default_factory=dict)
    # Per metric, scored records it flags (`is_flagged`: a bad label such as "hallucinated", or a score
    # below `threshold` when one is set).
    flagged: dict[str, int] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    # The first result left unscored, as `metric: reason`: what a batch that scored nothing says first.
    first_unscored: str | None = None

    def add(self, results: Sequence[MetricResult] | None, *, metric_names: Sequence[str] = ()) -> None:
        """One record's results; None for an input that could not be read."""
        self.records += 1
        for name in metric_names:
            self.scores.setdefault(name, [])
            self.unscored.setdefault(name, 0)
            self.flagged.setdefault(name, 0)
        if results is None:
            self.invalid += 1
            return
        for result in results:
            self.scores.setdefault(result.metric, [])
            self.unscored.setdefault(result.metric, 0)
            self.flagged.setdefault(result.metric, 0)
            if result.score is None:
                self.unscored[result.metric] += 1
                if self.first_unscored is None:
                    self.first_unscored = f"{result.metric}: {result.reason or 'no reason given'}"
            else:
                self.scores[result.metric].append(result.score)
                self.flagged[result.metric] += is_flagged(result, self.threshold)
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

    @property
    def shown_threshold(self) -> float:
        """The threshold the "below" share is taken at: the caller's, else 0.5."""
        return UNLABELLED_THRESHOLD if self.threshold is None else self.threshold

    def below_share(self, metric: str) -> float | None:
        values = self.scores.get(metric) or []
        return sum(v < self.shown_threshold for v in values) / len(values) if values else None

    def flagged_share(self, metric: str) -> float | None:
        values = self.scores.get(metric) or []
        return self.flagged.get(metric, 0) / len(values) if values else None

    def gate(self, fail_under: Mapping[str, float], max_flagged: float | None = None) -> list[str]:
        """One line per failed condition of the CI gate; empty when the batch passes. `max_flagged` is a
        count of faithfulness-flagged records (>= 1 or 0) or a share of the scored ones (0 < x < 1)."""
        failures = []
        if max_flagged is not None:
            flagged, share = self.flagged.get(FLAGGED_METRIC, 0), self.flagged_share(FLAGGED_METRIC)
            if share is None:
                failures.append(
                    f"{FLAGGED_METRIC}: no record could be scored (--max-flagged {max_flagged:g})"
                )
            elif (share > max_flagged) if 0 < max_flagged < 1 else (flagged > max_flagged):
                limit = f"{max_flagged:.0%} of scored" if 0 < max_flagged < 1 else f"{max_flagged:g}"
                failures.append(
                    f"{FLAGGED_METRIC}: {flagged} records flagged ({share:.1%} of scored), more than {limit}"
                )
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
            flagged = self.flagged.get(metric, 0)
            stats = (
                "no score"
                if mean is None
                else f"mean {mean:.3f}, {share:.0%} below {self.shown_threshold:g}, {flagged} flagged"
            )
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


def parse_max_flagged(value: str | None) -> float | None:
    """`--max-flagged`: a whole count ("3") or a share of the scored records ("0.05"); None when unset."""
    if value is None:
        return None
    try:
        parsed = float(value)
    except ValueError:
        parsed = float("nan")
    whole = parsed.is_integer() and "." not in value
    if not (parsed >= 0 and (whole or parsed < 1)):
        raise ValueError(f"--max-flagged {value!r}: expected a count (e.g. 3) or a share below 1 (e.g. 0.05)")
    return parsed
