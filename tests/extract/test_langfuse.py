"""Langfuse SDK spans (`langfuse.observation.*`): the edges the recordings in fixtures/langfuse* do not reach.
Each trace here has the shape the SDK writes (see fixtures/langfuse/*.txt): `@observe` records a function's
arguments as `{"args": [...], "kwargs": {...}}`, `langfuse.openai` a generation's messages and output."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from recorded import recordings
from trace_builder import span, trace

from tracescore import semconv
from tracescore.consume import decode_message
from tracescore.extract import extract
from tracescore.extract._context import MAX_CONTEXT_CHARS, MAX_CONTEXTS
from tracescore.model import ExtractSkip, Trace

TYPE, INPUT, OUTPUT = "langfuse.observation.type", "langfuse.observation.input", "langfuse.observation.output"
SCOPE = "langfuse-sdk"
QUESTION = "How long does the Aurora X2 battery last?"
DOC = "The Aurora X2 battery lasts 14 hours on a single charge."
DOC2 = "The Aurora X2 weighs 1.2 kg."
ANSWER = "The Aurora X2 battery lasts 14 hours."


def _call(*args: Any, **kwargs: Any) -> str:
    return json.dumps({"args": list(args), "kwargs": kwargs})


def _observation(name: str, kind: str, *, parent: str | None = None, start: int = 0, **io: Any) -> Any:
    attributes: dict[str, Any] = {TYPE: kind}
    for key, attribute in (("input", INPUT), ("output", OUTPUT)):
        if key in io:
            value = io[key]
            attributes[attribute] = value if isinstance(value, str) else json.dumps(value)
    attributes.update(io.get("extra", {}))
    return span(name, attributes, parent=parent, scope=SCOPE, start=start)


def _generation(parent: str | None, start: int, answer: Any = ANSWER, question: str = QUESTION) -> Any:
    messages = [
        {"role": "system", "content": "Answer from the context."},
        {"role": "user", "content": question},
    ]
    output = answer if not isinstance(answer, str) else {"role": "assistant", "content": answer}
    return _observation(
        "OpenAI-generation", "generation", parent=parent, start=start, input=messages, output=output
    )


def _rag(root_output: Any = ANSWER, **root_io: Any) -> list[Any]:
    root = _observation("answer_question", "span", input=_call(QUESTION), output=root_output, **root_io)
    retriever = _observation("retrieve", "retriever", parent=root.span_id, start=1, output=[DOC, DOC2])
    return [root, retriever, _generation(root.span_id, 2)]


def test_a_decorated_rag_function_is_read_on_its_own_span() -> None:
    root, retriever, generation = _rag()
    [rag] = extract(trace(root, retriever, generation)).interactions
    assert rag.convention == "langfuse" and rag.span is root
    assert (rag.record.query, rag.record.contexts, rag.record.answer) == (QUESTION, (DOC, DOC2), ANSWER)
    assert rag.span_ids >= {retriever.span_id, generation.span_id}


def test_content_capture_off_is_an_explained_skip_never_a_guess() -> None:
    """@observe(capture_input=False, capture_output=False): no input or output on the function or its
    retriever. The generation still has its messages, but the documents are recorded nowhere."""
    root = _observation("answer_question", "span")
    retriever = _observation("retrieve", "retriever", parent=root.span_id, start=1)
    found = extract(trace(root, retriever, _generation(root.span_id, 2)))
    assert found.interactions == []
    [skip] = found.skips
    assert skip.reason == ExtractSkip.EMPTY_CONTEXT and skip.span is root
    assert "recorded no output (content capture off?)" in skip.detail
    assert "looked in langfuse.observation.output of the retriever and tool observations" in skip.detail


def test_capture_off_everywhere_is_a_skip_naming_what_is_missing() -> None:
    root = _observation("answer_question", "span")
    retriever = _observation("retrieve", "retriever", parent=root.span_id, start=1)
    generation = _observation("OpenAI-generation", "generation", parent=root.span_id, start=2)
    found = extract(trace(root, retriever, generation))
    assert found.interactions == []
    [skip] = found.skips
    assert (
        skip.reason == ExtractSkip.MISSING_ANSWER and "looked in langfuse.observation.output" in skip.detail
    )


def test_a_huge_json_tool_result_is_bounded_and_noted() -> None:
    agent = _observation("support_agent", "agent", input=_call(QUESTION), output=ANSWER)
    # Not document-like and over the character bound: not judged, said so.
    blob = {"rows": [{"id": i, "payload": "x" * 200} for i in range(MAX_CONTEXT_CHARS // 200 + 10)]}
    huge = _observation(
        "export_table", "tool", parent=agent.span_id, start=1, input=_call("all"), output=blob
    )
    # A list of documents far past the count bound: the first MAX_CONTEXTS judged, the rest noted.
    many = [{"content": f"{DOC} (copy {i})"} for i in range(MAX_CONTEXTS * 4)]
    search = _observation(
        "search", "tool", parent=agent.span_id, start=2, input=_call("battery"), output=many
    )
    found = extract(trace(agent, huge, search, _generation(agent.span_id, 3)))
    [rag] = found.interactions
    assert len(rag.record.contexts) == MAX_CONTEXTS
    assert all(text.startswith(DOC) for text in rag.record.contexts)
    notes = " ".join(rag.context_notes)
    assert "would exceed 2,000,000 characters" in notes and "past the limit of 64" in notes


def test_a_100kb_repr_output_is_never_the_answer() -> None:
    repr_output = "Response(response='" + "The battery lasts long. " * 4_300 + "', source_nodes=[])"
    assert len(repr_output) > 100_000
    root, retriever, generation = _rag(root_output=repr_output)
    [rag] = extract(trace(root, retriever, generation)).interactions
    assert rag.span is root and rag.record.answer == ANSWER  # the generation's text
    # Without a generation there is nothing better: skipped, naming the repr.
    found = extract(trace(root, retriever))
    assert found.interactions == []
    [skip] = found.skips
    assert (
        skip.reason == ExtractSkip.MISSING_ANSWER
        and "a program repr" in skip.detail
        and len(skip.detail) < 1_000
    )


def test_a_function_returning_the_models_stream_is_answered_by_the_generation() -> None:
    for output in ({}, {"id": "chatcmpl-1", "choices": [{"message": {"role": "assistant", "content": "x"}}]}):
        root, retriever, generation = _rag(root_output=output)
        [rag] = extract(trace(root, retriever, generation)).interactions
        assert rag.record.answer == ANSWER, output


def test_langfuse_around_an_openinference_llm_call_is_scored_once_on_the_langfuse_interaction() -> None:
    """@observe around an OpenInference-instrumented OpenAI client: the OpenInference LLM span, carrying
    the tool results in its messages, would be an interaction of its own; the outer Langfuse agent is."""
    agent = _observation("support_agent", "agent", input=_call(QUESTION), output=ANSWER)
    tool = _observation(
        "product_facts", "tool", parent=agent.span_id, start=1, input=_call(topic="battery"), output=[DOC]
    )
    llm = span(
        "ChatCompletion",
        {
            semconv.OPENINFERENCE_SPAN_KIND: "LLM",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": QUESTION,
            "llm.input_messages.1.message.role": "tool",
            "llm.input_messages.1.message.content": json.dumps([DOC]),
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": ANSWER,
        },
        parent=agent.span_id,
        scope="openinference.instrumentation.openai",
        start=2,
    )
    found = extract(trace(agent, tool, llm))
    [rag] = found.interactions
    assert rag.convention == "langfuse" and rag.span is agent and rag.record.contexts == (DOC,)
    assert found.skips == []


def test_an_openinference_chain_under_a_langfuse_function_without_llm_work_is_read_by_openinference() -> None:
    kind = semconv.OPENINFERENCE_SPAN_KIND
    root = _observation("handle", "span", input=_call(QUESTION), output=ANSWER)
    chain = span(
        "RetrievalQA", {kind: "CHAIN", "input.value": QUESTION, "output.value": ANSWER}, parent=root.span_id
    )
    retriever = span(
        "retrieve",
        {kind: "RETRIEVER", "retrieval.documents.0.document.content": DOC},
        parent=chain.span_id,
        start=1,
    )
    [rag] = extract(trace(root, chain, retriever)).interactions
    assert rag.convention == "openinference" and rag.span is chain


@pytest.mark.parametrize(
    ("name", "arguments", "output"),
    [
        ("send_reply", _call(to="user-7", body=f"Hi! {ANSWER} Best, Aurora"), "sent"),  # carries the answer
        ("final_answer", _call("answer"), ANSWER),  # returns the answer itself
    ],
)
def test_a_tool_that_only_carries_the_answer_is_not_evidence(name: str, arguments: str, output: str) -> None:
    agent = _observation("support_agent", "agent", input=_call(QUESTION), output=ANSWER)
    search = _observation(
        "search", "tool", parent=agent.span_id, start=1, input=_call("battery"), output=[DOC]
    )
    echo = _observation(name, "tool", parent=agent.span_id, start=3, input=arguments, output=output)
    [rag] = extract(trace(agent, search, _generation(agent.span_id, 2), echo)).interactions
    assert rag.record.contexts == (DOC,)
    assert any(f"'{name}' not judged" in note for note in rag.context_notes)


@pytest.mark.parametrize("kind", ["tool", "retriever"])
def test_a_lookup_after_the_answer_was_written_is_not_evidence(kind: str) -> None:
    agent = _observation("support_agent", "agent", input=_call(QUESTION), output=ANSWER)
    search = _observation(
        "search", "tool", parent=agent.span_id, start=1, input=_call("battery"), output=[DOC]
    )
    later = _observation("cite_sources", kind, parent=agent.span_id, start=5, input=_call("x"), output=[DOC2])
    [rag] = extract(trace(agent, search, _generation(agent.span_id, 2), later)).interactions
    assert rag.record.contexts == (DOC,)
    assert any(
        "'cite_sources' not judged: the tool was called after the LLM call that wrote the answer" in note
        for note in rag.context_notes
    )


def test_a_judges_call_is_never_an_interaction_of_its_own() -> None:
    """An evaluator run on its own (an experiment's scoring): its generation is the judge's, not an app's."""
    judge = _observation("faithfulness", "evaluator", input=_call(QUESTION, ANSWER), output={"score": 1})
    verdict = _generation(judge.span_id, 1, "score: 1", question=f"Is '{ANSWER}' supported?")
    found = extract(trace(judge, verdict))
    assert found.interactions == [] and [s.reason for s in found.skips] == [ExtractSkip.NOT_RAG]


def test_the_question_among_several_string_arguments_is_the_one_the_model_was_given() -> None:
    root = _observation("answer", "span", input=_call("tenant-42", QUESTION, top_k=3), output=ANSWER)
    retriever = _observation("retrieve", "retriever", parent=root.span_id, start=1, output=[DOC])
    [rag] = extract(trace(root, retriever, _generation(root.span_id, 2))).interactions
    assert rag.record.query == QUESTION


def test_a_chat_function_taking_the_conversation_asks_its_last_user_message() -> None:
    conversation = [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": ANSWER},
        {"role": "user", "content": "And how much does it weigh?"},
    ]
    root = _observation("chat_turn", "span", input=_call(conversation), output="It weighs 1.2 kg.")
    retriever = _observation("retrieve", "retriever", parent=root.span_id, start=1, output=[DOC2])
    [rag] = extract(trace(root, retriever, _generation(root.span_id, 2, "It weighs 1.2 kg."))).interactions
    assert rag.record.query == "And how much does it weigh?"


def test_v3_trace_io_and_langfuse_session_id_are_read_where_the_observation_has_none() -> None:
    """v3's `update_current_trace(input=..., output=..., session_id=..., user_id=...)` from a span below the
    function, and Langfuse's own `langfuse.session.id` / `langfuse.user.id`."""
    root = _observation("rag", "span")
    step = _observation(
        "step",
        "span",
        parent=root.span_id,
        start=1,
        extra={
            "langfuse.trace.input": QUESTION,
            "langfuse.trace.output": ANSWER,
            "langfuse.session.id": "c-9",
            "langfuse.user.id": "u-9",
        },
    )
    retriever = _observation("retrieve", "retriever", parent=step.span_id, start=2, output=[DOC])
    [rag] = extract(trace(root, step, retriever)).interactions
    assert rag.span is root and (rag.record.query, rag.record.answer) == (QUESTION, ANSWER)
    assert rag.session_id == "c-9" and rag.user_id == "u-9"


def test_a_judge_or_guardrail_generation_is_never_the_question_or_the_answer() -> None:
    root = _observation("answer_question", "span", input=_call(QUESTION))  # output not captured
    guardrail = _observation("moderation", "guardrail", parent=root.span_id, start=0)
    screening = _generation(guardrail.span_id, 0, "SAFE", question="Is this safe? " + QUESTION)
    retriever = _observation("retrieve", "retriever", parent=root.span_id, start=1, output=[DOC])
    answering = _generation(root.span_id, 2)
    judge = _observation("faithfulness", "evaluator", parent=root.span_id, start=4)
    verdict = _generation(judge.span_id, 5, "score: 0.9")
    [rag] = extract(trace(root, guardrail, screening, retriever, answering, judge, verdict)).interactions
    assert (rag.record.query, rag.record.answer) == (QUESTION, ANSWER)


def test_langfuse_openai_without_observe_is_one_interaction_per_function_calling_loop() -> None:
    ask = _generation(None, 0, {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]})
    messages = [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]},
        {"role": "tool", "tool_call_id": "c1", "content": json.dumps([DOC])},
    ]
    answer = _observation(
        "OpenAI-generation",
        "generation",
        start=2,
        input={"tools": [], "messages": messages},
        output={"role": "assistant", "content": ANSWER},
    )
    [rag] = extract(trace(ask, answer)).interactions
    assert rag.span is answer and rag.record.contexts == (DOC,)
    assert [s.kind for s in rag.context_sources] == ["tool_message"]


