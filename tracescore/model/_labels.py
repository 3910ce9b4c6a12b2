"""The label rule: one reading of "is this answer flagged?" for records, the report, the CI gate, the demo,
the consumer's learning and the alerts' estimates (every stage reads it from here).

A metric's result carries its own label (Faithfulness: `faithfulness_label`, README "What 'hallucinated'
means"); everything downstream reads that label rather than re-deriving it from the score, so a strict
label rule applies the same way everywhere. Results without a known label fall back to the score.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracescore.model._results import MetricResult

__all__ = ["BAD_LABELS", "FAITHFULNESS", "GOOD_LABELS", "UNLABELLED_THRESHOLD", "is_flagged", "label_is_bad"]

# The metric every stage defaults to: the one whose label says "hallucinated" (what the consumer scores, the
# cascade ranks, the alerts watch, the CI gate and the report count).
FAITHFULNESS = "faithfulness"

# Scores below this are flagged when the result carries no label read as good or bad and the caller sets
# no threshold of its own.
UNLABELLED_THRESHOLD = 0.5

# Labels read as "the answer is bad" (the positive class) or "good"; anything else is unknown.
BAD_LABELS = frozenset(
    {"hallucinated", "hallucination", "unfaithful", "fail", "failed", "bad", "false", "0", "not_relevant"}
)
GOOD_LABELS = frozenset({"faithful", "grounded", "pass", "passed", "good", "true", "1", "relevant"})


def label_is_bad(label: Any) -> bool | None:
    """True for a bad label, False for a good one, None when unknown (or absent)."""
    if label is None:
        return None
    text = str(label).strip().casefold()
    if text in BAD_LABELS:
        return True
    if text in GOOD_LABELS:
        return False
    return None


def is_flagged(result: MetricResult | Mapping[str, Any] | None, threshold: float | None = None) -> bool:
    """Whether a scored result marks its answer as bad. By default its label decides (Faithfulness: README,
    What "hallucinated" means), and a result without a known label is flagged below 0.5. A `threshold` set
    by the caller (`tracescore score --threshold`) flags any score below it as well. Unscored results
    (errors, not applicable) are never flagged: they are counted apart."""
    if result is None:
        return False
    if isinstance(result, MetricResult):
        score, label = result.score, result.label
    else:
        score, label = result.get("score"), result.get("label")
    if not isinstance(score, int | float) or isinstance(score, bool):
        return False
    bad = label_is_bad(label)
    if bad is True:
        return True
    if threshold is not None:
        return bool(score < threshold)
    return bad is None and score < UNLABELLED_THRESHOLD
