"""Span recorders: the one place where RAG, retrieval and generation content becomes span attributes.

The decorators and the manual spans (`rag_span`, `retriever_span`, `generation_span`) both drive these, so
what a span carries never depends on how it was made. Every method is guarded: a recording problem is
logged (once per kind of problem) and never reaches the application.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode

from tracescore import semconv
from tracescore.instrument._content import ContentPolicy, flat_items, safe_json, safe_str
from tracescore.instrument._documents import Document, DocumentsMixin, id_and_score, read_documents

__all__ = [
    "GenerationRecorder",
    "RagRecorder",
    "Recorder",
    "RetrieverRecorder",
    "context_attributes",
    "current_rag",
    "policy",
    "recording_failed",
    "set_policy",
    "unguarded",
    "use_provider",
]

_log = logging.getLogger("tracescore.instrument")
# A ProxyTracer (it follows whichever provider becomes global) until `use_provider` (tracescore.init) hands
# in the provider spans go to: then its own tracer, one delegation less per span.
_tracer: trace.Tracer = trace.get_tracer(semconv.SDK_SCOPE)
_RAG_KEY = otel_context.create_key("tracescore.rag")
_ATTRIBUTES_KEY = otel_context.create_key("tracescore.attributes")
_R = TypeVar("_R")

# GenAI message lists with one text part; only the text needs JSON-encoding (same bytes as json.dumps of the
# whole structure, a third of the cost).
_USER_MESSAGES = '[{"role": "user", "parts": [{"type": "text", "content": %s}]}]'
_ASSISTANT_MESSAGES = (
    '[{"role": "assistant", "parts": [{"type": "text", "content": %s}], "finish_reason": "stop"}]'
)


class _MessageKeys(NamedTuple):
    """Where one side of a rag call goes: its text, the text's MIME type, and its GenAI message list."""

    value: str
    mime_type: str
    messages: str
    template: str


_QUESTION = _MessageKeys(
    semconv.INPUT_VALUE, semconv.INPUT_MIME_TYPE, semconv.GEN_AI_INPUT_MESSAGES, _USER_MESSAGES
)
_ANSWER = _MessageKeys(
    semconv.OUTPUT_VALUE, semconv.OUTPUT_MIME_TYPE, semconv.GEN_AI_OUTPUT_MESSAGES, _ASSISTANT_MESSAGES
)

# json.dumps of a str (the same bytes), without the encoder's two Python layers on the application's path.
_json_text: Callable[[str], str] = json.encoder.encode_basestring_ascii  # type: ignore[attr-defined]

_policy = ContentPolicy()
# Retrievers of one rag call may run in threads that copied its context; numbering their documents is the
# only shared step, and brief, so one lock serves every rag span.
_DOCUMENT_NUMBERING = threading.Lock()
_warned: set[str] = set()
# Whether any context ever carried attributes for tracescore spans: until then a span skips the lookup.
_attributes_used = False


def policy() -> ContentPolicy:
    return _policy


def use_provider(provider: trace.TracerProvider) -> None:
    global _tracer
    _tracer = provider.get_tracer(semconv.SDK_SCOPE)


def set_policy(new: ContentPolicy) -> None:
    """Installed by `tracescore.init()`; recorders read it when a span starts."""
    global _policy
    _policy = new


def _guarded(method: Callable[..., _R]) -> Callable[..., _R | None]:
    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> _R | None:
        try:
            return method(*args, **kwargs)
        except Exception as exc:
            recording_failed(method, exc)
            return None

    return call


def recording_failed(method: Callable[..., Any], error: Exception) -> None:
    """Instrumentation must never break the application: log each kind of failure once, not per call."""
    what = f"{method.__qualname__}: {type(error).__name__}"
    _warn_once(what, "tracescore could not record %s", what, exc_info=True)


def unguarded(recorder: type[Recorder], method: str) -> Callable[..., Any]:
    """A recorder method without its guard, for a caller that guards the call itself (the decorators, one
    frame less per input on the application's path)."""
    function = getattr(recorder, method)
    return getattr(function, "__wrapped__", function)  # type: ignore[no-any-return]