def test_a_rag_function_decorated_as_a_generation_is_read_with_the_retrieval_inside_it() -> None:
    """`@observe(as_type="generation")` on the whole function: its input is the call, not messages."""
    # The decorated function's span ends after the retrieval it ran.
    generation = replace(
        _observation("rag", "generation", input=_call(QUESTION), output=ANSWER), end_time_unix_nano=10
    )
    retriever = _observation("retrieve", "retriever", parent=generation.span_id, start=1, output=[DOC])
    [rag] = extract(trace(generation, retriever)).interactions
    assert rag.span is generation and (rag.record.query, rag.record.contexts) == (QUESTION, (DOC,))
    # A raw prompt string is never split into a question.
    prompt = _observation(
        "complete", "generation", input=f"Context: {DOC}\nQuestion: {QUESTION}", output=ANSWER
    )
    found = extract(trace(prompt))
    assert found.interactions == [] and [s.reason for s in found.skips] == [ExtractSkip.EMPTY_CONTEXT]


def test_a_traced_function_with_no_llm_work_is_not_an_interaction() -> None:
    found = extract(trace(_observation("load_config", "span", input=_call("prod"), output="ok")))
    assert found.interactions == [] and [s.reason for s in found.skips] == [ExtractSkip.NOT_RAG]
    assert "langfuse" in found.skips[0].detail


@pytest.mark.parametrize(
    "recording",
    [r for r in recordings() if r.source.startswith("langfuse") and r.scenario.startswith("session_")],
    ids=lambda r: r.id,
)
def test_a_recorded_langfuse_session_turn_keeps_its_session(recording: Any) -> None:
    spans = decode_message(recording.payload)
    [rag] = extract(Trace(recording.trace_id, tuple(spans))).interactions
    assert rag.session_id == "session-" + recording.scenario.split("_")[1]
