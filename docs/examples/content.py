"""docs/instrumenting.md, "Content controls": limits, redaction by name and a hook of your own. The span
shows what reached it (content.out)."""

import re

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore

exporter = InMemorySpanExporter()

# --8<-- [start:content]
tracescore.init(
    service_name="support-bot",
    settings=tracescore.InstrumentSettings(
        content=tracescore.ContentSettings(
            max_attribute_chars=200, max_documents=10, redact=("email", "card")
        )
    ),
    redact=lambda text: re.sub(r"ACME-\d+", "ACME-<id>", text),  # after the built-in redactors
    exporter=exporter,  # left out in an app: the spans go to Kafka
)
# --8<-- [end:content]


@tracescore.rag
def answer(query: str, contexts: list[str]) -> str:
    return "Mail jane@example.com about ticket ACME-1234; card 4111 1111 1111 1111 is on file."


answer("Who handles my ticket?", ["Tickets go to support@example.com."])
tracescore.shutdown()
[span] = exporter.get_finished_spans()
print(span.attributes["output.value"])
print(span.attributes["retrieval.documents.0.document.content"])
