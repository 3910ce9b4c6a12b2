"""Haystack's own tracer: the component types the recordings (fixtures/haystack_otel: FilterRetriever,
ChatPromptBuilder, OpenAIChatGenerator) do not reach, read by the ends of their class names: a ranker in
place of the retrievals, an embedder never read, a plain generator's string replies, a tool-calling pipeline
whose tool results reach the generator as Haystack tool messages, and the model client's own
instrumentation inside a component."""

from __future__ import annotations

import json
from typing import Any

import pytest
from recorded import extracted, recordings, replaced, spans_of, without
from trace_builder import span, trace

from tracescore.extract import extract
from tracescore.model import ContextSourceKind, DecodedSpan, ExtractSkip

QUESTION = "How long does the Aurora X2 battery last?"
DOC = "The Aurora X2 battery lasts 14 hours."
OTHER = "The Aurora X2 charges in 2 hours."
ANSWER = "It lasts 14 hours."


def _pipeline(
    inputs: dict[str, Any],
    *components: tuple[str, dict[str, Any] | None, Any],
    name: str = "haystack.pipeline.run",
    outputs: dict[str, Any] | None = None,
) -> list[DecodedSpan]:
    """A `haystack.pipeline.run` with one `haystack.component.run` per (class name, input, output)."""
    attributes = {"haystack.pipeline.input_data": json.dumps(inputs)}
    if outputs is not None:
        attributes["haystack.pipeline.output_data"] = json.dumps(outputs)
    run = span(name, attributes, scope="haystack")
    spans = [run]
    for at, (kind, given, made) in enumerate(components, start=1):
        attributes = {"haystack.component.name": kind.lower(), "haystack.component.type": kind}
        if given is not None:
            attributes["haystack.component.input"] = json.dumps(given)
        if made is not None:
            attributes["haystack.component.output"] = json.dumps(made)
        spans.append(
            span("haystack.component.run", attributes, parent=run.span_id, scope="haystack", start=at)
        )
    return spans


def _reply(text: str) -> dict[str, Any]:
    return {"role": "assistant", "meta": {}, "name": None, "content": [{"text": text}]}


def test_a_rankers_documents_are_read_in_place_of_the_retrievals_and_an_embedder_never() -> None:
    documents = [{"id": "1", "content": DOC}, {"id": "2", "content": OTHER}]
    found = extract(
        trace(
            *_pipeline(
                {"text_embedder": {"text": QUESTION}, "ranker": {"query": QUESTION}},
                ("SentenceTransformersTextEmbedder", {"text": QUESTION}, {"embedding": [0.1, 0.2]}),
                ("InMemoryEmbeddingRetriever", {"query_embedding": [0.1, 0.2]}, {"documents": documents}),
                ("TransformersSimilarityRanker", {"query": QUESTION}, {"documents": documents[:1]}),
                ("PromptBuilder", {"question": QUESTION}, {"prompt": f"{DOC}\n{QUESTION}"}),
                ("OpenAIGenerator", {"prompt": f"{DOC}\n{QUESTION}"}, {"replies": [ANSWER], "meta": [{}]}),
            )
        )
    )
    [rag] = found.interactions
    assert rag.convention == "haystack" and rag.record.query == QUESTION and rag.record.answer == ANSWER
    assert rag.record.contexts == (DOC,) and [s.kind for s in rag.context_sources] == ["reranker"]


@pytest.mark.parametrize("name", ["haystack.pipeline.run", "haystack.async_pipeline.run"])
def test_without_a_question_in_the_pipeline_input_the_retrievers_query_is_the_question(name: str) -> None:
    """Also an AsyncPipeline of Haystack 2.x, whose span had a name of its own."""
    found = extract(
        trace(
            *_pipeline(
                {},
                ("InMemoryBM25Retriever", {"query": QUESTION}, {"documents": [{"content": DOC}]}),
                ("OpenAIChatGenerator", {"messages": []}, {"replies": [_reply(ANSWER)]}),
                name=name,
            )
        )
    )
    [rag] = found.interactions
    assert (rag.record.query, rag.record.contexts, rag.record.answer) == (QUESTION, (DOC,), ANSWER)


