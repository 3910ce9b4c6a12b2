"""An earlier turn's tool result in the prompt, in the message shapes the recordings do not reach (the
recorded ones: tests/extract/test_recorded_multiturn.py): OpenInference function messages whose result
sits beside them (`message.function.*`), Haystack's `tool_call_result` parts, Anthropic's `tool_result`
blocks and Gemini's `function_response` parts in user-role messages (which are not turns of their own).
Each is read as the earlier turn's (`earlier_turn`, with how many turns back); an earlier answer never is.
A result is named by its tool where the message list names it: by its own name, else by the call it answers,
matched by id (OpenAI `tool_calls`, GenAI `tool_call` parts, Anthropic `tool_use` blocks)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from recorded import Recording, extracted, recordings, repeats_label, spans_of
from trace_builder import span, trace

from tracescore.extract import extract
from tracescore.extract._context import Contexts
from tracescore.extract._history import TurnResult, genai_tool_results, indexed_tool_results
from tracescore.extract._tools import add_earlier_turns
from tracescore.model import DecodedSpan, Interaction, RunToolCall
from tracescore.score import evaluate
from tracescore.score.judges import OfflineJudge

FIRST = "What does the Basic plan cost?"
PRICE = "Aurora Basic costs 9 euros a month."
EARLIER_ANSWER = "The Basic plan costs 9 euros a month."
QUESTION = "And the weekend add-on?"
WEEKEND = "The weekend add-on costs the same as the Basic plan."
ANSWER = "The weekend add-on costs 9 euros a month."


def _openinference_turn(history: dict[str, Any]) -> list[Any]:
    """An agent whose model call was given the first turn (question, tool result, answer) before this turn's
    question; this turn's own lookup is its TOOL span."""
    agent = span(
        "turn", {"openinference.span.kind": "AGENT", "input.value": QUESTION, "output.value": ANSWER}
    )
    tool = span(
        "search_plans",
        {"openinference.span.kind": "TOOL", "tool.name": "search_plans", "output.value": WEEKEND},
        parent=agent.span_id,
        start=1,
    )
    messages = "llm.input_messages"
    llm = span(
        "chat",
        {
            "openinference.span.kind": "LLM",
            f"{messages}.0.message.role": "user",
            f"{messages}.0.message.content": FIRST,
            f"{messages}.1.message.role": "function",
            **{f"{messages}.1.{key}": value for key, value in history.items()},
            f"{messages}.2.message.role": "assistant",
            f"{messages}.2.message.content": EARLIER_ANSWER,
            f"{messages}.3.message.role": "user",
            f"{messages}.3.message.content": QUESTION,
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": ANSWER,
        },
        parent=agent.span_id,
        start=2,
    )
    return [agent, tool, llm]


@pytest.mark.parametrize(
    "history",
    [
        {"message.function.0": json.dumps({"name": "search_plans", "content": PRICE})},
        {"message.function.content": PRICE},
        {
            "function.0": json.dumps(
                {"name": "search_plans", "content": PRICE, "call_id": "c1", "is_error": False}
            )
        },
    ],
    ids=["message.function.M", "message.function.content", "function.M"],
)
def test_a_function_messages_result_recorded_beside_it_is_the_earlier_turns(history: dict[str, Any]) -> None:
    [rag] = extract(trace(*_openinference_turn(history))).interactions
    assert rag.record.contexts == (WEEKEND, PRICE)
    assert [(s.kind, s.turns_back) for s in rag.context_sources] == [("tool", 0), ("earlier_turn", 1)]


def _genai_turn(messages: list[dict[str, Any]]) -> list[Any]:
    agent = span("invoke_agent support", {"gen_ai.operation.name": "invoke_agent"})
    tool = span(
        "execute_tool search_plans",
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.result": WEEKEND},
        parent=agent.span_id,
        start=1,
    )
    return [agent, tool, _chat(messages, parent=agent.span_id, start=2)]


def _chat(messages: list[dict[str, Any]], **placement: Any) -> Any:
    """A GenAI chat span given `messages` that answered ANSWER."""
    return span(
        "chat",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps(messages),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}]
            ),
        },
        **placement,
    )


def _conversation(tool_message: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": FIRST},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "search_plans"}]},
        tool_message,
        {"role": "assistant", "content": EARLIER_ANSWER},
        {"role": "user", "content": QUESTION},
    ]


