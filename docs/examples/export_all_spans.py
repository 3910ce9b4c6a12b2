"""docs/integrations: another instrumentation's spans sent to Kafka by tracescore.init(), no Collector.
The "instrumentation" here is the plain OpenTelemetry API writing OpenInference attributes, as
OpenInference's instrumentors do; tests/docs runs this against the real broker and checks the trace is
scored. Needs TRACESCORE_BOOTSTRAP_SERVERS."""

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

import tracescore

# --8<-- [start:provider]
provider = TracerProvider(resource=Resource.create({"service.name": "support-bot"}))
trace.set_tracer_provider(provider)  # the provider your instrumentation writes to
tracescore.init(settings=tracescore.InstrumentSettings(export_all_spans=True))  # all its spans, to Kafka
# --8<-- [end:provider]

tracer = provider.get_tracer("support_bot.rag")
question, document = "How heavy is the Aurora X2?", "The Aurora X2 weighs 1.2 kg."
with tracer.start_as_current_span("rag", attributes={"openinference.span.kind": "CHAIN"}) as rag:
    rag.set_attribute("input.value", question)
    with tracer.start_as_current_span("retrieve", attributes={"openinference.span.kind": "RETRIEVER"}) as hit:
        hit.set_attribute("retrieval.documents.0.document.content", document)
    rag.set_attribute("output.value", "The Aurora X2 weighs 1.2 kg.")
tracescore.shutdown()
