"""The evaluation record: one JSON object per (scored interaction, metric) on the `tracescore.evaluations`
topic, written by emit and read by alert, the status line and anyone downstream."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, BeforeValidator, Field, ValidationError, model_validator

from tracescore.model._history import HISTORY_TURNS_KEPT, ConversationSource
from tracescore.model._results import MetricStatus, Usage
from tracescore.model._skips import ServiceSkip

__all__ = [
    "EVALUATIONS_TOPIC",
    "SCHEMA_VERSION",
    "AnnotatorKind",
    "EvaluationRecord",
    "UnreadableRecord",
    "annotator_kind",
    "none_unwritten",
    "read_evaluation_record",
    "revision_key",
]

SCHEMA_VERSION = 1
# Where `tracescore consume` writes the records, and `tracescore alert` and `conversations` read them.
EVALUATIONS_TOPIC = "tracescore.evaluations"

AnnotatorKind = Literal["LLM", "CODE"]


def none_unwritten(value: object) -> bool:
    """A field written only where it says something: the records of most interactions stay as they were."""
    return value is None


def _written_as_int(version: object) -> object:
    # pydantic reads `true` and `1.0` as the literal 1: no tracescore writes either.
    if type(version) is not int:
        raise ValueError("not an integer")
    return version


# The `schema_version` field of the versioned records: the JSON integer 1, nothing equal to it.
SchemaVersion = Annotated[Literal[1], BeforeValidator(_written_as_int)]
_Versioned = TypeVar("_Versioned", bound=BaseModel)
# The deterministic judge's name: the `judge` of its records, and `--judge offline`.
OFFLINE_JUDGE = "offline"
# The series (attribute sets: a route, metric and status is one) a service's metric keeps per instrument in
# one process: the OpenTelemetry SDK's own default, and `tracescore consume --metrics-max-series`'s. Past it
# the SDK folds each new series into one labelled otel.metric.overflow, without service or route, for the life
# of the process (cumulative series are never forgotten).
METRIC_SERIES_LIMIT = 2000


def annotator_kind(judge_name: str) -> AnnotatorKind:
    """CODE for the deterministic offline judge ("offline", or a variant of it, "offline:<name>"); every
    other judge ("openai:<model>", a custom judge wrapping a model) answers through an LLM."""
    return "CODE" if judge_name.split(":", 1)[0].strip().lower() == OFFLINE_JUDGE else "LLM"


class EvaluationRecord(BaseModel):
    """Versioned wire format. Add fields freely; renaming or removing one bumps `schema_version`."""

    schema_version: SchemaVersion = Field(
        default=SCHEMA_VERSION, description="Version of this format; readers skip versions they do not know."
    )
    trace_id: str = Field(description="Scored span's trace id, 32 lowercase hex chars (as in OTLP JSON).")
    span_id: str = Field(description="Scored span's id, 16 lowercase hex chars.")
    evaluation_span_id: str | None = Field(
        default=None, description="Id of the evaluation span written for this record, a child of span_id."
    )
    service_name: str = Field(description="service.name of the scored span's resource.")
    route: str = Field(
        description="What results are grouped by: tracescore.route, else the request's http.route, else the "
        "scored span's name."
    )
    metric: str = Field(description="Metric name: faithfulness, answer_relevancy, context_relevance, ...")
    score: float | None = Field(description="0..1; null exactly when status is not ok.")
    label: str | None = Field(
        description="The metric's verdict, e.g. faithful or hallucinated (faithfulness); null if it has none."
    )
    status: MetricStatus = Field(description="ok, not_applicable (nothing to check) or error (judge failed).")
    reason: str | None = Field(
        default=None, description="The judge's explanation, or one built from the claims and their verdicts."
    )
    judge: str = Field(description='Who scored: "offline", or "openai:<model>" for an LLM judge.')
    # Derived from `judge` when absent (records written before this field existed read the same way).
    annotator_kind: AnnotatorKind = Field(default="LLM", description="CODE (offline judge) or LLM (a model).")
    selection: str | None = Field(
        default=None,
        description="Why an LLM judge behind the sampling policy scored it: cascade (suspicious offline), "
        "baseline (uniform, unbiased: use these for rolling estimates) or uniform (uniform too, drawn with "
        "the cascade's budget where targeting showed no lift); None otherwise.",
    )
    inclusion_probability: float | None = Field(
        default=None,
        description="LLM records behind the sampling policy: the chance the policy had of sending this "
        "interaction to the LLM judge, under the split in force (baseline, uniform draws and cascade "
        "together: 1 for a certain cascade pick).",
    )
    targeted_share: float | None = Field(
        default=None,
        description="LLM records behind the sampling policy: the split in force for the route and answer "
        "shape when it was decided, the share of the cascade's budget that targeted suspicious answers (the "
        "rest drew uniformly); None from consumers before the split, or without a cascade.",
    )
    offline_score: float | None = Field(
        default=None,
        description="LLM records behind the sampling policy: the offline judge's score of the interaction "
        "and metric, so an estimate can pair them without the offline record.",
    )
    offline_label: str | None = Field(
        default=None,
        description="LLM records behind the sampling policy: the offline judge's label of the interaction "
        "and metric (alerts on the share of faithful answers pair labels, not scores).",
    )
    convention: str = Field(
        default="tracescore", description="Instrumentation convention the interaction was read from."
    )
    session_id: str | None = Field(
        default=None,
        description="Conversation the turn belongs to (session.id / gen_ai.conversation.id).",
    )
    user_id: str | None = Field(
        default=None,
        description="End user who asked (user.id; the Vercel AI SDK's metadata userId; Langfuse's user id).",
    )
    conversation_source: ConversationSource | None = Field(
        default=None,
        description="Where session_id came from: named (the app or its producer named the conversation), "
        "history (inferred from the question/answer history the app resent, where it named none: "
        "tracescore consume's infer_conversations) or response_chain (joined by tracescore conversations "
        "from the chain of response ids a model service that keeps the history names: "
        "previous_response_id); null without a conversation.",
    )
    history_turns: list[str] = Field(
        default_factory=list,
        description="With conversation_source history: the digests of the (question, answer) pairs the "
        f"turn's prompt resent, oldest first (the {HISTORY_TURNS_KEPT} most recent); only earlier turns "
        "among them ground its claims.",
    )
    response_id: str | None = Field(
        default=None,
        exclude_if=none_unwritten,
        description="Where no conversation was named (infer_conversations): the id of the response that "
        "answered, as the model service that keeps the history knows it (the OpenAI Responses API's "
        "`resp_...`); a follow-up names it.",
    )
    previous_response_id: str | None = Field(
        default=None,
        exclude_if=none_unwritten,
        description="Where no conversation was named (infer_conversations): the response the turn's request "
        "named as the one before it (`previous_response_id`): the turn is a follow-up of the turn that "
        "answered with it.",
    )
    revision: int = Field(
        default=0,
        ge=0,
        description="0 for an interaction's first scoring; n+1 when spans that arrived late changed what "
        "was judged (question, documents, answer) and it was scored again.",
    )
    supersedes: str | None = Field(
        default=None,
        description="Key of the revision this record replaces, `<trace_id>:<span_id>:<revision>`: a reader "
        "keeps the latest revision of each (trace_id, span_id).",
    )
    timestamp: datetime = Field(description="When the record was written (UTC).")
    span_started_at: datetime | None = Field(
        default=None,
        description="When the scored span started (UTC): the turn's time, which orders a conversation's "
        "turns; null in records written before this field existed.",
    )
    details: dict[str, Any] = Field(
        default_factory=dict,
        description="The metric's details: for faithfulness the claims with verdict, reason, quoted "
        "evidence, confidence, context_index and evidence_source (the document the evidence is in, and its "
        "source); context_sources (where each judged document came from: span, kind, and turns_back for an "
        "earlier turn's) and context_notes; for the agent-run metrics what they found in the run.",
    )
    usage: Usage = Field(default_factory=Usage, description="Judge calls, tokens and cost of this record.")

    @model_validator(mode="before")
    @classmethod
    def _annotator_from_judge(cls, data: Any) -> Any:
        if isinstance(data, dict) and "annotator_kind" not in data and isinstance(data.get("judge"), str):
            return {**data, "annotator_kind": annotator_kind(data["judge"])}
        return data

    def to_kafka(self) -> tuple[bytes, bytes]:
        """(key, value): keyed by trace id so a trace's evaluations stay in one partition, in order."""
        return self.trace_id.encode(), self.model_dump_json().encode()

    def slim(self, reason_chars: int = 1_000) -> EvaluationRecord:
        """What the services that re-key records (alert, conversations) read of it: without its details and
        usage, and the reason cut short, so a re-keyed message stays small whatever the evaluations topic
        allows."""
        reason = self.reason[:reason_chars] if self.reason else self.reason
        return self.model_copy(update={"details": {}, "usage": Usage(), "reason": reason})