@pytest.mark.parametrize(
    "tool_message",
    [
        # Haystack's ChatMessage.to_dict(): a tool message of `tool_call_result` parts.
        {"role": "tool", "content": [{"tool_call_result": {"result": PRICE, "origin": {}, "error": False}}]},
        # Anthropic: the result is a `tool_result` block of a user-role message.
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": PRICE}]},
        # Gemini: a `function_response` part of a user-role message, the result under `response`.
        {"role": "user", "parts": [{"function_response": {"name": "search_plans", "response": PRICE}}]},
    ],
    ids=["haystack", "anthropic", "gemini"],
)
def test_tool_result_parts_in_any_message_are_the_earlier_turns(tool_message: dict[str, Any]) -> None:
    """A user-role message that only carries a tool's result is not a turn: the result is one turn back."""
    [rag] = extract(trace(*_genai_turn(_conversation(tool_message)))).interactions
    assert rag.record.contexts == (WEEKEND, PRICE) and EARLIER_ANSWER not in rag.record.contexts
    assert [(s.kind, s.turns_back) for s in rag.context_sources] == [("tool", 0), ("earlier_turn", 1)]


@pytest.mark.parametrize(
    "tool_message",
    [
        {
            "role": "tool",
            "content": [{"tool_call_result": 5}, None, 7, {"tool_call_result": {"result": None}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result"}, {"type": "tool-result", "output": {"type": 3}}],
        },
        {
            "role": "user",
            "parts": [{"function_response": None}, {"functionResponse": [1, {"response": "x"}]}],
        },
        {"role": "function", "content": {"name": {"content": {"result": {"output": {"response": [None]}}}}}},
        {"role": "tool", "content": json.dumps({"id": 1, "name": 2, "response": {"result": "deep" * 1000}})},
        # A `type` that is not text, ids and names that are not strings.
        {"role": "user", "content": [{"type": ["tool_result"]}, {"type": {"tool_use": 1}, "id": "c1"}]},
        {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": ["c1"], "name": 3, "response": PRICE}],
        },
        {"role": "tool", "tool_call_id": {"c1": 1}, "name": ["x"], "content": PRICE},
    ],
)
def test_odd_tool_result_shapes_never_crash(tool_message: dict[str, Any]) -> None:
    found = extract(trace(*_genai_turn(_conversation(tool_message))))
    [rag] = found.interactions
    assert rag.record.contexts[0] == WEEKEND and rag.record.answer == ANSWER


def test_a_tool_message_without_a_name_is_named_by_the_assistants_call_with_its_id() -> None:
    """OpenAI-style tool messages carry only `tool_call_id`: the assistant's `tool_calls` name them, matched
    by id (not by order); a message's own name wins."""
    calls = [
        {"id": "c1", "type": "function", "function": {"name": "search_plans", "arguments": "{}"}},
        {"id": "c2", "type": "function", "function": {"name": "search_addons", "arguments": "{}"}},
    ]
    messages = [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "tool_call_id": "c2", "content": WEEKEND},
        {"role": "tool", "tool_call_id": "c1", "content": PRICE},
        {"role": "function", "name": "price_list", "content": PRICE},
        {"role": "tool", "tool_call_id": "unknown", "content": PRICE},
    ]
    assert _tool_call_names(messages) == ["search_addons", "search_plans", "price_list", "(tool message)"]


def _tool_call_names(messages: list[dict[str, Any]]) -> list[str]:
    """The names of the run's tool calls when a chat without tool spans was given `messages`."""
    [rag] = extract(trace(_chat(messages))).interactions
    assert rag.record.run is not None
    return [call.name for call in rag.record.run.tool_calls]


# The GenAI semconv's message parts as Logfire records them (fixtures/logfire/tools_faithful.txt): an
# assistant `tool_call` part, answered by a tool-role message's `tool_call_response` part with its id.
def _genai_call(call_id: str, name: str, topic: str = "prices") -> dict[str, Any]:
    return {"type": "tool_call", "id": call_id, "name": name, "arguments": {"topic": topic}}


def _genai_response(call_id: str, response: str) -> dict[str, Any]:
    return {"role": "tool", "parts": [{"type": "tool_call_response", "id": call_id, "response": response}]}


def _genai_user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "content": text}]}


