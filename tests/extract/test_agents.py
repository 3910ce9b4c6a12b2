"""Agents: tool calls are retrieval, a function-calling loop is one interaction, messages kept on children."""

from __future__ import annotations

import json

from trace_builder import span, trace

from tracescore import semconv
from tracescore.extract import extract
from tracescore.extract._context import MAX_CONTEXTS
from tracescore.extract._tools import tool_result_texts
from tracescore.model import ExtractSkip

KIND = semconv.OPENINFERENCE_SPAN_KIND
QUESTION = "How long does the Aurora X2 battery last?"
DOC = "The Aurora X2 battery lasts 14 hours."
DOC2 = "The Aurora X2 charges in 2 hours."
ANSWER = "It lasts 14 hours."


def _agent(*children_of, answer: str = ANSWER) -> list:
    agent = span("LangGraph", {KIND: "CHAIN", "input.value": QUESTION, "output.value": answer}, start=0)
    return [agent, *(child(agent.span_id) for child in children_of)]


def test_a_plain_tool_returning_documents_is_the_retrieval() -> None:
    """LangGraph agent with a plain @tool: the ToolMessage's content is the list of documents."""
    message = {"type": "tool", "data": {"content": json.dumps([DOC, DOC2]), "tool_call_id": "c1"}}
    agent, tool = _agent(
        lambda p: span("search", {KIND: "TOOL", "output.value": json.dumps(message)}, parent=p, start=1)
    )
    found = extract(trace(agent, tool))
    [rag] = found.interactions
    assert rag.span is agent and rag.record.contexts == (DOC, DOC2)
    assert [(s.span_id, s.kind) for s in rag.context_sources] == [(tool.span_id, "tool")] * 2
    assert rag.context_notes == ()


def test_tool_message_shapes_all_give_the_documents() -> None:
    shapes = [
        {"output": {"type": "tool", "data": {"content": [DOC, DOC2]}}},
        {"type": "tool", "content": json.dumps([{"page_content": DOC}, {"page_content": DOC2}])},
        {"lc": 1, "type": "constructor", "kwargs": {"type": "tool", "content": [DOC, DOC2]}},
        {"documents": [{"text": DOC}, {"text": DOC2}]},
    ]
    for shape in shapes:
        agent = span("LangGraph", {KIND: "CHAIN", "input.value": QUESTION, "output.value": ANSWER})
        tool = span(
            "search", {KIND: "TOOL", "output.value": json.dumps(shape)}, parent=agent.span_id, start=1
        )
        [rag] = extract(trace(agent, tool)).interactions
        assert rag.record.contexts == (DOC, DOC2), shape


def test_a_tool_result_that_is_not_document_like_is_context_with_a_note() -> None:
    agent, tool = _agent(
        lambda p: span("battery_hours", {KIND: "TOOL", "output.value": "14"}, parent=p, start=1)
    )
    [rag] = extract(trace(agent, tool)).interactions
    assert rag.record.contexts == ("14",)
    [note] = rag.context_notes
    assert tool.span_id in note and "not document-like" in note


def test_a_retriever_tool_is_read_once_from_its_retriever() -> None:
    agent = span("agent", {KIND: "AGENT", "input.value": QUESTION, "output.value": ANSWER})
    tool = span("retrieve_docs", {KIND: "TOOL", "output.value": f"{DOC}\n\n{DOC2}"}, parent=agent.span_id)
    retriever = span(
        "VectorStoreRetriever",
        {KIND: "RETRIEVER", "retrieval.documents.0.document.content": DOC},
        parent=tool.span_id,
    )
    [rag] = extract(trace(agent, tool, retriever)).interactions
    assert rag.record.contexts == (DOC,) and rag.context_sources[0].kind == "retriever"


