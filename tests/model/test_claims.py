"""Faithfulness's details as one model: what the metric, emit and `tracescore conversations`' grounding write
holds to it strictly (a renamed key fails here), it is the same JSON as before the model existed, and
whatever an older consumer wrote is still read, tolerantly, by every reader."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from tracescore.emit import evaluation_record, explanation
from tracescore.model import (
    ContextSource,
    ContextSourceKind,
    DecodedSpan,
    FaithfulnessDetails,
    FaithfulnessFindings,
    GroundingDetails,
    GroundingStatus,
    Interaction,
    MetricResult,
    NotRejudgedReason,
    RagRecord,
    Verdict,
)
from tracescore.score import OfflineJudge
from tracescore.score.metrics import Faithfulness

DOCS = ("The X200 battery lasts 12 hours.", "The X200 weighs 1.2 kg.")
RECORD = RagRecord(
    query="How long does the X200 battery last, and what does it weigh?",
    contexts=DOCS,
    answer="The X200 battery lasts 12 hours. The X200 weighs 3 kg. It ships from Oslo.",
)
# What the metric and emit wrote before the details had a model (this record, the offline judge).
BEFORE = json.loads((Path(__file__).parent / "faithfulness_details_before_the_model.json").read_text())
SOURCES = (
    ContextSource("01" * 8, ContextSourceKind.RETRIEVER),
    ContextSource("02" * 8, ContextSourceKind.EARLIER_TURN, turns_back=1),
)


async def faithfulness(record: RagRecord = RECORD, **options: Any) -> MetricResult:
    return await Faithfulness(**options).score(record, OfflineJudge())


def same_json(written: dict[str, Any], before: dict[str, Any]) -> bool:
    """Equal, keys in the same order (what a byte-for-byte reader of the records sees)."""
    return json.dumps(written) == json.dumps(before)


async def test_the_metric_writes_the_model_strictly_as_the_json_it_wrote_before() -> None:
    for details, before in (
        ((await faithfulness()).details, BEFORE["metric"]),
        ((await faithfulness(max_claims=1)).details, BEFORE["capped"]),
    ):
        assert same_json(details, before)
        parsed = FaithfulnessDetails.model_validate(details)  # strict: no key the model does not know
        assert same_json(parsed.to_details(), before)
        assert all(isinstance(c["verdict"], str) for c in details["claims"])


async def test_emits_records_hold_to_the_model_and_name_each_claims_source() -> None:
    span = DecodedSpan("ab" * 16, "cd" * 8, "rag", "svc", "scope", {}, 2_000_000_000)
    rag = Interaction(span=span, record=RECORD, route="/ask", context_sources=SOURCES, context_notes=("n",))
    record = evaluation_record(rag, await faithfulness(), None)
    wire = json.loads(record.to_kafka()[1])["details"]
    assert same_json(wire, BEFORE["record"])
    parsed = FaithfulnessDetails.model_validate(wire)
    assert same_json(parsed.to_details(), BEFORE["record"])
    sources = [c.evidence_source for c in parsed.claims]
    assert sources[1] is not None and sources[1].turns_back == 1, "the weight is in the earlier turn's"
    assert sources[2] is None, "no evidence quoted, no source"


async def test_a_key_the_model_does_not_know_fails_strict_reading() -> None:
    details = (await faithfulness()).details
    renamed = {k if k != "verdict_counts" else "verdicts" for k in details}
    with pytest.raises(ValidationError):
        FaithfulnessDetails.model_validate({k: details.get(k, details["verdict_counts"]) for k in renamed})
    claim = {**details["claims"][0], "quote": "renamed evidence"}
    with pytest.raises(ValidationError):
        FaithfulnessDetails.model_validate({**details, "claims": [claim]})


# Details as older consumers (or other versions' scored files) wrote them: fields missing, new or
# malformed, verdicts a judge invented.
OLDER = {
    "claims": [
        {"claim": "Old.", "verdict": "NO_EVIDENCE"},  # before sentence, confidence, context_index
        {"claim": "Unsure.", "verdict": "CONTRADICTORY", "confidence": "high", "evidence": 5},
        {"claim": "A new key.", "verdict": "FULLY_SUPPORTED", "written_by": "a newer consumer"},
        {"claim": "No verdict."},
        {"claim": "An odd verdict.", "verdict": "MAYBE"},
        {"claim": "A verdict as a list.", "verdict": ["NO_EVIDENCE"]},
        "a claim as text",
        {"claim": "A bad source.", "verdict": "NO_EVIDENCE", "evidence_source": {"turns_back": "1"}},
    ],
    "verdict_counts": {"NO_EVIDENCE": 2, "CONTRADICTORY": "one", "MAYBE": 1},
    "total_claims": True,
    "capped": "yes",
    "something_new": [1],
}


def test_older_details_are_read_tolerantly_claims_without_a_verdict_left_out() -> None:
    read = FaithfulnessDetails.read(OLDER)
    assert [c.claim for c in read.claims] == ["Old.", "Unsure.", "A new key.", "A bad source."]
    assert read.claims[1].confidence is None and read.claims[1].sure == 1.0 and read.claims[1].evidence == ""
    assert read.claims[3].evidence_source is None
    assert read.verdict_counts == {Verdict.NO_EVIDENCE: 2}
    assert read.total_claims is None and read.capped is None
    for odd in (None, [], "text", {"claims": {"0": "not a list"}}, {"claims": [None, 3]}):
        assert FaithfulnessDetails.read(odd).claims == []
    with pytest.raises(ValidationError):
        FaithfulnessDetails.model_validate(OLDER)


def test_the_explanation_of_a_one_claim_answer_says_claim_not_claims() -> None:
    details = {"claims": [{"claim": "It ships from Oslo.", "verdict": "NO_EVIDENCE"}]}
    result = MetricResult(metric="faithfulness", score=0.0, label="hallucinated", judge="x", details=details)
    assert explanation(result) == (
        "0 of 1 claim fully supported by the retrieved context. no_evidence: It ships from Oslo."
    )


def test_every_reader_reads_older_details_without_a_crash() -> None:
    result = MetricResult(metric="faithfulness", score=0.25, label="hallucinated", judge="x", details=OLDER)
    assert explanation(result) == (
        "1 of 4 claims fully supported by the retrieved context. no_evidence: Old.; contradictory: Unsure.; "
        "no_evidence: A bad source."
    )
    found = FaithfulnessFindings.of(result)
    assert (found.claims, found.no_evidence, found.contradicted) == (2, 2, 0), "the counts it carries"


@pytest.mark.parametrize("shape", sorted(BEFORE["earlier_turns"]))
def test_what_grounding_across_turns_wrote_reads_strictly_as_the_same_json(shape: str) -> None:
    before = BEFORE["earlier_turns"][shape]
    details = FaithfulnessDetails.model_validate({"earlier_turns": before})
    grounding = details.earlier_turns
    assert grounding is not None and grounding.status in set(GroundingStatus)
    assert same_json(details.to_details(), {"earlier_turns": before})
    assert GroundingDetails.read(before) == grounding


def test_the_grounding_details_name_what_users_read() -> None:
    grounded = GroundingDetails.model_validate(BEFORE["earlier_turns"]["grounded"])
    assert (grounded.status, grounded.claims_judged, grounded.claims_grounded) == (
        GroundingStatus.GROUNDED,
        1,
        1,
    )
    assert [(t.turns_back, t.documents) for t in grounded.turns or ()] == [(1, 1), (2, 2)]
    no_judge = GroundingDetails.model_validate(BEFORE["earlier_turns"]["no_judge"])
    assert no_judge.why == NotRejudgedReason.NO_JUDGE and no_judge.note and "--judge openai" in no_judge.note
    with pytest.raises(ValidationError):  # a renamed key, a status no version writes
        GroundingDetails.model_validate({**BEFORE["earlier_turns"]["paired"], "grounded_offline": True})
    with pytest.raises(ValidationError):
        GroundingDetails.model_validate({"status": "regrounded"})


def test_older_or_newer_grounding_details_are_read_tolerantly() -> None:
    odd = {
        "status": "grounded",
        "judge": 7,
        "turns": [{"trace_id": "ab" * 16, "turns_back": 1, "documents": 2}, {"turns_back": 2}, "x"],
        "claims_judged": "one",
        "claims_grounded": 1,
        "written_by": "a newer consumer",
    }
    read = FaithfulnessDetails.read({**OLDER, "earlier_turns": odd}).earlier_turns
    assert read is not None and read.status == GroundingStatus.GROUNDED
    assert [t.trace_id for t in read.turns or ()] == ["ab" * 16], "a turn without its trace is left out"
    assert (read.judge, read.claims_judged, read.claims_grounded) == (None, None, 1)
    for unreadable in ({"status": "a newer status"}, {"turns": []}, {"status": ["grounded"]}, "grounded", 3):
        assert FaithfulnessDetails.read({"earlier_turns": unreadable}).earlier_turns is None
