"""`tracescore score --report` and `tracescore report`: a self-contained HTML page summarising a scored batch.

Memory stays bounded on large batches: every score is kept (histograms, medians), but texts are kept only
for the worst `limit` records (a heap) and the first `limit` unscored ones. When rows carry a `label`
(faithful/hallucinated, pass/fail, ...), the page adds a confusion matrix and the balanced accuracy of
"rank metric below the threshold" against it. One small inline script sorts, filters and searches the
tables; the page stays one file with no external resource.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import json
import math
import statistics
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

from tracescore.score._types import RagRecord

__all__ = ["ReportCollector", "read_scores", "render_report"]

DEFAULT_TITLE = "tracescore report"
RANK_METRIC = "faithfulness"
_NOT_METRICS = frozenset({"id", "line", "reason", "results", "query", "answer", "contexts", "label"})
# Labels read as "the answer is bad" (the positive class) or "good"; anything else is counted as unknown.
_BAD_LABELS = frozenset(
    {"hallucinated", "hallucination", "unfaithful", "fail", "failed", "bad", "false", "0"}
)
_GOOD_LABELS = frozenset({"faithful", "grounded", "pass", "passed", "good", "true", "1"})
# Worst first: a sentence holding several claims takes the colour of its worst verdict.
_VERDICT_SEVERITY = {"CONTRADICTORY": 3, "NO_EVIDENCE": 2, "PARTIALLY_SUPPORTED": 1, "FULLY_SUPPORTED": 0}
_CONTEXT_CHARS = 20_000  # per record: a pathological context must not blow up the page
_SNIPPET_CHARS = 300
_BINS = 10


@dataclass
class _Kept:
    """What the report shows of one record: scores, per-metric results and (when known) the texts."""

    id: str | None
    line: int | None
    scores: dict[str, float | None]
    results: dict[str, Any]
    reason: str | None
    query: str | None = None
    answer: str | None = None
    contexts: list[str] = field(default_factory=list)


class ReportCollector:
    """`score_file(on_row=...)` callback; also built from plain JSONL rows by `render_report`."""

    def __init__(self, *, threshold: float = 0.5, limit: int = 50, rank_metric: str = RANK_METRIC) -> None:
        self.threshold = threshold
        self.limit = limit
        self.rank_metric = rank_metric
        self.records = 0
        self.invalid = 0
        self.metrics: list[str] = []  # in first-seen order, so columns follow the CLI's --metrics
        self.scores: dict[str, list[float]] = {}
        self.unscored: dict[str, Counter[str]] = {}
        self.record_min: list[float] = []  # lowest score of each scored record: the below-threshold count
        self.unscored_total = 0
        self.unscored_kept: list[_Kept] = []
        # (label says bad, rank metric says bad) -> records; only rows with a readable label and a score.
        self.confusion: Counter[tuple[bool, bool]] = Counter()
        self.unlabelled = 0
        self._worst: list[tuple[tuple[float, ...], int, _Kept]] = []  # max-heap on the negated rank key
        self._seq = itertools.count()

    def __call__(self, record: RagRecord | None, row: Mapping[str, Any]) -> None:
        self.records += 1
        results = row.get("results") or {}
        if not results and str(row.get("reason") or "").startswith("invalid input"):
            self.invalid += 1
        scores = {k: v for k, v in row.items() if _is_metric(k, v)}
        for name, score in scores.items():
            if name not in self.scores:
                self.metrics.append(name)
                self.scores[name] = []
                self.unscored[name] = Counter()
            if score is not None:
                self.scores[name].append(float(score))
            elif name in results:  # an invalid line has no result: it is counted as invalid, not here
                self.unscored[name][(results[name] or {}).get("reason") or "no reason given"] += 1
        self._count_label(row.get("label"), scores.get(self.rank_metric))
        present = [float(v) for v in scores.values() if v is not None]
        if present:
            self.record_min.append(min(present))
            self._keep_if_worst(record, row, scores, min(present))
        if any(v is None for v in scores.values()) or not scores:
            self.unscored_total += 1
            if len(self.unscored_kept) < self.limit:
                kept = _kept(record, row, scores)
                kept.contexts = []  # the unscored table shows the reason, not the context
                self.unscored_kept.append(kept)

    def _count_label(self, label: Any, score: Any) -> None:
        if label is None:
            return
        truth = _label_is_bad(label)
        if truth is None or score is None:
            self.unlabelled += 1
            return
        self.confusion[(truth, float(score) < self.threshold)] += 1

    def _keep_if_worst(
        self, record: RagRecord | None, row: Mapping[str, Any], scores: Mapping[str, Any], lowest: float
    ) -> None:
        rank = scores.get(self.rank_metric)
        # Records below the threshold on any metric first, then by the rank metric, lowest first.
        below = 0.0 if lowest < self.threshold else 1.0
        key = (below, 2.0 if rank is None else float(rank), lowest, float(row.get("line") or 0))
        entry = (tuple(-k for k in key), next(self._seq), _kept(record, row, scores))
        if len(self._worst) < self.limit:
            heapq.heappush(self._worst, entry)
        elif entry[0] > self._worst[0][0]:  # lower rank key than the best of the kept worst
            heapq.heapreplace(self._worst, entry)

    def worst(self) -> list[_Kept]:
        """Kept worst records, lowest rank-metric score first."""
        return [kept for _, _, kept in sorted(self._worst, key=lambda e: (tuple(-k for k in e[0]), e[1]))]

    @classmethod
    def from_rows(
        cls, rows: Iterable[Mapping[str, Any]], *, threshold: float = 0.5, limit: int = 50
    ) -> ReportCollector:
        """Rows as written to the JSONL, optionally carrying `query`, `answer` and `contexts`."""
        collector = cls(threshold=threshold, limit=limit)
        for row in rows:
            collector(None, row)
        return collector


def _label_is_bad(label: Any) -> bool | None:
    text = str(label).strip().casefold()
    if text in _BAD_LABELS:
        return True
    if text in _GOOD_LABELS:
        return False
    return None


def read_scores(
    scores: Path, records: Path | None = None
) -> Iterator[tuple[RagRecord | None, dict[str, Any]]]:
    """(record, row) for each row of a `tracescore score` JSONL; with `records` (the scored input file)
    each row gets its record by line number, for the texts. ValueError names a line that is not a row."""
    by_line: dict[int, RagRecord] = {}
    if records is not None:
        from tracescore.score._batch import read_records

        by_line = {line.number: line.record for line in read_records(records) if line.record is not None}
    with scores.open(encoding="utf-8-sig") as handle:
        for number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                row = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(
                    f"{scores} line {number}: not JSON ({exc.msg}); is it a `tracescore score` output?"
                ) from None
            if not isinstance(row, dict):
                raise ValueError(f"{scores} line {number}: expected a JSON object")
            yield by_line.get(row.get("line")) if isinstance(row.get("line"), int) else None, row


def _confusion_view(collector: ReportCollector) -> dict[str, Any] | None:
    counts = collector.confusion
    if not counts:
        return None
    tp, fn = counts[(True, True)], counts[(True, False)]
    tn, fp = counts[(False, False)], counts[(False, True)]
    tpr = tp / (tp + fn) if tp + fn else None
    tnr = tn / (tn + fp) if tn + fp else None
    rates = [r for r in (tpr, tnr) if r is not None]
    return {
        "metric": collector.rank_metric,
        "tp": tp,
        "fn": fn,
        "tn": tn,
        "fp": fp,
        "tpr": tpr,
        "tnr": tnr,
        "balanced_accuracy": sum(rates) / len(rates) if rates else None,
        "unlabelled": collector.unlabelled,
    }


def _is_metric(key: str, value: Any) -> bool:
    if key in _NOT_METRICS or isinstance(value, bool):
        return False
    return value is None or isinstance(value, int | float)


def _kept(record: RagRecord | None, row: Mapping[str, Any], scores: Mapping[str, Any]) -> _Kept:
    contexts = list(record.contexts) if record else list(row.get("contexts") or [])
    return _Kept(
        id=row.get("id"),
        line=row.get("line"),
        scores=dict(scores),
        results=dict(row.get("results") or {}),
        reason=row.get("reason"),
        query=record.query if record else row.get("query"),
        answer=record.answer if record else row.get("answer"),
        contexts=_capped(contexts),
    )


def _capped(contexts: list[str]) -> list[str]:
    out, budget = [], _CONTEXT_CHARS
    for text in contexts:
        text = str(text)
        if budget <= 0:
            break
        out.append(text if len(text) <= budget else text[:budget] + " … [truncated]")
        budget -= len(text)
    return out


# --- view models: plain dicts and lists, so the template stays logic-free -------------------------------


def _metric_summary(collector: ReportCollector, name: str, threshold: float) -> dict[str, Any]:
    scores = collector.scores[name]
    below = sum(s < threshold for s in scores)
    return {
        "name": name,
        "scored": len(scores),
        "unscored": sum(collector.unscored[name].values()),
        "reasons": collector.unscored[name].most_common(),
        "mean": statistics.fmean(scores) if scores else None,
        "median": statistics.median(scores) if scores else None,
        "below": below,
        "below_share": below / len(scores) if scores else None,
        "histogram": _histogram(scores, threshold),
    }


def _histogram(scores: list[float], threshold: float) -> dict[str, Any]:
    """Geometry of an inline SVG bar chart: 10 bins over [0, 1], the last one closed."""
    counts = [0] * _BINS
    for s in scores:
        counts[min(_BINS - 1, max(0, math.floor(s * _BINS)))] += 1
    width, height, left, bottom, top = 420, 190, 44, 36, 18
    plot_w, plot_h = width - left - 10, height - bottom - top
    peak = max(counts) or 1
    bar_w = plot_w / _BINS
    bars = []
    for i, count in enumerate(counts):
        bar_h = plot_h * count / peak
        bars.append(
            {
                "x": round(left + i * bar_w + 1, 1),
                "y": round(top + plot_h - bar_h, 1),
                "w": round(bar_w - 2, 1),
                "h": round(bar_h, 1),
                "count": count,
                "low": (i + 1) / _BINS <= threshold,
                "range": f"{i / _BINS:.1f}–{(i + 1) / _BINS:.1f}",
            }
        )
    ticks = [{"x": round(left + i * bar_w, 1), "label": f"{i / _BINS:g}"} for i in range(0, _BINS + 1, 2)]
    return {
        "width": width,
        "height": height,
        "left": left,
        "top": top,
        "base": top + plot_h,
        "right": left + plot_w,
        "peak": peak,
        "bars": bars,
        "ticks": ticks,
        "threshold_x": round(left + plot_w * min(1.0, max(0.0, threshold)), 1),
    }


def _highlight(answer: str, claims: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The answer cut into segments; sentences that carry claims become marks coloured by verdict."""
    by_sentence: dict[str, list[Mapping[str, Any]]] = {}
    for claim in claims:
        sentence = str(claim.get("sentence") or "").strip()
        if sentence:
            by_sentence.setdefault(sentence, []).append(claim)
    spans: list[tuple[int, int, list[Mapping[str, Any]]]] = []
    cursor = 0
    for sentence, group in by_sentence.items():
        # Sentences come in answer order, so search after the previous one first, then anywhere free.
        start = answer.find(sentence, cursor)
        if start < 0:
            start = answer.find(sentence)
        end = start + len(sentence)
        if start < 0 or any(start < e and s < end for s, e, _ in spans):
            continue  # not found verbatim: the claim is still listed under the answer
        spans.append((start, end, group))
        cursor = end
    segments, position = [], 0
    for start, end, group in sorted(spans, key=lambda s: s[0]):
        if start > position:
            segments.append({"text": answer[position:start]})
        worst = max(group, key=lambda c: _VERDICT_SEVERITY.get(str(c.get("verdict")), 2))
        segments.append(
            {
                "text": answer[start:end],
                "verdict": _css(worst.get("verdict")),
                "title": "\n\n".join(_claim_tooltip(c) for c in group),
            }
        )
        position = end
    if position < len(answer):
        segments.append({"text": answer[position:]})
    return segments


