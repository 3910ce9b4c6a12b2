"""Attribute names tracescore writes and reads: OpenInference first, OTel GenAI beside it.

OpenInference names are what Phoenix and Arize render; the GenAI names are what Langfuse and generic OTLP
backends understand. Producer (instrument) and consumer (consume) both use this one table.
"""

from __future__ import annotations

__all__ = [
    "ERROR_TYPE",
    "EVALUATION_EVENT",
    "EVALUATOR_SCOPE",
    "GEN_AI_EVALUATION_EXPLANATION",
    "GEN_AI_EVALUATION_NAME",
    "GEN_AI_EVALUATION_SCORE_LABEL",
    "GEN_AI_EVALUATION_SCORE_VALUE",
    "GEN_AI_INPUT_MESSAGES",
    "GEN_AI_OPERATION_NAME",
    "GEN_AI_OUTPUT_MESSAGES",
    "HTTP_ROUTE",
    "INPUT_MIME_TYPE",
    "INPUT_VALUE",
    "METADATA",
    "OPENINFERENCE_SPAN_KIND",
    "OUTPUT_MIME_TYPE",
    "OUTPUT_VALUE",
    "RETRIEVAL_DOCUMENTS",
    "SDK_SCOPE",
    "TRACESCORE_ANNOTATOR_KIND",
    "TRACESCORE_CONVENTION",
    "TRACESCORE_EVALUATED_SPAN_ID",
    "TRACESCORE_JUDGE",
    "TRACESCORE_ROUTE",
    "TRACESCORE_SELECTION",
    "document_content_key",
]

# OpenInference
OPENINFERENCE_SPAN_KIND = "openinference.span.kind"
INPUT_VALUE = "input.value"
INPUT_MIME_TYPE = "input.mime_type"
OUTPUT_VALUE = "output.value"
OUTPUT_MIME_TYPE = "output.mime_type"
RETRIEVAL_DOCUMENTS = "retrieval.documents"
METADATA = "metadata"


def document_content_key(index: int) -> str:
    """OpenInference flattens lists with zero-based indices: retrieval.documents.0.document.content."""
    return f"{RETRIEVAL_DOCUMENTS}.{index}.document.content"


# OpenTelemetry GenAI semantic conventions
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"
EVALUATION_EVENT = "gen_ai.evaluation.result"
GEN_AI_EVALUATION_NAME = "gen_ai.evaluation.name"
GEN_AI_EVALUATION_SCORE_VALUE = "gen_ai.evaluation.score.value"
GEN_AI_EVALUATION_SCORE_LABEL = "gen_ai.evaluation.score.label"
GEN_AI_EVALUATION_EXPLANATION = "gen_ai.evaluation.explanation"
HTTP_ROUTE = "http.route"
ERROR_TYPE = "error.type"

# tracescore's own
TRACESCORE_ROUTE = "tracescore.route"
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