def _warn_once(kind: str, message: str, *args: Any, exc_info: bool = False) -> None:
    if kind not in _warned:
        _warned.add(kind)
        _log.warning(message, *args, exc_info=exc_info)


def current_rag() -> RagRecorder | None:
    value = otel_context.get_value(_RAG_KEY)
    return value if isinstance(value, RagRecorder) else None


def context_attributes(
    session_id: str | None = None,
    user_id: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    tags: Iterable[str] | None = None,
) -> otel_context.Context:
    """A context whose tracescore spans carry these attributes (merged over any already in the context)."""
    global _attributes_used
    _attributes_used = True
    attrs: dict[str, Any] = dict(otel_context.get_value(_ATTRIBUTES_KEY) or {})  # type: ignore[call-overload]
    if session_id is not None:
        attrs[semconv.SESSION_ID] = safe_str(session_id)
        attrs[semconv.GEN_AI_CONVERSATION_ID] = safe_str(session_id)
    if user_id is not None:
        attrs[semconv.USER_ID] = safe_str(user_id)
    if metadata is not None:
        attrs[semconv.METADATA] = safe_json(dict(metadata))
    if tags is not None:
        attrs[semconv.TAG_TAGS] = [safe_str(t) for t in tags]
    return otel_context.set_value(_ATTRIBUTES_KEY, attrs)


class Recorder:
    """One span and what has been recorded on it. Created per call; never shared between calls."""

    kind = semconv.SPAN_KIND_CHAIN
    operation = "invoke_workflow"
    # The context key under which a recorder puts itself in its span's context (a rag span, for the
    # retrievers inside it); None: not at all.
    context_key: str | None = None
    # Set per instance only when something is cut or left out (the common call never pays for either).
    _truncated: tuple[str, ...] = ()
    _documents_omitted = 0

    def __init__(self, name: str, attributes: Mapping[str, Any] | None = None, *, start: bool = True) -> None:
        """`start=False` (the decorators): inputs recorded before `begin()` go into the span's start
        attributes, one attribute update less per call on the application's path."""
        self.policy = _policy
        self._name = name
        pending: dict[str, Any] = {
            semconv.OPENINFERENCE_SPAN_KIND: self.kind,
            semconv.GEN_AI_OPERATION_NAME: self.operation,
        }
        inherited = otel_context.get_value(_ATTRIBUTES_KEY) if _attributes_used else None
        if inherited:
            pending.update(inherited)  # type: ignore[call-overload]
            metadata = pending.pop(semconv.METADATA, None)
            if metadata is not None:  # free text: under the content controls like any other
                self._text(semconv.METADATA, metadata, pending)
        if attributes:
            pending.update(attributes)
        if not self.policy.capture:
            pending[semconv.TRACESCORE_CONTENT_CAPTURED] = False
        self._pending: dict[str, Any] | None = pending
        if start:
            self.begin()

    def begin(self) -> None:
        """Start the span with everything recorded so far."""
        pending, self._pending = self._pending, None
        try:
            self.span: Span = _tracer.start_span(self._name, attributes=pending)
        except Exception as exc:
            self.span = _untraced(self._name, exc)
        context = trace.set_span_in_context(self.span)
        if self.context_key is not None:
            context = otel_context.set_value(self.context_key, self, context)
        self.context = context

    def _put(self, attributes: dict[str, Any]) -> None:
        if self._pending is not None:
            self._pending.update(attributes)
        else:
            self.span.set_attributes(attributes)

    def _text(self, key: str, value: Any, out: dict[str, Any]) -> str | None:
        """Put the policy's form of `value` under `key` in `out`; None when content is not captured."""
        policy = self.policy
        if policy.verbatim and type(value) is str and len(value) <= policy.max_chars:
            out[key] = value
            return value
        if not policy.capture:
            return None
        text, truncated = policy.text(value)
        if truncated:
            self._truncated += (key,)
        out[key] = text
        return text

    @_guarded
    def set_attribute(self, key: str, value: Any) -> None:
        self._put({key: value})

    @_guarded
    def set_route(self, route: Any) -> None:
        self._put({semconv.TRACESCORE_ROUTE: safe_str(route)})

    @_guarded
    def set_session(self, session_id: Any) -> None:
        text = safe_str(session_id)
        self._put({semconv.SESSION_ID: text, semconv.GEN_AI_CONVERSATION_ID: text})

    @_guarded
    def set_user(self, user_id: Any) -> None:
        self._put({semconv.USER_ID: safe_str(user_id)})

    @_guarded
    def set_metadata(self, metadata: Mapping[str, Any]) -> None:
        """Free metadata (JSON), under the content controls."""
        out: dict[str, Any] = {}
        self._text(semconv.METADATA, safe_json(dict(metadata)), out)
        self._put(out)

    def end(self, error: BaseException | None = None) -> None:
        """End the span, marking what the content controls changed and the error, if any. Never raises; a
        second end is ignored, with a warning."""
        if self._pending is not None:
            self.begin()
        if self.context is None:
            _warn_once(
                "ended twice",
                "tracescore: span %r was ended twice; the second end is ignored (a `with` block ends its "
                "span itself: call end() only on a span started without one)",
                self._name,
            )
            return
        try:
            if error is not None:
                self.span.record_exception(error)
                self.span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {safe_str(error)}"))
                self.span.set_attribute(semconv.ERROR_TYPE, type(error).__qualname__)
            if self._truncated:
                self.span.set_attribute(semconv.TRACESCORE_TRUNCATED, list(self._truncated))
            if self._documents_omitted:
                self.span.set_attribute(semconv.TRACESCORE_DOCUMENTS_OMITTED, self._documents_omitted)
        except Exception:
            _log.warning("tracescore could not mark a span", exc_info=True)
        finally:
            try:
                self.span.end()
            except Exception as exc:  # a span processor of the app's that raises in on_end
                _warn_once(
                    f"end: {type(exc).__name__}",
                    "tracescore: ending span %r raised %s in the TracerProvider (a span processor's "
                    "on_end?); the application is unaffected",
                    self._name,
                    type(exc).__name__,
                    exc_info=True,
                )
            # A rag span's context refers back to its recorder: drop the cycle now rather than leave it to the
            # garbage collector, whose passes grow with every span still queued for export.
            self.context = None  # type: ignore[assignment]

    def __enter__(self) -> Recorder:
        self._token = otel_context.attach(self.context)
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        otel_context.detach(self._token)
        self.end(exc if exc is not None and not isinstance(exc, GeneratorExit) else None)


