"""The details of a Faithfulness result: its claims and their verdicts, as the metric writes them and every
reader (records, the status line, `tracescore tail`, the report, `assert_scores`, the explanation, the
cascade's suspicion) reads them: one set of field names, so a renamed key fails where it is written.

`MetricResult.details` and the records keep the JSON object (the wire format is this model's dump, the same
keys in the same order as before it existed). Two ways in:

* `FaithfulnessDetails.model_validate(details)`: strict, what the metric and emit write (unknown keys and
  wrong types raise); the tests hold every writer to it.
* `FaithfulnessDetails.read(details)`: tolerant, for details whose writer is not known to be this version (a
  record from Kafka an older consumer wrote, a scored file, a custom metric's details): a field that is
  missing or malformed reads as absent, a claim without a readable verdict is left out; never raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, TypeAdapter, ValidationError

from tracescore.model._results import MetricResult, Verdict
from tracescore.model._vocabulary import GroundingStatus, NotRejudgedReason

__all__ = [
    "ClaimsCap",
    "DocumentSource",
    "EarlierTurn",
    "FaithfulnessClaim",
    "FaithfulnessDetails",
    "GroundingDetails",
]

_WRITTEN = ConfigDict(extra="forbid", frozen=True)


class DocumentSource(BaseModel):
    """Where a judged document came from, as records carry it (`ContextSource`): the span, how it was read
    (a `ContextSourceKind` value), and, for an earlier turn's, how many turns back (written only then)."""

    model_config = _WRITTEN

    span_id: str = ""  # empty: an earlier turn's document not told apart (written without it)
    kind: str  # not the enum: a newer consumer's kind must still read
    turns_back: StrictInt = 0
    trace_id: str | None = Field(
        default=None,
        description="The earlier turn's trace, for a claim `tracescore conversations` grounded in what that "
        "turn retrieved (a revision of the record).",
    )
    retrieved_as: str | None = Field(
        default=None, description="How that earlier turn read the document (a ContextSourceKind value)."
    )


class FaithfulnessClaim(BaseModel):
    """One claim of the answer and the judge's verdict on it."""

    model_config = _WRITTEN

    claim: str = ""
    sentence: str = Field(default="", description="The answer sentence the claim was read from.")
    verdict: Verdict
    reason: str = ""
    evidence: str = Field(default="", description="The quoted context the verdict rests on, or empty.")
    # 0..1; None when the judge does not say (read as sure).
    confidence: float | None = None
    context_index: StrictInt | None = Field(
        default=None, description="The document the evidence is in (None: no quote, or none holds it)."
    )
    evidence_source: DocumentSource | None = Field(
        default=None, description="That document's source (records only, written by emit)."
    )

    @property
    def unsupported(self) -> bool:
        return self.verdict in (Verdict.NO_EVIDENCE, Verdict.CONTRADICTORY)

    @property
    def sure(self) -> float:
        """The confidence clamped to 0..1; a verdict without one counts as sure (1.0)."""
        return 1.0 if self.confidence is None else min(1.0, max(0.0, self.confidence))


class ClaimsCap(BaseModel):
    """Present when an answer was longer than `max_claims`: what was judged of it."""

    model_config = _WRITTEN

    max_claims: StrictInt
    answer_sentences: StrictInt
    sentences_judged: StrictInt
    claims_judged: StrictInt


class EarlierTurn(BaseModel):
    """An earlier turn of the conversation whose documents a turn was judged against."""

    model_config = _WRITTEN

    trace_id: str
    turns_back: StrictInt = Field(ge=1, description="1: the turn just before.")
    documents: StrictInt = Field(ge=0, description="Its documents held and judged against.")


class GroundingDetails(BaseModel):
    """What grounding across turns did with a turn (`tracescore conversations`; a revision's
    `details.earlier_turns`, see docs/conversations.md). Written with `exclude_unset`: each status writes
    only what it knows (`superseded`: the revision it replaces; `not_rejudged`: why, in words too)."""

    model_config = _WRITTEN

    status: GroundingStatus
    judge: str | None = Field(default=None, description="The judge that judged the claims again.")
    why: NotRejudgedReason | None = Field(default=None, description="With `not_rejudged`: why not.")
    note: str | None = Field(default=None, description="`why`, said for people: what to change.")
    revision_of: StrictInt | None = Field(default=None, ge=0, description="The record's revision decided.")
    turns: list[EarlierTurn] | None = Field(default=None, description="The earlier turns judged against.")
    claims_judged: StrictInt | None = Field(
        default=None, ge=0, description="Claims judged again (None: the judge gave no verdicts)."
    )
    claims_grounded: StrictInt | None = Field(default=None, ge=0)
    turns_without_documents: StrictInt | None = Field(
        default=None, ge=0, description="Earlier turns known with no document held (not judged against)."
    )
    other_user_turns_left_out: StrictInt | None = Field(
        default=None, ge=0, description="Earlier turns of another `user.id` under the same session id."
    )
    turns_not_in_history: StrictInt | None = Field(
        default=None,
        ge=0,
        description="In a conversation inferred from the resent history: earlier turns under the same id "
        "whose question and answer this turn's history does not hold (another chat with the same opening).",
    )
    offline_grounded: bool | None = Field(
        default=None, description="An LLM record whose offline record was grounded: the pair it follows."
    )

    @classmethod
    def read(cls, details: Any) -> GroundingDetails | None:
        """Tolerant, as `FaithfulnessDetails.read`: None without a status this version knows (as a claim
        without a readable verdict); other fields missing or malformed read as absent, turns that do not
        read are left out."""
        if not isinstance(details, Mapping) or details.get("status") not in _STATUSES:
            return None
        try:
            return cls.model_validate(details)
        except ValidationError:
            pass
        data = _readable_fields(cls, details, skip=("turns",))
        turns = details.get("turns")
        if isinstance(turns, list | tuple):
            data["turns"] = [t for t in (_earlier_turn(row) for row in turns) if t is not None]
        return cls.model_validate(data)