def _claim_tooltip(claim: Mapping[str, Any]) -> str:
    text = f"{claim.get('verdict', '?')}: {claim.get('claim', '')}"
    if claim.get("reason"):
        text += f"\n{claim['reason']}"
    if claim.get("evidence"):
        text += f'\nEvidence: "{claim["evidence"]}"'
    return text


def _css(verdict: Any) -> str:
    return str(verdict or "unknown").lower().replace("_", "-")


def _record_view(kept: _Kept, metrics: list[str], threshold: float) -> dict[str, Any]:
    faith = kept.results.get(RANK_METRIC) or {}
    details = faith.get("details") if isinstance(faith, Mapping) else None
    claims = details.get("claims") if isinstance(details, Mapping) else None
    claims = [c for c in claims if isinstance(c, Mapping)] if isinstance(claims, list) else []
    scores = []
    for name in metrics:
        result = kept.results.get(name) or {}
        score = kept.scores.get(name)
        scores.append(
            {
                "name": name,
                "score": score,
                "low": score is not None and score < threshold,
                "label": result.get("label") if isinstance(result, Mapping) else None,
                "reason": result.get("reason") if isinstance(result, Mapping) else None,
            }
        )
    answer = kept.answer
    return {
        "verdicts": " ".join(sorted({_css(c.get("verdict")) for c in claims})),
        "id": kept.id,
        "line": kept.line,
        "scores": scores,
        "query": kept.query,
        "answer": answer,
        "segments": _highlight(answer, claims) if answer is not None else [],
        "claims": [_claim_view(c) for c in claims],
        "contexts": kept.contexts,
        "reason": kept.reason,
    }


