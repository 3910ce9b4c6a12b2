"""Attribute names tracescore writes and reads: OpenInference first, OTel GenAI beside it.

OpenInference names are what Phoenix and Arize render; the GenAI names are what Langfuse and generic OTLP
backends understand. Producer (instrument) and consumer (consume) both use this one table.
"""

from __future__ import annotations

from tracescore.model import OpenInferenceSpanKind

__all__ = [
    "ERROR_TYPE",
    "EVALUATION_EVENT",
    "EVALUATOR_SCOPE",
    "EVENT_NAME",
    "EVENT_NAME_ATTRIBUTES",
    "GEN_AI_CONVERSATION_ID",
    "GEN_AI_EVALUATION_EXPLANATION",
    "GEN_AI_EVALUATION_NAME",
    "GEN_AI_EVALUATION_SCORE_LABEL",
    "GEN_AI_EVALUATION_SCORE_VALUE",
    "GEN_AI_EVENT_PREFIX",
    "GEN_AI_INPUT_MESSAGES",
    "GEN_AI_OPERATION_NAME",
    "GEN_AI_OUTPUT_MESSAGES",
    "GEN_AI_REQUEST_MODEL",
    "GEN_AI_RETRIEVAL_DOCUMENTS",
    "GEN_AI_RETRIEVAL_QUERY_TEXT",
    "HTTP_ROUTE",
    "INPUT_MIME_TYPE",
    "INPUT_VALUE",
    "LLM_INPUT_MESSAGES",
    "LLM_MODEL_NAME",
    "LLM_OUTPUT_MESSAGES",
    "LOGFIRE_SCRUBBED",
    "LOG_RECORD_BODY",
    "METADATA",
    "OPENINFERENCE_SPAN_KIND",
    "OUTPUT_MIME_TYPE",
    "OUTPUT_VALUE",
    "RETRIEVAL_DOCUMENTS",
    "SDK_SCOPE",
    "SESSION_ID",
    "SPAN_KIND_CHAIN",
    "SPAN_KIND_LLM",
    "SPAN_KIND_RETRIEVER",
    "TAG_TAGS",
    "TRACESCORE_ANNOTATOR_KIND",
    "TRACESCORE_CONTENT_CAPTURED",
    "TRACESCORE_CONVENTION",
    "TRACESCORE_DOCUMENTS_OMITTED",
    "TRACESCORE_EVALUATED_SPAN_ID",
    "TRACESCORE_JUDGE",
    "TRACESCORE_ROUTE",
    "TRACESCORE_SELECTION",
    "TRACESCORE_TRUNCATED",
    "USER_ID",
    "document_content_key",
    "document_key",
]

# OpenInference
OPENINFERENCE_SPAN_KIND = "openinference.span.kind"
INPUT_VALUE = "input.value"
INPUT_MIME_TYPE = "input.mime_type"
OUTPUT_VALUE = "output.value"
OUTPUT_MIME_TYPE = "output.mime_type"
RETRIEVAL_DOCUMENTS = "retrieval.documents"
METADATA = "metadata"
SESSION_ID = "session.id"
USER_ID = "user.id"
TAG_TAGS = "tag.tags"
LLM_MODEL_NAME = "llm.model_name"
LLM_INPUT_MESSAGES = "llm.input_messages"
LLM_OUTPUT_MESSAGES = "llm.output_messages"
SPAN_KIND_CHAIN = OpenInferenceSpanKind.CHAIN.value
SPAN_KIND_RETRIEVER = OpenInferenceSpanKind.RETRIEVER.value
SPAN_KIND_LLM = OpenInferenceSpanKind.LLM.value


def document_content_key(index: int) -> str:
    """OpenInference flattens lists with zero-based indices: retrieval.documents.0.document.content."""
    return f"{RETRIEVAL_DOCUMENTS}.{index}.document.content"


def document_key(index: int, field: str) -> str:
    """retrieval.documents.N.document.<field>: content, id, score or metadata (a JSON string)."""
    return f"{RETRIEVAL_DOCUMENTS}.{index}.document.{field}"


# OpenTelemetry GenAI semantic conventions
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"
GEN_AI_RETRIEVAL_QUERY_TEXT = "gen_ai.retrieval.query.text"
GEN_AI_RETRIEVAL_DOCUMENTS = "gen_ai.retrieval.documents"
GEN_AI_CONVERSATION_ID = "gen_ai.conversation.id"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
EVALUATION_EVENT = "gen_ai.evaluation.result"
GEN_AI_EVALUATION_NAME = "gen_ai.evaluation.name"
GEN_AI_EVALUATION_SCORE_VALUE = "gen_ai.evaluation.score.value"
GEN_AI_EVALUATION_SCORE_LABEL = "gen_ai.evaluation.score.label"
GEN_AI_EVALUATION_EXPLANATION = "gen_ai.evaluation.explanation"
HTTP_ROUTE = "http.route"
ERROR_TYPE = "error.type"
# An OTel log record that is an event: its name (LogRecord.event_name, or this attribute from SDKs before
# the field existed). Only GenAI events (this prefix) are read from log records, as their span's events.
EVENT_NAME = "event.name"
# Where a log record without the field names its event, in this order: the attribute above, then
# `event_name` (LiteLLM's `otel` callback writes its events' names there).
EVENT_NAME_ATTRIBUTES = (EVENT_NAME, "event_name")
GEN_AI_EVENT_PREFIX = "gen_ai."
# A log record's body, kept among its span event's attributes. In the `log.record.*` namespace, where OTel
# names attributes about the log record itself (log.record.uid, log.record.original): no producer's event
# attribute can be shadowed by it, and a reader of the span event sees where the value came from.
LOG_RECORD_BODY = "log.record.body"

# Pydantic Logfire: the JSON list of what its scrubber replaced on the span (`[{"path": ["attributes", key],
# "matched_substring": ...}]`); a replaced value is a placeholder, never the app's.
LOGFIRE_SCRUBBED = "logfire.scrubbed"

# tracescore's own
TRACESCORE_ROUTE = "tracescore.route"
# Content controls mark what they changed: a shortened or withheld value is never taken for the real one.
TRACESCORE_TRUNCATED = "tracescore.truncated"  # keys of the attributes cut to max_attribute_chars
TRACESCORE_DOCUMENTS_OMITTED = "tracescore.documents.omitted"  # documents past max_documents
TRACESCORE_CONTENT_CAPTURED = "tracescore.content.captured"  # false when content capture is off
# Instrumentation scope of the SDK's spans (`@tracescore.rag`).
SDK_SCOPE = "tracescore"
# Instrumentation scope of the evaluation spans the consumer writes (and skips when it reads them back).
EVALUATOR_SCOPE = "tracescore.consumer"
TRACESCORE_JUDGE = "tracescore.judge"
TRACESCORE_EVALUATED_SPAN_ID = "tracescore.evaluated_span_id"
# CODE for the offline judge, LLM for a model judge (Phoenix's annotator kinds).
TRACESCORE_ANNOTATOR_KIND = "tracescore.annotator_kind"
# The instrumentation convention the evaluated interaction was read from (tracescore, openinference, ...).
TRACESCORE_CONVENTION = "tracescore.convention"
# Why an LLM judge scored it: cascade (the offline judge found it suspicious) or baseline (uniform sample).
TRACESCORE_SELECTION = "tracescore.selection"
