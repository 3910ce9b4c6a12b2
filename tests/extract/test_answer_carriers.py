"""An answer never supports itself: a tool result that merely carries the answer (handed it as arguments,
is the answer, ran after the answer was written) is not a document, in every convention that reads tools;
a result that only quotes documents the answer rests on stays."""

from __future__ import annotations

import json

import pytest
from trace_builder import span, trace

from tracescore import semconv
from tracescore.extract import extract
from tracescore.model import ExtractSkip

KIND = semconv.OPENINFERENCE_SPAN_KIND
QUESTION = "How long does the Aurora X2 battery last?"
DOCS = ["The Aurora X2 battery lasts 14 hours on a single charge.", "The Aurora X2 weighs 1.2 kg."]
ANSWER = "The Aurora X2 battery lasts 40 hours and it weighs 3 kg."


def _openinference(*tools: dict, answer: str = ANSWER) -> list:
    agent = span("agent.run", {KIND: "AGENT", "input.value": QUESTION, "output.value": answer})
    children = [
        span(name, {KIND: "TOOL", **attrs}, parent=agent.span_id, start=index + 1)
        for index, (name, attrs) in enumerate((t["name"], t["attrs"]) for t in tools)
    ]
    return [agent, *children]


SEARCH = {
    "name": "search_docs",
    "attrs": {"input.value": json.dumps({"query": QUESTION}), "output.value": json.dumps(DOCS)},
}


def _final_answer(answer: str) -> dict:
    return {
        "name": "final_answer",
        "attrs": {"input.value": json.dumps({"kwargs": {"answer": answer}}), "output.value": answer},
    }


def test_a_final_answer_tools_result_is_not_a_document() -> None:
    [rag] = extract(trace(*_openinference(SEARCH, _final_answer(ANSWER)))).interactions
    assert sorted(rag.record.contexts) == sorted(DOCS)
    [note] = rag.context_notes
    assert "final_answer" in note and "call arguments hold the answer" in note


def test_a_final_answer_that_is_a_number_is_carried_too() -> None:
    final = {
        "name": "final_answer",
        "attrs": {"input.value": json.dumps({"args": [14]}), "output.value": "14"},
    }
    [rag] = extract(trace(*_openinference(SEARCH, final, answer="14"))).interactions
    assert sorted(rag.record.contexts) == sorted(DOCS)


def test_with_only_the_answer_carried_there_is_nothing_to_judge_against() -> None:
    found = extract(trace(*_openinference(_final_answer(ANSWER))))
    assert found.interactions == []
    [skip] = found.skips
    assert skip.reason == ExtractSkip.EMPTY_CONTEXT and "never supports itself" in skip.detail


@pytest.mark.parametrize(
    "result",
    [
        pytest.param(ANSWER, id="the-answer"),
        pytest.param(f"  {ANSWER.upper()}  ", id="case-and-spacing"),
        pytest.param(json.dumps({"response": ANSWER, "sources": 2}), id="a-value-of-its-json"),
    ],
)
def test_a_tool_result_that_is_the_answer_is_not_a_document(result: str) -> None:
    sub_agent = {
        "name": "ask_expert",
        "attrs": {"input.value": json.dumps({"q": QUESTION}), "output.value": result},
    }
    [rag] = extract(trace(*_openinference(SEARCH, sub_agent))).interactions
    assert sorted(rag.record.contexts) == sorted(DOCS)
    assert any("its result is the answer" in note for note in rag.context_notes)


def test_documents_that_the_answer_quotes_stay_evidence() -> None:
    quoted = DOCS[0]
    one_text = {"name": "lookup", "attrs": {"output.value": "\n".join(DOCS)}}
    listed = {"name": "search_docs", "attrs": {"output.value": json.dumps(DOCS)}}
    for tool in (one_text, listed):
        [rag] = extract(trace(*_openinference(tool, answer=quoted))).interactions
        assert "".join(rag.record.contexts) == "".join(DOCS if tool is listed else ["\n".join(DOCS)])
        assert not any("never supports itself" in note for note in rag.context_notes)


def test_a_short_answer_inside_a_search_query_does_not_drop_the_search() -> None:
    search = {
        "name": "search_docs",
        "attrs": {
            "input.value": json.dumps({"query": "Aurora X2 battery 14 hours"}),
            "output.value": json.dumps(DOCS),
        },
    }
    [rag] = extract(trace(*_openinference(search, answer="14 hours"))).interactions
    assert sorted(rag.record.contexts) == sorted(DOCS)


def test_arguments_that_contain_a_whole_answer_carry_it() -> None:
    send = {
        "name": "send_email",
        "attrs": {"input.value": json.dumps({"body": f"Hello,\n{ANSWER}\nRegards"}), "output.value": "sent"},
    }
    [rag] = extract(trace(*_openinference(SEARCH, send))).interactions
    assert sorted(rag.record.contexts) == sorted(DOCS)


