"""One trace across services, made by the real SDK in separate processes (each its own `service.name`), each
continuing the trace from the `traceparent` it was called with, as an HTTP service does: a call recorded by
the app and again by the service it called (a gateway) is scored once, on the app's reading, the called
service's end user filling the app's empty one; two services that each make the same call, neither calling
the other (a fan-out), are two interactions."""

from __future__ import annotations

import base64
import json
import os
import sys
import textwrap

from _zygote import run as forked_run
from opentelemetry import propagate
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from service_processes import checkout_env

from tracescore.consume import decode_message
from tracescore.extract import extract
from tracescore.model import DecodedSpan, Interaction, Trace

QUESTION = "How long does the Aurora X2 battery last?"
DOCUMENTS = ["The Aurora X2 battery lasts 14 hours on a single charge."]
ANSWER = "The Aurora X2 battery lasts 14 hours."

# A service: answers QUESTION under the trace context it was called with, as `user` when one is named, after
# calling the services in `calls` from inside its answering span (their spans below it, in its trace).
# Prints its spans and theirs: base64 OTLP requests, one per service.
SERVICE = """
import base64, json, subprocess, sys
from contextlib import nullcontext
from opentelemetry import context, propagate
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
import tracescore

call = json.loads(sys.argv[1])
exporter = InMemorySpanExporter()
tracescore.init(call["service"], exporter=exporter)
called = []

@tracescore.rag
def answer(query, documents):
    for service in call["calls"]:
        called.extend(run(service))
    return call["answer"]

def run(service):
    headers = {}
    propagate.inject(headers)
    child = {**service, "traceparent": headers["traceparent"]}
    done = subprocess.run([sys.executable, "-c", sys.argv[2], json.dumps(child), sys.argv[2]],
                          capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout)

context.attach(propagate.extract({"traceparent": call["traceparent"]}))
with tracescore.attributes(user_id=call["user"]) if call["user"] else nullcontext():
    answer(call["question"], call["documents"])
tracescore.shutdown(timeout_s=30)
own = encode_spans(exporter.get_finished_spans()).SerializeToString()
print(json.dumps([base64.b64encode(own).decode(), *called]))
"""


def service(
    name: str, *, user: str | None = None, calls: tuple[dict[str, object], ...] = ()
) -> dict[str, object]:
    """One service's call: its name, the end user it names, the services it calls."""
    return {
        "service": name,
        "user": user,
        "calls": list(calls),
        "question": QUESTION,
        "documents": DOCUMENTS,
        "answer": ANSWER,
    }


def run_services(*called: dict[str, object]) -> tuple[Trace, list[Interaction]]:
    """The front service's span (`aurora-front`, in this process) calling each of `called` (in order, each a
    process of its own): the trace all of them recorded, and what is read of it."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "aurora-front"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("TRACESCORE_", "OTEL_"))}
    payloads: list[bytes] = []
    with provider.get_tracer("aurora_front").start_as_current_span("fan_out"):
        headers: dict[str, str] = {}
        propagate.inject(headers)
        code = textwrap.dedent(SERVICE)
        for call in called:
            argument = json.dumps({**call, "traceparent": headers["traceparent"]})
            command = [sys.executable, "-c", code, argument, code]
            done = forked_run(command, timeout=180, env=checkout_env(environment))
            assert done.returncode == 0, done.stderr
            payloads.extend(base64.b64decode(p) for p in json.loads(done.stdout))
    payloads.append(encode_spans(exporter.get_finished_spans()).SerializeToString())
    spans: list[DecodedSpan] = [span for payload in payloads for span in decode_message(payload)]
    [trace_id] = {span.trace_id for span in spans}
    trace = Trace(trace_id, tuple(spans))
    return trace, extract(trace).interactions


def test_two_services_that_each_make_the_same_call_are_two_interactions() -> None:
    # The front calls both; neither calls the other: the same question and answer twice, two interactions.
    trace, interactions = run_services(service("aurora-docs"), service("aurora-faq"))
    assert {span.service_name for span in trace.spans} == {"aurora-front", "aurora-docs", "aurora-faq"}
    assert sorted(i.span.service_name for i in interactions) == ["aurora-docs", "aurora-faq"]
    assert {(i.record.query, i.record.answer) for i in interactions} == {(QUESTION, ANSWER)}


def test_a_call_recorded_again_by_the_service_it_called_is_scored_once_with_the_end_user() -> None:
    # Each app calls a gateway from inside its answering span, which records the same call for the user it
    # was made for: scored once, on the app's reading; its user is the app's, else the gateway's.
    gateway = service("aurora-gateway", user="customer-42")
    trace, interactions = run_services(
        service("aurora-docs", calls=(gateway,)), service("aurora-faq", user="agent-7", calls=(gateway,))
    )
    assert sum(span.service_name == "aurora-gateway" for span in trace.spans) == 2
    users = {i.span.service_name: i.user_id for i in interactions}
    assert users == {"aurora-docs": "customer-42", "aurora-faq": "agent-7"}
