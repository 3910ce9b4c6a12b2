"""The quickstart's app with its spans also sent to Phoenix (docs/quickstart.md, step 5; run by
tests/docs/test_quickstart.py). tracescore.init() adds its Kafka export to the provider set here."""

# --8<-- [start:phoenix]
import os

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

phoenix = os.environ.get("PHOENIX_ENDPOINT", "http://127.0.0.1:6006")
provider = TracerProvider(resource=Resource.create({"service.name": "quickstart"}))
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(f"{phoenix}/v1/traces")))
trace.set_tracer_provider(provider)  # the app's tracescore.init() adds its Kafka export to this provider

import app  # noqa: E402, F401  (the quickstart's app.py, unchanged: it runs on import)

provider.shutdown()  # sends the rest to Phoenix
# --8<-- [end:phoenix]