class RagRecorder(Recorder, DocumentsMixin):
    """The `rag` span: query, documents (its own and its retrievers'), answer. What the consumer scores."""

    kind = semconv.SPAN_KIND_CHAIN
    operation = "invoke_workflow"
    context_key = _RAG_KEY
    _document_count = 0

    @_guarded
    def set_query(self, query: Any) -> None:
        if query is not None:
            self._put_message(query, _QUESTION)

    @_guarded
    def add_contexts(self, contexts: Any) -> None:
        """Retrieved documents: strings, mappings, LangChain Documents, LlamaIndex NodeWithScore."""
        self._add_documents(read_documents(contexts))

    def _add_documents(self, documents: list[Document | str]) -> None:
        out: dict[str, Any] = {}  # all or none: a redactor failing halfway must not leave some documents
        with _DOCUMENT_NUMBERING:
            self._document_count += self._put_documents(documents, self._document_count, out)
        self._put(out)

    add_documents = _guarded(_add_documents)

    @_guarded
    def set_answer(self, answer: Any) -> None:
        if answer is not None:
            self._put_message(answer, _ANSWER)

    def _put_message(self, value: Any, keys: _MessageKeys) -> None:
        """The question or the answer as text (OpenInference) and as a one-message GenAI list."""
        # Before `begin()` straight into the start attributes (these writes cannot fail halfway).
        pending = self._pending
        out = pending if pending is not None else {}
        text = self._text(keys.value, value, out)
        if text is not None:
            out[keys.mime_type] = "text/plain"
            out[keys.messages] = keys.template % _json_text(text)
        if out is not pending:
            self._put(out)


