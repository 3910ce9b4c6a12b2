"""The instrumented Northwind assistant: every answer is recorded as a tracescore RAG span."""

from __future__ import annotations

import tracescore

from . import pipeline
from .answerer import respond
from .questions import Question
from .retriever import Retriever

SERVICE_NAME = "northwind-assistant"

_retriever = Retriever()


def start(bootstrap: str, topic: str = "otlp_spans") -> tracescore.Instrumentation:
    return tracescore.init(service_name=SERVICE_NAME, bootstrap_servers=bootstrap, topic=topic)


@tracescore.rag(route_arg="route")
def answer(query: str, contexts: list[str], route: str, alteration: str | None = None) -> str:
    return respond(query, contexts, alteration)[0]


def _traced_answer(
    query: str, contexts: list[str], route: str, alteration: str | None
) -> tuple[str, str | None]:
    text = answer(query, contexts, route, alteration)
    # respond() is deterministic, so recomputing tells which alteration the traced answer carries
    # without putting that ground truth on the span where the scorer could see it.
    return text, respond(query, contexts, alteration)[1]


def ask(question: Question) -> pipeline.Result:
    return pipeline.run(question, _retriever, _traced_answer)
