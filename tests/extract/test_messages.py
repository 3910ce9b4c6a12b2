"""LLM calls read in every message form producers write: OpenLLMetry before 0.5x (`gen_ai.prompt.N`) and
0.6x (`gen_ai.input.messages` with `gen_ai.operation.name=chat`); agents with messages on children."""

from __future__ import annotations

import json

from trace_builder import span, trace

from tracescore.extract import extract
from tracescore.extract._read import qa_pairs

QUESTION = "How long does the Aurora X2 battery last?"
DOC = "The Aurora X2 battery lasts 14 hours."
ANSWER = "It lasts 14 hours."


def _workflow(**attrs: str) -> object:
    return span(
        "ask.workflow",
        {
            "traceloop.span.kind": "workflow",
            "traceloop.entity.name": "ask",
            "traceloop.entity.input": json.dumps({"args": [QUESTION], "kwargs": {}}),
            **attrs,
        },
    )


def _retrieve(parent: str) -> object:
    return span(
        "retrieve.task",
        {
            "traceloop.span.kind": "task",
            "traceloop.entity.name": "retrieve",
            "traceloop.entity.output": json.dumps([DOC]),
        },
        parent=parent,
        start=1,
    )


def test_openllmetry_06x_answer_is_read_from_gen_ai_output_messages() -> None:
    workflow = _workflow()
    chat = span(
        "openai.chat",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": QUESTION}]}]
            ),
            "gen_ai.output.messages": json.dumps(
                [
                    {
                        "role": "assistant",
                        "parts": [{"type": "text", "content": ANSWER}],
                        "finish_reason": "stop",
                    }
                ]
            ),
        },
        parent=workflow.span_id,
        start=2,
    )
    found = extract(trace(workflow, _retrieve(workflow.span_id), chat))
    [rag] = found.interactions
    assert found.skips == []
    assert rag.convention == "openllmetry" and rag.span is workflow
    assert (rag.record.query, rag.record.contexts, rag.record.answer) == (QUESTION, (DOC,), ANSWER)


def test_openllmetry_old_prompt_form_still_reads() -> None:
    workflow = _workflow()
    chat = span(
        "openai.chat",
        {
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": QUESTION,
            "gen_ai.completion.0.content": ANSWER,
        },
        parent=workflow.span_id,
        start=2,
    )
    [rag] = extract(trace(workflow, _retrieve(workflow.span_id), chat)).interactions
    assert rag.record.answer == ANSWER and rag.record.contexts == (DOC,)


def test_openllmetry_old_form_tool_messages_are_context_and_a_tool_span_too() -> None:
    workflow = _workflow()
    chat = span(
        "openai.chat",
        {
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": QUESTION,
            "gen_ai.prompt.1.role": "assistant",
            "gen_ai.prompt.1.content": "",
            "gen_ai.prompt.2.role": "tool",
            "gen_ai.prompt.2.content": DOC,
            "gen_ai.completion.0.content": ANSWER,
        },
        parent=workflow.span_id,
        start=2,
    )
    [rag] = extract(trace(workflow, chat)).interactions
    assert rag.record.contexts == (DOC,) and rag.context_sources[0] == (chat.span_id, "tool_message", 0)
    tool = span(
        "battery.tool",
        {"traceloop.span.kind": "tool", "traceloop.entity.output": json.dumps(14)},
        parent=workflow.span_id,
        start=1,
    )
    [rag] = extract(trace(workflow, tool, chat)).interactions
    assert rag.record.contexts == ("14",) and rag.context_sources[0] == (tool.span_id, "tool", 0)


