"""An application process instrumented with `tracescore.init` writes through the real broker, and what the
consumer reads back (decode, then the extraction it scores) is the RAG call: the query, the documents the
`@retriever` returned rolled up onto the `@rag` span, and the answer; scored once, not once per span."""

from __future__ import annotations

import json
import os
import sys
import textwrap

import pytest
from _zygote import run
from service_processes import checkout_env

from tracescore.consume import decode_message
from tracescore.extract import extract
from tracescore.model import Trace
from tracescore.testing.kafka_topics import read_topic

APP = """
import json, sys
import tracescore

instrumentation = tracescore.init("shop", topic=sys.argv[1])  # the broker from TRACESCORE_BOOTSTRAP_SERVERS

@tracescore.retriever
def search(query):
    return [{"content": "Returns are free within 30 days.", "id": "policy-7", "score": 0.8}]

@tracescore.generation(model="gpt-4o-mini")
async def generate(messages):
    return "Free within 30 days."

@tracescore.rag(route="/returns")
async def answer(query):
    search(query)
    return await generate([{"role": "user", "content": query}])

import asyncio
asyncio.run(answer("Can I return my order?"))
tracescore.shutdown(timeout_s=60)
print(json.dumps(instrumentation.stats()))
"""


@pytest.mark.kafka
def test_an_instrumented_app_is_read_back_as_one_rag_interaction(bootstrap: str, topic_prefix: str) -> None:
    topic = f"{topic_prefix}.spans"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACESCORE_", "OTEL_"))}
    env["TRACESCORE_BOOTSTRAP_SERVERS"] = bootstrap
    done = run([sys.executable, "-c", textwrap.dedent(APP), topic], timeout=180, env=checkout_env(env))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"delivered": 3, "dropped": {}}

    spans = [span for m in read_topic(bootstrap, topic) for span in decode_message(m.value)]
    assert sorted(s.name for s in spans) == ["answer", "generate", "search"]
    assert {s.scope_name for s in spans} == {"tracescore"}
    found = extract(Trace(spans[0].trace_id, tuple(spans)))
    assert not found.skips
    [interaction] = found.interactions
    assert interaction.span.name == "answer"
    assert interaction.route == "/returns"
    assert interaction.record.query == "Can I return my order?"
    assert interaction.record.contexts == ("Returns are free within 30 days.",)
    assert interaction.record.answer == "Free within 30 days."