def revision_key(trace_id: str, span_id: str, revision: int) -> str:
    """What `supersedes` holds: the interaction's trace and span, and the revision replaced."""
    return f"{trace_id}:{span_id}:{revision}"


class UnreadableRecord(ValueError):
    """A message on an evaluations (or conversations) topic that is not a record this version reads. `reason`
    is `ServiceSkip.INVALID_RECORD` (not JSON, or not the record's fields) or `UNKNOWN_SCHEMA_VERSION`;
    `detail` says why, naming the kind of record read."""

    def __init__(
        self,
        reason: Literal[ServiceSkip.INVALID_RECORD, ServiceSkip.UNKNOWN_SCHEMA_VERSION],
        detail: str,
    ) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def read_evaluation_record(value: bytes | None) -> EvaluationRecord:
    """The record in a Kafka message's value, or UnreadableRecord. pydantic's JSON parser, not json.loads:
    it also refuses text that is not Unicode (a lone surrogate escape), which no reader could pass on."""
    return read_versioned(EvaluationRecord, "an evaluation record", value)


def read_versioned(model: type[_Versioned], kind: str, value: bytes | None) -> _Versioned:
    """The `model` (a record of the formats that share SCHEMA_VERSION, `kind` in what a reader is told: "an
    evaluation record")
    in a Kafka message's value, or UnreadableRecord: `unknown_schema_version` when the message says a version
    this tracescore does not read (or none), before its fields are looked at; `invalid_record` else."""
    try:
        record = model.model_validate_json(value or b"")
    except ValidationError as exc:
        version = _claimed_version(value)
        if version is not None and not (type(version) is int and version == SCHEMA_VERSION):
            detail = _version_detail(kind, version)
            raise UnreadableRecord(ServiceSkip.UNKNOWN_SCHEMA_VERSION, detail) from None
        raise UnreadableRecord(ServiceSkip.INVALID_RECORD, _problems(kind, exc)) from None
    if "schema_version" not in record.model_fields_set:
        # A record that does not say which format it is, is none we know.
        raise UnreadableRecord(ServiceSkip.UNKNOWN_SCHEMA_VERSION, _version_detail(kind, None))
    return record