def test_genai_execute_tool_result_is_the_retrieval() -> None:
    user = json.dumps([{"role": "user", "parts": [{"type": "text", "content": QUESTION}]}])
    said = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}])
    agent = span(
        "invoke_agent support",
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.input.messages": user,
            "gen_ai.output.messages": said,
        },
    )
    tool = span(
        "execute_tool search",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.call.arguments": json.dumps({"query": "battery"}),
            "gen_ai.tool.call.result": json.dumps([{"content": DOC}]),
        },
        parent=agent.span_id,
        start=1,
    )
    [rag] = extract(trace(agent, tool)).interactions
    assert rag.convention == "genai" and rag.record.contexts == (DOC,)
    assert rag.context_sources[0].span_id == tool.span_id


def _oi_llm(parent: str, start: int, *, messages: list[tuple[str, str]], out: str | None) -> object:
    attrs: dict = {KIND: "LLM"}
    for i, (role, content) in enumerate(messages):
        attrs[f"llm.input_messages.{i}.message.role"] = role
        attrs[f"llm.input_messages.{i}.message.content"] = content
    if out is None:
        attrs["llm.output_messages.0.message.role"] = "assistant"
        attrs["llm.output_messages.0.message.tool_calls.0.tool_call.function.name"] = "search"
    else:
        attrs["llm.output_messages.0.message.role"] = "assistant"
        attrs["llm.output_messages.0.message.content"] = out
    return span(
        "ChatCompletion", attrs, parent=parent, start=start, scope="openinference.instrumentation.openai"
    )


def test_openai_function_calling_loop_without_a_chain_is_one_interaction() -> None:
    request = span("POST /ask", {semconv.HTTP_ROUTE: "/ask"})
    ask = _oi_llm(request.span_id, 1, messages=[("system", "Be brief."), ("user", QUESTION)], out=None)
    tool = span("search", {KIND: "TOOL", "output.value": json.dumps([DOC])}, parent=request.span_id, start=2)
    answer = _oi_llm(
        request.span_id,
        3,
        messages=[
            ("system", "Be brief."),
            ("user", QUESTION),
            ("assistant", ""),
            ("tool", json.dumps([DOC])),
        ],
        out=ANSWER,
    )
    found = extract(trace(request, ask, tool, answer))
    [rag] = found.interactions
    assert found.skips == []
    assert rag.span is answer and rag.route == "/ask"
    assert (rag.record.query, rag.record.contexts, rag.record.answer) == (QUESTION, (DOC,), ANSWER)
    assert rag.context_sources[0].span_id == tool.span_id  # the tool span, not the message copy


def test_tool_role_messages_are_the_context_when_no_tool_span_was_recorded() -> None:
    request = span("POST /ask")
    ask = _oi_llm(
        request.span_id,
        1,
        messages=[
            ("user", "earlier question"),
            ("assistant", "old answer"),
            ("tool", "stale result"),
            ("user", QUESTION),
        ],
        out=None,
    )
    answer = _oi_llm(
        request.span_id,
        3,
        messages=[
            ("user", "earlier question"),
            ("assistant", "old answer"),
            ("tool", "stale result"),
            ("user", QUESTION),
            ("assistant", ""),
            ("tool", DOC),
        ],
        out=ANSWER,
    )
    [rag] = extract(trace(request, ask, answer)).interactions
    # This turn's tool result first; the earlier turn's result after it, marked; never the earlier answer.
    assert rag.record.contexts == (DOC, "stale result") and rag.record.query == QUESTION
    assert rag.context_sources == (
        (answer.span_id, "tool_message", 0),
        (answer.span_id, "earlier_turn", 1),
    )


def test_genai_tool_call_response_parts_after_the_question() -> None:
    history = [
        {"role": "user", "parts": [{"type": "text", "content": QUESTION}]},
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": "c1", "name": "search", "arguments": {}}],
        },
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": [DOC]}]},
    ]
    ask = span(
        "chat gpt",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps(history[:1]),
            "gen_ai.output.messages": json.dumps(history[1:2]),
        },
        start=1,
    )
    said = [{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}]
    answer = span(
        "chat gpt",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps(history),
            "gen_ai.output.messages": json.dumps(said),
        },
        start=3,
    )
    found = extract(trace(ask, answer))
    [rag] = found.interactions
    assert found.skips == [] and rag.span is answer
    assert (rag.record.query, rag.record.contexts) == (QUESTION, (DOC,))


