"""The three-turn support chats recorded from the real libraries (tests/extract/fixtures/record.py; the
manifest's `conversation` entry says each turn's history form and what grounds it): turn 1 retrieves the
price list, turn 3 retrieves only "the add-on costs the same as the Basic plan". Read from a source's folder
wherever it is kept (`fixtures/<source>`, or `fixtures/unread/<source>` until its reader is merged)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from recorded import FIXTURES

from tracescore.consume import decode_message

# Earlier tool results resent in the prompt, only questions and answers, or the history kept by the model's
# service (the Responses API's previous_response_id: nothing resent).
FORMS = ("resent", "qa_only", "service")
ENDINGS = ("faithful", "invented", "restated")


@dataclass(frozen=True)
class Turn:
    source: str
    scenario: str
    trace_id: str
    payload: bytes
    chat: str  # e.g. "qa_only_faithful" (semconv_ and schema_v1_ variants keep their prefix)
    form: str
    ending: str
    turn: int
    session_id: str
    service: str  # service.name of its spans: a conversation is (service, session id)
    # Its log records (<scenario>.logs.pb: Semantic Kernel's model calls' messages), None without: written
    # to the spans topic beside its spans, as the Collector's logs pipeline does.
    logs: bytes | None = None


def chat_turns(source: str) -> list[Turn]:
    folder = FIXTURES / source if (FIXTURES / source).is_dir() else FIXTURES / "unread" / source
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    turns = []
    for file_name, entry in sorted(manifest["scenarios"].items()):
        conversation = entry.get("conversation") or {}
        form, name = conversation.get("history"), str(conversation.get("name", ""))
        ending = name.rsplit("_", 1)[-1]
        if form not in FORMS or ending not in ENDINGS or not file_name.endswith(".binpb"):
            continue
        payload = Path(folder / file_name).read_bytes()
        turns.append(
            Turn(
                source=source,
                scenario=entry["scenario"],
                trace_id=entry["trace_id"],
                payload=payload,
                chat=name,
                form=form,
                ending=ending,
                turn=int(conversation["turn"]),
                session_id=conversation["session_id"],
                service=decode_message(payload)[0].service_name,
                logs=(folder / entry["logs"]["file"]).read_bytes() if "logs" in entry else None,
            )
        )
    return turns


def named_nothing(turn: Turn) -> Turn:
    """`turn` as its app would have recorded it naming no conversation: every span attribute that held the
    conversation id left out (the recorded spans otherwise as they are). The question/answer history the app
    resent stays in the prompt, which is what a conversation is inferred from where none is named."""
    request = ExportTraceServiceRequest.FromString(turn.payload)
    for resource in request.resource_spans:
        for scope in resource.scope_spans:
            for span in scope.spans:
                kept = [a for a in span.attributes if a.value.string_value != turn.session_id]
                del span.attributes[:]
                span.attributes.extend(kept)
    return replace(turn, payload=request.SerializeToString(), chat=f"unnamed_{turn.chat}")