GENAI_CONVERSATION = [
    _genai_user(FIRST),
    {"role": "assistant", "parts": [_genai_call("call_0001", "search_plans")]},
    _genai_response("call_0001", PRICE),
    {"role": "assistant", "parts": [{"type": "text", "content": EARLIER_ANSWER}]},
    _genai_user(QUESTION),
    # Two calls at once, answered in the other order: matched by id, not by order.
    {
        "role": "assistant",
        "parts": [
            _genai_call("call_0002", "search_plans"),
            _genai_call("call_0003", "search_addons", "weekend"),
        ],
    },
    _genai_response("call_0003", WEEKEND),
    _genai_response("call_0002", PRICE),
    _genai_response("call_unknown", PRICE),
]

# Anthropic's Messages API: an assistant `tool_use` block (`id`, `name`, `input`), answered by a `tool_result`
# block (`tool_use_id`, `content`) of the next user-role message.
ANTHROPIC_CONVERSATION = [
    {"role": "user", "content": FIRST},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me look that up."},
            {"type": "tool_use", "id": "toolu_01", "name": "search_plans", "input": {"topic": "prices"}},
        ],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": PRICE}]},
    {"role": "assistant", "content": [{"type": "text", "text": EARLIER_ANSWER}]},
    {"role": "user", "content": QUESTION},
    {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "toolu_02", "name": "search_plans", "input": {"topic": "prices"}},
            {"type": "tool_use", "id": "toolu_03", "name": "search_addons", "input": {"topic": "weekend"}},
        ],
    },
    {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_03",
                "content": [{"type": "text", "text": WEEKEND}],
            },
            {"type": "tool_result", "tool_use_id": "toolu_02", "content": PRICE},
            {"type": "tool_result", "tool_use_id": "toolu_unknown", "content": PRICE},
        ],
    },
]


@pytest.mark.parametrize(
    ("messages", "weekend"),
    [(GENAI_CONVERSATION, WEEKEND), (ANTHROPIC_CONVERSATION, [{"type": "text", "text": WEEKEND}])],
    ids=["genai", "anthropic"],
)
def test_a_tool_result_part_is_named_by_the_call_with_its_id_in_every_turn(
    messages: Any, weekend: Any
) -> None:
    """A GenAI `tool_call_response` part names its tool through the `tool_call` part with its `id`, an
    Anthropic `tool_result` block through the `tool_use` block its `tool_use_id` answers: the earlier turn's
    result as much as this turn's, parallel calls by id whatever their order, an unknown id unnamed."""
    prices, weekends = {"topic": "prices"}, {"topic": "weekend"}
    assert [tuple(result)[:4] for result in genai_tool_results(messages)] == [
        (PRICE, 1, "search_plans", prices),
        (weekend, 0, "search_addons", weekends),
        (PRICE, 0, "search_plans", prices),
        (PRICE, 0, None, None),
    ]


@pytest.mark.parametrize(
    "part",
    [
        # Pydantic AI (fixtures/pydantic_ai/faithful.txt): the part names its tool itself.
        {"type": "tool_call_response", "id": "call_0001", "name": "search_plans", "result": PRICE},
        # The Vercel AI SDK's prompt messages (fixtures/vercel_ai/tool_generate_chat_faithful.txt).
        {"type": "tool-result", "toolCallId": "call_0001", "toolName": "search_plans", "output": PRICE},
        # Gemini's `function_response`; Haystack's `tool_call_result` (origin: the ToolCall it answers).
        {"function_response": {"name": "search_plans", "response": PRICE}},
        {
            "tool_call_result": {
                "result": PRICE,
                "origin": {"tool_name": "search_plans", "arguments": {"topic": "prices"}, "id": "c1"},
                "error": False,
            }
        },
    ],
    ids=["pydantic_ai", "vercel_ai", "gemini", "haystack"],
)
def test_a_tool_result_part_that_names_its_tool_is_named_by_it(part: dict[str, Any]) -> None:
    """Named by the part itself; a Haystack result's `origin` (the ToolCall it answers) gives its arguments
    too; the others' arguments are the calls' (none made in these messages)."""
    messages = [{"role": "user", "content": QUESTION}, {"role": "user", "parts": [part]}]
    arguments = part.get("tool_call_result", {}).get("origin", {}).get("arguments")
    assert [tuple(result)[:4] for result in genai_tool_results(messages)] == [
        (PRICE, 0, "search_plans", arguments)
    ]


