"""A turn's documents written by another tracescore version (a rolling upgrade, docs/operating/upgrading.md):
skipped and counted as `invalid_evidence`, never grounded on, never a stop."""

from __future__ import annotations

import json

from grounding_turns import Harness, evidence_of, interaction
from kafka.consumer.fetcher import ConsumerRecord

from tracescore.conversations._logic import EVIDENCE_HEADER


def test_a_turns_documents_of_another_schema_version_are_skipped_as_invalid_evidence() -> None:
    harness = Harness()
    written = json.loads(evidence_of(interaction(1)).model_dump_json())
    for offset, version in enumerate((2, 1)):
        value = json.dumps({**written, "schema_version": version}).encode()
        message = ConsumerRecord(
            "turns", 0, 0, offset, 0, 0, None, value, [(EVIDENCE_HEADER, b"1")], None, -1, len(value), -1
        )
        harness.logic.apply(message, replay=False)
    assert harness.skipped == {"invalid_evidence": 1}  # version 1, this one's, is read
