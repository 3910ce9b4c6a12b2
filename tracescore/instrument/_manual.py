"""Manual capture, for code that cannot be decorated, and attributes for every span started in a block.

The manual spans drive the same recorders as the decorators, so a span carries the same attributes however
it was made.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context

from tracescore import semconv
from tracescore.instrument._recorders import (
    GenerationRecorder,
    RagRecorder,
    RetrieverRecorder,
    context_attributes,
    current_rag,
)

__all__ = ["attributes", "generation_span", "rag_span", "record_contexts", "retriever_span"]


def rag_span(name: str = "rag", *, route: str | None = None) -> RagRecorder:
    """For code that cannot be decorated: `with tracescore.rag_span("answer") as s: s.set_query(q);
    s.add_contexts(docs); s.set_answer(a)`. The span is current inside the block and ends with it."""
    return RagRecorder(name, {semconv.TRACESCORE_ROUTE: route} if route is not None else None)


def retriever_span(name: str = "retrieve") -> RetrieverRecorder:
    """`with tracescore.retriever_span() as s: s.set_query(q); s.add_documents(docs)`."""
    return RetrieverRecorder(name)


def generation_span(name: str = "generate", *, model: str | None = None) -> GenerationRecorder:
    """`with tracescore.generation_span(model="gpt-4o") as s: s.set_messages(m); s.set_output(text)`."""
    recorder = GenerationRecorder(name)
    recorder.set_model(model)
    return recorder


def record_contexts(contexts: Iterable[Any]) -> None:
    """Attach retrieved contexts to the enclosing RAG span, for functions that retrieve inside themselves."""
    rag_recorder = current_rag()
    if rag_recorder is not None:
        rag_recorder.add_contexts(contexts)


@contextmanager
def attributes(
    *,
    session_id: str | None = None,
    user_id: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    tags: Iterable[str] | None = None,
) -> Iterator[None]:
    """Session id, user id, metadata and tags for every tracescore span started inside the block (and in
    tasks started from it): `with tracescore.attributes(session_id=..., user_id=...): ...`."""
    token = otel_context.attach(context_attributes(session_id, user_id, metadata, tags))
    try:
        yield
    finally:
        otel_context.detach(token)
