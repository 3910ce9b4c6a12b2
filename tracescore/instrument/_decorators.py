"""`@tracescore.rag`, `@tracescore.retriever`, `@tracescore.generation`: which parameters hold the query,
the contexts, the messages, and how the answer is read from the return value.

That is resolved once, at decoration, into a `Spec`; the call shape (sync, async, generator, async
generator) picks one thin wrapper (`_calls.py`), and all of them drive the same recorder (`_recorders.py`),
so the span never depends on the shape. The manual forms live in `_manual.py` and are re-exported here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, overload

from tracescore import semconv
from tracescore.instrument._calls import Param, Spec, decorator, find_param
from tracescore.instrument._content import safe_str
from tracescore.instrument._manual import (
    attributes,
    generation_span,
    rag_span,
    record_contexts,
    retriever_span,
)
from tracescore.instrument._recorders import (
    GenerationRecorder,
    RagRecorder,
    Recorder,
    RetrieverRecorder,
    recording_failed,
    unguarded,
)

__all__ = [
    "attributes",
    "generation",
    "generation_span",
    "rag",
    "rag_span",
    "record_contexts",
    "retriever",
    "retriever_span",
]

_log = logging.getLogger("tracescore.instrument")
F = TypeVar("F", bound=Callable[..., Any])

_QUERY_PARAMS = ("query", "question")
_CONTEXT_PARAMS = ("contexts", "documents", "docs")
_MESSAGES_PARAMS = ("messages", "prompt")
_ANSWER_FIELDS = ("answer", "output", "response", "result", "content", "text")


def _join_text(chunks: list[Any]) -> str | None:
    return "".join(_chunk_text(c) for c in chunks) if chunks else None


def _chunk_text(chunk: Any) -> str:
    if isinstance(chunk, str):
        return chunk
    choices = getattr(chunk, "choices", None)  # an OpenAI stream chunk
    if choices:
        delta = getattr(choices[0], "delta", None)
        return safe_str(getattr(delta, "content", None) or "")
    return safe_str(chunk)


def _join_documents(chunks: list[Any]) -> list[Any]:
    documents: list[Any] = []
    for chunk in chunks:
        if isinstance(chunk, list | tuple):
            documents.extend(chunk)
        else:
            documents.append(chunk)
    return documents


def _text_of(value: Any) -> Any:
    """The answer in a return value: a str, a mapping's answer field, an OpenAI ChatCompletion's content."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return next((value[k] for k in _ANSWER_FIELDS if k in value), None)
    choices = getattr(value, "choices", None)
    if choices:
        message = getattr(choices[0], "message", None)
        return getattr(message, "content", None)
    return value


def _output(
    make: type[Recorder], setter: str, extract: Callable[[Any], Any] | None, default: Callable[[Any], Any]
) -> Callable[..., None]:
    put = unguarded(make, setter)

    def record(recorder: Recorder, value: Any) -> None:
        try:
            out = extract(value) if extract is not None else default(value)
        except Exception:  # a user extractor that fails is a bug to report, never the call's failure
            _log.warning("tracescore: an output extractor raised; the span has no output", exc_info=True)
            return
        try:
            put(recorder, out)
        except Exception as exc:
            recording_failed(put, exc)

    return record


def _common(
    fn: Callable[..., Any],
    route: str | None,
    route_arg: str | None,
    session_arg: str | None,
    user_arg: str | None,
) -> tuple[dict[str, Any], list[tuple[Param, str]]]:
    static: dict[str, Any] = {}
    inputs: list[tuple[Param, str]] = []
    if route is not None:
        static[semconv.TRACESCORE_ROUTE] = route
    for explicit, method, what in (
        (route_arg, "set_route", "route"),
        (session_arg, "set_session", "session id"),
        (user_arg, "set_user", "user id"),
    ):
        param = find_param(fn, explicit, (), what) if explicit is not None else None
        if param is not None:
            inputs.append((param, method))
    return static, inputs


# --- @rag ---------------------------------------------------------------------------------------------


