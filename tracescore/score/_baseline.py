"""The baseline gate: a run's faithfulness-flagged share against another run's of the same golden set (main's
`tracescore score --out`, kept from its CI run), record by record.

What it estimates: the change in the share of answers flagged (now minus the baseline's), over the questions
the golden set is a sample of, the same records in both runs. Its 95% interval is Newcombe's for a paired
difference of proportions (Newcombe 1998, Stat Med 17:2635, method 10: Wilson score intervals combined with
the pairs' correlation), accurate for a few dozen records, where a normal approximation is not: it covers
which questions happened to be in the set and verdicts that flip from run to run (a judge's noise shows as
pairs that disagree). It does not cover a golden set unlike the traffic, nor a judge's bias common to both
runs (which the difference largely cancels). The gate fails when the interval's lower end is above the margin:
a rise the sample cannot explain by chance, so a small set's one new flag does not fail a build on noise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist
from typing import Any

from tracescore._plural import counted
from tracescore.model import FAITHFULNESS, is_flagged

__all__ = [
    "CONFIDENCE",
    "Baseline",
    "Comparison",
    "paired_difference_interval",
    "record_key",
    "share_interval",
]

CONFIDENCE = 0.95


def record_key(record_id: str | None, where: str) -> str:
    """How a record is paired with the baseline's: by its id, else by where it was read ("line 3")."""
    return f"id {record_id!r}" if record_id is not None else where


@dataclass(frozen=True)
class Baseline:
    """A scores file's flags of faithfulness, by record key (`record_key`): None where not scored."""

    name: str
    flags: Mapping[str, bool | None]

    @classmethod
    def read(cls, path: Path, threshold: float | None = None) -> Baseline:
        """The flags of a `tracescore score --out` file, flagged as the run's own are (`threshold`).
        ValueError naming the line for what is no scores row (as `tracescore report` reads them), or a
        record read twice: there would be no telling which of them to pair."""
        from tracescore.score._report import read_scores  # the HTML report's jinja2: only when asked

        flags: dict[str, bool | None] = {}
        for _, row in read_scores(path):  # a file with no scores row at all is refused there, by name
            if "results" not in row:
                continue
            line = row.get("line")
            if not isinstance(line, int) or isinstance(line, bool):
                raise ValueError(f"{path}: a row without its input line: give the --out file of a run")
            record_id = row.get("id")
            key = record_key(None if record_id is None else str(record_id), f"line {line}")
            if key in flags:
                raise ValueError(
                    f"{path}: {key} on two rows (input line {line} the second): no telling which to pair"
                )
            flags[key] = _flag(row, threshold)
        return cls(str(path), flags)

    def compare(self, flags: Mapping[str, bool | None]) -> Comparison:
        """This baseline against a run's flags (by the same keys): the pairs scored in both, counted."""
        counts = {(True, True): 0, (True, False): 0, (False, True): 0, (False, False): 0}
        for key, now in flags.items():
            before = self.flags.get(key)
            if now is not None and before is not None:
                counts[now, before] += 1
        return Comparison(
            baseline=self.name,
            both=counts[True, True],
            newly=counts[True, False],
            fixed=counts[False, True],
            neither=counts[False, False],
            unpaired=sum(1 for key, now in flags.items() if now is None or self.flags.get(key) is None),
        )


def _flag(row: Mapping[str, Any], threshold: float | None) -> bool | None:
    result = (row.get("results") or {}).get(FAITHFULNESS)
    if not isinstance(result, Mapping) or not isinstance(result.get("score"), int | float):
        return None
    return is_flagged(result, threshold)


@dataclass(frozen=True)
class Comparison:
    """The records scored in both runs, by their flags now and in the baseline."""

    baseline: str
    both: int  # flagged in both runs
    newly: int  # flagged now, not in the baseline
    fixed: int  # flagged in the baseline, not now
    neither: int
    unpaired: int  # records of this run not scored in both (or not in the baseline)

    @property
    def paired(self) -> int:
        return self.both + self.newly + self.fixed + self.neither

    @property
    def rise(self) -> float | None:
        """Now's flagged share minus the baseline's, on the paired records; None without any."""
        return (self.newly - self.fixed) / self.paired if self.paired else None

    def interval(self, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
        return paired_difference_interval(self.both, self.newly, self.fixed, self.neither, confidence)

    def words(self) -> str:
        """`faithfulness flagged 2 -> 5 of 50 records paired with main.jsonl: +6.0 points (...)`."""
        interval = self.interval()
        if interval is None or self.rise is None:
            return f"{FAITHFULNESS}: no record scored in both this run and {self.baseline}"
        low, high = interval
        return (
            f"{FAITHFULNESS} flagged {self.both + self.fixed} -> {self.both + self.newly} of "
            f"{counted(self.paired, 'record')} paired with {self.baseline}: {_points(self.rise)} "
            f"({CONFIDENCE:.0%} interval {low * 100:+.1f} to {_points(high)}; {self.newly} newly flagged, "
            f"{self.fixed} no longer)" + (f"; {self.unpaired} not paired" if self.unpaired else "")
        )


def _points(share: float) -> str:
    """A difference of shares in percentage points, signed: +6.0 points."""
    return f"{share * 100:+.1f} points"


def paired_difference_interval(
    both: int, first_only: int, second_only: int, neither: int, confidence: float = CONFIDENCE
) -> tuple[float, float] | None:
    """Newcombe's interval (method 10) for p1 - p2 of paired binary outcomes: `both` pairs positive in both,
    `first_only` in the first alone, `second_only` in the second alone, `neither`; None with no pair."""
    n = both + first_only + second_only + neither
    if n == 0:
        return None
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p1, p2 = (both + first_only) / n, (both + second_only) / n
    l1, u1 = _wilson(both + first_only, n, z)
    l2, u2 = _wilson(both + second_only, n, z)
    margins = (both + first_only) * (second_only + neither) * (both + second_only) * (first_only + neither)
    cross = both * neither - first_only * second_only
    # The pairs' correlation, continuity-corrected toward 0 when positive (Newcombe's phi*).
    corrected = cross - n / 2 if cross > n / 2 else min(cross, 0)
    phi = corrected / math.sqrt(margins) if margins else 0.0
    d = p1 - p2
    low = d - math.sqrt(max((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2, 0.0))
    high = d + math.sqrt(max((p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2, 0.0))
    return max(low, -1.0), min(high, 1.0)


def share_interval(successes: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """Wilson's score interval for a share (`successes` of `n`), sound for a few dozen records and a share
    of 0 or 1, where a normal approximation is not; None for no record."""
    return _wilson(successes, n, NormalDist().inv_cdf(0.5 + confidence / 2)) if n else None


def _wilson(successes: int, n: int, z: float) -> tuple[float, float]:
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(centre - half, 0.0), min(centre + half, 1.0)
