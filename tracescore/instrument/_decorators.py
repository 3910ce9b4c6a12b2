"""`@tracescore.rag`: one span per RAG call carrying the query, the retrieved contexts and the answer.

The call shape (sync, async, generator, async generator) is picked once at decoration; all four wrappers
share one span context manager, so what is recorded never differs between them.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode

from tracescore import semconv

__all__ = ["rag", "record_contexts"]

_log = logging.getLogger("tracescore.instrument")
F = TypeVar("F", bound=Callable[..., Any])

SCOPE_NAME = semconv.SDK_SCOPE
_QUERY_PARAMS = ("query", "question")
_CONTEXT_PARAMS = ("contexts", "documents", "docs")
_TEXT_FIELDS = ("page_content", "content", "text")
_ANSWER_FIELDS = ("answer", "output", "response", "result")

_tracer = trace.get_tracer(SCOPE_NAME)

# GenAI message lists with one text part; only the text needs JSON-encoding on the hot path (the result is
# the same bytes json.dumps gives for the whole structure).
_USER_MESSAGES = '[{"role": "user", "parts": [{"type": "text", "content": %s}]}]'
_ASSISTANT_MESSAGES = (
    '[{"role": "assistant", "parts": [{"type": "text", "content": %s}], "finish_reason": "stop"}]'
)


@dataclass(frozen=True)
class _RagSpec:
    """What to read from one decorated function's calls; built once at decoration."""

    span_name: str
    signature: inspect.Signature
    query_param: str
    contexts_param: str | None
    route: str | None
    route_param: str | None
    answer_from: Callable[[Any], Any] | None


@dataclass
class _Outcome:
    span: Span
    value: Any = None
    chunks: list[Any] = field(default_factory=list)


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
    answer: Callable[[Any], Any] | None = None,
) -> F | Callable[[F], F]:
    """Trace a RAG call. Bare `@rag` reads the query from a `query`/`question` parameter, the contexts from
    `contexts`/`documents`/`docs` and the answer from the return value (a str, a mapping with an `answer`
    key, or anything `answer=` extracts). `route` (fixed) or `route_arg` (a parameter) tags the span so that
    alerts can be split per route."""

    def decorate(fn: F) -> F:
        spec = _build_spec(fn, name, route, route_arg, query_arg, contexts_arg, answer)
        return _wrap(fn, spec)

    return decorate(func) if func is not None else decorate


def record_contexts(contexts: Iterable[Any]) -> None:
    """Attach retrieved contexts to the current RAG span, for functions that retrieve inside themselves."""
    _guarded(_set_contexts, trace.get_current_span(), contexts)


def _build_spec(
    fn: Callable[..., Any],
    name: str | None,
    route: str | None,
    route_arg: str | None,
    query_arg: str | None,
    contexts_arg: str | None,
    answer: Callable[[Any], Any] | None,
) -> _RagSpec:
    signature = inspect.signature(fn)
    params = signature.parameters

    def pick(explicit: str | None, candidates: Sequence[str], what: str, required: bool) -> str | None:
        if explicit is not None:
            if explicit not in params:
                raise TypeError(
                    f"@tracescore.rag: {fn.__qualname__} has no parameter {explicit!r} for the {what}"
                )
            return explicit
        found = next((p for p in candidates if p in params), None)
        if found is None and required:
            raise TypeError(
                f"@tracescore.rag: cannot find the {what} of {fn.__qualname__}: name a parameter "
                f"{' or '.join(candidates)}, or pass {what}_arg='...'"
            )
        return found

    query_param = pick(query_arg, _QUERY_PARAMS, "query", required=True)
    assert query_param is not None
    return _RagSpec(
        span_name=name or fn.__name__,
        signature=signature,
        query_param=query_param,
        contexts_param=pick(contexts_arg, _CONTEXT_PARAMS, "contexts", required=False),
        route=route,
        route_param=pick(route_arg, (), "route", required=False) if route_arg else None,
        answer_from=answer,
    )