def test_pydantic_ai_shape_messages_on_chat_children_documents_on_execute_tool() -> None:
    agent = span(
        "invoke_agent agent", {"gen_ai.agent.name": "agent", "gen_ai.operation.name": "invoke_agent"}
    )
    user = {"role": "user", "parts": [{"type": "text", "content": QUESTION}]}
    call = {
        "role": "assistant",
        "parts": [{"type": "tool_call", "id": "c1", "name": "search", "arguments": {}}],
    }
    ret = {
        "role": "user",
        "parts": [{"type": "tool_call_response", "id": "c1", "name": "search", "result": DOC}],
    }
    first = span(
        "chat m",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Answer from the tools."}]),
            "gen_ai.input.messages": json.dumps([user]),
            "gen_ai.output.messages": json.dumps([call]),
        },
        parent=agent.span_id,
        start=1,
    )
    running = span("running tools", parent=agent.span_id, start=2)
    tool = span(
        "execute_tool search",
        {"gen_ai.tool.name": "search", "gen_ai.tool.call.result": DOC},
        parent=running.span_id,
        start=3,
    )
    said = {"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}
    second = span(
        "chat m",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps([user, call, ret]),
            "gen_ai.output.messages": json.dumps([said]),
        },
        parent=agent.span_id,
        start=4,
    )
    found = extract(trace(agent, first, running, tool, second))
    [rag] = found.interactions
    assert rag.span is agent and rag.convention == "genai"
    assert (rag.record.query, rag.record.contexts, rag.record.answer) == (QUESTION, (DOC,), ANSWER)
    assert "Answer from the tools." not in rag.record.contexts


def test_an_agent_with_no_tool_and_no_retriever_is_an_explained_skip() -> None:
    agent = span(
        "invoke_agent agent",
        {"gen_ai.operation.name": "invoke_agent"},
    )
    chat = span(
        "chat m",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.system_instructions": "Acme Corp was founded in 1999.",
            "gen_ai.input.messages": json.dumps([{"role": "user", "content": QUESTION}]),
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": ANSWER}]),
        },
        parent=agent.span_id,
        start=1,
    )
    found = extract(trace(agent, chat))
    assert found.interactions == []
    [skip] = found.skips
    assert skip.reason == ExtractSkip.EMPTY_CONTEXT
    assert "system_instructions are read as documents only under a label that names them" in skip.detail


def test_an_agent_looping_200_tool_calls_stays_bounded() -> None:
    agent = span("agent", {KIND: "AGENT", "input.value": QUESTION, "output.value": ANSWER})
    tools = [
        span(
            f"search{i}",
            {KIND: "TOOL", "output.value": json.dumps([f"{DOC} ({i})"] * 3)},
            parent=agent.span_id,
            start=i + 1,
        )
        for i in range(200)
    ]
    [rag] = extract(trace(agent, *tools)).interactions
    assert len(rag.record.contexts) == MAX_CONTEXTS
    assert any("limit of 64" in note for note in rag.context_notes)


def test_documents_past_the_character_limit_are_not_judged_and_noted() -> None:
    big = "x" * 1_500_000
    agent, first, second = _agent(
        lambda p: span("a", {KIND: "TOOL", "output.value": json.dumps([big])}, parent=p, start=1),
        lambda p: span("b", {KIND: "TOOL", "output.value": json.dumps([big, DOC])}, parent=p, start=2),
    )
    [rag] = extract(trace(agent, first, second)).interactions
    assert rag.record.contexts == (big, DOC)
    assert any("2,000,000 characters" in note for note in rag.context_notes)


def test_tool_results_of_odd_shapes_never_crash() -> None:
    odd = ["", "   ", "null", "{}", "[]", "\x00\x01\x02binary", "[1, 2, 3]", '{"a": {"b": [null]}}', "{bad"]
    for value in odd:
        agent, tool = _agent(
            lambda p, v=value: span("t", {KIND: "TOOL", "output.value": v}, parent=p, start=1)
        )
        found = extract(trace(agent, tool))
        assert len(found.interactions) + len(found.skips) == 1


