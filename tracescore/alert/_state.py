"""What the alert service keeps per (service, route, metric, unit) across restarts: the value of the compacted
state topic. One model per key, `AlertState`; a drop rule's part (`DropState`: the route's trailing normal as
sums, whether it is held, the drop alert's own level) is an optional field of it, so a state written before
drop rules existed reads as a route without one, and an older reader ignores the field.

Every list here is bounded by construction (buckets and floor snapshots, see alert/_drop.py), so a state
always fits a Kafka message whatever the traffic.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

__all__ = ["AlertState", "Bucket", "DropState", "Level", "LevelState", "Moments", "Snapshot"]

Level = Literal["ok", "warning", "critical"]


class LevelState(BaseModel):
    """What was last notified of one alert (a threshold's or a drop's): the level and when."""

    level: Level = "ok"
    level_since: datetime | None = None
    notified_at: datetime | None = None
    resolved_at: datetime | None = None


class Moments(BaseModel):
    """Additive sums of a set of interactions, all the rolling estimate needs of them (alert/_estimate.py):
    stratum C (the LLM judge's value where it scored with inclusion probability 1) and stratum R (the value
    of the judge that scores every answer, the offline one), with the counts the estimate reports."""

    c_n: int = 0
    c_sum: float = 0.0
    c_squares: float = 0.0
    r_n: int = 0
    r_sum: float = 0.0
    r_squares: float = 0.0
    offline_n: int = 0
    llm_n: int = 0
    excluded: int = 0
    unpaired: int = 0
    pairs: int = 0

    def values(self) -> list[float]:
        return [float(getattr(self, name)) for name in type(self).model_fields]

    @classmethod
    def of(cls, values: list[float]) -> Moments:
        named = zip(cls.model_fields, values, strict=True)
        return cls(**{name: (round(v) if name in _COUNTS else v) for name, v in named})


_COUNTS = {"c_n", "r_n", "offline_n", "llm_n", "excluded", "unpaired", "pairs"}


class Bucket(BaseModel):
    """The sums of consecutive interactions of a route, and the span of their record times."""

    first_at: datetime
    last_at: datetime
    moments: Moments


class Snapshot(BaseModel):
    """The route's normal as it was at `taken_at`: a candidate for the floor a slow decline is caught on."""

    taken_at: datetime
    moments: Moments


class DropState(LevelState):
    """A drop rule's state for one route: its drop alert's level (as `AlertState`'s for thresholds), the
    window and normal as buckets of sums, the floor's snapshots, and what was already counted."""

    recent: list[Bucket] = Field(default_factory=list, description="The window's older answers, as sums.")
    normal: list[Bucket] = Field(default_factory=list, description="The trailing normal, oldest first.")
    floor: list[Snapshot] = Field(default_factory=list, description="Best normals of the floor's span.")
    withheld: Bucket | None = Field(
        default=None,
        description="Answers that left the window while a drop was suspected: learned into the normal when "
        "the suspicion clears, forgotten if it pages.",
    )
    # What a restart needs to count no answer twice when it reads the last minutes again to refill the rule's
    # window: the newest record time seen when this was written, and the answers then still waiting in the
    # rule's window, not yet counted (hashes: bounded whatever the ids; at most the rule's window_count).
    counted_until: datetime | None = None
    pending: list[str] = Field(default_factory=list, description="Hashes of answers not counted yet.")
    held_since: datetime | None = Field(
        default=None, description="The normal held: a drop suspected or firing."
    )
    suspicion_spent: bool = Field(
        default=False, description="A suspicion held the normal a window's span without a page: not again."
    )
    learned_at: datetime | None = Field(default=None, description="When the normal first had enough answers.")
    learning_since: datetime | None = Field(
        default=None,
        description="Since when the normal has had too few answers (unset: it has enough). Learning longer "
        "than the windows' and the normal's spans together, the route is too quiet to arm: said once a run.",
    )
    late: int = Field(default=0, description="Records that came too late to count (already-counted answers).")
    # The sustained-drop test (alert/_cusum.py); states written before it read as a silent start.
    cusum: float = Field(default=0.0, description="The CUSUM: evidence of a drop since it last left 0.")
    cusum_run: Moments | None = Field(default=None, description="The answers since the CUSUM last left 0.")
    cusum_drop: float | None = Field(default=None, description="Set while it alarms: the drop it found.")
    cusum_recovery: float = Field(default=0.0, description="While it alarms: evidence of a recovery.")


class AlertState(LevelState):
    """What the evaluator keeps of one key across restarts (the service saves it in the state topic, inside
    `RouteState`): what was last notified, and the drop rule's sums. A field added here with a default is
    read from older states as that default, so adding one needs no new schema version; removing or
    redefining one does."""

    judge_firing: bool = False
    judge_since: datetime | None = None
    judge_notified_at: datetime | None = None
    no_data_firing: bool = False
    no_data_since: datetime | None = None
    last_seen: datetime | None = None
    drop: DropState | None = None
    # The route's arrival rate, for a no-data part that pages on an unusual silence (alert/_silence.py);
    # a state written before it reads as a route whose rate is still to learn.
    arrivals: float = Field(default=0.0, description="Answers weighted by age, as of arrivals_at.")
    arrivals_at: datetime | None = None
    first_seen: datetime | None = Field(default=None, description="The route's first answer counted.")
    rate_known_at: datetime | None = Field(
        default=None, description="When its rate was first known (said once: no-data alert armed)."
    )

    @property
    def drop_firing(self) -> bool:
        return self.drop is not None and self.drop.level != "ok"

    @property
    def firing(self) -> bool:
        """Any alert of the key fires: its threshold's, its drop's, its judge's or its no-data alert."""
        return self.level != "ok" or self.drop_firing or self.judge_firing or self.no_data_firing
