"""The Vercel AI SDK's telemetry (`ai.*` spans): the edges the recorded fixtures (fixtures/vercel_ai) do not
show. Attribute names and value shapes are those `ai` 6 writes (see the recorded .txt dumps)."""

from __future__ import annotations

import json
from typing import Any

from trace_builder import span, trace

from tracescore import semconv
from tracescore.extract import extract
from tracescore.extract._context import MAX_CONTEXT_CHARS, MAX_CONTEXTS
from tracescore.model import DecodedSpan, ExtractSkip, Trace

QUESTION = "How long does the Aurora X2 battery last?"
DOC = "The Aurora X2 battery lasts 14 hours on a single charge."
DOC2 = "The Aurora X2 weighs 1.2 kg."
ANSWER = "The Aurora X2 battery lasts 14 hours."
SYSTEM = "You answer questions about Aurora products."


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def _call(name: str = "ai.generateText", sid: str | None = None, **attrs: Any) -> DecodedSpan:
    base = {"ai.operationId": name, "ai.telemetry.functionId": "aurora-support"}
    return span(name, {**base, **attrs}, sid=sid, scope="ai", start=0)


def _model(
    parent: DecodedSpan, start: int, text: str | None, messages: list[Any], **attrs: Any
) -> DecodedSpan:
    operation = f"{parent.name}.doStream" if "stream" in parent.name else f"{parent.name}.doGenerate"
    values = {
        "ai.operationId": operation,
        "ai.prompt.messages": json.dumps(messages),
        "gen_ai.system": "openai.chat",
        **({"ai.response.text": text} if text is not None else {}),
        **attrs,
    }
    return span(operation, values, parent=parent.span_id, scope="ai", start=start)


def _tool(parent: DecodedSpan, start: int, result: Any, name: str = "search_docs") -> DecodedSpan:
    values = {
        "ai.operationId": "ai.toolCall",
        "ai.toolCall.name": name,
        "ai.toolCall.args": json.dumps({"query": QUESTION}),
        **({"ai.toolCall.result": json.dumps(result)} if result is not None else {}),
    }
    return span("ai.toolCall", values, parent=parent.span_id, scope="ai", start=start)


def _tool_loop(result: Any = (DOC, DOC2), answer: str = ANSWER, **outer: Any) -> list[DecodedSpan]:
    """generateText: the model asks for search_docs, the tool runs, the model answers."""
    prompt = json.dumps({"system": SYSTEM, "prompt": QUESTION})
    anchor = _call(**{"ai.prompt": prompt, "ai.response.text": answer, **outer})
    first = [{"role": "system", "content": SYSTEM}, _user(QUESTION)]
    return [
        anchor,
        _model(anchor, 1, "", first, **{"ai.prompt.tools": ['{"name":"search_docs"}']}),
        _tool(anchor, 2, list(result) if isinstance(result, tuple) else result),
        _model(anchor, 3, answer, first),
    ]


def test_the_tool_loop_is_one_interaction_with_the_tool_result_as_documents() -> None:
    spans = _tool_loop()
    found = extract(trace(*spans))
    [rag] = found.interactions
    assert found.skips == [] and rag.convention == "vercel_ai" and rag.span is spans[0]
    assert (rag.record.query, rag.record.contexts, rag.record.answer) == (QUESTION, (DOC, DOC2), ANSWER)
    assert [s.kind for s in rag.context_sources] == ["tool", "tool"]
    assert rag.route == "aurora-support"


def test_rows_of_one_text_and_its_scores_are_one_document_each_and_other_rows_are_not_split() -> None:
    """The AI SDK's RAG guide returns its vector search's `{name, similarity}` rows (recorded: fixtures
    vercel_ai/rows_*); rows with two texts (which one is the document?) stay one document, the result."""
    rows = [{"name": DOC, "similarity": 0.91}, {"name": DOC2, "similarity": 0.8}]
    [rag] = extract(trace(*_tool_loop(rows))).interactions
    assert rag.record.contexts == (DOC, DOC2)
    for ambiguous in (
        [{"title": "Battery", "name": DOC, "similarity": 0.9}],  # two texts in a row
        [{"name": DOC, "similarity": 0.9}, {"chunk_text": DOC2, "similarity": 0.8}],  # keys differ
        [{"name": DOC, "similarity": True}],  # a flag is not a score
        [{"id": "doc-1", "score": 0.9}],  # an identifier, not the document
    ):
        [rag] = extract(trace(*_tool_loop(ambiguous))).interactions
        assert rag.record.contexts == (json.dumps(ambiguous),), ambiguous


