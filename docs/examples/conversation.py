"""docs/agents.md: grounding across turns. Turn 3 of a support chat recorded from LangGraph (an InMemorySaver
checkpointer keeps the thread; tests/extract/fixtures/scenarios/langgraph_conversation.py) looks up only that
the weekend add-on costs the same as the Basic plan: its price is judged against turn 1's tool result, which
the thread kept in the model call's input."""

import json
from datetime import UTC, datetime
from pathlib import Path

from tracescore.consume import decode_message
from tracescore.emit import evaluation_record
from tracescore.extract import extract
from tracescore.model import Trace
from tracescore.score import evaluate

RECORDED = Path(__file__).resolve().parents[2] / "tests" / "extract" / "fixtures" / "langgraph_conversation"

# --8<-- [start:read]
for scenario in ("resent_faithful_turn3", "resent_invented_turn3"):
    spans = decode_message((RECORDED / f"{scenario}.binpb").read_bytes())  # one Kafka message: turn 3
    [turn] = extract(Trace(spans[0].trace_id, tuple(spans))).interactions
    [result] = evaluate(turn.record, ["faithfulness"])  # the offline judge
    record = evaluation_record(turn, result, None, now=datetime(2026, 1, 1, tzinfo=UTC))
    print(f"{scenario}: {turn.record.query!r} -> {turn.record.answer!r}: {record.label}")
    [claim] = record.details["claims"]
    shown = {k: claim[k] for k in ("verdict", "evidence", "context_index", "evidence_source")}
    print("  details.context_sources:", json.dumps(record.details["context_sources"]))
    print("  details.claims[0]:", json.dumps(shown))
# --8<-- [end:read]
