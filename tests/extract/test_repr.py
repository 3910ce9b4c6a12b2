"""Never a score from the wrong text: a program repr is read properly from another span or not judged."""

from __future__ import annotations

import json

import pytest
from trace_builder import span, trace

from tracescore import semconv
from tracescore.extract import extract
from tracescore.extract._read import is_repr
from tracescore.model import ExtractSkip

KIND = semconv.OPENINFERENCE_SPAN_KIND
QUESTION = "What does Acme Corp sell?"
DOC = "Acme Corp was founded in 1999 and sells anvils."
ANSWER = "Acme Corp sells anvils."

REPRS = [
    "ChatMessage(_role=<ChatRole.ASSISTANT: 'assistant'>, _content=[TextContent(text='Acme sells anvils.')])",
    "Document(id=3f2a, content='Acme Corp was founded in 1999 and sells anvils.', score=1.2)",
    "NodeWithScore(node=TextNode(id_='a1', text='Acme Corp sells anvils.'), score=0.8)",
    "<NodeWithScore(node=TextNode(id_='a1', text='Acme'))>",
    "ToolOutput(content='Acme Corp sells anvils.', tool_name='search', raw_input={}, raw_output=None)",
    "<generator object StreamingResponse.response_gen at 0x7f3a2c1b9e40>",
    json.dumps({"response_gen": "<generator object StreamingResponse.response_gen at 0x7f3a2c1b9e40>"}),
    "[Document(metadata={'source': 'kb'}, page_content='Acme Corp sells anvils.')]",
    "<app.models.Answer object at 0x7f3a2c1b9e40>",
    "[object Object]",  # JavaScript's String(anObject)
    "Response.Output(text='Acme Corp sells anvils.')",  # a dotted class name
    "  \n ChatMessage(role='assistant', content='Acme Corp sells anvils.')",  # after blanks
]
PROSE = [
    ANSWER,
    "Acme (the company) sells anvils.",
    "Call Foo(bar=1) to configure it.",
    '{"answer": "Acme Corp sells anvils."}',
    "Result: f(x=1) returned 3",
    # Starts like a repr, but the call closes and the sentence goes on.
    "Foo(bar=1) is the default; see Bar(x=2) for the other one.",
    "F(x=1) is 3, so G(y=2) is 4.",
    "Acme(TM) sells anvils (and hammers).",
    'Acme("anvils") ships in two days.',
    "[Document(id=1)] is how the list is written.",
    "Anvil(s): see the catalogue.",
    "A classic bug prints [object Object] instead of the text.",
]
# What a framework writes with its repr, cut wherever the span attribute stopped (LlamaIndex workflows cut
# at 200 characters: the closing brackets never come).
STOP_EVENT = (
    "StopEvent(result=AgentOutput(response=ChatMessage(role=<MessageRole.ASSISTANT: 'assistant'>, "
    "additional_kwargs={}, blocks=[TextBlock(block_type='text', text='Acme Corp sells anvils.')]), "
    "tool_calls=[], raw=None, current_agent_name='agent'))"
)
TRUNCATED = [
    STOP_EVENT[:200] + "...",
    STOP_EVENT[:200],
    STOP_EVENT[:40],
    STOP_EVENT[:150],  # cut inside a quoted string
    "AgentOutput(response=ChatMessage(role=<MessageRole.ASSISTANT: 'assistant'>, additional_kwargs={}, blo",
    "[Document(metadata={'source': 'kb'}, page_content='Acme Corp sells anv",
    "<NodeWithScore(node=TextNode(id_='a1', text='Acme Corp sells anvils. It also",
]


@pytest.mark.parametrize("text", REPRS)
def test_each_repr_shape_is_recognised(text: str) -> None:
    assert is_repr(text)


@pytest.mark.parametrize("text", PROSE)
def test_prose_is_not_taken_for_a_repr(text: str) -> None:
    assert not is_repr(text)


@pytest.mark.parametrize("text", TRUNCATED)
def test_a_repr_cut_short_is_still_a_repr(text: str) -> None:
    assert is_repr(text)


def test_a_100_kb_repr_is_read_as_one_without_trouble() -> None:
    body = ", ".join(f"TextBlock(block_type='text', text='part {i} of it')" for i in range(2_000))
    whole = f"StopEvent(result=AgentOutput(response=ChatMessage(blocks=[{body}])))"
    assert len(whole) > 100_000
    assert is_repr(whole) and is_repr(whole[:100_000])