def test_content_capture_off_is_an_explained_skip() -> None:
    """recordInputs: false, recordOutputs: false: no prompt, no response, no tool result is recorded."""
    anchor = _call()
    spans = [
        anchor,
        span(
            "ai.generateText.doGenerate",
            {"ai.operationId": "ai.generateText.doGenerate"},
            parent=anchor.span_id,
        ),
        _tool(anchor, 2, None),
    ]
    found = extract(trace(*spans))
    assert found.interactions == []
    [skip] = found.skips
    assert skip.reason == ExtractSkip.MISSING_ANSWER and "recordOutputs: false" in skip.detail


def test_outputs_off_is_a_missing_answer_naming_record_outputs() -> None:
    anchor = _call(**{"ai.prompt": json.dumps({"system": SYSTEM, "prompt": QUESTION})})
    first = [{"role": "system", "content": SYSTEM}, _user(QUESTION)]
    spans = (anchor, _model(anchor, 1, None, first), _tool(anchor, 2, None), _model(anchor, 3, None, first))
    [skip] = extract(trace(*spans)).skips
    assert skip.reason == ExtractSkip.MISSING_ANSWER and "recordOutputs: false" in skip.detail


def test_a_huge_json_tool_result_is_read_within_the_bounds_and_says_so() -> None:
    many = [{"id": i, "content": f"Chunk {i}: {DOC}"} for i in range(5000)]
    [rag] = extract(trace(*_tool_loop(result=many))).interactions
    assert len(rag.record.contexts) == MAX_CONTEXTS
    assert any("past the limit" in note for note in rag.context_notes)

    one_blob = {"report": "x" * (MAX_CONTEXT_CHARS + 10)}  # not document-like and over the size bound
    found = extract(trace(*_tool_loop(result=one_blob)))
    assert found.interactions == []
    [skip] = found.skips
    assert skip.reason == ExtractSkip.EMPTY_CONTEXT and "exceed" in skip.detail


def test_an_answer_that_is_a_repr_is_not_judged() -> None:
    found = extract(trace(*_tool_loop(answer="[object Object]")))
    assert found.interactions == []
    [skip] = found.skips
    assert skip.reason == ExtractSkip.MISSING_ANSWER and "repr" in skip.detail


def test_a_tool_called_after_the_answer_is_not_evidence() -> None:
    anchor, ask, search, answer_call = _tool_loop()
    # The answering step also called a tool (stopWhen ended the loop after it): its result came too late.
    late = _tool(anchor, 4, [DOC2.replace("1.2", "3")], name="log_feedback")
    [rag] = extract(trace(anchor, ask, search, answer_call, late)).interactions
    assert rag.record.contexts == (DOC, DOC2)
    assert any("called after the LLM call that wrote the answer" in note for note in rag.context_notes)


def test_a_tool_whose_result_is_the_answer_is_not_evidence() -> None:
    anchor, ask, search, answer_call = _tool_loop()
    final = _tool(anchor, 2, ANSWER, name="final_answer")
    [rag] = extract(trace(anchor, ask, search, final, answer_call)).interactions
    assert rag.record.contexts == (DOC, DOC2)
    assert any(final.span_id in note and "its result is the answer" in note for note in rag.context_notes)


def test_genai_attributes_on_the_model_calls_score_the_interaction_once() -> None:
    """Were the SDK (or a span processor) to add the GenAI chat convention to its model calls, the GenAI
    recogniser would read the answering chat (its messages hold the tool result): still one interaction,
    read here from the whole call."""
    anchor, ask, search, answer_call = _tool_loop()
    messages = [
        {"role": "user", "parts": [{"type": "text", "content": QUESTION}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "response": json.dumps([DOC, DOC2])}]},
    ]
    chat = {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": json.dumps(messages),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}]
        ),
    }
    answer_call = _model(anchor, 3, ANSWER, [_user(QUESTION)], **chat)
    genai_alone = extract(trace(answer_call))
    assert [r.convention for r in genai_alone.interactions] == ["genai"]  # the GenAI reading exists
    found = extract(trace(anchor, ask, search, answer_call))
    [rag] = found.interactions
    assert rag.convention == "vercel_ai" and rag.span is anchor and found.skips == []


