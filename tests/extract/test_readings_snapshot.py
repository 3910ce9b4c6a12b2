"""Every recorded fixture reads exactly as the committed snapshot says: each interaction's question,
documents, answer, run, sources, notes, route and conversation, and each skip's reason and detail, in the
order the consumer reads them (`find`, then each interaction built), byte for byte.

A change to the reader that means to read something differently regenerates the snapshot and shows the
difference in review:

    TRACESCORE_UPDATE_READINGS=1 pytest tests/extract/test_readings_snapshot.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tracescore.consume import assemble_messages, decode_message
from tracescore.extract import Skip, find
from tracescore.model import Interaction, Trace

FIXTURES = Path(__file__).parent / "fixtures"
SNAPSHOT = Path(__file__).parent / "readings.json"
PAYLOADS = sorted(FIXTURES.glob("*/*.binpb"))


def readings(payload: bytes, logs: bytes | None = None) -> list[dict[str, Any]]:
    """What the consumer reads of one recorded message (and of the log records recorded with it, their GenAI
    events on their spans): per trace, its interactions and skips."""
    spans = (
        decode_message(payload)
        if logs is None
        else [s for t in assemble_messages([logs, payload]) for s in t.spans]
    )
    out = []
    for trace_id in sorted({s.trace_id for s in spans}):
        trace = Trace(trace_id, tuple(s for s in spans if s.trace_id == trace_id))
        findings = find(trace)
        out.append(
            {
                "trace_id": trace_id,
                "found": [
                    {
                        "span": f.span.span_id,
                        "span_ids": sorted(f.span_ids),
                        "route": f.route,
                        "question_missing": f.question_missing,
                        "texts": f.texts,
                        "session_id": f.session_id,
                        "interaction": _interaction(f.interaction()),
                    }
                    for f in findings.found
                ],
                "skips": [_skip(s) for s in findings.skips],
            }
        )
    return out


def _interaction(i: Interaction) -> dict[str, Any]:
    return {
        "span": i.span.span_id,
        "record": i.record.model_dump(mode="json"),
        "route": i.route,
        "convention": i.convention,
        "span_ids": sorted(i.span_ids),
        "context_sources": [list(s) for s in i.context_sources],
        "context_notes": list(i.context_notes),
        "session_id": i.session_id,
        "user_id": i.user_id,
        "question_missing": i.question_missing,
    }


def _skip(s: Skip) -> dict[str, Any]:
    span = s.span.span_id if s.span is not None else None
    return {
        "reason": s.reason,
        "detail": s.detail,
        "expected": s.expected,
        "span": span,
        "convention": s.convention,
    }


def _all() -> dict[str, Any]:
    return {str(p.relative_to(FIXTURES)): readings(p.read_bytes(), _logs(p)) for p in PAYLOADS}


def _logs(payload: Path) -> bytes | None:
    """The log records recorded beside a trace (<scenario>.logs.pb), if any."""
    logs = payload.with_name(payload.name.removesuffix(".binpb") + ".logs.pb")
    return logs.read_bytes() if logs.is_file() else None


def _dumps(value: Any) -> str:
    return json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


@pytest.fixture(scope="module")
def snapshot() -> dict[str, Any]:
    if os.environ.get("TRACESCORE_UPDATE_READINGS"):
        SNAPSHOT.write_text(_dumps(_all()), encoding="utf-8")
    loaded: dict[str, Any] = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    return loaded


def test_the_snapshot_covers_every_recorded_fixture(snapshot: dict[str, Any]) -> None:
    assert sorted(snapshot) == [str(p.relative_to(FIXTURES)) for p in PAYLOADS]


@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_a_recorded_fixture_reads_as_the_snapshot_says(payload: Path, snapshot: dict[str, Any]) -> None:
    # Compared as the JSON text, so a difference shows as a diff of what was read.
    assert _dumps(readings(payload.read_bytes(), _logs(payload))) == _dumps(
        snapshot[str(payload.relative_to(FIXTURES))]
    )
