"""A tool span is a tool call of the run wherever it sits: beside the model calls, under the agent, or under a
model call (a model call that runs its tools itself, or stays open while they run, is their parent: Google
ADK 1.x's `call_llm`, automatic function calling). Its documents are evidence, in every convention."""

from __future__ import annotations

import json

import pytest
from recorded import recordings
from trace_builder import span, trace

from tracescore.consume import decode_message
from tracescore.extract import extract
from tracescore.model import DecodedSpan, Trace

QUESTION = "How long does the Aurora X2 battery last?"
DOC = "The Aurora X2 battery lasts 14 hours."
ANSWER = "It lasts 14 hours."


def _llm_with_tool_inside(llm: dict[str, object], tool: dict[str, object]) -> list[DecodedSpan]:
    """One model call (no agent span around it) that ran its tool inside itself before answering."""
    call = span("model call", llm, start=0)
    call.end_time_unix_nano = 10  # open while its tool runs
    inside = span("tool", tool, parent=call.span_id, start=1)
    return [call, inside]


LONE_CALLS = {
    "openinference": (
        {
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": QUESTION,
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": ANSWER,
        },
        {"openinference.span.kind": "TOOL", "tool.name": "search", "output.value": json.dumps([DOC])},
    ),
    "genai": (
        {
            "gen_ai.operation.name": "generate_content",
            "gen_ai.input.messages": json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": QUESTION}]}]
            ),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}]
            ),
        },
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "search",
            "gen_ai.tool.call.result": DOC,
        },
    ),
    "mlflow": (
        {
            "mlflow.spanType": '"CHAT_MODEL"',
            "mlflow.spanInputs": json.dumps({"messages": [{"role": "user", "content": QUESTION}]}),
            "mlflow.spanOutputs": json.dumps(
                {"choices": [{"message": {"role": "assistant", "content": ANSWER}}]}
            ),
        },
        {"mlflow.spanType": '"TOOL"', "mlflow.spanOutputs": json.dumps(DOC)},
    ),
}


@pytest.mark.parametrize("convention", sorted(LONE_CALLS))
def test_a_tool_inside_the_model_call_that_answered_is_its_evidence(convention: str) -> None:
    llm, tool = LONE_CALLS[convention]
    found = extract(trace(*_llm_with_tool_inside(llm, tool)))
    [rag] = found.interactions
    assert rag.convention == convention and rag.record.contexts == (DOC,)
    assert rag.run is not None and rag.run.tool_calls_total == 1


def test_a_langfuse_tool_inside_a_generation_is_the_agents_tool_call() -> None:
    agent = span(
        "support",
        {
            "langfuse.observation.type": "agent",
            "langfuse.observation.input": json.dumps(QUESTION),
            "langfuse.observation.output": json.dumps(ANSWER),
        },
        scope="langfuse-sdk",
    )
    generation = span(
        "generate",
        {"langfuse.observation.type": "generation", "langfuse.observation.output": json.dumps(ANSWER)},
        parent=agent.span_id,
        scope="langfuse-sdk",
        start=1,
    )
    generation.end_time_unix_nano = 10  # open while its tool runs
    tool = span(
        "search",
        {"langfuse.observation.type": "tool", "langfuse.observation.output": json.dumps([DOC])},
        parent=generation.span_id,
        scope="langfuse-sdk",
        start=2,
    )
    [rag] = extract(trace(agent, generation, tool)).interactions
    assert rag.record.contexts == (DOC,)
    assert rag.run is not None and [call.name for call in rag.run.tool_calls] == ["search"]


def test_adk_1x_tool_under_the_model_call_that_asked_for_it_is_a_tool_call_of_the_run() -> None:
    """Recorded: ADK 1.39's `execute_tool` span is a child of the `call_llm` span that asked for it."""
    turns = [r for r in recordings() if r.source == "google_adk_v1" and r.expected[0] == "interaction"]
    assert turns
    for recording in turns:
        spans = decode_message(recording.payload)
        by_id = {s.span_id: s for s in spans}
        [interaction] = extract(Trace(recording.trace_id, tuple(spans))).interactions
        [tool] = [s for s in spans if s.attributes.get("openinference.span.kind") == "TOOL"]
        assert by_id[tool.parent_span_id or ""].name == "call_llm"
        own = [text for text, s in zip(interaction.record.contexts, interaction.context_sources, strict=True)
               if s.span_id == tool.span_id]  # fmt: skip
        assert own == recording.conversation["retrieved"]  # type: ignore[index]
        assert interaction.run is not None and [c.name for c in interaction.run.tool_calls] == [
            "search_plans"
        ]
