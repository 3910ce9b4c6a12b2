"""docs/offline/metrics.md: custom metrics, the label rule's settings, and custom metrics declared in TOML.
The LLM-judged ones need an LLM judge; the Python ones are scored here by the offline judge, with the
consumer's metric of kb_metrics.py and what a metric that fails gives."""

# --8<-- [start:labels]
from tracescore.score import Faithfulness

Faithfulness()  # label_rule="any_unsupported", min_confidence=0.5, threshold=0.4: the default
Faithfulness(min_confidence=0.8)  # only near-certain unsupported claims decide the label
Faithfulness(label_rule="threshold", threshold=0.5)  # the score alone: the earlier rule
# --8<-- [end:labels]

# --8<-- [start:custom]
from tracescore.score import LLMJudgeMetric, python_metric, rubric  # noqa: E402

politeness = LLMJudgeMetric("politeness", "Rate how polite the answer is.", scale=(1, 5), samples=3)
concise = rubric("concise", "The answer is at most two sentences.")  # 1-5, normalised to 0..1
cites = rubric("cites_source", "The answer names its source.", scale="pass/fail")  # 0 or 1


@python_metric
def short_answer(record) -> float:
    return 1.0 if len(record.answer) < 500 else 0.0


@python_metric
def quotes_a_document(answer: str, contexts: tuple[str, ...]) -> float:  # given the fields it names
    return 1.0 if any(answer.rstrip(".").casefold() in c.casefold() for c in contexts) else 0.0


# --8<-- [end:custom]
from pathlib import Path  # noqa: E402

from tracescore.score import IncompatibleJudge, evaluate, make_metrics  # noqa: E402

record = {"query": "Where is the head office?", "contexts": ["It is in Delhi."], "answer": "In Delhi."}
for result in evaluate(record, [short_answer, quotes_a_document]):
    print(result.metric, result.score)
try:
    evaluate(record, [politeness])
except IncompatibleJudge as refused:
    print(f"refused before scoring: {refused}")
[declared] = make_metrics(["politeness"], Path(__file__).with_name("metrics.toml"))
print(type(declared).__name__, declared.name)

# --8<-- [start:outcomes]
from kb_metrics import (  # noqa: E402
    cites_a_document,
    looks_it_up,
    raises,
    returns_none,
    returns_seven,
    waits_on_a_service,
)

from tracescore.score import evaluate  # noqa: E402

cited = {"query": "How heavy is the Aurora X2?", "answer": "It weighs 1.2 kg [KB-101]."}
for answer in (cited["answer"], "It weighs 1.2 kg."):
    [result] = evaluate({**cited, "answer": answer}, [cites_a_document])
    print(result.metric, result.score, result.label, repr(result.reason), result.judge)
for result in evaluate(cited, [raises, returns_none, returns_seven, looks_it_up, waits_on_a_service]):
    print(f"{result.metric}: {result.status.value}, score {result.score}, reason {result.reason!r}")
# --8<-- [end:outcomes]
