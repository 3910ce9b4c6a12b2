"""The run view (`record.run`): every recogniser reads an agent's tool calls, steps and tokens the same way,
failed calls included, and a run of any length stays bounded."""

from __future__ import annotations

import dataclasses
import json

from recorded import recordings
from trace_builder import span, trace

from tracescore import semconv
from tracescore.consume import decode_message
from tracescore.extract import extract
from tracescore.model import MAX_RUN_TEXT_CHARS, MAX_RUN_TOOL_CALLS, Run, Trace

KIND = semconv.OPENINFERENCE_SPAN_KIND
QUESTION = "How long does the Aurora X2 battery last?"
DOC = "The Aurora X2 battery lasts 14 hours."
ANSWER = "It lasts 14 hours."


def _agent() -> list:
    return [span("LangGraph", {KIND: "CHAIN", "input.value": QUESTION, "output.value": ANSWER}, start=0)]


def _run_of(*spans: object) -> Run:
    [interaction] = extract(trace(*spans)).interactions  # type: ignore[arg-type]
    assert interaction.run is not None and interaction.run is interaction.record.run
    return interaction.run


def _tool(parent: str, start: int, result: object, arguments: str = '{"query": "battery"}', **attrs: object):
    return span(
        "search_docs",
        {KIND: "TOOL", "tool.name": "search_docs", "input.value": arguments, "output.value": result, **attrs},
        parent=parent,
        start=start,
    )


def _llm(parent: str, start: int, prompt: int, completion: int):
    return span(
        "ChatOpenAI",
        {
            KIND: "LLM",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": ANSWER,
            "llm.token_count.prompt": prompt,
            "llm.token_count.completion": completion,
        },
        parent=parent,
        start=start,
    )


def test_tool_calls_steps_and_tokens_of_an_agent() -> None:
    [agent] = _agent()
    ask, tool, answer = (
        _llm(agent.span_id, 1, 40, 5),
        _tool(agent.span_id, 2, DOC),
        _llm(agent.span_id, 3, 60, 9),
    )
    run = _run_of(agent, ask, tool, answer)
    [call] = run.tool_calls
    assert (call.name, call.arguments, call.result, call.ok, call.span_id) == (
        "search_docs",
        '{"query": "battery"}',
        DOC,
        True,
        tool.span_id,
    )
    assert (run.steps, run.tool_calls_total, run.failed_tool_calls) == (2, 1, 0)
    assert (run.prompt_tokens, run.completion_tokens, run.retrievals) == (100, 14, 0)


def test_a_failed_call_is_read_from_its_status_its_attributes_or_its_result() -> None:
    [agent] = _agent()
    raised = dataclasses.replace(
        _tool(agent.span_id, 1, None), status_code=2, status_message="TimeoutError: search timed out"
    )
    recorded = _tool(agent.span_id, 2, "partial", **{"error.type": "RateLimitError"})
    handled = (
        _tool(  # LangGraph's ToolNode / handle_tool_error: the failure is the ToolMessage the model gets
            agent.span_id,
            3,
            json.dumps({"type": "tool", "data": {"content": "search backend down", "status": "error"}}),
        )
    )
    told = _tool(agent.span_id, 4, "Error: ValueError('bad topic')\n Please fix your mistakes.")
    llamaindex = _tool(
        agent.span_id, 5, json.dumps({"blocks": [{"text": "x"}], "tool_name": "s", "is_error": True})
    )
    worked = _tool(agent.span_id, 6, DOC)
    run = _run_of(agent, raised, recorded, handled, told, llamaindex, worked)
    assert [c.ok for c in run.tool_calls] == [False, False, False, False, False, True]
    assert run.failed_tool_calls == 5
    errors = [c.error or "" for c in run.tool_calls]
    assert "TimeoutError: search timed out" in errors[0] and "RateLimitError" in errors[1]
    assert "reports an error" in errors[2] and "Error: ValueError" in errors[3]


def test_an_error_word_inside_a_result_is_not_a_failure() -> None:
    [agent] = _agent()
    tool = _tool(agent.span_id, 1, "The error light blinks when the Aurora X2 battery is below 5%.")
    assert _run_of(agent, tool).tool_calls[0].ok