def test_tool_results_passed_in_the_prompt_are_this_turns_then_earlier_turns() -> None:
    """No ai.toolCall span (a client-side tool, or results the app injected): the tool messages after the
    question; an earlier turn's tool result kept in the prompt comes after them, marked as such."""
    old = {
        "type": "tool-result",
        "toolCallId": "c0",
        "toolName": "search_docs",
        "output": {"type": "text", "value": "stale"},
    }
    new = {
        "type": "tool-result",
        "toolCallId": "c1",
        "toolName": "search_docs",
        "output": {"type": "json", "value": [{"content": DOC}]},
    }
    failed = {
        "type": "tool-result",
        "toolCallId": "c2",
        "toolName": "search_docs",
        "output": {"type": "error-text", "value": "timeout"},
    }
    messages = [
        _user("Hi"),
        {"role": "tool", "content": [old]},
        {"role": "assistant", "content": [{"type": "text", "text": "Hello!"}]},
        _user(QUESTION),
        {
            "role": "assistant",
            "content": [{"type": "tool-call", "toolCallId": "c1", "toolName": "search_docs"}],
        },
        {"role": "tool", "content": [new, failed]},
    ]
    anchor = _call(**{"ai.prompt": json.dumps({"messages": messages}), "ai.response.text": ANSWER})
    model = _model(anchor, 1, ANSWER, messages)
    [rag] = extract(trace(anchor, model)).interactions
    assert rag.record.query == QUESTION and rag.record.contexts == (DOC, "stale")
    assert rag.context_sources == ((model.span_id, "tool_message", 0), (model.span_id, "earlier_turn", 1))


def test_documents_under_a_label_in_the_system_prompt_are_read_as_instructions() -> None:
    prompt = {"system": f"Answer from the context.\n\nContext:\n{DOC}\n\n{DOC2}", "prompt": QUESTION}
    anchor = _call("ai.streamText", **{"ai.prompt": json.dumps(prompt), "ai.response.text": ANSWER})
    model = _model(anchor, 1, ANSWER, [{"role": "system", "content": prompt["system"]}, _user(QUESTION)])
    [rag] = extract(trace(anchor, model)).interactions
    assert (rag.record.query, rag.record.contexts) == (QUESTION, (f"{DOC}\n\n{DOC2}",))
    assert rag.context_sources == ((model.span_id, "instructions", 0),)


def test_documents_in_the_system_prompt_with_no_label_are_a_no_retrieval_skip() -> None:
    prompt = {"system": f"Answer from what follows.\n\n{DOC}\n\n{DOC2}", "prompt": QUESTION}
    anchor = _call("ai.streamText", **{"ai.prompt": json.dumps(prompt), "ai.response.text": ANSWER})
    model = _model(anchor, 1, ANSWER, [{"role": "system", "content": prompt["system"]}, _user(QUESTION)])
    found = extract(trace(anchor, model))
    assert found.interactions == []
    [skip] = found.skips
    assert skip.reason == ExtractSkip.NO_RETRIEVAL and "read only under a label" in skip.detail


def test_tools_offered_but_not_called_leave_nothing_to_judge_against() -> None:
    anchor, ask, _, _ = _tool_loop()
    ask = _model(anchor, 1, ANSWER, [_user(QUESTION)], **{"ai.prompt.tools": ['{"name":"search_docs"}']})
    [skip] = extract(trace(anchor, ask)).skips
    assert skip.reason == ExtractSkip.EMPTY_CONTEXT


