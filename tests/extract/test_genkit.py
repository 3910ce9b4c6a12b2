"""Genkit's own spans (`genkit:*`), recorded from a real Node app through the OTLP exporter Genkit's telemetry
was given and the real Collector (fixtures/genkit, fixtures/genkit_conversation): a flow that retrieves and
generates, a flow whose model calls a tool, and a chat on Genkit's agent API, each read with its question,
documents, answer, route and (a chat) session."""

from __future__ import annotations

import json
from typing import Any

import pytest
from recorded import (
    Recording,
    extracted,
    read_as_run,
    read_chat_turn,
    recordings,
    repeats_label,
    replaced,
    spans_of,
)

from tracescore.extract import Skip, extract
from tracescore.extract._genkit import Genkit
from tracescore.model import DecodedSpan, ExtractSkip, Interaction, RunToolCall, Trace

RECORDED = {r.id: r for r in recordings() if r.source in ("genkit", "genkit_conversation")}
INPUT = "genkit:input"
SUBTYPE = "genkit:metadata:subtype"


def test_a_flow_that_retrieves_is_read_with_the_retrievers_documents_under_the_flows_name() -> None:
    interaction = read_as_run(RECORDED["genkit/rag_faithful"], "genkit", "answerQuestion")
    assert interaction.route == "answerQuestion"
    assert {s.kind for s in interaction.context_sources} == {"retriever"}
    run = interaction.run
    assert run is not None and (run.retrievals, run.steps, run.tool_calls) == (1, 1, ())
    assert (run.prompt_tokens, run.completion_tokens) == (42, 9)


def test_a_flow_whose_model_calls_a_tool_is_read_with_the_tools_result_and_the_run() -> None:
    recording = RECORDED["genkit/tool_unfaithful"]
    interaction = read_as_run(recording, "genkit", "supportAgent")
    assert interaction.route == "supportAgent"
    assert {s.kind for s in interaction.context_sources} == {"tool"}
    run = interaction.run
    assert run is not None and run.steps == 2
    [call] = run.tool_calls
    assert (call.name, json.loads(call.arguments or "")) == ("searchDocs", {"query": recording.question})
    assert run.tools_offered == ("searchDocs: Search the Aurora product documentation.",)


def test_without_the_flows_input_the_question_is_the_user_message_without_the_docs_genkit_added() -> None:
    recording = RECORDED["genkit/rag_unfaithful"]
    [flow] = [s for s in spans_of(recording) if s.parent_span_id is None]
    spans = [s if s is not flow else replaced([s], INPUT, "{}")[0] for s in spans_of(recording)]
    [interaction] = extracted(spans).interactions
    assert interaction.record.query == recording.question


def test_a_chat_turn_is_read_in_the_agents_session_with_the_earlier_turns_results_it_was_resent() -> None:
    interaction, conversation = read_chat_turn(RECORDED["genkit_conversation/resent_faithful_turn3"])
    assert (interaction.convention, interaction.route) == ("genkit", "supportChat")
    assert (interaction.session_id, interaction.user_id) == (conversation["session_id"], None)
    earlier = [s for s in interaction.context_sources if s.kind == "earlier_turn"]
    resent = {conversation["turn"] - item["turn"] for item in conversation["resent"]}
    assert resent == {1, 2} and {s.turns_back for s in earlier} == resent


def test_a_greeting_answered_without_a_lookup_is_skipped_with_nothing_to_judge_against() -> None:
    recording = RECORDED["genkit_conversation/greeting_turn1"]
    spans = spans_of(recording)
    [skip] = extract(Trace(recording.trace_id, tuple(spans))).skips
    assert isinstance(skip, Skip) and (skip.reason, skip.convention) == (ExtractSkip.EMPTY_CONTEXT, "genkit")


def test_without_a_retriever_span_the_documents_are_those_the_model_was_handed() -> None:
    """`ai.generate({docs})` with documents the app found itself (no `ai.retrieve`): the model action's
    input `docs`."""
    recording = RECORDED["genkit/rag_faithful"]
    spans = [s for s in spans_of(recording) if s.attributes.get("genkit:metadata:subtype") != "retriever"]
    [interaction] = extracted(spans).interactions
    assert interaction.record.query == recording.question
    assert sorted(interaction.record.contexts) == sorted(recording.documents)
    assert {s.kind for s in interaction.context_sources} == {"input"}


def test_a_generate_call_outside_any_flow_is_the_interaction() -> None:
    """`ai.generate` called on its own: its `generate` span, read from the model action below it (the question
    without the documents Genkit appended to the user message)."""
    recording = RECORDED["genkit/rag_unfaithful"]
    spans = [s for s in spans_of(recording) if s.attributes.get("genkit:metadata:subtype") != "flow"]
    [interaction] = extracted(spans).interactions
    assert interaction.span.name == "generate" and interaction.convention == "genkit"
    assert (interaction.record.query, interaction.record.answer) == (recording.question, recording.answer)
    assert sorted(interaction.record.contexts) == sorted(recording.documents)


