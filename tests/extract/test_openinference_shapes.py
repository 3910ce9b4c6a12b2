"""OpenInference shapes of agent and pipeline frameworks: documents a program hands to a step as its input
(DSPy with a plain search function), and an LLM span whose output is an OpenAI Responses API object (the
OpenAI Agents SDK's Chat Completions model when streamed)."""

from __future__ import annotations

import json

from trace_builder import span, trace

from tracescore import semconv
from tracescore.extract import extract
from tracescore.model import ExtractSkip

KIND = semconv.OPENINFERENCE_SPAN_KIND
QUESTION = "How long does the Aurora X2 battery last?"
DOCS = ["The Aurora X2 battery lasts 14 hours on a single charge.", "The Aurora X2 weighs 1.2 kg."]
ANSWER = "The Aurora X2 battery lasts 14 hours."
PREDICTION = json.dumps({"reasoning": "From the passages.", "answer": ANSWER})


def _program(step_input: object, *, retrieved: list[str] | None = None) -> list:
    """A DSPy-shaped program: RAG.forward -> [Retrieve] -> ChainOfThought.forward -> Predict.forward -> LM."""
    program = span(
        "RAG.forward",
        {KIND: "CHAIN", "input.value": json.dumps({"question": QUESTION}), "output.value": PREDICTION},
    )
    spans = [program]
    if retrieved is not None:
        documents = {f"retrieval.documents.{i}.document.content": d for i, d in enumerate(retrieved)}
        spans.append(
            span("Retrieve.forward", {KIND: "RETRIEVER", **documents}, parent=program.span_id, start=1)
        )
    step = span(
        "ChainOfThought.forward",
        {KIND: "CHAIN", "input.value": json.dumps(step_input), "output.value": PREDICTION},
        parent=program.span_id,
        start=2,
    )
    inner = span(
        "Predict.forward",
        {KIND: "CHAIN", "input.value": json.dumps(step_input), "output.value": PREDICTION},
        parent=step.span_id,
        start=3,
    )
    llm = span(
        "LM.__call__",
        {
            KIND: "LLM",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": f"[[ ## context ## ]]\n{DOCS}\n\n{QUESTION}",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": f"[[ ## answer ## ]]\n{ANSWER}",
        },
        parent=inner.span_id,
        start=4,
    )
    return [*spans, step, inner, llm]


def test_documents_a_step_was_given_as_input_are_the_context_once_each() -> None:
    spans = _program({"context": DOCS, "question": QUESTION})
    found = extract(trace(*spans))
    [rag] = found.interactions
    assert rag.span.name == "RAG.forward"
    assert (rag.record.query, rag.record.contexts, rag.record.answer) == (QUESTION, tuple(DOCS), ANSWER)
    assert {source.kind for source in rag.context_sources} == {"input"}


def test_a_recorded_retrieval_wins_over_the_documents_a_step_was_given() -> None:
    spans = _program({"context": ["an older passage"], "question": QUESTION}, retrieved=DOCS)
    [rag] = extract(trace(*spans)).interactions
    assert rag.record.contexts == tuple(DOCS)


def test_a_step_input_that_is_not_a_list_of_documents_is_no_context() -> None:
    spans = _program({"context": "The Aurora X2 battery lasts 14 hours.", "question": QUESTION})
    found = extract(trace(*spans))
    assert found.interactions == []
    [skip] = found.skips
    assert skip.reason == ExtractSkip.EMPTY_CONTEXT


def test_an_llm_output_that_is_a_responses_api_object_gives_its_output_text() -> None:
    response = {
        "object": "response",
        "model": "gpt-4o-mini",
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": ANSWER, "annotations": []}],
            }
        ],
        "text": None,
    }
    agent = span("Agent workflow", {KIND: "AGENT"})
    llm = span(
        "generation",
        {
            KIND: "LLM",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": QUESTION,
            "output.value": json.dumps([response]),
        },
        parent=agent.span_id,
        start=2,
    )
    tool = span(
        "search_docs", {KIND: "TOOL", "output.value": json.dumps(DOCS)}, parent=agent.span_id, start=1
    )
    [rag] = extract(trace(agent, tool, llm)).interactions
    assert (rag.record.query, rag.record.contexts, rag.record.answer) == (QUESTION, tuple(DOCS), ANSWER)


def test_an_agent_whose_llm_messages_start_past_index_0_has_its_question_from_the_input_messages() -> None:
    """The OpenAI Agents instrumentation keeps input message 0 for instructions; without them, the user's
    message is `llm.input_messages.1` and the flattened list has no index 0."""
    agent = span("Agent workflow", {KIND: "AGENT"})
    asks = span(
        "response",
        {
            KIND: "LLM",
            "input.value": json.dumps([{"role": "user", "content": QUESTION}]),
            "llm.input_messages.1.message.role": "user",
            "llm.input_messages.1.message.content": QUESTION,
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "search_docs",
        },
        parent=agent.span_id,
        start=1,
    )
    tool = span(
        "search_docs", {KIND: "TOOL", "output.value": json.dumps(DOCS)}, parent=agent.span_id, start=2
    )
    answers = span(
        "response",
        {KIND: "LLM", "llm.output_messages.0.message.content": ANSWER},
        parent=agent.span_id,
        start=3,
    )
    [rag] = extract(trace(agent, asks, tool, answers)).interactions
    assert (rag.record.query, rag.record.contexts, rag.record.answer) == (QUESTION, tuple(DOCS), ANSWER)


def test_an_unnamed_crew_whose_span_name_carries_a_new_id_each_run_keeps_one_route() -> None:
    routes = set()
    for crew_id in ("4b84119f-560b-40bc-8e13-0c80ed4b6144", "0d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6"):
        crew = span(
            f"Crew_{crew_id}.kickoff",
            {KIND: "CHAIN", "input.value": json.dumps({"question": QUESTION}), "output.value": ANSWER},
        )
        tool = span("search_docs.run", {KIND: "TOOL", "output.value": json.dumps(DOCS)}, parent=crew.span_id)
        [rag] = extract(trace(crew, tool)).interactions
        routes.add(rag.route)
    assert routes == {"Crew_{id}.kickoff"}