def test_a_workflows_stop_event_is_never_the_answer_the_llm_call_that_wrote_it_is() -> None:
    """LlamaIndex FunctionAgent / AgentWorkflow: the root's output is a StopEvent repr cut at 200
    characters; the answer is the agent's last LLM call's text, not the cut repr."""
    run = span("AgentWorkflow.run", {KIND: "CHAIN", "input.value": "{}", "output.value": TRUNCATED[0]})
    asks = span(
        "OpenAI.achat",
        {
            KIND: "LLM",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": QUESTION,
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "search",
        },
        parent=run.span_id,
        start=1,
    )
    tool = span("search", {KIND: "TOOL", "output.value": json.dumps([DOC])}, parent=run.span_id, start=2)
    answers = span(
        "OpenAI.achat",
        {KIND: "LLM", "llm.output_messages.0.message.content": ANSWER},
        parent=run.span_id,
        start=3,
    )
    [rag] = extract(trace(run, asks, tool, answers)).interactions
    assert (rag.record.query, rag.record.contexts, rag.record.answer) == (QUESTION, (DOC,), ANSWER)


@pytest.mark.parametrize("text", TRUNCATED[:2])
def test_a_trace_whose_only_answer_is_a_cut_repr_is_an_explained_skip(text: str) -> None:
    run = span("AgentWorkflow.run", {KIND: "CHAIN", "input.value": QUESTION, "output.value": text})
    tool = span("search", {KIND: "TOOL", "output.value": json.dumps([DOC])}, parent=run.span_id, start=1)
    found = extract(trace(run, tool))
    assert found.interactions == []
    [skip] = found.skips
    assert skip.reason == ExtractSkip.MISSING_ANSWER and "repr" in skip.detail and "StopEvent(" in skip.detail


@pytest.mark.parametrize("text", REPRS)
def test_a_repr_answer_with_no_better_reading_is_an_explained_skip(text: str) -> None:
    chain = span("Pipeline.run", {KIND: "CHAIN", "input.value": QUESTION, "output.value": text})
    retriever = span(
        "retriever", {KIND: "RETRIEVER", "retrieval.documents.0.document.content": DOC}, parent=chain.span_id
    )
    found = extract(trace(chain, retriever))
    assert found.interactions == []
    [skip] = found.skips
    assert skip.reason == ExtractSkip.MISSING_ANSWER and "repr" in skip.detail


@pytest.mark.parametrize("text", REPRS)
def test_repr_documents_are_dropped_and_noted(text: str) -> None:
    chain = span("chain", {KIND: "CHAIN", "input.value": QUESTION, "output.value": ANSWER})
    retriever = span(
        "_retrieve", {KIND: "RETRIEVER", "output.value": json.dumps([text])}, parent=chain.span_id
    )
    found = extract(trace(chain, retriever))
    assert found.interactions == []
    [skip] = found.skips
    assert skip.reason == ExtractSkip.EMPTY_CONTEXT and "program reprs" in skip.detail


def test_haystack_answer_is_read_from_the_generators_output_messages() -> None:
    run = span(
        "haystack.pipeline.run",
        {
            KIND: "CHAIN",
            "input.value": json.dumps({"data": {"retriever": {"query": QUESTION}, "prompt_builder": {}}}),
            "output.value": json.dumps({"llm": {"replies": [REPRS[0]]}}),
        },
    )
    retriever = span(
        "InMemoryBM25Retriever",
        {
            KIND: "RETRIEVER",
            "input.value": json.dumps({"query": QUESTION}),
            "output.value": json.dumps({"documents": [REPRS[1]]}),
            "retrieval.documents.0.document.content": DOC,
        },
        parent=run.span_id,
        start=1,
    )
    llm = span(
        "OpenAIChatGenerator",
        {
            KIND: "LLM",
            "output.value": json.dumps({"replies": [REPRS[0]]}),
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": ANSWER,
        },
        parent=run.span_id,
        start=2,
    )
    [rag] = extract(trace(run, retriever, llm)).interactions
    assert (rag.record.query, rag.record.contexts, rag.record.answer) == (QUESTION, (DOC,), ANSWER)