def test_a_tool_returning_langchain_documents_stringified_as_their_repr_is_read_exactly() -> None:
    """LangChain turns a tool's list[Document] into str(list): the page_content literals are read back."""
    content = (
        f"[Document(metadata={{'source': 'kb'}}, page_content={DOC!r}), "
        'Document(metadata={}, page_content="it\'s 2 hours")]'
    )
    message = {"type": "tool", "data": {"content": content}}
    agent, tool = _agent(
        lambda p: span("search", {KIND: "TOOL", "output.value": json.dumps(message)}, parent=p, start=1)
    )
    [rag] = extract(trace(agent, tool)).interactions
    assert rag.record.contexts == (DOC, "it's 2 hours") and rag.context_notes == ()
    odd = "[Document(id=1, content='x'), Document(page_content='y')]"  # not every Document has page_content
    agent, tool = _agent(lambda p: span("search", {KIND: "TOOL", "output.value": odd}, parent=p, start=1))
    [skip] = extract(trace(agent, tool)).skips
    assert skip.reason == ExtractSkip.EMPTY_CONTEXT and "program reprs" in skip.detail


def test_a_tool_request_never_answered_is_an_explained_missing_answer() -> None:
    request = span("POST /ask")
    ask = _oi_llm(request.span_id, 1, messages=[("user", QUESTION)], out=None)
    tool = span("search", {KIND: "TOOL", "output.value": DOC}, parent=request.span_id, start=2)
    [skip] = extract(trace(request, ask, tool)).skips
    assert skip.reason == ExtractSkip.MISSING_ANSWER and "asked for a tool" in skip.detail


def _genai_chat(parent: str, start: int, messages: list[dict], output: list[dict]) -> object:
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": json.dumps(messages),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": output}]),
    }
    return span("chat", attributes, parent=parent, start=start)


def test_genai_tool_spans_that_recorded_no_result_leave_the_tool_messages_as_the_documents() -> None:
    """An agent whose execute_tool spans carry names only (autogen-core's own spans, or content capture off)
    and whose chat spans carry the messages: the result passed to the model is what the answer rests on."""
    agent = span("invoke_agent support", {"gen_ai.operation.name": "invoke_agent"})
    user = {"role": "user", "parts": [{"type": "text", "content": QUESTION}]}
    call = {"type": "tool_call", "id": "c1", "name": "search", "arguments": {"query": QUESTION}}
    result = {"type": "tool_call_response", "id": "c1", "response": str([DOC, DOC2])}
    ask = _genai_chat(agent.span_id, 1, [user], [call])
    tool = span(
        "execute_tool search",
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"},
        parent=agent.span_id,
        start=2,
    )
    messages = [user, {"role": "assistant", "parts": [call]}, {"role": "tool", "parts": [result]}]
    answer = _genai_chat(agent.span_id, 3, messages, [{"type": "text", "content": ANSWER}])
    [rag] = extract(trace(agent, ask, tool, answer)).interactions
    assert rag.span is agent and (rag.record.query, rag.record.answer) == (QUESTION, ANSWER)
    # str() of the tool's list of strings, read back one document each
    assert rag.record.contexts == (DOC, DOC2) and rag.context_notes == ()
    assert {s.span_id for s in rag.context_sources} == {answer.span_id}


def test_a_tool_result_that_is_the_str_of_a_list_of_strings_is_read_back_exactly() -> None:
    quoted = 'Aurora\'s charger is "USB-C".'
    assert tool_result_texts(str([DOC, quoted])) == ([DOC, quoted], True)
    too_many = str(["x"] * 100_000)  # parsing it would take seconds and 100 MB
    for text in ("['not', closed", "[1, 2]", "['a'] + ['b']", "[]", "see ['a'] here", too_many):
        assert tool_result_texts(text) == ([text], False), text[:40]