class FaithfulnessDetails(BaseModel):
    """`MetricResult.details` of Faithfulness, and of its records (emit adds where the documents came from).

    Dumped with `exclude_unset` (`to_details`): a field the writer did not set is not written, as before
    this model (`capped` only for a capped answer, `evidence_source` only where the evidence was found)."""

    model_config = _WRITTEN

    total_claims: StrictInt | None = Field(default=None, ge=0)
    verdict_counts: dict[Verdict, StrictInt] | None = None
    unsupported_claims: StrictInt | None = Field(
        default=None, ge=0, description="Claims unsupported at the label rule's min_confidence."
    )
    label_rule: str | None = None
    claims: list[FaithfulnessClaim] = Field(default_factory=list)
    capped: ClaimsCap | None = None
    # Written by emit into records, for every metric: where each judged document came from, what extract
    # read differently, and why there is no question.
    context_sources: list[DocumentSource] | None = None
    context_notes: list[str] | None = None
    question_recorded: bool | None = None
    question_missing: str | None = None
    # Written by `tracescore conversations` into a turn's revision: what grounding across turns did.
    earlier_turns: GroundingDetails | None = None

    def to_details(self) -> dict[str, Any]:
        """The JSON object results and records carry."""
        return self.model_dump(mode="json", exclude_unset=True)

    @classmethod
    def of(cls, result: MetricResult) -> FaithfulnessDetails:
        """The tolerant reading of a result's details (`read`)."""
        return cls.read(result.details)

    @classmethod
    def read(cls, details: Any) -> FaithfulnessDetails:
        """Whatever of `details` this version can read; never raises (see the module's docstring)."""
        if not isinstance(details, Mapping):
            return cls()
        try:  # what this version writes reads in one pass; the rest field by field
            return cls.model_validate(details)
        except ValidationError:
            pass
        data = _readable_fields(cls, details, skip=("claims", "verdict_counts", "earlier_turns"))
        counts = details.get("verdict_counts")
        if isinstance(counts, Mapping):
            data["verdict_counts"] = {
                Verdict(v): n for v, n in counts.items() if v in _VERDICTS and _count(n) is not None
            }
        rows = details.get("claims")
        if isinstance(rows, list | tuple):
            data["claims"] = [c for c in (_claim(row) for row in rows) if c is not None]
        grounding = GroundingDetails.read(details.get("earlier_turns"))
        if grounding is not None:
            data["earlier_turns"] = grounding
        return cls.model_validate(data)


# Tuples: membership by equality, so a verdict that is not hashable (a list) is left out, not a crash.
_VERDICTS = tuple(Verdict)
_STATUSES = tuple(GroundingStatus)


def _count(n: Any) -> int | None:
    return n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else None


def _claim(row: Any) -> FaithfulnessClaim | None:
    if not isinstance(row, Mapping) or row.get("verdict") not in _VERDICTS:
        return None
    return FaithfulnessClaim.model_validate(_readable_fields(FaithfulnessClaim, row))


def _earlier_turn(row: Any) -> EarlierTurn | None:
    if not isinstance(row, Mapping):
        return None
    try:
        return EarlierTurn.model_validate(_readable_fields(EarlierTurn, row))
    except ValidationError:  # without its trace id (or a readable distance): no turn to name
        return None


def _readable_fields(model: type[BaseModel], data: Mapping[str, Any], skip: tuple[str, ...] = ()) -> dict:
    """The fields of `data` that validate as `model`'s, each on its own; unknown keys left out."""
    readable = {}
    for name in model.model_fields:
        if name in data and name not in skip:
            try:
                readable[name] = _adapter(model, name).validate_python(data[name])
            except ValidationError:
                continue
    return readable


@cache
def _adapter(model: type[BaseModel], name: str) -> TypeAdapter[Any]:
    field = model.model_fields[name]
    return TypeAdapter(field.annotation if not field.metadata else field.rebuild_annotation())
