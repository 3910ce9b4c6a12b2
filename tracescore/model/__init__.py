"""The data model every stage shares: what flows from consume through extract, sample and score to emit
and alert.

Spans and traces (`DecodedSpan` with its `SpanEvent`s, `Trace`, the order spans started in: `start_order`),
the RAG interactions recognised in them (`Interaction`, formerly `RagSpan`, its `RagRecord` and
`ContextSource`, an agent's `Run` and its `RunToolCall`s), what a judge returns (`MetricResult`,
`MetricStatus`, `Usage`, `Verdict`; `FaithfulnessDetails` with its `FaithfulnessClaim`s, what a
Faithfulness result's details hold, with `GroundingDetails` where `tracescore conversations` grounded a
turn in its `EarlierTurn`s, and `FaithfulnessFindings`, their counts),
the label rule that reads a result as flagged or not (`is_flagged`, `label_is_bad`), the evaluation record
emit writes and alert reads (`EvaluationRecord`), the conversation record `tracescore conversations` writes
from them (`ConversationRecord`), and the shared words (`Selection`, `ConversationLabel`,
`ContextSourceKind`, `GroundingStatus`, `NotRejudgedReason`, `OpenInferenceSpanKind`, `ExtractSkip`, why
`tracescore consume` did not score an interaction, and `ServiceSkip`, why `tracescore alert` or `tracescore
conversations` skipped a message). Stages import these
from here (or from a stage's public `__init__`), never from one another's private modules. Light on purpose
(pydantic only): the instrumentation SDK's install can import it.
"""

from tracescore.model._claims import (
    ClaimsCap,
    DocumentSource,
    EarlierTurn,
    FaithfulnessClaim,
    FaithfulnessDetails,
    GroundingDetails,
)
from tracescore.model._conversation import (
    CONVERSATION_KEY,
    CONVERSATIONS_TOPIC,
    ConversationRecord,
    WorstTurn,
    read_conversation_record,
)
from tracescore.model._evidence import EVIDENCE_TOPIC, EvidenceDocument, TurnEvidence, read_turn_evidence
from tracescore.model._findings import NEAR_CERTAIN, FaithfulnessFindings
from tracescore.model._history import (
    HISTORY_ID_PREFIX,
    HISTORY_TURNS_KEPT,
    RESPONSE_CHAIN_ID_PREFIX,
    RESPONSE_ID_PREFIX,
    ChatTurn,
    ConversationSource,
    InferredConversation,
    history_conversation_id,
    inferred_conversation,
    response_chain_id,
    turn_digest,
)
from tracescore.model._labels import (
    BAD_LABELS,
    FAITHFULNESS,
    GOOD_LABELS,
    UNLABELLED_THRESHOLD,
    is_flagged,
    label_is_bad,
)
from tracescore.model._record import (
    EVALUATIONS_TOPIC,
    METRIC_SERIES_LIMIT,
    OFFLINE_JUDGE,
    SCHEMA_VERSION,
    AnnotatorKind,
    EvaluationRecord,
    UnreadableRecord,
    annotator_kind,
    read_evaluation_record,
    revision_key,
)
from tracescore.model._results import MetricResult, MetricStatus, RagRecord, Usage, Verdict, has_question
from tracescore.model._run import MAX_RUN_TEXT_CHARS, MAX_RUN_TOOL_CALLS, Run, RunToolCall
from tracescore.model._skips import ExtractSkip, ServiceSkip
from tracescore.model._trace import (
    MAX_SPAN_EVENT_BYTES,
    MAX_SPAN_EVENTS,
    ContextSource,
    DecodedSpan,
    Interaction,
    RagSpan,
    SpanEvent,
    Trace,
    start_order,
)
from tracescore.model._vocabulary import (
    ContextSourceKind,
    ConversationLabel,
    GroundingStatus,
    NotRejudgedReason,
    OpenInferenceSpanKind,
    Selection,
)

__all__ = [
    "BAD_LABELS",
    "CONVERSATIONS_TOPIC",
    "CONVERSATION_KEY",
    "EVALUATIONS_TOPIC",
    "EVIDENCE_TOPIC",
    "FAITHFULNESS",
    "GOOD_LABELS",
    "HISTORY_ID_PREFIX",
    "HISTORY_TURNS_KEPT",
    "MAX_RUN_TEXT_CHARS",
    "MAX_RUN_TOOL_CALLS",
    "MAX_SPAN_EVENTS",
    "MAX_SPAN_EVENT_BYTES",
    "METRIC_SERIES_LIMIT",
    "NEAR_CERTAIN",
    "OFFLINE_JUDGE",
    "RESPONSE_CHAIN_ID_PREFIX",
    "RESPONSE_ID_PREFIX",
    "SCHEMA_VERSION",
    "UNLABELLED_THRESHOLD",
    "AnnotatorKind",
    "ChatTurn",
    "ClaimsCap",
    "ContextSource",
    "ContextSourceKind",
    "ConversationLabel",
    "ConversationRecord",
    "ConversationSource",
    "DecodedSpan",
    "DocumentSource",
    "EarlierTurn",
    "EvaluationRecord",
    "EvidenceDocument",
    "ExtractSkip",
    "FaithfulnessClaim",
    "FaithfulnessDetails",
    "FaithfulnessFindings",
    "GroundingDetails",
    "GroundingStatus",
    "InferredConversation",
    "Interaction",
    "MetricResult",
    "MetricStatus",
    "NotRejudgedReason",
    "OpenInferenceSpanKind",
    "RagRecord",
    "RagSpan",
    "Run",
    "RunToolCall",
    "Selection",
    "ServiceSkip",
    "SpanEvent",
    "Trace",
    "TurnEvidence",
    "UnreadableRecord",
    "Usage",
    "Verdict",
    "WorstTurn",
    "annotator_kind",
    "has_question",
    "history_conversation_id",
    "inferred_conversation",
    "is_flagged",
    "label_is_bad",
    "read_conversation_record",
    "read_evaluation_record",
    "read_turn_evidence",
    "response_chain_id",
    "revision_key",
    "start_order",
    "turn_digest",
]