def test_a_tool_calling_pipelines_tool_messages_are_the_documents() -> None:
    """A ToolInvoker between two generator calls: the tool results reach the second call as Haystack tool
    messages (`tool_call_result` parts); no retriever recorded them."""
    call = {"tool_name": "search", "arguments": {"topic": "battery"}, "id": "c1"}
    asked = {"role": "assistant", "meta": {}, "name": None, "content": [{"tool_call": call}]}
    result = {"role": "tool", "meta": {}, "name": None,
              "content": [{"tool_call_result": {"result": DOC, "origin": call, "error": False}}]}  # fmt: skip
    user = {"role": "user", "meta": {}, "name": None, "content": [{"text": QUESTION}]}
    found = extract(
        trace(
            *_pipeline(
                {"llm": {"messages": [user]}},
                ("OpenAIChatGenerator", {"messages": [user]}, {"replies": [asked]}),
                ("ToolInvoker", {"messages": [asked]}, {"tool_messages": [result]}),
                ("OpenAIChatGenerator", {"messages": [user, asked, result]}, {"replies": [_reply(ANSWER)]}),
            )
        )
    )
    [rag] = found.interactions
    assert (rag.record.query, rag.record.contexts, rag.record.answer) == (QUESTION, (DOC,), ANSWER)
    assert [(s.kind, s.turns_back) for s in rag.context_sources] == [("tool_message", 0)]
    assert rag.run is not None and rag.run.steps == 2


def test_the_pipeline_is_read_once_around_the_model_clients_own_instrumentation() -> None:
    """An OpenInference-instrumented client under the generator component: scored once, as the pipeline."""
    spans = _pipeline(
        {"prompt_builder": {"question": QUESTION}},
        ("InMemoryBM25Retriever", {"query": QUESTION}, {"documents": [{"content": DOC}]}),
        ("OpenAIChatGenerator", {"messages": []}, {"replies": [_reply(ANSWER)]}),
    )
    client = span(
        "ChatCompletion",
        {
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": QUESTION,
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": ANSWER,
        },
        parent=spans[-1].span_id,
        start=3,
    )
    found = extract(trace(*spans, client))
    [rag] = found.interactions
    assert rag.convention == "haystack" and found.skips == []


STUFFED = f"Answer from the context below.\n\nContext:\n{DOC}\n\nQuestion: {QUESTION}"


def test_a_text_generators_prompt_carries_documents_under_a_label() -> None:
    """Haystack 2.x's OpenAIGenerator: its input is the prompt string the PromptBuilder rendered."""
    run, _, generator = _pipeline(
        {"prompt_builder": {"question": QUESTION}},
        ("PromptBuilder", {"question": QUESTION}, {"prompt": STUFFED}),
        ("OpenAIGenerator", {"prompt": STUFFED}, {"replies": [ANSWER], "meta": [{}]}),
    )
    [rag] = extract(trace(run, _, generator)).interactions
    assert (rag.record.query, rag.record.contexts, rag.record.answer) == (QUESTION, (DOC,), ANSWER)
    assert [(s.kind, s.span_id) for s in rag.context_sources] == [("prompt", generator.span_id)]


def test_the_prompt_builders_rendered_prompt_is_read_when_the_model_call_is_the_apps_own_component() -> None:
    """A custom component calls the model: no ...Generator input; the ChatPromptBuilder's output holds the
    messages, the documents in its system message."""
    messages = [
        {"role": "system", "meta": {}, "name": None, "content": [{"text": f"Context:\n{DOC}"}]},
        {"role": "user", "meta": {}, "name": None, "content": [{"text": QUESTION}]},
    ]
    run, builder, model_call = _pipeline(
        {"prompt_builder": {"question": QUESTION}},
        ("ChatPromptBuilder", {"question": QUESTION}, {"prompt": messages}),
        ("AuroraModelCall", {"messages": messages}, {"replies": [_reply(ANSWER)]}),
        outputs={"llm": {"replies": [_reply(ANSWER)]}},
    )
    [rag] = extract(trace(run, builder, model_call)).interactions
    assert (rag.record.query, rag.record.contexts, rag.record.answer) == (QUESTION, (DOC,), ANSWER)
    assert [(s.kind, s.span_id) for s in rag.context_sources] == [("instructions", builder.span_id)]