def test_openllmetry_06x_function_calling_without_a_workflow_is_one_interaction() -> None:
    user = {"role": "user", "parts": [{"type": "text", "content": QUESTION}]}
    call = {
        "role": "assistant",
        "parts": [{"type": "tool_call", "id": "c1", "name": "search", "arguments": "{}"}],
    }
    result = {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": DOC}]}
    said = {"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}
    ask = span(
        "openai.chat",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps([user]),
            "gen_ai.output.messages": json.dumps([call]),
        },
        start=1,
    )
    answer = span(
        "openai.chat",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps([user, call, result]),
            "gen_ai.output.messages": json.dumps([said]),
        },
        start=2,
    )
    found = extract(trace(ask, answer))
    [rag] = found.interactions
    assert found.skips == [] and rag.span is answer
    assert (rag.record.query, rag.record.contexts, rag.record.answer) == (QUESTION, (DOC,), ANSWER)
    assert ask.span_id in rag.span_ids


def test_two_function_calling_loops_in_one_request_keep_their_own_tool_results() -> None:
    request = span("POST /ask")
    spans = [request]
    for turn, doc in enumerate((DOC, "The Aurora X2 weighs 1.2 kg.")):
        base = 10 * turn
        spans.append(
            span(
                "chat",
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.output.messages": json.dumps(
                        [{"role": "assistant", "parts": [{"type": "tool_call", "name": "s"}]}]
                    ),
                    "gen_ai.input.messages": json.dumps([{"role": "user", "content": f"q{turn}"}]),
                },
                parent=request.span_id,
                start=base + 1,
            )
        )
        spans.append(
            span("execute_tool s", {"gen_ai.tool.call.result": doc}, parent=request.span_id, start=base + 2)
        )
        spans.append(
            span(
                "chat",
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": f"a{turn}"}]),
                    "gen_ai.input.messages": json.dumps([{"role": "user", "content": f"q{turn}"}]),
                },
                parent=request.span_id,
                start=base + 3,
            )
        )
    found = extract(trace(*spans))
    assert [(r.record.query, r.record.contexts, r.record.answer) for r in found.interactions] == [
        ("q0", (DOC,), "a0"),
        ("q1", ("The Aurora X2 weighs 1.2 kg.",), "a1"),
    ]


def test_old_pydantic_ai_running_tool_span_is_read() -> None:
    agent = span("agent run", {"final_result": ANSWER})
    chat = span(
        "chat m",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps([{"role": "user", "content": QUESTION}]),
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": ANSWER}]),
        },
        parent=agent.span_id,
        start=2,
    )
    tool = span(
        "running tool", {"gen_ai.tool.name": "search", "tool_response": DOC}, parent=agent.span_id, start=1
    )
    [rag] = extract(trace(agent, tool, chat)).interactions
    assert rag.record.contexts == (DOC,) and rag.record.answer == ANSWER


def test_a_retrieval_named_tool_is_read_once_not_again_from_the_tool_message() -> None:
    """traceloop @tool search_docs between two openai.chat calls: the tool message repeats its result."""
    workflow = _workflow()
    tool = span(
        "search_docs.tool",
        {
            "traceloop.span.kind": "tool",
            "traceloop.entity.name": "search_docs",
            "traceloop.entity.output": json.dumps([DOC]),
        },
        parent=workflow.span_id,
        start=1,
    )
    chat = span(
        "openai.chat",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps(
                [{"role": "user", "content": QUESTION}, {"role": "tool", "content": json.dumps([DOC])}]
            ),
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": ANSWER}]),
        },
        parent=workflow.span_id,
        start=2,
    )
    [rag] = extract(trace(workflow, tool, chat)).interactions
    assert rag.record.contexts == (DOC,) and rag.context_sources[0].span_id == tool.span_id


def test_the_pairs_are_each_question_and_the_last_answer_after_it() -> None:
    messages = [
        ("system", "You answer from the documents."),
        ("user", "What does Basic cost?"),
        ("assistant", ""),  # a tool call, no text
        ("tool", "Basic costs 9 euros."),
        ("assistant", "9 euros a month."),
        ("user", "Phone support?"),
        ("assistant", "Only with Plus."),
        ("user", "And the add-on?"),  # the question being answered: no pair yet
    ]
    assert qa_pairs(messages) == (
        ("What does Basic cost?", "9 euros a month."),
        ("Phone support?", "Only with Plus."),
    )
