"""`@tracescore.rag`, `@tracescore.retriever`, `@tracescore.generation` and their manual forms.

What to read from a call (which parameter holds the query, the contexts, the messages ...) is resolved
once, at decoration. The call shape (sync, async, generator, async generator) picks one thin wrapper; all
of them drive the same recorder (`_recorders.py`), so the span never depends on the shape. The span is
current only while the application's own code runs, so a generator's consumer never inherits it.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from opentelemetry import context as otel_context

from tracescore import semconv
from tracescore.instrument._content import safe_str
from tracescore.instrument._recorders import (
    GenerationRecorder,
    RagRecorder,
    Recorder,
    RetrieverRecorder,
    context_attributes,
    current_rag,
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
SCOPE_NAME = semconv.SDK_SCOPE

_QUERY_PARAMS = ("query", "question")
_CONTEXT_PARAMS = ("contexts", "documents", "docs")
_MESSAGES_PARAMS = ("messages", "prompt")
_ANSWER_FIELDS = ("answer", "output", "response", "result", "content", "text")


@dataclass(frozen=True, slots=True)
class _Param:
    """Reads one parameter's value from a call without binding the whole signature (7 µs saved per call)."""

    name: str
    position: int | None  # None: keyword-only
    default: Any

    def read(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self.name in kwargs:
            return kwargs[self.name]
        if self.position is not None and self.position < len(args):
            return args[self.position]
        return None if self.default is inspect.Parameter.empty else self.default


def _param(
    fn: Callable[..., Any], explicit: str | None, candidates: Sequence[str], what: str
) -> _Param | None:
    params = list(inspect.signature(fn).parameters.values())
    names = [p.name for p in params]
    if explicit is not None and explicit not in names:
        raise TypeError(f"tracescore: {fn.__qualname__} has no parameter {explicit!r} for the {what}")
    name = explicit or next((c for c in candidates if c in names), None)
    if name is None:
        return None
    index = names.index(name)
    param = params[index]
    positional = param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD)
    return _Param(name, index if positional else None, param.default)


