"""What a scored batch adds up to, and the CI gate on it: means, flagged records, judge spend."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tracescore.model import FAITHFULNESS, UNLABELLED_THRESHOLD, MetricResult, MetricStatus, Usage, is_flagged

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
    # Records a judge failed on (status error, not a record with nothing to check), counted by the set of
    # metrics it failed: a gate counts those that touch its own metrics.
    judge_failed: Counter[frozenset[str]] = field(default_factory=Counter)
    # The first invalid input and, per metric, the first judge failure: (record number, "where: why").
    first_invalid: tuple[int, str] | None = None
    first_judge_failure: dict[str, tuple[int, str]] = field(default_factory=dict)

    def add(
        self,
        results: Sequence[MetricResult] | None,
        *,
        metric_names: Sequence[str] = (),
        where: str | None = None,
        error: str | None = None,
    ) -> None:
        """One record's results; None for an input that could not be read, `error` saying why. `where`
        names the record in the gate's reasons ("line 4")."""
        self.records += 1
        for name in metric_names:
            self.scores.setdefault(name, [])
            self.unscored.setdefault(name, 0)
            self.flagged.setdefault(name, 0)
        prefix = f"{where}: " if where else ""
        if results is None:
            self.invalid += 1
            if self.first_invalid is None:
                self.first_invalid = (self.records, prefix + (error or "invalid input"))
            return
        failed = frozenset(r.metric for r in results if r.status is MetricStatus.ERROR)
        if failed:
            self.judge_failed[failed] += 1
        for result in results:
            self.scores.setdefault(result.metric, [])
            self.unscored.setdefault(result.metric, 0)
            self.flagged.setdefault(result.metric, 0)
            why = f"{result.metric}: {result.reason or 'no reason given'}"
            if result.metric in failed and result.metric not in self.first_judge_failure:
                self.first_judge_failure[result.metric] = (self.records, prefix + why)
            if result.score is None:
                self.unscored[result.metric] += 1
                if self.first_unscored is None:
                    self.first_unscored = why
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

    def gate(
        self, fail_under: Mapping[str, float], max_flagged: float | None = None, *, allow_unscored: int = 0
    ) -> list[str]:
        """One line per failed condition of the CI gate; empty when the batch passes. `max_flagged` is a
        count of faithfulness-flagged records (>= 1 or 0) or a share of the scored ones (0 < x < 1). A gate
        also fails when more than `allow_unscored` records were invalid or not scored by a judge failure on
        a gated metric (that line last, with the first reason); no condition given, no gate at all."""
        if allow_unscored < 0:
            raise ValueError(f"allow_unscored={allow_unscored}: expected a count of records, 0 or more")
        if not fail_under and max_flagged is None:
            return []
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
        gated = {*fail_under, *([FLAGGED_METRIC] if max_flagged is not None else [])}
        unscored = self._unscored_for(gated, allow_unscored)
        return failures + ([unscored] if unscored else [])

    def _unscored_for(self, gated: set[str], allowed: int) -> str | None:
        """The gate's line on records it could not judge, when there are more than `allowed`."""
        failed = sum(n for metrics, n in self.judge_failed.items() if metrics & gated)
        count = self.invalid + failed
        if count <= allowed:
            return None
        firsts = [self.first_judge_failure[m] for m in gated if m in self.first_judge_failure]
        firsts += [self.first_invalid] if self.first_invalid else []
        _, first = min(firsts)
        kinds = [f"{self.invalid} invalid"] if self.invalid else []
        kinds += [f"{failed} judge error" + "s" * (failed != 1)] if failed else []
        return (
            f"{count} of {self.records} records not scored ({', '.join(kinds)}), "
            f"more than --allow-unscored {allowed}; the first: {first}"
        )

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