# Tool results the model was given: Genkit resends the conversation in each model action's input, the model's
# `toolRequest` parts (`{name, ref, input}`) before the `toolResponse` parts (`{name, ref, output}`) answering
# them, so a result read from the messages is named and argued as the tool action that ran it.


def _tools(spans: list[DecodedSpan]) -> list[DecodedSpan]:
    return [s for s in spans if s.attributes.get(SUBTYPE) == "tool"]


TOOL_TURNS = [r for r in RECORDED.values() if _tools(spans_of(r))]


def _read(recording: Recording, *, tool_spans: bool = True) -> Interaction:
    """The recording's one interaction, read with or without its tool action spans."""
    spans = spans_of(recording)
    tools = {s.span_id for s in _tools(spans)} if not tool_spans else set()
    [interaction] = extracted([s for s in spans if s.span_id not in tools]).interactions
    return interaction


def _calls(recording: Recording, *, tool_spans: bool = True) -> list[tuple[str, Any, str | None]]:
    """The run's tool calls (tool, arguments parsed, result), read with or without the tool action spans."""
    run = _read(recording, tool_spans=tool_spans).record.run
    assert run is not None
    return [(c.name, json.loads(c.arguments or "null"), c.result) for c in run.tool_calls]


@pytest.mark.parametrize("recording", TOOL_TURNS, ids=lambda r: r.id)
def test_without_tool_spans_the_run_reads_each_tool_response_named_and_argued_as_the_tool_span(
    recording: Recording,
) -> None:
    """A run read from the `toolResponse` parts alone (no tool action spans) has the calls the tool spans
    record: each named and with the `input` of the `toolRequest` with its `ref` (it had no arguments)."""
    assert _calls(recording, tool_spans=False) == _calls(recording)


def _answering_results(recording: Recording, **replace: Any) -> list[tuple[str | None, Any, int]]:
    """(tool, arguments, turns back) of each tool result the recording's last model action was given."""
    models = [s for s in spans_of(recording) if s.attributes.get(SUBTYPE) == "model"]
    last = max(models, key=lambda s: s.start_time_unix_nano)
    given = json.loads(last.attributes[INPUT])
    if replace:
        given["messages"] = [
            {**m, "content": [_part_with(part, replace) for part in m["content"]]} for m in given["messages"]
        ]
    [model] = replaced([last], INPUT, json.dumps(given))
    return [(r.tool, r.arguments, r.back) for r in Genkit().input_tool_results(model)]


def _part_with(part: dict[str, Any], replace: dict[str, Any]) -> dict[str, Any]:
    """A `toolRequest` / `toolResponse` part with fields replaced (another plugin's shape)."""
    return {k: {**v, **replace} if k in ("toolRequest", "toolResponse") else v for k, v in part.items()}


@pytest.mark.parametrize("ref", [True, False], ids=["ref", "no_ref"])
def test_an_earlier_turns_tool_response_is_named_and_argued_as_its_turns_tool_span(ref: bool) -> None:
    """The third turn of a chat was resent every turn's `toolResponse`: each is named and given the arguments
    its turn's tool action ran with, paired by `ref` (the OpenAI plugin's call id), else, for a plugin that
    gives none, the n-th response of a tool answering its n-th request of the turn."""
    turns = [RECORDED[f"genkit_conversation/resent_faithful_turn{n}"] for n in (1, 2, 3)]
    ran = [_tools(spans_of(turn)) for turn in turns]
    expected = [
        (t.attributes["genkit:name"], json.loads(t.attributes[INPUT]), 3 - n) for n, [t] in enumerate(ran, 1)
    ]
    assert len({json.dumps(arguments) for _, arguments, _ in expected}) == 3  # three different topics
    assert _answering_results(turns[-1], **({} if ref else {"ref": None})) == expected


def test_one_tool_asked_two_things_from_the_messages_is_no_repeat_the_same_twice_is() -> None:
    """Two recorded `searchPlans` results read from the messages (no tool spans), as one run would have made
    them: asked different topics they are no repeat (without arguments they were); the same topic twice is."""

    def call(name: str) -> RunToolCall:
        run = _read(RECORDED[f"genkit_conversation/{name}"], tool_spans=False).record.run
        assert run is not None
        [made] = run.tool_calls
        return made

    first, other, same = (
        call("qa_only_faithful_turn1"),
        call("qa_only_faithful_turn2"),
        call("qa_only_invented_turn1"),
    )
    assert first.name == other.name == same.name == "searchPlans"
    assert repeats_label(RECORDED["genkit/tool_faithful"], first, other) == "no_repeats"
    assert repeats_label(RECORDED["genkit/tool_faithful"], first, same) == "repeated"