def test_a_text_generators_system_prompt_is_read_as_its_instructions() -> None:
    """Haystack 2.x's OpenAIGenerator given `system_prompt` at run time: the documents under its label are
    read as the instructions' (kind `instructions`), the prompt being the question."""
    system = f"Answer from the context below.\n\nContext:\n{DOC}"
    run, generator = _pipeline(
        {"llm": {"prompt": QUESTION, "system_prompt": system}},
        (
            "OpenAIGenerator",
            {"prompt": QUESTION, "system_prompt": system},
            {"replies": [ANSWER], "meta": [{}]},
        ),
        outputs={"llm": {"replies": [ANSWER], "meta": [{}]}},
    )
    [rag] = extract(trace(run, generator)).interactions
    assert (rag.record.contexts, rag.record.answer) == ((DOC,), ANSWER)
    assert [(s.kind, s.span_id) for s in rag.context_sources] == [("instructions", generator.span_id)]


RECORDED = {r.scenario: r for r in recordings() if r.source == "haystack_otel_stuffed"}


@pytest.mark.parametrize("scenario", ["documents_faithful", "documents_unfaithful"])
def test_documents_handed_to_a_prompt_builder_are_read_one_by_one(scenario: str) -> None:
    """Haystack `Document`s given to a ChatPromptBuilder (recorded from haystack-ai 3.4.1): the tracer
    records them as a list of documents in the builder's input; each is a document of its own (kind
    `input`), not the prompt's rendered block."""
    recording = RECORDED[scenario]
    [rag] = extracted(spans_of(recording)).interactions
    assert (rag.record.query, rag.record.answer) == (recording.question, recording.answer)
    assert rag.record.contexts == tuple(recording.documents)
    assert {s.kind for s in rag.context_sources} == {ContextSourceKind.INPUT}


def test_a_prompt_builders_text_input_named_like_documents_is_not_a_document_list() -> None:
    run, builder, generator = _pipeline(
        {"prompt_builder": {"question": QUESTION, "documents": DOC}},
        ("ChatPromptBuilder", {"question": QUESTION, "documents": DOC}, {"prompt": STUFFED}),
        ("OpenAIGenerator", {"prompt": STUFFED}, {"replies": [ANSWER], "meta": [{}]}),
    )
    [rag] = extract(trace(run, builder, generator)).interactions
    assert [s.kind for s in rag.context_sources] == [ContextSourceKind.PROMPT]


AGENT_RUNS = {r.scenario: r for r in recordings() if r.source == "haystack_otel_agent"}
AGENT_TOOL_OUTPUT = "haystack.agent.step.tool.output"


@pytest.mark.parametrize(
    ("scenario", "anchor"),
    [
        ("pipeline_faithful", "haystack.pipeline.run"),
        ("pipeline_unfaithful", "haystack.pipeline.run"),
        ("agent_faithful", "haystack.agent.run"),
        ("agent_unfaithful", "haystack.agent.run"),
    ],
)
def test_an_agents_tool_calls_are_its_documents_and_its_usage_is_read(scenario: str, anchor: str) -> None:
    """A Haystack Agent that called `search_docs` (recorded from haystack-ai 3.4.1), as a pipeline component
    and run on its own: the tool span's result is the documents (kind `tool`, one each), the run names the
    call with its arguments, and its two model calls' usage (in each reply's meta) is summed."""
    recording = AGENT_RUNS[scenario]
    spans = spans_of(recording)
    [tool] = [s for s in spans if s.name == "haystack.agent.step.tool"]
    [rag] = extracted(spans).interactions
    assert (rag.convention, rag.span.name) == ("haystack", anchor)
    assert (rag.record.query, rag.record.answer) == (recording.question, recording.answer)
    assert rag.record.contexts == tuple(recording.documents)
    assert {(s.kind, s.span_id) for s in rag.context_sources} == {(ContextSourceKind.TOOL, tool.span_id)}
    run = rag.record.run
    assert run is not None
    [call] = run.tool_calls
    assert (call.name, json.loads(call.arguments or "")) == ("search_docs", {"query": recording.question})
    assert call.ok and call.span_id == tool.span_id
    assert (run.steps, run.prompt_tokens, run.completion_tokens) == (2, 84, 18)


