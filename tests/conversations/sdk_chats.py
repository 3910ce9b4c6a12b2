"""Chats of an app decorated with the tracescore SDK that names no conversation, recorded as the OTLP
messages its Kafka exporter would send: the app resends its last turns (or all of them), after a fixed
few-shot prompt's example pairs where it has one; `tracescore consume` infers (or not) the conversations."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

# (question, documents, answer) of each turn of a chat.
Turns = tuple[tuple[str, str, str], ...]

# The SDK sets the global TracerProvider once per process: the app runs in one of its own and prints each
# turn's trace as the OTLP message the SDK's Kafka exporter would send, in hex, one line per turn:
# "<chat> <turn> <hex>".
APP = textwrap.dedent(
    """
    import json, sys
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import tracescore

    exporter = InMemorySpanExporter()
    service, examples, chats = json.loads(sys.argv[1])
    tracescore.init(service_name=service, exporter=exporter)
    # A few-shot prompt: the same example pairs before every request's messages.
    shots = [
        message
        for question, reply in examples
        for message in ({"role": "user", "content": question}, {"role": "assistant", "content": reply})
    ]


    @tracescore.generation(model="stand-in")
    def generate(messages, reply):
        return reply


    @tracescore.rag(route="/chat")
    def answer(question, documents, reply, history):
        tracescore.record_contexts([documents])
        return generate([*shots, *history, {"role": "user", "content": question}], reply)


    turns_asked = []
    for name, (window, turns) in chats.items():
        history = []
        for n, (question, documents, reply) in enumerate(turns, 1):
            last = window[n - 1] if isinstance(window, list) else window  # turns resent, per turn or all
            resent = history[-2 * last:] if last else history  # the app's window: its last turns
            answer(question, documents, reply, resent if window is not None else [])
            history += [{"role": "user", "content": question}, {"role": "assistant", "content": reply}]
            turns_asked.append((name, n))
    tracescore.shutdown()
    traces = {}
    for span in exporter.get_finished_spans():
        traces.setdefault(span.context.trace_id, []).append(span)
    in_order = sorted(traces.values(), key=lambda spans: min(s.start_time for s in spans))
    for (name, n), spans in zip(turns_asked, in_order, strict=True):
        print(name, n, encode_spans(spans).SerializeToString().hex())
    """
)


def chat_traces(
    chats: dict[str, tuple[int | list[int] | None, Turns]],
    service: str = "window-chat",
    examples: tuple[tuple[str, str], ...] = (),
) -> list[tuple[str, int, bytes]]:
    """(chat, turn, OTLP message) of each turn, as the SDK app of `service` recorded them: per chat, the
    turns its app resends (its last N, 0 for all, or N per turn; None: none, a one-shot app) and its turns;
    `examples`, the (question, answer) pairs of a few-shot prompt sent before every request's messages."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACESCORE_", "OTEL_"))}
    argument = json.dumps([service, examples, chats])
    done = subprocess.run(
        [sys.executable, "-c", APP, argument], env=env, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = []
    for line in done.stdout.splitlines():
        chat, turn, payload = line.split()
        out.append((chat, int(turn), bytes.fromhex(payload)))
    return out
