"""docs/offline/metrics.md, Which metrics need the documents: each metric's `uses_contexts`, inferred or
set, and a record without a contexts column."""

# --8<-- [start:contexts]
from tracescore.score import UsesContexts, evaluate, make_metrics, python_metric, rubric


@python_metric
def quotes_a_document(answer: str, contexts: tuple[str, ...]) -> float:  # takes contexts: NEEDED
    return 1.0 if any(answer.rstrip(".").casefold() in c.casefold() for c in contexts) else 0.0


@python_metric(uses_contexts=UsesContexts.NEEDED)  # given the record, it says what it reads
def cites_a_document(record) -> float:
    return float(any(record.answer.rstrip(".") in c for c in record.contexts))


cited = rubric("cited", "The answer quotes {{ context }}.")  # names the documents: NEEDED
concise = rubric("concise", "The answer is at most two sentences.")  # the whole record: IF_PRESENT

# The documents under a name tracescore does not read (`column_map={'contexts': 'passages'}` reads it).
record = {"query": "Where is the head office?", "passages": ["It is in Delhi."], "answer": "In Delhi."}
[unread, quality] = evaluate(record, [quotes_a_document, "quality"])
print(unread.metric, unread.status, "-", unread.reason)
print(quality.metric, f"{quality.score:.2f}", "-", *quality.warnings)
# --8<-- [end:contexts]

for metric in (
    quotes_a_document,
    cites_a_document,
    cited,
    concise,
    *make_metrics(["faithfulness", "quality"]),
):
    print(f"{metric.name}: uses_contexts={metric.uses_contexts}")
