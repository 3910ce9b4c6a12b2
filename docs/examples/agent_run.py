"""docs/agents.md: an agent run recorded from LangGraph (tests/extract/fixtures/scenarios/
langgraph_tool_error.py): its search tool failed, and the model answered anyway. The run view, the run
signals (no judge call) and the evaluation record the consumer writes for one of them."""

from datetime import UTC, datetime
from pathlib import Path

from tracescore.consume import decode_message
from tracescore.emit import evaluation_record
from tracescore.extract import extract
from tracescore.model import Trace
from tracescore.score import evaluate

RECORDED = Path(__file__).resolve().parents[2] / "tests" / "extract" / "fixtures" / "langgraph_tool_error"
spans = decode_message((RECORDED / "tool_error_ignored.binpb").read_bytes())
[interaction] = extract(Trace(spans[0].trace_id, tuple(spans))).interactions

# --8<-- [start:run]
run = interaction.run  # also interaction.record.run: what the metrics read
print(run.model_dump_json(indent=2, exclude={"tool_calls": {0: {"span_id"}}}))
# --8<-- [end:run]

# --8<-- [start:signals]
signals = ["tool_errors", "ungrounded_answer", "unused_tool_results", "repeated_tool_calls", "run_budget"]
results = evaluate(interaction.record, ["faithfulness", *signals])  # the offline judge; signals call none
for result in results:
    score = "-" if result.score is None else f"{result.score:.2f}"
    line = f"{result.metric:<20} {score:>4}  {result.label or result.status.value:<15} {result.reason or ''}"
    print(line.rstrip())
# --8<-- [end:signals]

# --8<-- [start:record]
tool_errors = next(r for r in results if r.metric == "tool_errors")
record = evaluation_record(interaction, tool_errors, None, now=datetime(2026, 1, 1, tzinfo=UTC))
print(record.model_dump_json(indent=2, exclude={"usage", "timestamp"}))
# --8<-- [end:record]
