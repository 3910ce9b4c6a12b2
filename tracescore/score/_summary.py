"""What a scored batch adds up to, and the CI gate on it: means, flagged records, judge spend."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tracescore._plural import counted
from tracescore.model import (
    FAITHFULNESS,
    UNLABELLED_THRESHOLD,
    FaithfulnessFindings,
    MetricResult,
    MetricStatus,
    Usage,
    annotator_kind,
    is_flagged,
)
from tracescore.score._baseline import CONFIDENCE, Baseline, Comparison, record_key, share_interval

__all__ = [
    "FLAGGED_METRIC",
    "BatchSummary",
    "GateCondition",
    "GateFailure",
    "as_parameter",
    "parse_fail_under",
    "parse_max_flagged",
    "parse_share",
]

# The metric whose flags `--max-flagged` counts: a hallucination is a faithfulness failure.
FLAGGED_METRIC = FAITHFULNESS
# A long answer to the offline judge: each claim is one more chance of a false flag. On the labelled dev
# summaries it flagged 10% of faithful answers of 1-2 claims, 35-45% of those of 3 or more (about half on
# summaries nobody tuned on) and scored them 0.55 on average (docs/offline/judges.md, "Longer answers, more
# false flags").
LONG_ANSWER_CLAIMS = 3


class GateCondition(StrEnum):
    """A condition of the CI gate, by the name of `BatchSummary.gate`'s parameter that sets it (UNIQUE_IDS:
    set by any condition, no parameter of its own)."""

    FAIL_UNDER = "fail_under"
    MAX_FLAGGED = "max_flagged"
    ALLOW_UNSCORED = "allow_unscored"
    BASELINE = "baseline_margin"  # with `baseline`: the rise allowed against it
    UNIQUE_IDS = "unique_ids"


@dataclass(frozen=True)
class GateFailure:
    """One failed condition of the gate, as data: each caller words it with its own name for the condition
    (`words`), the library as its parameter (`str()`), `tracescore score` as its flag."""

    condition: GateCondition
    # The condition as given: the metric's minimum mean, the flags allowed, the records allowed unscored.
    limit: float
    metric: str | None = None  # the metric it gates (None for allow_unscored)
    # What the batch has: the mean, the flagged records or the records not scored; None: no record was scored.
    found: float | None = None
    share: float | None = None  # max_flagged: the flagged share of the scored records
    # allow_unscored: the records in the batch, the ones not scored by why, and the first one's reason.
    records: int = 0
    invalid: int = 0
    judge_errors: int = 0
    no_contexts: int = 0
    first: str | None = None
    # baseline_margin: the runs compared, record by record.
    comparison: Comparison | None = None

    def words(self, name: Callable[[GateFailure], str]) -> str:
        """The line that says what failed, the condition written by `name` (e.g. `as_parameter`)."""
        if self.condition is GateCondition.UNIQUE_IDS:
            others = int(self.found or 0) - 1
            more = f"; {counted(others, 'other id')} too" if others else ""
            return f"{self.first}{more}: {REPEATED_ID_RISK}"
        if self.condition is GateCondition.ALLOW_UNSCORED:
            kinds = [
                phrase
                for count, phrase in (
                    (self.invalid, f"{self.invalid} invalid"),
                    (self.judge_errors, counted(self.judge_errors, "judge error")),
                    (self.no_contexts, f"{self.no_contexts} without a contexts column"),
                )
                if count
            ]
            return (
                f"{self.found:g} of {counted(self.records, 'record')} not scored ({', '.join(kinds)}), "
                f"more than {name(self)}; the first: {self.first}"
            )
        if self.comparison is not None:
            if self.found is None:
                return f"{self.comparison.words()} ({name(self)})"
            return f"{self.comparison.words()}: a rise above {name(self)} even at the interval's lower end"
        if self.found is None:
            return f"{self.metric}: no record could be scored ({name(self)})"
        if self.condition is GateCondition.FAIL_UNDER:
            return f"{self.metric}: mean {self.found:.3f} is below {self.limit:g}"
        # :g of the percentage, not :.0%: a limit of 0.5% was said "more than 0% of scored".
        limit = f"{self.limit * 100:g}% of scored" if _is_share(self.limit) else f"{self.limit:g}"
        flagged = counted(self.found, "record")
        return f"{self.metric}: {flagged} flagged ({self.share:.1%} of scored), more than {limit}"

    def __str__(self) -> str:
        return self.words(as_parameter)


# Why a gate refuses a batch whose records repeat an id: what a user reads after the ids repeated.
REPEATED_ID_RISK = (
    "a gate counts each record by its id (a copy weighs twice, and runs are compared by id): give each "
    "record its own id"
)
# Records named on the summary's line about repeated ids.
_REPEATS_SHOWN = 3


def as_parameter(failure: GateFailure) -> str:
    """The failed condition as `BatchSummary.gate` is given it: `fail_under={'faithfulness': 0.8}`."""
    if failure.condition is GateCondition.FAIL_UNDER:
        return f"fail_under={{{failure.metric!r}: {failure.limit:g}}}"
    return f"{failure.condition}={failure.limit:g}"


def _is_share(max_flagged: float) -> bool:
    """`max_flagged` below 1 is a share of the scored records; 0 and up from 1, a count."""
    return 0 < max_flagged < 1


@dataclass
class BatchSummary:
    """Filled one record at a time (`add`), so a long batch never keeps its results to be summarised."""

    # Set by the caller (--threshold): scores below it count as flagged too; None: each result's label.
    threshold: float | None = None
    # Set by the caller (`needing_contexts`): the metrics that need the retrieved contexts; a record no
    # contexts column was found for (`add`'s `no_contexts`) is not judged by them.
    needs_contexts: frozenset[str] = frozenset()
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
    # Per metric, the first record it left unscored, as "where: reason": what its summary line says when it
    # scored nothing.
    first_unscored_by_metric: dict[str, str] = field(default_factory=dict)
    # Records read but not judged, counted by (the metrics a judge failed on: status error, not a record with
    # nothing to check; the metrics that needed the contexts column the record lacked): a gate counts those
    # that touch its own metrics.
    unjudged: Counter[tuple[frozenset[str], frozenset[str]]] = field(default_factory=Counter)
    # The first invalid input and, per metric, the first record it did not judge: (number, "where: why").
    first_invalid: tuple[int, str] | None = None
    first_unjudged: dict[str, tuple[int, str]] = field(default_factory=dict)
    # Each record's faithfulness flag, by `record_key` (None: not scored): compared with a baseline's.
    flags: dict[str, bool | None] = field(default_factory=dict)
    # Each record id (`add`'s record_id) -> where it was read, every place for an id read more than once:
    # one entry per id, so a batch keeps its ids (not its results) to tell a repeated one.
    ids: dict[str, list[str]] = field(default_factory=dict)
    # Faithfulness scores the offline judge gave answers of LONG_ANSWER_CLAIMS or more claims: where at
    # least half the batch is such, its flagged share and mean are the judge's level more than the answers'.
    long_offline: int = 0

    def add(
        self,
        results: Sequence[MetricResult] | None,
        *,
        metric_names: Sequence[str] = (),
        where: str | None = None,
        error: str | None = None,
        no_contexts: str | None = None,
        record_id: str | None = None,
    ) -> None:
        """One record's results; None for an input that could not be read, `error` saying why. `where`
        names the record in the gate's reasons ("line 4"); `no_contexts`, set when the record had no
        contexts column, says so (the reader's ReadRow.no_contexts): the metrics that need them did not
        judge it. `record_id`, the record's id: one read twice fails a gate (`repeated_ids`)."""
        self.records += 1
        place = where or f"record {self.records}"
        if record_id is not None:
            self.ids.setdefault(record_id, []).append(place)
        key = record_key(record_id, place)
        self.flags[key] = None
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
        blind = frozenset(r.metric for r in results if no_contexts and r.metric in self.needs_contexts)
        if failed or blind:
            self.unjudged[failed, blind] += 1
        for result in results:
            self.scores.setdefault(result.metric, [])
            self.unscored.setdefault(result.metric, 0)
            self.flagged.setdefault(result.metric, 0)
            why = f"{result.metric}: {result.reason or 'no reason given'}"
            if result.metric in failed | blind:
                self.first_unjudged.setdefault(result.metric, (self.records, prefix + why))
            if result.score is None:
                self.unscored[result.metric] += 1
                if self.first_unscored is None:
                    self.first_unscored = why
                self.first_unscored_by_metric.setdefault(
                    result.metric, prefix + (result.reason or "no reason given")
                )
            else:
                self.scores[result.metric].append(result.score)
                flagged = is_flagged(result, self.threshold)
                self.flagged[result.metric] += flagged
                if result.metric == FLAGGED_METRIC:
                    self.flags[key] = flagged
                    self.long_offline += is_long_offline(result)
            self.usage += result.usage

    @property
    def repeated_ids(self) -> dict[str, list[str]]:
        """Each id read on more than one record -> where each was read, in input order."""
        return {record_id: wheres for record_id, wheres in self.ids.items() if len(wheres) > 1}

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

    def flagged_interval(self, metric: str) -> tuple[float, float] | None:
        """The 95% interval (Wilson's) of the share of answers the metric flags, over the questions the batch
        is a sample of: what the flagged share estimates, given how many records it rests on. It does not
        cover the judge's own errors, nor a batch unlike the traffic it stands for."""
        return share_interval(self.flagged.get(metric, 0), len(self.scores.get(metric) or []))

    def gate(
        self,
        fail_under: Mapping[str, float],
        max_flagged: float | None = None,
        *,
        allow_unscored: int = 0,
        baseline: Baseline | None = None,
        baseline_margin: float = 0.0,
    ) -> list[str]:
        """One line per failed condition of the CI gate; empty when the batch passes. `max_flagged` is a
        count of faithfulness-flagged records (>= 1 or 0) or a share of the scored ones (0 < x < 1). A gate
        also fails when more than `allow_unscored` records were invalid, not scored by a judge failure on a
        gated metric, or had no contexts column for a gated metric that needs them (that line last, with the
        first reason); no condition given, no gate at all. `baseline` (another run's scores of the same
        records, `Baseline.read`) fails it when the faithfulness-flagged share rose by more than
        `baseline_margin` (a share) at the lower end of its 95% interval (`tracescore.score._baseline`). An id
        read on more than one record fails any gate. `gate_failures` gives the same as data."""
        failures = self.gate_failures(
            fail_under,
            max_flagged,
            allow_unscored=allow_unscored,
            baseline=baseline,
            baseline_margin=baseline_margin,
        )
        return [str(failure) for failure in failures]

    def gate_failures(
        self,
        fail_under: Mapping[str, float],
        max_flagged: float | None = None,
        *,
        allow_unscored: int = 0,
        baseline: Baseline | None = None,
        baseline_margin: float = 0.0,
    ) -> list[GateFailure]:
        """`gate`'s failed conditions, as data."""
        if allow_unscored < 0:
            raise ValueError(f"allow_unscored={allow_unscored}: expected a count of records, 0 or more")
        if not 0 <= baseline_margin < 1:
            raise ValueError(f"baseline_margin={baseline_margin}: expected a share, 0 or more and below 1")
        if not fail_under and max_flagged is None and baseline is None:
            return []
        failures = []
        if max_flagged is not None:
            flagged, share = self.flagged.get(FLAGGED_METRIC, 0), self.flagged_share(FLAGGED_METRIC)
            found = None if share is None else flagged
            if share is None or (
                (share > max_flagged) if _is_share(max_flagged) else (flagged > max_flagged)
            ):
                failures.append(
                    GateFailure(GateCondition.MAX_FLAGGED, max_flagged, FLAGGED_METRIC, found, share)
                )
        for metric, minimum in fail_under.items():
            mean = self.mean(metric)
            if mean is None or mean < minimum:
                failures.append(GateFailure(GateCondition.FAIL_UNDER, minimum, metric, mean))
        if baseline is not None:
            comparison = baseline.compare(self.flags)
            interval = comparison.interval()
            if interval is None or interval[0] > baseline_margin:
                failures.append(
                    GateFailure(
                        GateCondition.BASELINE,
                        baseline_margin,
                        FLAGGED_METRIC,
                        comparison.rise,
                        comparison=comparison,
                    )
                )
        flag_gated = max_flagged is not None or baseline is not None
        gated = {*fail_under, *([FLAGGED_METRIC] if flag_gated else [])}
        unscored = self._unscored_for(gated, allow_unscored)
        return failures + ([unscored] if unscored else []) + self._repeated_for_gate()

    def _repeated_for_gate(self) -> list[GateFailure]:
        """The gate's failure on ids read on more than one record: the first such id, where it was read."""
        repeated = self.repeated_ids
        if not repeated:
            return []
        return [
            GateFailure(
                GateCondition.UNIQUE_IDS,
                1,
                found=len(repeated),
                records=sum(map(len, repeated.values())),
                first=_repeated_words(*next(iter(repeated.items()))),
            )
        ]

    def _unscored_for(self, gated: set[str], allowed: int) -> GateFailure | None:
        """The gate's failure on records it could not judge, when there are more than `allowed`."""
        # A record a judge failed on counts as that, whatever else it lacked.
        failed = sum(n for (errors, _), n in self.unjudged.items() if errors & gated)
        blind = sum(
            n for (errors, lacking), n in self.unjudged.items() if lacking & gated and not errors & gated
        )
        count = self.invalid + failed + blind
        if count <= allowed:
            return None
        firsts = [self.first_unjudged[m] for m in gated if m in self.first_unjudged]
        firsts += [self.first_invalid] if self.first_invalid else []
        _, first = min(firsts)
        return GateFailure(
            GateCondition.ALLOW_UNSCORED,
            allowed,
            found=count,
            records=self.records,
            invalid=self.invalid,
            judge_errors=failed,
            no_contexts=blind,
            first=first,
        )

    def __str__(self) -> str:
        # `print(result.summary)` in a notebook: the summary `tracescore score` ends with, not the fields.
        return "\n".join(self.lines())

    def lines(self) -> list[str]:
        """The closing summary, as printed by `tracescore score`."""
        out = [f"{counted(self.records, 'record')} ({self.invalid} invalid)"]
        for metric, values in self.scores.items():
            mean = self.mean(metric)
            share = self.below_share(metric)
            flagged = self.flagged.get(metric, 0)
            first = self.first_unscored_by_metric.get(metric)
            stats = (
                ("no score" + (f"; the first: {first}" if first else ""))
                if mean is None
                else f"mean {mean:.3f}, {share:.0%} below {self.shown_threshold:g}, {flagged} flagged"
                + flagged_words(flagged, len(values))
            )
            out.append(f"  {metric}: {len(values)} scored, {self.unscored.get(metric, 0)} unscored; {stats}")
        if repeated := self.repeated_ids:
            shown = "; ".join(_repeated_words(*item) for item in list(repeated.items())[:_REPEATS_SHOWN])
            more = len(repeated) - _REPEATS_SHOWN
            out.append(
                f"  {counted(len(repeated), 'id')} on more than one record, each record scored: {shown}"
                + (f"; {more} more" if more > 0 else "")
            )
        out += [f"  note: {note}" for note in self.notes]
        spend = f"judge calls {self.usage.calls}, tokens {self.usage.prompt_tokens} prompt + "
        spend += f"{self.usage.completion_tokens} completion"
        if self.usage.cost_usd:
            spend += f", cost ${self.usage.cost_usd:.4f}"
        out.append("  " + spend)
        return out

    @property
    def notes(self) -> list[str]:
        """What the summary says under its figures, as `note:` lines (and the summary JSON's `notes`): where
        most faithfulness scores are the offline judge's on long answers, that they read its level."""
        note = long_answers_note(self.long_offline, len(self.scores.get(FLAGGED_METRIC) or []))
        return [note] if note else []


def long_answers_note(long_offline: int, scored: int) -> str | None:
    """Said where at least half of `scored` faithfulness scores are the offline judge's on long answers
    (`long_offline`, counted by `is_long_offline`): a golden set of faithful summaries fails `--max-flagged
    5%` or `--fail-under faithfulness=0.8` on the judge's false flags alone, and nothing else on the summary
    or the report says why."""
    if not scored or long_offline * 2 < scored:
        return None
    return (
        f"{long_offline} of {scored} faithfulness scores are the offline judge's on long answers "
        f"({LONG_ANSWER_CLAIMS} or more claims), where it flags a third to a half of the faithful ones and "
        "scores them about 0.55: the flagged share and mean read the judge's level, not the answers'; gate "
        "on a change against main's scores (--baseline) or score with an LLM judge (--judge openai)"
    )


def is_long_offline(result: MetricResult | Mapping[str, Any]) -> bool:
    """A faithfulness score the offline judge gave an answer of LONG_ANSWER_CLAIMS or more claims; `result`
    also as a row's JSON (`tracescore report` reads `--out`), where anything unreadable is not one."""
    if isinstance(result, Mapping):
        judge, details = result.get("judge"), result.get("details")
        # An LLM judge's row is told by its name, before its details are read (the costly part).
        if not isinstance(judge, str) or annotator_kind(judge) != "CODE" or not isinstance(details, Mapping):
            return False
        # The claims are counted from the details alone: the score is not needed, nor checked.
        result = MetricResult(metric=FLAGGED_METRIC, score=None, judge=judge, details=dict(details))
    elif annotator_kind(result.judge) != "CODE":
        return False
    return FaithfulnessFindings.of(result).claims >= LONG_ANSWER_CLAIMS


def flagged_words(flagged: int, scored: int) -> str:
    """` (57%, 95% interval 39% to 73%)`: the flagged share of `scored` records and its interval."""
    interval = share_interval(flagged, scored)
    if interval is None:
        return ""
    low, high = interval
    return f" ({flagged / scored:.0%}, {CONFIDENCE:.0%} interval {low:.0%} to {high:.0%})"


def _repeated_words(record_id: str, wheres: Sequence[str]) -> str:
    return f"id {record_id!r} on {counted(len(wheres), 'record')} ({', '.join(wheres)})"


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
    """`--max-flagged`: a whole count ("3"), a share of the scored records ("0.05") or that share as a
    percentage ("5%"); None when unset."""
    if value is None:
        return None
    text = value.strip()
    expected = "a count (e.g. 3), a share below 1 (e.g. 0.05) or a percentage below 100% (e.g. 5%)"
    if text.endswith("%"):
        return _share("--max-flagged", value, expected)
    parsed = _number(text)
    if not (parsed >= 0 and ((parsed.is_integer() and "." not in text) or parsed < 1)):
        raise ValueError(f"--max-flagged {value!r}: expected {expected}")
    return parsed


def parse_share(option: str, value: str) -> float:
    """A share given to `option` as a fraction ("0.02") or a percentage ("2%"): 0 or more, below 1."""
    return _share(option, value, "a share below 1 (e.g. 0.02) or a percentage below 100% (e.g. 2%)")


def _share(option: str, value: str, expected: str) -> float:
    text = value.strip()
    percent = text.endswith("%")
    parsed = _number(text.removesuffix("%"))
    if percent and parsed >= 100:
        # 100% as a share would be 1, which --max-flagged reads as one record; and no share passes 100%.
        raise ValueError(
            f"{option} {value!r}: a percentage must be below 100% (e.g. 5%); at 100% every scored record may "
            "be flagged and pass: leave the option out"
        )
    share = parsed / 100 if percent else parsed
    if not 0 <= share < 1:
        raise ValueError(f"{option} {value!r}: expected {expected}")
    return share


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return float("nan")