def _claimed_version(value: bytes | None) -> object:
    try:
        data = json.loads(value or b"")
    except ValueError:
        return None
    return data.get("schema_version") if isinstance(data, dict) else None


def _version_detail(kind: str, version: object) -> str:
    """What a reader can act on: a newer tracescore wrote it (upgrade), or no tracescore did."""
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        return (
            f"{kind} of schema_version {version}, written by a newer tracescore; this one reads up to "
            f"{SCHEMA_VERSION}: upgrade tracescore to read it"
        )
    said = "without a schema_version" if version is None else f"of schema_version {json.dumps(version)}"
    return f"{kind} {said}, which no tracescore writes; this one reads up to {SCHEMA_VERSION}"


def _problems(kind: str, exc: ValidationError, shown: int = 3) -> str:
    errors = exc.errors(include_url=False)
    if errors and errors[0]["type"] == "json_invalid":
        return f"not JSON ({errors[0]['msg'].removeprefix('Invalid JSON: ')})"[:200]
    if errors and errors[0]["type"] == "model_type":
        return "not a JSON object"
    missing = [str(e["loc"][0]) for e in errors if e["type"] == "missing" and e["loc"]]
    other = [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in errors if e["type"] != "missing"]
    parts = (
        [f"missing {', '.join(missing[:shown])}" + (" ..." if len(missing) > shown else "")]
        if missing
        else []
    )
    parts += other[:shown]
    return (f"not {kind}: " + "; ".join(parts))[:200]
