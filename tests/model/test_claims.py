"""Faithfulness's details as one model: what the metric and emit write holds to it strictly (a renamed key
fails here), it is the same JSON as before the model existed, and whatever an older consumer wrote is still
read, tolerantly, by every reader."""

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
    Interaction,
    MetricResult,
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


def test_every_reader_reads_older_details_without_a_crash() -> None:
    result = MetricResult(metric="faithfulness", score=0.25, label="hallucinated", judge="x", details=OLDER)
    assert explanation(result) == (
        "1 of 4 claims fully supported by the retrieved context. no_evidence: Old.; contradictory: Unsure.; "
        "no_evidence: A bad source."
    )
    found = FaithfulnessFindings.of(result)
    assert (found.claims, found.no_evidence, found.contradicted) == (2, 2, 0), "the counts it carries"
