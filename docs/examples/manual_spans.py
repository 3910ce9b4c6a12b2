"""docs/instrumenting.md: code that cannot be decorated, documents added from anywhere inside a rag span,
and attributes for every tracescore span started in a block. Runs without Kafka (an in-memory exporter)."""

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore

exporter = InMemorySpanExporter()
tracescore.init(service_name="support-bot", exporter=exporter)
question, documents, answer = "Where is the head office?", ["Its head office is in Delhi."], "In Delhi."

# --8<-- [start:manual]
with tracescore.rag_span("answer", route="/support") as span:
    span.set_query(question)
    with tracescore.retriever_span() as retrieval:
        retrieval.set_query(question)
        retrieval.add_documents(documents)
    with tracescore.generation_span(model="gpt-4o") as generation:
        generation.set_messages([{"role": "user", "content": question}])
        generation.set_output(answer)
    span.set_answer(answer)
# --8<-- [end:manual]


# --8<-- [start:record_contexts]
def rerank_and_keep(hits: list[str]) -> list[str]:
    kept = hits[:3]
    tracescore.record_contexts(kept)  # onto the enclosing rag span, from anywhere inside it
    return kept


@tracescore.rag
def ask(question: str) -> str:
    rerank_and_keep(["Its head office is in Delhi.", "It was founded in 1934."])
    return "In Delhi."


# --8<-- [end:record_contexts]


# --8<-- [start:attributes]
with tracescore.attributes(session_id="conv-42", user_id="u-7", metadata={"plan": "pro"}, tags=["beta"]):
    ask("Where is the head office?")  # every tracescore span started in here carries them
# --8<-- [end:attributes]

tracescore.shutdown()
spans = {span.name: span for span in exporter.get_finished_spans()}
assert spans["answer"].attributes["output.value"] == "In Delhi."
assert spans["retrieve"].attributes["retrieval.documents.0.document.content"] == documents[0]
assert spans["ask"].attributes["retrieval.documents.1.document.content"] == "It was founded in 1934."
assert spans["ask"].attributes["session.id"] == "conv-42"
print("ok")