def _claim_view(claim: Mapping[str, Any]) -> dict[str, str]:
    """Every key the template reads, as text: a judge may leave any of them out."""
    view = {k: str(claim.get(k) or "") for k in ("claim", "verdict", "reason", "evidence")}
    view["css"] = _css(claim.get("verdict"))
    return view


def _snippet(text: str | None) -> str | None:
    if text is None or len(text) <= _SNIPPET_CHARS:
        return text
    return text[:_SNIPPET_CHARS] + "…"


@functools.cache
def _template() -> jinja2.Template:
    env = jinja2.Environment(
        autoescape=True,  # every text in a record is untrusted: a <script> in an answer must render as text
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    source = resources.files("tracescore.score").joinpath("report.html.jinja").read_text(encoding="utf-8")
    return env.from_string(source)


def render_report(
    rows: Iterable[Mapping[str, Any]] | ReportCollector,
    *,
    threshold: float = 0.5,
    title: str = DEFAULT_TITLE,
    limit: int = 50,
) -> str:
    """The report as one HTML page. `rows` is a `ReportCollector` fed by `score_file(on_row=...)`, or
    output rows (the JSONL), which may carry `query`/`answer`/`contexts` to show texts and highlights."""
    if isinstance(rows, ReportCollector):
        collector = rows
    else:
        collector = ReportCollector.from_rows(rows, threshold=threshold, limit=limit)
    metrics = collector.metrics
    worst = [k for k in collector.worst() if any(s is not None and s < threshold for s in k.scores.values())]
    unscored = []
    for kept in collector.unscored_kept:
        view = _record_view(kept, metrics, threshold)
        view.update(query=_snippet(kept.query), answer=_snippet(kept.answer))
        unscored.append(view)
    return _template().render(
        title=title,
        threshold=threshold,
        records=collector.records,
        invalid=collector.invalid,
        metrics=[_metric_summary(collector, m, threshold) for m in metrics],
        below_total=sum(m < threshold for m in collector.record_min),
        worst=[_record_view(k, metrics, threshold) for k in worst],
        unscored=unscored,
        unscored_total=collector.unscored_total,
        limit=collector.limit,
        rank_metric=RANK_METRIC if RANK_METRIC in metrics else None,
        confusion=_confusion_view(collector),
        verdicts=list(_VERDICT_SEVERITY)[::-1],
        css=_css,
    )
