"""Combined quality: one number (and a letter) from faithfulness, answer relevancy and context relevance.

It calls its sub-metrics itself; under `evaluate()` their judge calls are shared with the same metrics
requested on their own, so asking for `quality` next to them costs no extra judge call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tracescore.model import MetricResult, RagRecord, Usage
from tracescore.score.judges._protocol import Judge
from tracescore.score.metrics._answer_relevancy import AnswerRelevancy
from tracescore.score.metrics._context_relevance import ContextRelevance
from tracescore.score.metrics._faithfulness import Faithfulness
from tracescore.score.metrics._protocol import Metric, UsesContexts, contexts_use, evaluate_each

__all__ = ["DEFAULT_WEIGHTS", "Quality", "letter_grade"]

DEFAULT_WEIGHTS: Mapping[str, float] = {
    "faithfulness": 0.4,
    "answer_relevancy": 0.3,
    "context_relevance": 0.3,
}
_GRADES = ((0.9, "A"), (0.8, "B"), (0.7, "C"), (0.6, "D"))


def letter_grade(score: float) -> str:
    return next((grade for bound, grade in _GRADES if score >= bound), "F")


class Quality:
    name = "quality"

    def __init__(
        self,
        metrics: Sequence[Metric] | None = None,
        *,
        weights: Mapping[str, float] = DEFAULT_WEIGHTS,
    ) -> None:
        self._metrics = tuple(metrics or (Faithfulness(), AnswerRelevancy(), ContextRelevance()))
        missing = [m.name for m in self._metrics if weights.get(m.name, 0) <= 0]
        if missing:
            raise ValueError(f"no positive weight for sub-metric(s) {', '.join(missing)}")
        self._weights = dict(weights)
        self.tasks = tuple(t for m in self._metrics for t in getattr(m, "tasks", ()))
        # It scores from the sub-metrics that could be scored: it needs the contexts only when all of its
        # parts do, and reads none when none does.
        uses = {contexts_use(m) for m in self._metrics}
        self.uses_contexts = uses.pop() if len(uses) == 1 else UsesContexts.IF_PRESENT

    async def score(self, record: RagRecord, judge: Judge) -> MetricResult:
        results = await evaluate_each(record, self._metrics, judge)
        usage = sum((r.usage for r in results), Usage())
        # Keyed by the sub-metric's own name, the name its weight was given under.
        named = list(zip((m.name for m in self._metrics), results, strict=True))
        scored = {name: r.score for name, r in named if r.score is not None}
        unscored = {name: f"{r.status.value}: {r.reason}" for name, r in named if r.score is None}
        components = {name: r.score for name, r in named}
        if not scored:
            return MetricResult.not_applicable(
                self.name,
                "no sub-metric could be scored: " + "; ".join(f"{k} {v}" for k, v in unscored.items()),
                judge=judge.name,
                usage=usage,
                details={"components": components},
            )
        # Weights are renormalised over the sub-metrics that scored; the missing ones are named in details.
        total = sum(self._weights[name] for name in scored)
        weighted = sum(self._weights[name] * score for name, score in scored.items()) / total
        harmonic = 0.0 if min(scored.values()) == 0 else len(scored) / sum(1 / s for s in scored.values())
        return MetricResult(
            metric=self.name,
            score=weighted,
            label=letter_grade(weighted),
            judge=judge.name,
            usage=usage,
            warnings=list(dict.fromkeys(w for r in results for w in r.warnings)),
            details={
                "components": components,
                "weights": {name: self._weights[name] for name in components},
                "weighted_mean": weighted,
                "harmonic_mean": harmonic,
                "minimum": min(scored.values()),
                "grade": letter_grade(weighted),
                "unscored": unscored,
            },
        )
