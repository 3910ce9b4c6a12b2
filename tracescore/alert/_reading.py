"""What a drop rule reads of one route (alert/_drop.py keeps its buckets and normal): the window test's
bound at four lengths and the sustained test's evidence (alert/_cusum.py), read into the figures its
alert, its notifications and `AlertEvaluator.drop_status` give."""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal, NamedTuple

from tracescore.alert._config import DropConfig
from tracescore.alert._cusum import Sustained
from tracescore.alert._estimate import LLM_N, OFFLINE_N, R_N, PairStats, Sums, interactions, plain_level
from tracescore.alert._floor import Floor

__all__ = ["LENGTHS", "PAST_RANGE", "DropReader", "DropReading", "Figures", "Status", "Test"]

# Said beside a reading with a level past 0..1 (`Figures.past_range`).
PAST_RANGE = "a level past 0..1: the correction from the LLM judge's baseline pairs overshoots on this route"
LENGTHS = (1, 2, 4)  # newest buckets of the window tested on their own, besides the whole window

Status = Literal["learning", "too_few", "ready"]
Test = Literal["window", "sustained"]


@dataclass(frozen=True, slots=True)
class DropReading:
    """What a drop rule reads of one route now."""

    status: Status  # learning: the normal has too few answers; too_few: the window has
    # The window's newest part (1/8, 1/4, 1/2 or all of it) whose drop has the highest lower bound:
    window: float  # its level (plain difference estimator)
    window_n: int
    normal: float  # the reference's level: the normal, or the floor when it sits higher
    normal_n: int
    drop: float  # normal - window
    lower: float  # one-sided lower bound of the drop at the rule's confidence (over the four lengths)
    reference: Literal["normal", "floor"]
    calibrated: bool  # the levels are corrected by the LLM judge's baseline pairs
    offline_n: int  # the window's offline and LLM scores
    llm_n: int
    whole_n: int = 0  # the whole window's answers
    whole_drop: float = 0.0  # the whole window's drop: a drop is suspected (the normal held) from min_drop
    peak_drop: float = 0.0  # the largest drop of the four lengths: an alert holds while it is above half
    # The sustained-drop test (alert/_cusum.py): its evidence as a share of its threshold, and its alarm;
    # `test` says which test the reading above is: the window's, or the CUSUM's answers since the drop began.
    evidence: float = 0.0
    alarm: bool = False
    test: Test = "window"

    @property
    def ready(self) -> bool:
        return self.status == "ready"

    def figures(self) -> Figures:
        """The reading as a person is shown it (notifications, logs, the stop summary).

        The levels are the ones the test compared, unclipped: the estimator may read one past 0..1 (the
        route's one baseline correction is added to every offline-judged answer, so a window the offline
        judge fails throughout can read -0.04 and a normal it passes throughout 1.04), and clipped they would
        no longer make the drop that was tested (a normal of 1.10 and a window of 1.00 shown as 1.00 and
        1.00 for a drop of 0.10). Written to two decimals, the drop as the difference of the two levels
        written and its bound no larger, so the text adds up to the last digit."""
        window, normal = _written(self.window), _written(self.normal)
        drop = _written(normal - window)
        past = not (0.0 <= window <= 1.0 and 0.0 <= normal <= 1.0)
        return Figures(
            f"{window:.2f}", f"{normal:.2f}", f"{drop:.2f}", f"{min(_written(self.lower), drop):.2f}", past
        )


class Figures(NamedTuple):
    """`DropReading.figures`: the levels, the drop and its lower bound as written; `past_range`: a level
    read past 0..1 (the notification says why)."""

    window: str
    normal: str
    drop: str
    lower: str
    past_range: bool


def _written(value: float) -> float:
    return round(value, 2) + 0.0  # never "-0.00"