@pytest.mark.parametrize("messages", [GENAI_CONVERSATION, ANTHROPIC_CONVERSATION], ids=["genai", "anthropic"])
def test_the_runs_tool_calls_are_named_by_the_calls_the_results_answer(messages: Any) -> None:
    """A model call without tool spans: this turn's tool results are the run's tool calls, each named by the
    call it answers (not `(tool message)`), which the tool signals compare (a retry of the same tool)."""
    assert _tool_call_names(messages) == ["search_addons", "search_plans", "(tool message)"]


@pytest.mark.parametrize("messages", [GENAI_CONVERSATION, ANTHROPIC_CONVERSATION], ids=["genai", "anthropic"])
def test_two_tools_answering_one_turn_are_not_a_repeated_call(messages: Any) -> None:
    """What the names change for a user: results of two different tools were two calls of one unnamed tool
    with no arguments recorded, which `repeated_tool_calls` read as a repeat."""
    [rag] = extract(trace(_chat(messages))).interactions  # search_addons, search_plans, one unnamed
    [result] = evaluate(rag.record, ["repeated_tool_calls"], OfflineJudge())
    assert (result.label, result.score) == ("no_repeats", 1.0)


# One turn's two calls of one tool, answered as tool results, in each message shape that names a call by id:
# the assistant's calls (`arguments`: two queries, ids c0 and c1) and the results that answer them, the
# second call's first (matched by id, not by order).
def _openai_turn(arguments: list[dict[str, Any]]) -> list[dict[str, Any]]:
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "search_docs", "arguments": json.dumps(a)}}
        for i, a in enumerate(arguments)
    ]
    answers = [{"role": "tool", "tool_call_id": f"c{i}", "content": r} for i, r in ANSWERED]
    return [{"role": "user", "content": QUESTION}, {"role": "assistant", "tool_calls": calls}, *answers]


def _genai_turn_of(arguments: list[dict[str, Any]]) -> list[dict[str, Any]]:
    calls = [{**_genai_call(f"c{i}", "search_docs"), "arguments": a} for i, a in enumerate(arguments)]
    answers = [_genai_response(f"c{i}", r) for i, r in ANSWERED]
    return [_genai_user(QUESTION), {"role": "assistant", "parts": calls}, *answers]


def _anthropic_turn(arguments: list[dict[str, Any]]) -> list[dict[str, Any]]:
    calls = [
        {"type": "tool_use", "id": f"c{i}", "name": "search_docs", "input": a}
        for i, a in enumerate(arguments)
    ]
    answers = [{"type": "tool_result", "tool_use_id": f"c{i}", "content": r} for i, r in ANSWERED]
    return [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": calls},
        {"role": "user", "content": answers},
    ]