OFFERED = (
    "search_docs: Search the Aurora product documentation.",
    "order_status: Look up the delivery status of an Aurora order.",
)


@pytest.mark.parametrize("scenario", ["pipeline_faithful", "agent_faithful"])
def test_the_tools_an_agent_was_offered_are_its_runs_offered_tools(scenario: str) -> None:
    """The Agent offers its model `search_docs` and `order_status` (recorded from haystack-ai 3.4.1): each
    model call's input lists them as Haystack serialises a `Tool` (`{"type": ..., "data": {"name",
    "description", ...}}`), read as every convention's offered tools are; `order_status` is offered, never
    called."""
    [rag] = extracted(spans_of(AGENT_RUNS[scenario])).interactions
    run = rag.record.run
    assert run is not None
    assert run.tools_offered == OFFERED
    assert [call.name for call in run.tool_calls] == ["search_docs"]


def test_a_generator_components_toolset_is_read_tool_by_tool() -> None:
    """A chat generator component given a `Toolset` at run time: the tracer records it as Haystack
    serialises one (its tools under `data.tools`); each tool is offered, once."""

    def tool(name: str, description: str) -> dict[str, Any]:
        data = {"name": name, "description": description, "parameters": {}, "function": f"app.{name}"}
        return {"type": "haystack.tools.tool.Tool", "data": data}

    toolset = {"type": "haystack.tools.toolset.Toolset", "data": {"tools": [tool("search", "Search docs.")]}}
    user = {"role": "user", "meta": {}, "name": None, "content": [{"text": QUESTION}]}
    given = {"messages": [user], "tools": [toolset, tool("weather", "Today's weather.")]}
    found = extract(
        trace(
            *_pipeline(
                {"llm": {"messages": [user]}},
                ("InMemoryBM25Retriever", {"query": QUESTION}, {"documents": [{"content": DOC}]}),
                ("OpenAIChatGenerator", given, {"replies": [_reply(ANSWER)]}),
            )
        )
    )
    [rag] = found.interactions
    assert rag.record.run is not None
    assert rag.record.run.tools_offered == ("search: Search docs.", "weather: Today's weather.")


def test_an_agents_tool_result_that_is_its_answer_is_not_evidence() -> None:
    """An answer never supports itself: a tool whose result is the Agent's answer (a tool handed back what
    the model wrote) is dropped, with a note, and the Agent has nothing else to be judged against."""
    recording = AGENT_RUNS["agent_unfaithful"]
    found = extracted(replaced(spans_of(recording), AGENT_TOOL_OUTPUT, json.dumps(recording.answer)))
    assert not found.interactions
    [skip] = found.skips
    assert skip.reason == ExtractSkip.EMPTY_CONTEXT
    assert "'haystack.agent.step.tool' not judged: its result is the answer" in skip.detail


def test_an_agent_with_content_tracing_off_is_not_captured() -> None:
    """An Agent run on its own, no pipeline around it, traced with content tracing off: said, not guessed."""
    keys = (
        "haystack.agent.input",
        "haystack.agent.output",
        AGENT_TOOL_OUTPUT,
        "haystack.agent.step.tool.input",
    )
    keys += ("haystack.agent.step.llm.input", "haystack.agent.step.llm.output")
    found = extracted(without(spans_of(AGENT_RUNS["agent_faithful"]), *keys))
    [skip] = found.skips
    assert skip.reason == ExtractSkip.CONTENT_NOT_CAPTURED
    assert "HAYSTACK_CONTENT_TRACING_ENABLED" in skip.detail