def test_retrieval_spans_beside_the_call_are_its_documents() -> None:
    request = span("POST /api/chat", {semconv.HTTP_ROUTE: "/api/chat"})
    retrieval = span(
        "retrieval docs",
        {
            "gen_ai.operation.name": "retrieval",
            "gen_ai.retrieval.documents": json.dumps([{"id": "d1", "content": DOC}]),
        },
        parent=request.span_id,
        start=1,
    )
    prompt = json.dumps({"system": f"Context:\n{DOC}", "messages": [_user(QUESTION)]})
    anchor = span(
        "ai.generateText",
        {"ai.operationId": "ai.generateText", "ai.prompt": prompt, "ai.response.text": ANSWER,
         "ai.telemetry.metadata.sessionId": "chat-7"},
        parent=request.span_id,
        scope="ai",
        start=2,
    )  # fmt: skip
    model = _model(anchor, 3, ANSWER, [_user(QUESTION)])
    later = span("retrieval again", dict(retrieval.attributes), parent=request.span_id, start=9)
    [rag] = extract(trace(request, retrieval, anchor, model, later)).interactions
    assert rag.record.contexts == (DOC,) and rag.context_sources[0].span_id == retrieval.span_id
    assert rag.route == "/api/chat"  # no functionId: the request's route
    assert rag.session_id == "chat-7"


def test_rerank_gives_its_top_ranked_documents_and_says_when_the_ranking_is_missing() -> None:
    request = span("answer_question")
    rerank = span(
        "ai.rerank",
        {"ai.operationId": "ai.rerank", "ai.documents": [json.dumps(DOC2), json.dumps(DOC), json.dumps("x")]},
        parent=request.span_id,
        scope="ai",
        start=1,
    )
    ranking = [
        json.dumps({"index": 1, "relevanceScore": 0.9}),
        json.dumps({"index": 0, "relevanceScore": 0.5}),
    ]
    do_rerank = span(
        "ai.rerank.doRerank",
        {"ai.operationId": "ai.rerank.doRerank", "ai.ranking": ranking},
        parent=rerank.span_id,
        scope="ai",
        start=1,
    )
    anchor = span(
        "ai.generateText",
        {
            "ai.operationId": "ai.generateText",
            "ai.prompt": json.dumps({"prompt": QUESTION}),
            "ai.response.text": ANSWER,
        },
        parent=request.span_id,
        scope="ai",
        start=2,
    )
    [rag] = extract(trace(request, rerank, do_rerank, anchor)).interactions
    assert rag.record.contexts == (DOC, DOC2)
    assert [s.kind for s in rag.context_sources] == ["reranker", "reranker"]

    found = extract(trace(request, rerank, anchor))  # recordOutputs off: no ranking
    [skip] = found.skips
    assert skip.reason == ExtractSkip.EMPTY_CONTEXT and "ai.ranking" in skip.detail


def test_an_object_call_answers_with_its_answer_field() -> None:
    answer = json.dumps({"answer": ANSWER, "sources": ["doc-0"]})
    prompt = json.dumps({"prompt": QUESTION})
    anchor = _call("ai.generateObject", **{"ai.prompt": prompt, "ai.response.object": answer})
    ask = _model(anchor, 1, None, [_user(QUESTION)])
    answer_call = _model(anchor, 3, None, [_user(QUESTION)], **{"ai.response.object": answer})
    [rag] = extract(trace(anchor, ask, _tool(anchor, 2, [DOC]), answer_call)).interactions
    assert (rag.record.answer, rag.record.contexts) == (ANSWER, (DOC,))


def test_an_ai_sdk_call_inside_a_tool_is_part_of_the_outer_interaction() -> None:
    anchor, ask, search, answer_call = _tool_loop()
    inner = span(
        "ai.generateText",
        {
            "ai.operationId": "ai.generateText",
            "ai.prompt": json.dumps({"prompt": "summarise"}),
            "ai.response.text": "short",
        },
        parent=search.span_id,
        scope="ai",
        start=2,
    )
    found = extract(Trace(anchor.trace_id, (anchor, ask, search, inner, answer_call)))
    [rag] = found.interactions
    assert rag.span is anchor and found.skips == []


def test_an_explicit_tracescore_route_wins_over_the_function_id() -> None:
    spans = _tool_loop(**{semconv.TRACESCORE_ROUTE: "/support"})
    [rag] = extract(trace(*spans)).interactions
    assert rag.route == "/support"


def test_an_sdk_before_4_answers_with_ai_result_text() -> None:
    anchor, ask, search, answer_call = _tool_loop(answer=" ")
    prompt = json.dumps({"prompt": QUESTION})
    old = _call(sid=anchor.span_id, **{"ai.prompt": prompt, "ai.result.text": ANSWER})
    [rag] = extract(trace(old, ask, search, answer_call)).interactions
    assert rag.record.answer == ANSWER
