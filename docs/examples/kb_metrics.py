"""docs/offline/metrics.md: a custom metric for `tracescore consume`, in a module of its own that it imports
by dotted path (`--metrics faithfulness,kb_metrics:cites_a_document`, this folder on PYTHONPATH). No code
at import: the consumer imports the module. tests/docs/test_examples_kafka.py scores it through the real
broker; docs/examples/custom_metrics.py scores it and the failing metrics below with evaluate()."""

# --8<-- [start:cites]
import re

from tracescore.model import MetricResult
from tracescore.score import python_metric

CITATION = re.compile(r"\[(KB-\d+)\]")


@python_metric
def cites_a_document(answer: str) -> MetricResult:
    """Pass when the answer cites a knowledge-base article as [KB-123]."""
    cited = CITATION.findall(answer)
    return MetricResult(
        metric="cites_a_document",  # renamed to the function's name anyway
        score=1.0 if cited else 0.0,
        label="pass" if cited else "fail",  # read as good and bad: `tracescore tail --flagged`, alerts
        reason=f"cites {', '.join(cited)}" if cited else "no [KB-nnn] citation in the answer",
        judge="",  # set to the judge that ran the metric
    )


# --8<-- [end:cites]


# --8<-- [start:failing]
import asyncio  # noqa: E402
import time  # noqa: E402


@python_metric
def raises(answer: str) -> float:
    raise KeyError("kb_index")


@python_metric
def returns_none(answer: str) -> float | None:
    return None


@python_metric
def returns_seven(answer: str) -> float:
    return 7


@python_metric
async def looks_it_up(answer: str) -> float:  # async: runs on the event loop, so it must never block
    await asyncio.sleep(0.01)  # your async HTTP call
    return 1.0


@python_metric(timeout_s=0.5)  # 30 s unless you say; None: no limit
def waits_on_a_service(answer: str) -> float:  # plain: runs on a thread, other interactions go on
    time.sleep(60)  # a service that does not answer
    return 1.0


# --8<-- [end:failing]