def test_a_run_of_a_thousand_tool_calls_keeps_the_first_and_counts_all() -> None:
    [agent] = _agent()
    tools = [
        _tool(agent.span_id, i + 1, "Error: timeout" if i % 2 else f"{DOC} ({i})" + "y" * 20_000)
        for i in range(1000)
    ]
    run = _run_of(agent, *tools)
    assert len(run.tool_calls) == MAX_RUN_TOOL_CALLS and run.omitted_tool_calls == 1000 - MAX_RUN_TOOL_CALLS
    assert run.tool_calls_total == 1000 and run.failed_tool_calls == 500
    assert all(len(c.result or "") <= MAX_RUN_TEXT_CHARS for c in run.tool_calls)
    assert run.tool_calls[0].clipped and not run.tool_calls[1].clipped


def test_usage_as_each_convention_records_it() -> None:
    genai = span(
        "chat gpt",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps([{"role": "user", "content": QUESTION}]),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}]
            ),
            "gen_ai.usage.input_tokens": 42,
            "gen_ai.usage.output_tokens": 9,
        },
    )
    retrieval = span(
        "retrieval", {"gen_ai.operation.name": "retrieval", "gen_ai.retrieval.documents": json.dumps([DOC])}
    )
    run = _run_of(genai, retrieval)
    assert (run.steps, run.prompt_tokens, run.completion_tokens, run.retrievals) == (1, 42, 9, 1)


def test_without_tool_spans_the_tool_messages_are_the_calls() -> None:
    """OpenAI function calling with no tool span: each tool message this turn passed to the model is a call
    (an earlier turn's is not)."""
    messages = [
        ("user", "earlier question"),
        ("tool", "stale result"),
        ("user", QUESTION),
        ("assistant", ""),
        ("tool", DOC),
        ("tool", "Error: rate limited"),
    ]
    attrs: dict[str, object] = {KIND: "LLM", "llm.output_messages.0.message.content": ANSWER}
    for i, (role, content) in enumerate(messages):
        attrs[f"llm.input_messages.{i}.message.role"] = role
        attrs[f"llm.input_messages.{i}.message.content"] = content
    run = _run_of(span("ChatOpenAI", attrs))
    assert [(c.result, c.ok) for c in run.tool_calls] == [(DOC, True), ("Error: rate limited", False)]
    assert run.earlier_turn_documents == 1


def test_an_interaction_without_tools_or_model_calls_has_no_run() -> None:
    """A decorated function: question, documents and answer on one span, nothing an agent did."""
    rag = span(
        "answer",
        {
            semconv.INPUT_VALUE: QUESTION,
            semconv.document_content_key(0): DOC,
            semconv.OUTPUT_VALUE: ANSWER,
        },
        scope="tracescore",
    )
    [interaction] = extract(trace(rag)).interactions
    assert interaction.run is None


def test_recorded_agent_runs() -> None:
    """From the real libraries: LangGraph's handled tool failure, its retry and a repeated search, a chat's
    third turn given the earlier turns' tool results by its checkpointer, and a follow-up that called no tool
    (its evidence is the earlier turn's)."""
    runs = {}
    sources = ("langgraph_tool_error", "langgraph_conversation", "pydantic_ai_conversation", "crewai")
    for recording in recordings():
        if recording.source in sources and recording.expected[0] == "interaction":
            spans = decode_message(recording.payload)
            [interaction] = extract(Trace(recording.trace_id, tuple(spans))).interactions
            runs[recording.id] = interaction.run
    shape = {
        k: (r.steps, r.tool_calls_total, r.failed_tool_calls, r.earlier_turn_documents)
        for k, r in runs.items()
    }
    assert shape["langgraph_tool_error/tool_error_ignored"] == (2, 1, 1, 0)
    assert shape["langgraph_tool_error/tool_error_retried"] == (3, 2, 1, 0)
    assert shape["langgraph_tool_error/repeated_call"] == (3, 2, 0, 0)
    # Its own search, plus turn 1's and turn 2's results the thread kept (one text each).
    assert shape["langgraph_conversation/resent_faithful_turn3"] == (2, 1, 0, 2)
    assert shape["langgraph_conversation/qa_only_faithful_turn3"] == (2, 1, 0, 0)
    assert shape["pydantic_ai_conversation/followup_faithful"] == (1, 0, 0, 3)
    assert shape["pydantic_ai_conversation/turn1"] == (2, 1, 0, 0)
    [call] = runs["langgraph_tool_error/tool_error_ignored"].tool_calls
    assert (call.name, call.result, call.ok) == ("search_docs", "search backend timed out", False)
    assert runs["pydantic_ai_conversation/turn1"].prompt_tokens == 84
    # LiteLLM's model-call span around the OpenAI client's: each step (and its tokens) counted once.
    litellm = runs["crewai/litellm_faithful"]
    assert (litellm.steps, litellm.prompt_tokens, litellm.completion_tokens) == (2, 84, 18)