def test_a_tool_called_after_the_llm_call_that_wrote_the_answer_is_not_evidence() -> None:
    agent = span("agent.run", {KIND: "AGENT", "input.value": QUESTION, "output.value": ANSWER}, start=0)
    search = span(
        "search_docs", {KIND: "TOOL", "output.value": json.dumps(DOCS)}, parent=agent.span_id, start=1
    )
    llm = span(
        "llm",
        {
            KIND: "LLM",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": ANSWER,
        },
        parent=agent.span_id,
        start=2,
    )
    after = span(
        "translate",
        {KIND: "TOOL", "output.value": "La batterie dure 40 heures."},
        parent=agent.span_id,
        start=5,
    )
    [rag] = extract(trace(agent, search, llm, after)).interactions
    assert sorted(rag.record.contexts) == sorted(DOCS)
    assert any("after the LLM call that wrote the answer" in note for note in rag.context_notes)


def test_genai_and_openllmetry_tools_follow_the_same_rule() -> None:
    said = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}])
    agent = span("invoke_agent a", {"gen_ai.operation.name": "invoke_agent", "gen_ai.output.messages": said})
    search = span(
        "execute_tool search",
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.result": json.dumps(DOCS)},
        parent=agent.span_id,
        start=1,
    )
    final = span(
        "execute_tool final_result",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.call.arguments": json.dumps({"answer": ANSWER}),
            "gen_ai.tool.call.result": "Final result processed.",
        },
        parent=agent.span_id,
        start=2,
    )
    [rag] = extract(trace(agent, search, final)).interactions
    assert sorted(rag.record.contexts) == sorted(DOCS)
    workflow = span(
        "ask.workflow",
        {
            "traceloop.span.kind": "workflow",
            "traceloop.entity.input": json.dumps({"args": [QUESTION]}),
            "traceloop.entity.output": json.dumps(ANSWER),
        },
    )
    lookup = span(
        "lookup.tool",
        {"traceloop.span.kind": "tool", "traceloop.entity.output": "\n".join(DOCS)},
        parent=workflow.span_id,
        start=1,
    )
    reply = span(
        "reply.tool",
        {
            "traceloop.span.kind": "tool",
            "traceloop.entity.input": json.dumps({"kwargs": {"text": ANSWER}}),
            "traceloop.entity.output": json.dumps({"ok": True}),
        },
        parent=workflow.span_id,
        start=2,
    )
    [rag] = extract(trace(workflow, lookup, reply)).interactions
    assert rag.record.contexts == ("\n".join(DOCS),)


def test_a_huge_or_binary_tool_result_is_bounded_and_never_a_crash() -> None:
    huge = json.dumps({"rows": [{"id": i, "text": DOCS[i % 2]} for i in range(60_000)]})
    binary = bytes(range(256)).decode("latin-1") * 400
    deep = "[" * 50_000 + "]" * 50_000
    many = str(["x"] * 100_000)  # a Python list's str(): not parsed past 256 items
    for result in (huge, binary, deep, many, "[" * 50_000, "{" + '"a":' * 10_000):
        tool = {"name": "dump", "attrs": {"input.value": huge, "output.value": result}}
        found = extract(trace(*_openinference(SEARCH, tool)))
        [rag] = found.interactions
        assert set(DOCS) <= set(rag.record.contexts)
        assert rag.context_notes, "what was read differently or left out is said"


def test_a_model_that_writes_the_answer_twice_wrote_it_after_the_search_between() -> None:
    def llm(start: int) -> object:
        return span(
            "llm",
            {KIND: "LLM", "llm.output_messages.0.message.content": ANSWER},
            parent=agent.span_id,
            start=start,
        )

    agent = span("agent.run", {KIND: "AGENT", "input.value": QUESTION, "output.value": ANSWER}, start=0)
    search = span(
        "search_docs", {KIND: "TOOL", "output.value": json.dumps(DOCS)}, parent=agent.span_id, start=3
    )
    [rag] = extract(trace(agent, llm(1), search, llm(5))).interactions
    assert sorted(rag.record.contexts) == sorted(DOCS)


def test_each_tool_message_passed_to_the_llm_is_judged_on_its_own() -> None:
    """OpenAI function calling without tool spans: two tool messages in the answering call's prompt, one
    of them an agent-as-tool's reply the model repeats; only that one is dropped."""
    messages = [("user", QUESTION), ("tool", DOCS[0]), ("tool", ANSWER)]
    attrs: dict[str, object] = {KIND: "LLM", "llm.output_messages.0.message.content": ANSWER}
    for index, (role, content) in enumerate(messages):
        attrs[f"llm.input_messages.{index}.message.role"] = role
        attrs[f"llm.input_messages.{index}.message.content"] = content
    [rag] = extract(trace(span("ChatCompletion", attrs))).interactions
    assert rag.record.contexts == (DOCS[0],)
    assert any("its result is the answer" in note for note in rag.context_notes)