@overload
def rag(func: F, /) -> F: ...
@overload
def rag(
    func: None = None,
    /,
    *,
    name: str | None = None,
    route: str | None = None,
    route_arg: str | None = None,
    query_arg: str | None = None,
    contexts_arg: str | None = None,
    session_arg: str | None = None,
    user_arg: str | None = None,
    answer: Callable[[Any], Any] | None = None,
) -> Callable[[F], F]: ...
def rag(
    func: F | None = None,
    /,
    *,
    name: str | None = None,
    route: str | None = None,
    route_arg: str | None = None,
    query_arg: str | None = None,
    contexts_arg: str | None = None,
    session_arg: str | None = None,
    user_arg: str | None = None,
    answer: Callable[[Any], Any] | None = None,
) -> F | Callable[[F], F]:
    """Trace a RAG call: the span the consumer scores. Bare `@rag` reads the query from a `query`/`question`
    parameter, the contexts from `contexts`/`documents`/`docs` (and from `@retriever` calls inside it), and
    the answer from the return value (a str, a mapping with an `answer` key, an OpenAI ChatCompletion, or
    whatever `answer=` extracts). `route` (fixed) or `route_arg` tags the span so alerts split per route."""

    def spec_for(fn: Callable[..., Any]) -> Spec:
        static, inputs = _common(fn, route, route_arg, session_arg, user_arg)
        query = find_param(fn, query_arg, _QUERY_PARAMS, "query")
        if query is None:
            raise TypeError(
                f"@tracescore.rag: cannot find the query of {fn.__qualname__}: name a parameter "
                f"{' or '.join(_QUERY_PARAMS)}, or pass query_arg='...'"
            )
        inputs.insert(0, (query, "set_query"))
        contexts = find_param(fn, contexts_arg, _CONTEXT_PARAMS, "contexts")
        if contexts is not None:
            inputs.insert(1, (contexts, "add_contexts"))
        return Spec(
            RagRecorder,
            name or fn.__name__,
            static,
            tuple(inputs),
            _output(RagRecorder, "set_answer", answer, _text_of),
            _join_text,
        )

    return decorator(func, spec_for)  # type: ignore[no-any-return]


# --- @retriever ---------------------------------------------------------------------------------------


def retriever(
    func: F | None = None,
    /,
    *,
    name: str | None = None,
    query_arg: str | None = None,
    documents: Callable[[Any], Any] | None = None,
) -> Any:
    """Trace a retrieval: a RETRIEVER span with the query (`query`/`question` parameter) and the returned
    documents (or what `documents=` extracts); they also roll up onto the enclosing `@rag` span."""

    def spec_for(fn: Callable[..., Any]) -> Spec:
        query = find_param(fn, query_arg, _QUERY_PARAMS, "query")
        inputs = ((query, "set_query"),) if query is not None else ()
        return Spec(
            RetrieverRecorder,
            name or fn.__name__,
            {},
            inputs,
            _output(RetrieverRecorder, "add_documents", documents, lambda value: value),
            _join_documents,
        )

    return decorator(func, spec_for)


# --- @generation --------------------------------------------------------------------------------------


def generation(
    func: F | None = None,
    /,
    *,
    name: str | None = None,
    messages_arg: str | None = None,
    model: str | None = None,
    model_arg: str | None = None,
    output: Callable[[Any], Any] | None = None,
) -> Any:
    """Trace an LLM call: an LLM span with the prompt (`messages`/`prompt` parameter: chat messages or a
    string), the model (`model=` or `model_arg`, default a `model` parameter) and the output (the return
    value: a str, a mapping, an OpenAI ChatCompletion, a stream of str or OpenAI chunks, or what
    `output=` extracts)."""

    def spec_for(fn: Callable[..., Any]) -> Spec:
        inputs: list[tuple[Param, str]] = []
        messages = find_param(fn, messages_arg, _MESSAGES_PARAMS, "messages")
        if messages is not None:
            inputs.append((messages, "set_messages"))
        model_param = find_param(fn, model_arg, () if model is not None else ("model",), "model")
        if model_param is not None:
            inputs.append((model_param, "set_model"))
        static = {semconv.LLM_MODEL_NAME: model, semconv.GEN_AI_REQUEST_MODEL: model} if model else {}
        return Spec(
            GenerationRecorder,
            name or fn.__name__,
            static,
            tuple(inputs),
            _output(GenerationRecorder, "set_output", output, _text_of),
            _join_text,
        )

    return decorator(func, spec_for)
