"""docs/instrumenting.md, "Shapes": a retriever, a generation and the rag span around them. Runs without
Kafka: the spans go to an in-memory exporter, and the rag span's attributes are printed (shapes.out)."""

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore

exporter = InMemorySpanExporter()
tracescore.init(service_name="support-bot", exporter=exporter)  # your app: the broker, not an exporter

CORPUS = {"office": "The Oberoi Group has its head office in Delhi.", "founded": "It was founded in 1934."}


def render(documents: list[dict]) -> str:
    return "\n".join(document["content"] for document in documents)


# --8<-- [start:shapes]
@tracescore.retriever  # a RETRIEVER span; its documents roll up onto the enclosing rag span
def search(query: str) -> list[dict]:
    return [{"id": key, "content": text, "score": 0.9} for key, text in CORPUS.items()]


@tracescore.generation(model="gpt-4o")  # an LLM span: prompt messages (`messages`/`prompt`), model, output
def generate(messages: list[dict]) -> str:
    return "The head office is in Delhi."  # your model call


@tracescore.rag(route="/support")  # the span the consumer scores: query, all documents, answer
def answer(query: str) -> str:
    documents = search(query)
    return generate([{"role": "system", "content": render(documents)}, {"role": "user", "content": query}])


# --8<-- [end:shapes]


answer("Where is the head office?")
tracescore.shutdown()
[rag] = [span for span in exporter.get_finished_spans() if span.name == "answer"]
for key in sorted(rag.attributes):
    if key.startswith(("input.", "output.", "retrieval.", "openinference.", "tracescore.")):
        print(f"{key} = {rag.attributes[key]!r}")