def test_llamaindex_retriever_with_documents_wins_over_a_sibling_of_reprs() -> None:
    query = span(
        "RetrieverQueryEngine.query", {KIND: "CHAIN", "input.value": QUESTION, "output.value": ANSWER}
    )
    retrieve = span(
        "BaseRetriever.retrieve",
        {KIND: "RETRIEVER", "retrieval.documents.0.document.content": DOC},
        parent=query.span_id,
        start=1,
    )
    inner = span(
        "VectorIndexRetriever._retrieve",
        {KIND: "RETRIEVER", "output.value": json.dumps([REPRS[2], REPRS[3]])},
        parent=retrieve.span_id,
        start=2,
    )
    [rag] = extract(trace(query, retrieve, inner)).interactions
    assert rag.record.contexts == (DOC,)
    assert any(inner.span_id in note and "reprs" in note for note in rag.context_notes)


def test_llamaindex_stream_answer_is_the_innermost_llm_output() -> None:
    query = span(
        "RetrieverQueryEngine.query",
        {KIND: "CHAIN", "input.value": QUESTION, "output.value": REPRS[6]},
    )
    retrieve = span(
        "retrieve", {KIND: "RETRIEVER", "retrieval.documents.0.document.content": DOC}, parent=query.span_id
    )
    synth = span("synthesize", {KIND: "CHAIN", "output.value": REPRS[5]}, parent=query.span_id, start=2)
    llm = span("OpenAI.stream_chat", {KIND: "LLM", "output.value": ANSWER}, parent=synth.span_id, start=3)
    [rag] = extract(trace(query, retrieve, synth, llm)).interactions
    assert rag.record.answer == ANSWER


def test_a_repr_tool_result_is_not_judged() -> None:
    agent = span("agent", {KIND: "AGENT", "input.value": QUESTION, "output.value": ANSWER})
    tool = span("search", {KIND: "TOOL", "output.value": REPRS[4]}, parent=agent.span_id, start=1)
    [skip] = extract(trace(agent, tool)).skips
    assert skip.reason == ExtractSkip.EMPTY_CONTEXT and "program reprs" in skip.detail


def test_a_tracescore_span_with_a_repr_answer_is_not_judged() -> None:
    ours = span(
        "answer",
        {"input.value": QUESTION, "output.value": REPRS[0], semconv.document_content_key(0): DOC},
        scope=semconv.SDK_SCOPE,
    )
    [skip] = extract(trace(ours)).skips
    assert skip.reason == ExtractSkip.MISSING_ANSWER


def test_genai_and_openllmetry_answers_that_are_reprs_come_from_the_llm_call_that_wrote_them() -> None:
    said = json.dumps([{"role": "assistant", "content": TRUNCATED[0]}])
    agent = span("invoke_agent a", {"gen_ai.operation.name": "invoke_agent", "gen_ai.output.messages": said})
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
        "execute_tool s",
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.result": json.dumps([DOC])},
        parent=agent.span_id,
        start=1,
    )
    [rag] = extract(trace(agent, tool, chat)).interactions
    assert rag.record.answer == ANSWER
    workflow = span(
        "ask.workflow",
        {
            "traceloop.span.kind": "workflow",
            "traceloop.entity.input": json.dumps({"args": [QUESTION]}),
            "traceloop.entity.output": json.dumps(TRUNCATED[4]),
        },
    )
    retrieve = span(
        "retrieve.task",
        {"traceloop.span.kind": "task", "traceloop.entity.output": json.dumps([DOC])},
        parent=workflow.span_id,
        start=1,
    )
    llm = span("openai.chat", {"gen_ai.completion.0.content": ANSWER}, parent=workflow.span_id, start=2)
    [rag] = extract(trace(workflow, retrieve, llm)).interactions
    assert rag.record.answer == ANSWER


def test_repr_documents_among_text_are_counted_in_one_note_per_span() -> None:
    chain = span("chain", {KIND: "CHAIN", "input.value": QUESTION, "output.value": ANSWER})
    documents = [REPRS[0], "The Aurora X2 battery lasts 14 hours.", REPRS[-1]]
    retriever = span(
        "_retrieve", {KIND: "RETRIEVER", "output.value": json.dumps(documents)}, parent=chain.span_id
    )
    [read] = extract(trace(chain, retriever)).interactions
    assert read.record.contexts == ("The Aurora X2 battery lasts 14 hours.",)
    [note] = read.context_notes
    assert note.startswith(f"2 document(s) from span {retriever.span_id} were program reprs")
