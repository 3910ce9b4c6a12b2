"""Does a trace visibly wait for another service's spans?

Two signs: a span whose parent has not arrived, and a remote call (a CLIENT span, or a span with HTTP or RPC
request attributes) with no child yet, i.e. no spans from its callee. Calls whose callee does not trace are
not waited for: an LLM provider, an embedding API, a database (the span, or its parent, carries GenAI, LLM
or database attributes).
"""

from __future__ import annotations

from collections.abc import Mapping

from tracescore.model import DecodedSpan
from tracescore.model import OpenInferenceSpanKind as Kind

__all__ = ["waits_for_remote"]

_CLIENT = 3  # OTLP SpanKind
# SERVER, PRODUCER, CONSUMER: not a call that waits for a callee's spans. A set: one hash lookup, where a
# tuple compares each member in turn (every trace released is asked).
_LOCAL_KINDS = frozenset({2, 4, 5})
_REQUEST_KEYS = ("http.request.method", "http.method", "rpc.system", "rpc.service", "rpc.method")
_UNTRACED_PREFIXES = ("db.", "llm.", "gen_ai.")
_UNTRACED_OPENINFERENCE = frozenset({Kind.LLM, Kind.EMBEDDING, Kind.RERANKER})
_REMOTE_GENAI_OPERATIONS = frozenset({"execute_tool", "invoke_agent", "create_agent"})


def waits_for_remote(spans: Mapping[str, DecodedSpan]) -> bool:
    """`spans` by span id: True when a parent is missing or a remote call has no callee spans yet."""
    if len(spans) == 1:  # the common shape of our own spans: answer without building the parent set
        (only,) = spans.values()
        return only.parent_span_id is not None or _calls_traced_remote(only, None)
    parents = {span.parent_span_id for span in spans.values()}
    for span in spans.values():
        parent_id = span.parent_span_id
        if parent_id is not None and parent_id not in spans:
            return True
        if span.span_id not in parents and _calls_traced_remote(span, spans.get(parent_id or "")):
            return True
    return False


def _calls_traced_remote(span: DecodedSpan, parent: DecodedSpan | None) -> bool:
    if span.kind in _LOCAL_KINDS:
        return False
    # Not a client call and no request keys: five lookups in the span's attributes, in C (the keys view's
    # isdisjoint walks the tuple and looks each key up; a set's isdisjoint(dict) would walk the dict, every
    # key of a trace read a grace period after it arrived, no longer in the CPU's caches).
    if span.kind != _CLIENT and span.attributes.keys().isdisjoint(_REQUEST_KEYS):
        return False
    return not (_untraced_callee(span) or (parent is not None and _untraced_callee(parent)))


def _untraced_callee(span: DecodedSpan) -> bool:
    """An LLM, embedding or database call: its provider sends no spans to wait for."""
    attributes = span.attributes
    operation = attributes.get("gen_ai.operation.name")
    if operation is not None:
        return operation not in _REMOTE_GENAI_OPERATIONS
    if attributes.get("openinference.span.kind") in _UNTRACED_OPENINFERENCE:
        return True
    return any(key.startswith(_UNTRACED_PREFIXES) for key in attributes)