class RetrieverRecorder(Recorder, DocumentsMixin):
    """A RETRIEVER span (`retrieval`): the query and the documents; the documents roll up onto the enclosing
    `rag` span, which is what the consumer scores."""

    kind = semconv.SPAN_KIND_RETRIEVER
    operation = "retrieval"

    def __init__(self, name: str, attributes: Mapping[str, Any] | None = None, *, start: bool = True) -> None:
        self._rag = current_rag()
        self._document_count = 0
        super().__init__(name, attributes, start=start)

    @_guarded
    def set_query(self, query: Any) -> None:
        if query is None:
            return
        out: dict[str, Any] = {}
        text = self._text(semconv.INPUT_VALUE, query, out)
        if text is not None:
            out[semconv.GEN_AI_RETRIEVAL_QUERY_TEXT] = text
            out[semconv.INPUT_MIME_TYPE] = "text/plain"
        self._put(out)

    @_guarded
    def add_documents(self, documents: Any) -> None:
        docs = read_documents(documents)
        out: dict[str, Any] = {}
        written = self._put_documents(docs, self._document_count, out)
        self._document_count += written
        kept = docs[:written]
        out[semconv.GEN_AI_RETRIEVAL_DOCUMENTS] = json.dumps([id_and_score(d) for d in kept])
        self._put(out)
        if self._rag is not None:
            self._rag.add_documents(docs)  # the rag span applies (and marks) its own document limit

    add_contexts = add_documents


class GenerationRecorder(Recorder):
    """An LLM span (`chat`): the prompt messages, the output and the model."""

    kind = semconv.SPAN_KIND_LLM
    operation = "chat"

    @_guarded
    def set_model(self, model: Any) -> None:
        if model is not None:
            name = safe_str(model)
            self._put({semconv.LLM_MODEL_NAME: name, semconv.GEN_AI_REQUEST_MODEL: name})

    @_guarded
    def set_messages(self, messages: Any) -> None:
        """A prompt string (one user message) or chat messages (mappings or objects with role/content)."""
        if messages is None:
            return
        if isinstance(messages, str | bytes):
            messages = [{"role": "user", "content": messages}]
        out: dict[str, Any] = {}
        genai = []
        for index, message in enumerate(flat_items(messages)):
            role, content = _role_content(message)
            prefix = f"{semconv.LLM_INPUT_MESSAGES}.{index}.message"
            out[f"{prefix}.role"] = role
            text = self._text(f"{prefix}.content", content, out)
            if text is not None:
                genai.append({"role": role, "parts": [{"type": "text", "content": text}]})
        if self.policy.capture:
            out[semconv.GEN_AI_INPUT_MESSAGES] = out[semconv.INPUT_VALUE] = json.dumps(genai)
            out[semconv.INPUT_MIME_TYPE] = "application/json"
        self._put(out)

    @_guarded
    def set_output(self, output: Any) -> None:
        if output is None:
            return
        out: dict[str, Any] = {f"{semconv.LLM_OUTPUT_MESSAGES}.0.message.role": "assistant"}
        text = self._text(f"{semconv.LLM_OUTPUT_MESSAGES}.0.message.content", output, out)
        if text is not None:
            out[semconv.OUTPUT_VALUE] = text
            out[semconv.OUTPUT_MIME_TYPE] = "text/plain"
            out[semconv.GEN_AI_OUTPUT_MESSAGES] = _ASSISTANT_MESSAGES % _json_text(text)
        self._put(out)

    set_answer = set_output


def _untraced(name: str, error: Exception) -> Span:
    """The span a call gets when the TracerProvider cannot start one (an app's sampler or span processor that
    raises): non-recording, under the current parent so context still propagates."""
    _warn_once(
        f"start: {type(error).__name__}",
        "tracescore: the TracerProvider raised %s: %s while starting span %r (a custom sampler or span "
        "processor's on_start?); such calls run untraced, the application is unaffected",
        type(error).__name__,
        error,
        name,
        exc_info=True,
    )
    return trace.NonRecordingSpan(trace.get_current_span().get_span_context())


def _role_content(message: Any) -> tuple[str, Any]:
    if isinstance(message, Mapping):
        return safe_str(message.get("role", "user")), message.get("content")
    return safe_str(getattr(message, "role", "user")), getattr(message, "content", message)
