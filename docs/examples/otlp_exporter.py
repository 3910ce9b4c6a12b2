"""docs/operating/kafka.md: the SDK sending over plain OTLP/HTTP to the ingest Collector. Here a local
receiver stands in for the Collector and checks that an OTLP export of the rag span arrived."""

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

import tracescore

received: list[ExportTraceServiceRequest] = []


class Collector(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        received.append(ExportTraceServiceRequest.FromString(body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


server = HTTPServer(("127.0.0.1", 0), Collector)
threading.Thread(target=server.serve_forever, daemon=True).start()
collector = f"127.0.0.1:{server.server_port}"

# --8<-- [start:otlp]
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402

# collector: the ingest Collector's host:port, e.g. "otelcol:4318"
tracescore.init(
    service_name="support-bot", exporter=OTLPSpanExporter(endpoint=f"http://{collector}/v1/traces")
)
# --8<-- [end:otlp]


@tracescore.rag
def answer(query: str, contexts: list[str]) -> str:
    return "In Delhi."


answer("Where is the head office?", ["Its head office is in Delhi."])
tracescore.shutdown()
server.shutdown()
spans = [
    span
    for request in received
    for rs in request.resource_spans
    for ss in rs.scope_spans
    for span in ss.spans
]
assert [span.name for span in spans] == ["answer"], spans
print("the Collector received the span over OTLP/HTTP")
