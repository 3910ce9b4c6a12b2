"""What the repo's ingest Collector config (collectors/otlp-to-kafka.yaml) reads from its environment, for
the tests and the fixture recorder that run it (one place: the recorder runs outside the tests' path)."""

from __future__ import annotations

from tracescore.testing._process import free_port

__all__ = ["ingest_env"]


def ingest_env(bootstrap: str, topic: str) -> tuple[dict[str, str], int]:
    """The ingest config's environment writing to `topic` at `bootstrap`, on free loopback ports: (it, the
    OTLP/HTTP port apps send to)."""
    http_port = free_port()
    env = {
        "KAFKA_BROKERS": bootstrap,
        "KAFKA_SPANS_TOPIC": topic,
        "OTLP_GRPC_ENDPOINT": f"127.0.0.1:{free_port()}",
        "OTLP_HTTP_ENDPOINT": f"127.0.0.1:{http_port}",
        "OTELCOL_METRICS_PORT": str(free_port()),
    }
    return env, http_port
