"""The quickstart's application (docs/quickstart.md includes it; tests/docs/test_quickstart.py runs it).

A RAG function with one decorator: its question, documents and answer go to Kafka as an OpenTelemetry span,
where `tracescore consume` scores them. The "LLM" is a stand-in that answers the second question with a
weight the documents do not give, so one of the two answers is caught.
"""

# --8<-- [start:app]
# --8<-- [start:decorated]
import tracescore

tracescore.init(service_name="quickstart")  # Kafka at $TRACESCORE_BOOTSTRAP_SERVERS, topic otlp_spans


@tracescore.rag(route="/ask")  # the span tracescore scores: question, documents, answer
def answer(question: str, contexts: list[str]) -> str:
    return ANSWERS[question]  # your LLM call, given the question and the documents


# --8<-- [end:decorated]


DOCUMENTS = ["The Aurora X2 battery lasts 14 hours on a single charge.", "The Aurora X2 weighs 1.2 kg."]
ANSWERS = {  # stands in for your LLM: the second answer is not what the documents say
    "How long does the battery last?": "The battery lasts 14 hours on a single charge.",
    "How much does the Aurora X2 weigh?": "The Aurora X2 weighs 3 kg.",
}
for question in ANSWERS:
    print(answer(question, DOCUMENTS))
tracescore.shutdown()  # delivers what is left, within 5 s
# --8<-- [end:app]
