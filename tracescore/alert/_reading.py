"""What a drop rule reads of one route (alert/_drop.py): the figures its alert, its notifications and
`AlertEvaluator.drop_status` give."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["DropReading", "Status", "Test"]

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