@dataclass(frozen=True, slots=True)
class _Spec:
    """Everything a wrapper needs per call, fixed at decoration."""

    make: type[Recorder]
    span_name: str
    static: Mapping[str, Any]
    inputs: tuple[tuple[_Param, str], ...]  # (parameter, recorder method fed with its value)
    output: Callable[[Recorder, Any], None]
    join: Callable[[list[Any]], Any]  # a stream's chunks as one output

    def start(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Recorder:
        recorder = self.make(self.span_name, self.static, start=False)
        for param, method in self.inputs:
            value = param.read(args, kwargs)
            if value is not None:
                getattr(recorder, method)(value)
        recorder.begin()
        return recorder


def _wrap(fn: Any, spec_for: Callable[[Callable[..., Any]], _Spec]) -> Any:
    # A classmethod/staticmethod object (decorator applied above @classmethod): wrap its function, re-wrap.
    if isinstance(fn, classmethod | staticmethod):
        return type(fn)(_wrap(fn.__func__, spec_for))
    spec = spec_for(fn)
    if inspect.isasyncgenfunction(fn):

        async def async_gen_wrapper(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            recorder = spec.start(args, kwargs)
            chunks: list[Any] = []
            error: BaseException | None = None
            try:
                token = otel_context.attach(recorder.context)
                try:
                    stream = fn(*args, **kwargs)
                finally:
                    otel_context.detach(token)
                try:
                    while True:
                        token = otel_context.attach(recorder.context)
                        try:
                            chunk = await stream.__anext__()
                        except StopAsyncIteration:
                            break
                        finally:
                            otel_context.detach(token)
                        chunks.append(chunk)
                        yield chunk
                finally:
                    await stream.aclose()
                spec.output(recorder, spec.join(chunks))
            except GeneratorExit:
                raise  # the consumer stopped early: not an error of the call
            except BaseException as exc:
                error = exc
                raise
            finally:
                recorder.end(error)

        wrapper: Callable[..., Any] = async_gen_wrapper
    elif inspect.iscoroutinefunction(fn):

        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            recorder = spec.start(args, kwargs)
            token = otel_context.attach(recorder.context)
            try:
                value = await fn(*args, **kwargs)
            except BaseException as exc:
                otel_context.detach(token)
                recorder.end(exc)
                raise
            otel_context.detach(token)
            spec.output(recorder, value)
            recorder.end()
            return value

        wrapper = async_wrapper
    elif inspect.isgeneratorfunction(fn):

        def gen_wrapper(*args: Any, **kwargs: Any) -> Iterator[Any]:
            recorder = spec.start(args, kwargs)
            chunks: list[Any] = []
            error: BaseException | None = None
            try:
                stream = fn(*args, **kwargs)
                try:
                    while True:
                        token = otel_context.attach(recorder.context)
                        try:
                            chunk = next(stream)
                        except StopIteration:
                            break
                        finally:
                            otel_context.detach(token)
                        chunks.append(chunk)
                        yield chunk
                finally:
                    stream.close()
                spec.output(recorder, spec.join(chunks))
            except GeneratorExit:
                raise
            except BaseException as exc:
                error = exc
                raise
            finally:
                recorder.end(error)

        wrapper = gen_wrapper
    else:

        def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
            recorder = spec.start(args, kwargs)
            token = otel_context.attach(recorder.context)
            try:
                value = fn(*args, **kwargs)
            except BaseException as exc:
                otel_context.detach(token)
                recorder.end(exc)
                raise
            otel_context.detach(token)
            spec.output(recorder, value)
            recorder.end()
            return value

        wrapper = sync_wrapper
    return functools.wraps(fn)(wrapper)


def _decorator(func: Any, spec_for: Callable[[Callable[..., Any]], _Spec]) -> Any:
    return _wrap(func, spec_for) if func is not None else functools.partial(_wrap, spec_for=spec_for)


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
    setter: str, extract: Callable[[Any], Any] | None, default: Callable[[Any], Any]
) -> Callable[..., None]:
    def record(recorder: Recorder, value: Any) -> None:
        try:
            out = extract(value) if extract is not None else default(value)
        except Exception:  # a user extractor that fails is a bug to report, never the call's failure
            _log.warning("tracescore: an output extractor raised; the span has no output", exc_info=True)
            return
        getattr(recorder, setter)(out)

    return record


def _common(
    fn: Callable[..., Any],
    route: str | None,
    route_arg: str | None,
    session_arg: str | None,
    user_arg: str | None,
) -> tuple[dict[str, Any], list[tuple[_Param, str]]]:
    static: dict[str, Any] = {}
    inputs: list[tuple[_Param, str]] = []
    if route is not None:
        static[semconv.TRACESCORE_ROUTE] = route
    for explicit, method, what in (
        (route_arg, "set_route", "route"),
        (session_arg, "set_session", "session id"),
        (user_arg, "set_user", "user id"),
    ):
        param = _param(fn, explicit, (), what) if explicit is not None else None
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

    def spec_for(fn: Callable[..., Any]) -> _Spec:
        static, inputs = _common(fn, route, route_arg, session_arg, user_arg)
        query = _param(fn, query_arg, _QUERY_PARAMS, "query")
        if query is None:
            raise TypeError(
                f"@tracescore.rag: cannot find the query of {fn.__qualname__}: name a parameter "
                f"{' or '.join(_QUERY_PARAMS)}, or pass query_arg='...'"
            )
        inputs.insert(0, (query, "set_query"))
        contexts = _param(fn, contexts_arg, _CONTEXT_PARAMS, "contexts")
        if contexts is not None:
            inputs.insert(1, (contexts, "add_contexts"))
        return _Spec(
            RagRecorder,
            name or fn.__name__,
            static,
            tuple(inputs),
            _output("set_answer", answer, _text_of),
            _join_text,
        )

    return _decorator(func, spec_for)  # type: ignore[no-any-return]


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

    def spec_for(fn: Callable[..., Any]) -> _Spec:
        query = _param(fn, query_arg, _QUERY_PARAMS, "query")
        inputs = ((query, "set_query"),) if query is not None else ()
        return _Spec(
            RetrieverRecorder,
            name or fn.__name__,
            {},
            inputs,
            _output("add_documents", documents, lambda value: value),
            _join_documents,
        )

    return _decorator(func, spec_for)


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

    def spec_for(fn: Callable[..., Any]) -> _Spec:
        inputs: list[tuple[_Param, str]] = []
        messages = _param(fn, messages_arg, _MESSAGES_PARAMS, "messages")
        if messages is not None:
            inputs.append((messages, "set_messages"))
        model_param = _param(fn, model_arg, () if model is not None else ("model",), "model")
        if model_param is not None:
            inputs.append((model_param, "set_model"))
        static = {semconv.LLM_MODEL_NAME: model, semconv.GEN_AI_REQUEST_MODEL: model} if model else {}
        return _Spec(
            GenerationRecorder,
            name or fn.__name__,
            static,
            tuple(inputs),
            _output("set_output", output, _text_of),
            _join_text,
        )

    return _decorator(func, spec_for)


# --- manual capture -----------------------------------------------------------------------------------


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