def _ai_sdk_turn(arguments: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The AI SDK's prompt messages (fixtures/vercel_ai/tool_generate_chat_faithful.txt: `input`, v5)."""
    calls = [
        {"type": "tool-call", "toolCallId": f"c{i}", "toolName": "search_docs", "input": a}
        for i, a in enumerate(arguments)
    ]
    answers = [
        {"type": "tool-result", "toolCallId": f"c{i}", "output": {"type": "text", "value": r}}
        for i, r in ANSWERED
    ]
    return [
        {"role": "user", "content": [{"type": "text", "text": QUESTION}]},
        {"role": "assistant", "content": calls},
        {"role": "tool", "content": answers},
    ]


ANSWERED = ((1, WEEKEND), (0, PRICE))  # (the call answered, its result)
BATTERY, WEIGHT = {"query": "battery"}, {"query": "weight"}


def _flattened(messages: list[dict[str, Any]], prefix: str, fields: str, call: tuple[str, str, str]) -> dict:
    """OpenAI-style messages as flattened attributes: each message's fields under `<prefix>.N.<fields>`, its
    calls under `tool_calls.M.` with `call`'s (id, name, arguments) keys."""
    flat: dict[str, Any] = {}
    for n, message in enumerate(messages):
        at = f"{prefix}.{n}.{fields}"
        flat.update({at + key: message[key] for key in ("role", "content", "tool_call_id") if key in message})
        for m, made in enumerate(message.get("tool_calls", ())):
            values = (made["id"], made["function"]["name"], made["function"]["arguments"])
            flat.update({f"{at}tool_calls.{m}.{key}": value for key, value in zip(call, values, strict=True)})
    return flat


def _openinference_chat(arguments: list[dict[str, Any]]) -> list[Any]:
    """OpenInference's openai instrumentation (fixtures/openinference_openai_tools/faithful.txt): the
    assistant's `message.tool_calls.M.tool_call.*`, a tool message's `message.tool_call_id`."""
    call = ("tool_call.id", "tool_call.function.name", "tool_call.function.arguments")
    messages = _flattened(_openai_turn(arguments), "llm.input_messages", "message.", call)
    output = {
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": ANSWER,
    }
    return [span("ChatCompletion", {"openinference.span.kind": "LLM", **messages, **output})]


def _openllmetry_chat(arguments: list[dict[str, Any]]) -> list[Any]:
    """OpenLLMetry's openai instrumentation before its GenAI messages: `gen_ai.prompt.N.tool_calls.M.id` /
    `.name` / `.arguments`, a tool message's `gen_ai.prompt.N.tool_call_id`."""
    workflow = span(
        "support.workflow",
        {
            "traceloop.span.kind": "workflow",
            "traceloop.entity.input": json.dumps({"args": [QUESTION], "kwargs": {}}),
            "traceloop.entity.output": json.dumps(ANSWER),
        },
    )
    messages = _flattened(_openai_turn(arguments), "gen_ai.prompt", "", ("id", "name", "arguments"))
    output = {"gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": ANSWER}
    return [workflow, span("openai.chat", {**messages, **output}, parent=workflow.span_id, start=1)]


TURNS = {
    "openai": lambda arguments: [_chat(_openai_turn(arguments))],
    "genai": lambda arguments: [_chat(_genai_turn_of(arguments))],
    "anthropic": lambda arguments: [_chat(_anthropic_turn(arguments))],
    "ai_sdk": lambda arguments: [_chat(_ai_sdk_turn(arguments))],
    "openinference": _openinference_chat,
    "openllmetry": _openllmetry_chat,
}


def _repeats(spans: list[Any]) -> tuple[list[tuple[str, str | None]], str]:
    """The run's calls (name, arguments) and `repeated_tool_calls`' label."""
    [rag] = extract(trace(*spans)).interactions
    assert rag.record.run is not None
    [result] = evaluate(rag.record, ["repeated_tool_calls"], OfflineJudge())
    return [(call.name, call.arguments) for call in rag.record.run.tool_calls], result.label


@pytest.mark.parametrize("shape", TURNS)
def test_one_tool_asked_two_things_is_not_a_repeated_call_but_asked_the_same_twice_is(shape: str) -> None:
    """A run's tool calls read from the model's messages carry the arguments of the calls their results
    answer (JSON text, as a tool span's): two searches for different things are no repeat; the same search
    twice is. Without the arguments every two results of one tool read as a repeat."""
    text = json.dumps
    assert _repeats(TURNS[shape]([BATTERY, WEIGHT])) == (
        [("search_docs", text(WEIGHT)), ("search_docs", text(BATTERY))],
        "no_repeats",
    )
    assert _repeats(TURNS[shape]([BATTERY, BATTERY]))[1] == "repeated"


def test_a_flattened_tool_message_is_named_by_the_call_with_its_id_in_every_turn() -> None:
    """OpenInference's flattened messages as its openai instrumentation records them: an earlier turn's
    result and this turn's are named (with arguments) by the assistant's `tool_calls.M.tool_call.*` whose id
    is their `message.tool_call_id`; a message's own `message.name` wins; an unknown id stays unnamed."""
    call = ("tool_call.id", "tool_call.function.name", "tool_call.function.arguments")
    earlier = [
        {"role": "user", "content": FIRST},
        {
            "role": "assistant",
            "tool_calls": [{"id": "c9", "function": {"name": "search_plans", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c9", "content": PRICE},
        {"role": "assistant", "content": EARLIER_ANSWER},
    ]
    unknown = {"role": "tool", "tool_call_id": "c7", "content": PRICE}
    flat = _flattened(
        [*earlier, *_openai_turn([BATTERY, WEIGHT]), unknown], "llm.input_messages", "message.", call
    )
    flat["llm.input_messages.7.message.name"] = "search_docs_v2"  # the message answering c0 names itself
    content = "message.content"
    found = indexed_tool_results(
        flat, "llm.input_messages", "message.role", lambda a, m: [a.get(f"{m}.{content}")]
    )
    assert [tuple(result)[:4] for result in found] == [
        (PRICE, 1, "search_plans", "{}"),
        (WEEKEND, 0, "search_docs", json.dumps(WEIGHT)),
        (PRICE, 0, "search_docs_v2", json.dumps(BATTERY)),
        (PRICE, 0, None, None),
    ]


def test_an_earlier_turns_result_keeps_its_tools_name() -> None:
    """The earlier turns' tool results carry the name their message list gave them, like this turn's."""
    contexts, llm = Contexts(), span("chat")
    add_earlier_turns(contexts, llm, [TurnResult(PRICE, 1, "search_plans"), TurnResult(WEEKEND, 2)])
    assert [(text, call.name) for _, text, call in contexts.tool_results()] == [
        (PRICE, "search_plans"),
        (WEEKEND, None),
    ]


# The recorded producers whose tool results name their calls elsewhere than beside them: OpenLIT passes the
# model's tool calls only as the output of the chat that made them (never in the next chat's input), AutoGen's
# `execute_tool` spans record a call's id but not its arguments, and Gemini's `function_response` parts answer
# `function_call` parts of the same name (ids only where ADK sets them).
RECORDED = {recording.id: recording for recording in recordings()}
OPENLIT_TOOL_TURNS = [
    r.param
    for r in RECORDED.values()
    if r.source.startswith("openlit") and b"tool_call_response" in r.payload
]
AUTOGEN_TOOL_TURNS = [
    r.param for r in RECORDED.values() if r.source == "autogen" and r.scenario != "core_only"
]


def _output_calls(spans: list[DecodedSpan]) -> dict[str, tuple[str, str]]:
    """Every GenAI `tool_call` part the recorded chats output, by id: (tool, arguments as JSON text)."""
    calls = {}
    for chat in spans:
        for message in json.loads(chat.attributes.get("gen_ai.output.messages", "[]")):
            for part in message["parts"]:
                if part["type"] == "tool_call":
                    calls[part["id"]] = (part["name"], json.dumps(part["arguments"]))
    return calls


def _run_calls(interaction: Interaction) -> list[tuple[str, str | None]]:
    assert interaction.record.run is not None
    return [(call.name, call.arguments) for call in interaction.record.run.tool_calls]


def _one_interaction(recording: Recording) -> Interaction:
    [interaction] = extracted(spans_of(recording)).interactions
    return interaction


@pytest.mark.parametrize("recording", OPENLIT_TOOL_TURNS)
def test_openlit_tool_messages_are_named_by_the_call_an_earlier_chat_output(recording: Recording) -> None:
    """OpenLIT leaves the model's tool-call message out of the answering chat's input: the result's
    `tool_call_response` id is answered by the `tool_call` the previous chat output, which names it and gives
    its arguments (it was `(tool message)` with none)."""
    spans = spans_of(recording)
    answers = [
        part["id"]
        for chat in spans
        for message in json.loads(chat.attributes.get("gen_ai.input.messages", "[]"))
        for part in message["parts"]
        if part["type"] == "tool_call_response"
    ]
    # The recording as read: the call it answers is in no chat's input, only in an earlier chat's output.
    assert answers and not any('"tool_call"' in s.attributes.get("gen_ai.input.messages", "") for s in spans)
    calls = _output_calls(spans)
    this_turn = answers[-1]  # the earlier turns' results come first in the input
    assert _run_calls(_one_interaction(recording)) == [calls[this_turn]]


@pytest.mark.parametrize("recording", AUTOGEN_TOOL_TURNS)
def test_autogen_tool_spans_take_the_arguments_of_the_call_with_their_id(recording: Recording) -> None:
    """autogen-core's `execute_tool` span records the tool and the call's id, not its arguments; the chat
    that asked for it output the call with that id and its arguments, which the run's call now carries."""
    spans = spans_of(recording)
    [tool] = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    assert not {"gen_ai.tool.call.arguments", "gen_ai.tool.call.result"} & tool.attributes.keys()
    assert _run_calls(_one_interaction(recording)) == [
        _output_calls(spans)[tool.attributes["gen_ai.tool.call.id"]]
    ]


def _repeats_label(*calls: RunToolCall) -> str:
    """`repeated_tool_calls` on a run that made `calls` (each as a recorded run read it), in order."""
    return repeats_label(RECORDED["autogen/faithful"], *calls)


@pytest.mark.parametrize(
    ("first", "other", "same"),
    [
        (
            "openlit_conversation/qa_only_faithful_turn1",
            "openlit_conversation/qa_only_faithful_turn2",  # topic support, not prices
            "openlit_conversation/qa_only_invented_turn1",  # topic prices again
        ),
        ("autogen/faithful", "autogen/second_turn_faithful", "autogen/unfaithful"),
    ],
    ids=["openlit", "autogen"],
)
def test_one_recorded_tool_asked_two_things_is_no_repeat_the_same_twice_is(
    first: str, other: str, same: str
) -> None:
    """Two recorded calls of one tool, as one run would have made them: asked different things they are no
    repeat (read without arguments they were: two unnamed results, or two `search_docs` with none); asked
    the same twice they are."""
    [call], [different], [again] = (
        _one_interaction(RECORDED[name]).record.run.tool_calls  # type: ignore[union-attr]
        for name in (first, other, same)
    )
    assert call.name == different.name == again.name and call.arguments == again.arguments
    assert _repeats_label(call, different) == "no_repeats"
    assert _repeats_label(call, again) == "repeated"


def _gemini_contents(recording: str) -> list[dict[str, Any]]:
    """The Gemini `contents` ADK sent the model in the recording's last model call (`function_call` and
    `function_response` parts, each with the id ADK gives it)."""
    spans = spans_of(RECORDED[recording])
    requests = [s for s in spans if "gcp.vertex.agent.llm_request" in s.attributes]
    return json.loads(
        max(requests, key=lambda s: s.start_time_unix_nano).attributes["gcp.vertex.agent.llm_request"]
    )["contents"]


def _without_ids(contents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Gemini's own shape: its API gives a function call no id (ADK adds one)."""
    return [
        {
            **content,
            "parts": [
                {k: {**v, "id": None} if k.startswith("function_") else v for k, v in part.items()}
                for part in content["parts"]
            ],
        }
        for content in contents
    ]


@pytest.mark.parametrize("ids", [True, False], ids=["adk_ids", "gemini_no_ids"])
def test_a_gemini_function_response_takes_the_arguments_of_the_function_call_it_answers(ids: bool) -> None:
    """Recorded Gemini contents (ADK, turn 3: one lookup a turn): each `function_response` is named and given
    the arguments of the `function_call` it answers, by id where ADK set one, else the earlier call of its
    tool not answered yet (the n-th response of a tool answers its n-th call of the turn)."""
    contents = _gemini_contents("google_adk_v1/resent_faithful_turn3")
    contents = contents if ids else _without_ids(contents)
    called = [
        (part["function_call"]["name"], part["function_call"]["args"])
        for content in contents
        for part in content["parts"]
        if "function_call" in part
    ]
    found = genai_tool_results(contents)
    assert [(result.tool, result.arguments) for result in found] == called
    assert [result.back for result in found] == [2, 1, 0]
    assert len({json.dumps(arguments) for _, arguments in called}) == 3  # three different topics


def test_gemini_function_responses_of_one_tool_answer_its_calls_in_order() -> None:
    """Two calls of one tool in one turn (Gemini gives them no id), answered in one message: the first
    response answers the first call; a response with no call of its tool left is named, without arguments;
    a new turn's responses answer that turn's calls."""

    def call(topic: str) -> dict[str, Any]:
        return {"function_call": {"name": "search_plans", "args": {"topic": topic}}}

    def response(text: str) -> dict[str, Any]:
        return {"function_response": {"name": "search_plans", "response": {"result": text}}}

    contents = [
        {"role": "user", "parts": [{"text": FIRST}]},
        {"role": "model", "parts": [call("prices"), call("weekend")]},
        {"role": "user", "parts": [response(PRICE), response(WEEKEND), response(PRICE)]},
        {"role": "model", "parts": [call("unanswered")]},
        {"role": "user", "parts": [{"text": QUESTION}]},
        {"role": "model", "parts": [call("plus")]},
        {"role": "user", "parts": [response(PRICE)]},
    ]
    assert [(r.value, r.back, r.tool, r.arguments) for r in genai_tool_results(contents)] == [
        ({"result": PRICE}, 1, "search_plans", {"topic": "prices"}),
        ({"result": WEEKEND}, 1, "search_plans", {"topic": "weekend"}),
        ({"result": PRICE}, 1, "search_plans", None),
        ({"result": PRICE}, 0, "search_plans", {"topic": "plus"}),
    ]