def _wrap(fn: F, spec: _RagSpec) -> F:
    if inspect.isasyncgenfunction(fn):

        async def async_gen_wrapper(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            with _rag_span(spec, args, kwargs) as outcome:
                stream = fn(*args, **kwargs)
                try:
                    while True:
                        # Current only while the stream advances, so the caller's own spans between chunks
                        # are not parented to the RAG span.
                        with _current(outcome):
                            try:
                                chunk = await stream.__anext__()
                            except StopAsyncIteration:
                                break
                        outcome.chunks.append(chunk)
                        yield chunk
                finally:
                    await stream.aclose()

        wrapper: Callable[..., Any] = async_gen_wrapper
    elif inspect.iscoroutinefunction(fn):

        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            with _rag_span(spec, args, kwargs) as outcome, _current(outcome):
                outcome.value = await fn(*args, **kwargs)
                return outcome.value

        wrapper = async_wrapper
    elif inspect.isgeneratorfunction(fn):

        def gen_wrapper(*args: Any, **kwargs: Any) -> Iterator[Any]:
            with _rag_span(spec, args, kwargs) as outcome:
                stream = fn(*args, **kwargs)
                try:
                    while True:
                        with _current(outcome):
                            try:
                                chunk = next(stream)
                            except StopIteration:
                                break
                        outcome.chunks.append(chunk)
                        yield chunk
                finally:
                    stream.close()

        wrapper = gen_wrapper
    else:

        def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
            with _rag_span(spec, args, kwargs) as outcome, _current(outcome):
                outcome.value = fn(*args, **kwargs)
                return outcome.value

        wrapper = sync_wrapper
    return functools.wraps(fn)(wrapper)  # type: ignore[return-value]


@contextmanager
def _rag_span(spec: _RagSpec, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Iterator[_Outcome]:
    """The one span lifecycle behind all four wrappers: start, record inputs, record the answer or the
    error, end. The wrappers make the span current (`_current`) only around the application's own code."""
    span = _tracer.start_span(spec.span_name)
    outcome = _Outcome(span)
    try:
        _guarded(_record_inputs, span, spec, args, kwargs)
        yield outcome
        _guarded(_record_answer, span, spec, outcome)
    except GeneratorExit:
        raise  # the caller stopped consuming a stream: not an error of the RAG call
    except BaseException as exc:
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        raise
    finally:
        span.end()


def _current(outcome: _Outcome) -> AbstractContextManager[Span]:
    return trace.use_span(
        outcome.span, end_on_exit=False, record_exception=False, set_status_on_exception=False
    )


def _guarded(record: Callable[..., None], *args: Any) -> None:
    # Instrumentation must never break the application's call: a recording failure is logged, not raised.
    try:
        record(*args)
    except Exception:
        _log.warning("tracescore could not record a RAG attribute", exc_info=True)


def _record_inputs(span: Span, spec: _RagSpec, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    if not span.is_recording():
        return
    call = spec.signature.bind_partial(*args, **kwargs)
    call.apply_defaults()  # a defaulted `contexts=` or `route=` is still what the call used
    bound = call.arguments
    query = bound.get(spec.query_param)
    span.set_attribute(semconv.OPENINFERENCE_SPAN_KIND, "CHAIN")
    if query is not None:
        span.set_attribute(semconv.INPUT_VALUE, str(query))
        span.set_attribute(semconv.INPUT_MIME_TYPE, "text/plain")
        span.set_attribute(semconv.GEN_AI_INPUT_MESSAGES, _USER_MESSAGES % json.dumps(str(query)))
    route = bound.get(spec.route_param) if spec.route_param else spec.route
    if route is not None:
        span.set_attribute(semconv.TRACESCORE_ROUTE, str(route))
    if spec.contexts_param and bound.get(spec.contexts_param) is not None:
        _set_contexts(span, bound[spec.contexts_param])


def _record_answer(span: Span, spec: _RagSpec, outcome: _Outcome) -> None:
    if not span.is_recording():
        return
    value: Any = "".join(str(c) for c in outcome.chunks) if outcome.chunks else outcome.value
    if spec.answer_from is not None:
        value = spec.answer_from(value)
    elif isinstance(value, Mapping):
        value = next((value[k] for k in _ANSWER_FIELDS if k in value), None)
    if value is None:
        return
    text = str(value)
    span.set_attribute(semconv.OUTPUT_VALUE, text)
    span.set_attribute(semconv.OUTPUT_MIME_TYPE, "text/plain")
    span.set_attribute(semconv.GEN_AI_OUTPUT_MESSAGES, _ASSISTANT_MESSAGES % json.dumps(text))


def _set_contexts(span: Span, contexts: Any) -> None:
    if not span.is_recording():
        return
    if isinstance(contexts, str | bytes | Mapping) or not isinstance(contexts, Iterable):
        contexts = [contexts]
    for index, item in enumerate(contexts):
        span.set_attribute(semconv.document_content_key(index), _context_text(item))


def _context_text(item: Any) -> str:
    """Text of one retrieved item: a str, a mapping or object with page_content/content/text (LangChain,
    LlamaIndex and most vector stores use one of these)."""
    if isinstance(item, str):
        return item
    if isinstance(item, Mapping):
        for key in _TEXT_FIELDS:
            if key in item:
                return str(item[key])
    for attr in _TEXT_FIELDS:
        text = getattr(item, attr, None)
        if isinstance(text, str):
            return text
    return str(item)
