"""Where each route stands against its rule now: what `tracescore alert` says of its routes when it stops,
the routes furthest past their thresholds first (then the nearest to firing), at most a few of them."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tracescore.alert._config import RuleConfig
from tracescore.alert._estimate import Estimate
from tracescore.alert._notification import AlertKey
from tracescore.alert._reading import PAST_RANGE, DropReading
from tracescore.alert._state import Level

__all__ = ["SUMMARY_ROUTES", "Standing", "describe_routes", "stop_summary", "worst_first"]

# Routes the summary at a stop names, worst first: a group's thousands would bury the few that matter.
SUMMARY_ROUTES = 10

_RANK: dict[Level, int] = {"ok": 0, "warning": 1, "critical": 2}


@dataclass(frozen=True, slots=True)
class Standing:
    """One route's estimate against its threshold rule, and its window against its normal (a drop rule)."""

    key: AlertKey
    rule: RuleConfig
    level: Level  # the threshold rule's
    estimate: Estimate | None  # None: no scores in the window
    drop_level: Level | None = None  # None: no drop rule
    drop: DropReading | None = None
    cannot_arm: bool = False  # the drop rule learning longer than a route with enough answers would

    @property
    def severity(self) -> tuple[int, float]:
        """(the worse of its levels, the margin left before a rule fires; below 0 past it), for sorting:
        firing first, then the nearest to firing. A threshold fires when the estimate's upper bound is below
        it, a drop rule when the drop's lower bound reaches its `min_drop`."""
        rank = max(_RANK[self.level], _RANK[self.drop_level or "ok"])
        margins = []
        est, warning = self.estimate, self.rule.warning
        if est is not None and warning is not None and self.rule.waiting(est) is None:
            margins.append(est.upper - warning)
        if self.drop is not None and self.drop.ready and self.rule.drop is not None:
            margins.append(self.rule.drop.min_drop - self.drop.lower)
        return rank, min(margins, default=math.inf)

    def describe(self) -> str:
        """`rag-api /billing faithfulness: warning: 0.55 [0.48, 0.62] from 40 offline + 4 LLM scores
        (thresholds: warning 0.70, critical 0.40)`, then its drop rule's reading when it has one."""
        key, rule = self.key, self.rule
        units = "answers" if key.unit == "answer" else "conversations"
        said = []
        thresholds = [f"{name} {value:.2f}" for name, value in (("warning", rule.warning),
                      ("critical", rule.critical)) if value is not None]  # fmt: skip
        if thresholds or self.level != "ok":
            est = self.estimate
            shown = "no scores in its window" if est is None else est.describe()
            waiting = None if est is None else rule.waiting(est)
            wait = "" if waiting is None else f"; {waiting}"
            said.append(f"{self.level}: {shown} (thresholds: {', '.join(thresholds) or 'none'}{wait})")
        if self.drop is not None and rule.drop is not None:
            d, drop = self.drop, rule.drop
            if d.status == "learning":
                # The cold start in the newcomer's terms: the count stays 0 until answers leave the window.
                learning = (
                    f"{d.normal_n} of {drop.min_normal_samples} {units}, which join it as they leave its "
                    f"window of {drop.window_count}"
                )
                if self.cannot_arm:  # said once in the log too
                    learning += (
                        "; too few per normal_seconds to ever arm: lower min_normal_samples or raise "
                        "normal_seconds"
                    )
                said.append(f"drop rule learning its normal ({learning})")
            elif d.status == "too_few":
                said.append(f"drop rule: too few recent {units} ({d.whole_n} of {drop.min_samples})")
            else:
                f = d.figures()
                past = f"; {PAST_RANGE}" if f.past_range else ""
                said.append(
                    f"drop rule {self.drop_level}: {f.window} over {d.window_n} {units} against its normal "
                    f"{f.normal}, a drop of {f.drop} (at least {f.lower}; alerts from {drop.min_drop:.2f}"
                    f"{past})"
                )
        unit = "" if key.unit == "answer" else f" ({key.unit}s)"
        return f"{key.service} {key.route} {key.metric}{unit}: {'; '.join(said)}"


def worst_first(standings: Iterable[Standing], most: int) -> tuple[list[Standing], int]:
    """The `most` most severe (`Standing.severity`), and how many more there are."""
    ranked = sorted(standings, key=lambda s: (-s.severity[0], s.severity[1], s.key.encode()))
    return ranked[:most], max(0, len(ranked) - most)


def describe_routes(routes: Sequence[Standing], more: int) -> list[str]:
    """The stop summary's lines for the routes `worst_first` kept and the `more` it left out, as `tracescore
    alert` prints them under its counts line."""
    if not routes:
        return []
    rest = [f"    and {more} more"] if more else []
    return [f"  routes ({len(routes) + more}, worst first):", *(f"    {s.describe()}" for s in routes), *rest]


def stop_summary(standings: Iterable[Standing]) -> list[str]:
    """What `tracescore alert` says of the routes it holds when it stops, from where each stands now
    (`AlertEvaluator.standings`): the worst `SUMMARY_ROUTES`, the others counted."""
    return describe_routes(*worst_first(standings, SUMMARY_ROUTES))
