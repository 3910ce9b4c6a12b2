"""docs/agents.md: tool_selection and goal_completion on the recorded LangGraph run whose search failed. They
need an LLM judge: here tracescore's scripted judge server stands in for the model (its reply is scripted
below), reached through the real `openai` client, so the one judge call both metrics share is real HTTP."""

import json
from pathlib import Path

from tracescore.consume import decode_message
from tracescore.extract import extract
from tracescore.model import Trace
from tracescore.score import OpenAIJudge, OpenAIJudgeSettings, evaluate
from tracescore.testing.judge_server import JudgeServer, fenced_data

RECORDED = Path(__file__).resolve().parents[2] / "tests" / "extract" / "fixtures" / "langgraph_tool_error"
spans = decode_message((RECORDED / "tool_error_ignored.binpb").read_bytes())
[interaction] = extract(Trace(spans[0].trace_id, tuple(spans))).interactions
MODEL_REPLY = {
    "tool_selection": {"reason": "search_docs is the tool for a product question.", "verdict": "fitting"},
    "goal_completion": {
        "reason": "The answer gives a battery life, as asked; whether it is right is faithfulness' question.",
        "verdict": "complete",
    },
}

with JudgeServer() as server:
    server.script(MODEL_REPLY)
    settings = OpenAIJudgeSettings(base_url=server.base_url, api_key="unused", model="judge-test")
    # --8<-- [start:judged]
    judge = OpenAIJudge(settings)  # any OpenAI-compatible model; the offline judge refuses these two
    results = evaluate(interaction.record, ["tool_selection", "goal_completion"], judge)
    for result in results:
        print(f"{result.metric}: {result.score} {result.label}: {result.reason} {result.details}")
    # --8<-- [end:judged]
    print(f"judge calls: {server.stats.chat_requests}")
    print("what the judge was given:", json.dumps(fenced_data(server.chat_requests[0]), indent=2))
