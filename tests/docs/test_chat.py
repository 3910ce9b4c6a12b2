"""docs/instrumenting.md, "A chat": a chat decorated with the SDK whose turns name no conversation is joined
by `tracescore consume`'s `infer_conversations`: the follow-up's prompt resends turn 1's question and answer
(its `@tracescore.generation` span records them), so the follow-up is a turn of the conversation turn 1
opened."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from tracescore.consume import decode_message
from tracescore.extract import find
from tracescore.model import DecodedSpan, Interaction, Trace

# The SDK sets the global TracerProvider once per process: the app runs in one of its own, and prints each
# turn's trace as the OTLP message the SDK's Kafka exporter would send, in hex.
APP = textwrap.dedent(
    """
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import tracescore

    exporter = InMemorySpanExporter()
    tracescore.init(service_name="chat-assistant", exporter=exporter)
    REPLIES = {
        "What does the Basic plan cost?": "The Basic plan costs 9 euros a month.",
        "And the weekend add-on?": "The weekend add-on costs 9 euros a month.",
    }


    @tracescore.generation(model="stand-in")
    def generate(messages):
        return REPLIES[messages[-1]["content"]]


    @tracescore.rag(route="/chat")
    def answer(question, history):
        tracescore.record_contexts(["The weekend add-on costs the same as the Basic plan."])
        return generate([*history, {"role": "user", "content": question}])


    history = []
    for question in REPLIES:
        reply = answer(question, history)
        history += [{"role": "user", "content": question}, {"role": "assistant", "content": reply}]
    tracescore.shutdown()
    traces = {}
    for span in exporter.get_finished_spans():
        traces.setdefault(span.context.trace_id, []).append(span)
    for spans in traces.values():
        print(encode_spans(spans).SerializeToString().hex())
    """
)


def chat_turns() -> list[tuple[DecodedSpan, ...]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACESCORE_", "OTEL_"))}
    done = subprocess.run(
        [sys.executable, "-c", APP], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return [tuple(decode_message(bytes.fromhex(line))) for line in done.stdout.split()]


def read(spans: tuple[DecodedSpan, ...]) -> Interaction:
    [found] = find(Trace(spans[0].trace_id, spans)).found
    found.infer_conversation()  # as tracescore consume does with infer_conversations on
    return found.interaction()


def test_a_follow_up_the_sdk_recorded_joins_the_conversation_its_resent_history_shows() -> None:
    first_turn, second_turn = chat_turns()
    [prompt] = [span for span in second_turn if span.name == "generate"]
    resent = [prompt.attributes[f"llm.input_messages.{i}.message.content"] for i in range(3)]
    assert resent == [
        "What does the Basic plan cost?",
        "The Basic plan costs 9 euros a month.",
        "And the weekend add-on?",
    ], "the follow-up's prompt resends turn 1's question and answer"
    first, follow_up = read(first_turn), read(second_turn)
    assert follow_up.record.query == "And the weekend add-on?"
    assert first.opens_conversation is not None and first.session_id is None, "a first turn names none"
    assert (follow_up.session_id, follow_up.conversation_source) == (first.opens_conversation, "history")
    assert follow_up.history == (first.turn_digest,), "turn 1's pair, the one the prompt resent"