class DropReader:
    """A drop rule's tests read on one route: the window's bound at four lengths, and the sustained test."""

    def __init__(self, config: DropConfig) -> None:
        self.config = config
        self._z = NormalDist().inv_cdf(config.confidence)
        self._z_lengths = NormalDist().inv_cdf(1 - (1 - config.confidence) / (len(LENGTHS) + 1))

    def read(
        self,
        lengths: list[Sums],
        normal_total: Sums,
        floor: Floor,
        sustained: Sustained | None,
        stats: PairStats | None,
    ) -> DropReading:
        """The window, at its `lengths` (its newest 1/8, 1/4, 1/2, then all of it), against the reference: the
        normal (`normal_total`), or the `floor`'s best snapshot when that is credibly higher; and the
        `sustained` test's evidence, whose answers since the drop began are read when it alarms.

        The window is tested at four lengths, its newest 1/8, 1/4, 1/2 and all of it (whole buckets, each
        with at least `min_samples` answers), at `confidence` for the four together (Bonferroni): a large
        drop shows in the newest answers long before it moves the whole window, a small one only in all."""
        config = self.config
        correction = 0.0 if stats is None else stats.plain
        correction_var = 0.0 if stats is None else stats.shrunk(stats.plain_raw_var) / stats.effective
        normal = normal_total
        reference: Literal["normal", "floor"] = "normal"
        if interactions(normal) >= config.min_normal_samples:
            # The floor takes over when it is credibly above the normal (its lower bound above the normal's
            # level), not whenever it happens to read higher: on a steady route that would be half the time.
            best_floor, floor_lower = floor.best(correction)
            if best_floor is not None and floor_lower > plain_level(normal, correction)[0]:
                normal, reference = best_floor, "floor"
        n_level, n_var, n_n = plain_level(normal, correction)
        share_n = normal[R_N] / n_n if n_n else 0.0  # answers the correction applies to
        best: tuple[float, float, float, int, Sums] | None = None  # (lower, drop, level, n, sums)
        peak = whole = 0.0
        whole_n = 0
        for window in lengths:
            w_level, w_var, w_n = plain_level(window, correction)
            whole_n = w_n  # the last length is the whole window
            if not w_n or not n_n:
                continue
            drop = n_level - w_level
            whole = drop
            if w_n < config.min_samples:
                continue
            share_w = window[R_N] / w_n
            var = max(w_var, n_var) / w_n + n_var / n_n + correction_var * (share_n - share_w) ** 2
            lower = drop - self._z_lengths * math.sqrt(var)
            peak = max(peak, drop)
            if best is None or lower > best[0]:
                best = (lower, drop, w_level, w_n, window)
        status: Status = "learning" if n_n < config.min_normal_samples else "ready"
        if best is None:
            window = lengths[-1]
            w_level, _, w_n = plain_level(window, correction)
            best = (-1.0, n_level - w_level if w_n and n_n else 0.0, w_level, w_n, window)
            status = "learning" if status == "learning" else "too_few"
        lower, drop, w_level, w_n, window = best
        evidence, alarm, test = 0.0, False, "window"
        if sustained is not None and status == "ready":
            evidence, alarm = sustained.evidence(normal_total, 0.0), sustained.alarm
            run_level, run_var, run_n = plain_level(sustained.run, correction)
            if alarm and lower < config.min_drop and run_n:  # the CUSUM's answers since the drop began
                n_level, normal_var, n_n = plain_level(normal_total, correction)
                reference, window, test = "normal", sustained.run, "sustained"
                drop, w_level, w_n = n_level - run_level, run_level, run_n
                lower = drop - self._z * math.sqrt(max(run_var, normal_var) / run_n + normal_var / n_n)
        calibrated = stats is not None or (window[OFFLINE_N] == 0 and window[LLM_N] > 0)
        return DropReading(
            status, w_level, w_n, n_level, n_n, drop, lower, reference, calibrated,
            round(window[OFFLINE_N]), round(window[LLM_N]), whole_n, whole, peak, evidence, alarm, test,
        )  # fmt: skip
