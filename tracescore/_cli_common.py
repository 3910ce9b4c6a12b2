"""What the `tracescore` commands share."""

from __future__ import annotations

import signal
import uuid
from collections.abc import Callable
from typing import Any, get_args

import click

from tracescore._kafka_config import KafkaConnection

__all__ = [
    "connect_timeout_option",
    "kafka_security_options",
    "meter_provider",
    "metrics_resource",
    "or_usage_error",
    "run_service",
    "service_connection",
]


def or_usage_error(factory: Any, *args: Any, **kwargs: Any) -> Any:
    """`factory(...)`, its ValueError shown as a usage error (one line, exit status 2)."""
    try:
        return factory(*args, **kwargs)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc


def kafka_security_options(fn: Any) -> Any:
    """The Kafka security flags of `tracescore alert` and `tracescore conversations`, named as consume's (the
    password only from the environment)."""
    from tracescore._kafka_config import KafkaSecurity, SaslMechanism, SecurityProtocol

    fields = KafkaSecurity.model_fields
    choices = {"security_protocol": get_args(SecurityProtocol), "sasl_mechanism": get_args(SaslMechanism)}
    for name in reversed(
        ["security_protocol", "sasl_mechanism", "sasl_username", "ssl_cafile", "ssl_certfile", "ssl_keyfile"]
    ):
        kind = click.Choice(choices[name]) if name in choices else click.STRING
        env = f"TRACESCORE_KAFKA__{name.upper()}"
        help_text = f"{(fields[name].description or '').rstrip('.')}. [env: {env}]"
        fn = click.option(f"--kafka-{name.replace('_', '-')}", f"kafka_{name}", type=kind, help=help_text)(fn)
    return fn


connect_timeout_option = click.option(
    "--connect-timeout",
    type=click.FloatRange(min=0, min_open=True),
    envvar="TRACESCORE_CONNECT_TIMEOUT_S",
    show_envvar=True,
    default=None,
    help="Give up with an error if no broker answers within this time "
    f"[default: {KafkaConnection.model_fields['connect_timeout_s'].default:g}].",
)


def run_service(make: Callable[[], Any], connection: KafkaConnection, idle_timeout: float | None) -> Any:
    """Build and run `tracescore alert`'s or `tracescore conversations`' service until SIGINT/SIGTERM (or
    the idle timeout) and return its stats; Kafka's errors, building it included, are one line, not a
    traceback."""
    from kafka.errors import KafkaError

    from tracescore._kafka import BrokerUnreachable

    try:
        service = make()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: service.stop())
        return service.run(idle_timeout_s=idle_timeout)
    except BrokerUnreachable as exc:
        raise click.ClickException(str(exc)) from exc
    except KafkaError as exc:  # missing rights and the like
        raise click.ClickException(f"Kafka at {connection.bootstrap_servers}: {exc}") from exc


def meter_provider(
    otlp_endpoint: str | None,
    prometheus_host: str = "",
    prometheus_port: int | None = None,
    service_name: str = "tracescore-consumer",
) -> Any:
    """The MeterProvider a service reports its metrics through: OTLP/HTTP and/or a Prometheus endpoint."""
    from opentelemetry.sdk.metrics import MeterProvider

    readers: list[Any] = []
    if prometheus_port is not None:
        try:
            from opentelemetry.exporter.prometheus import PrometheusMetricReader
            from prometheus_client import start_http_server
        except ImportError as exc:
            raise click.UsageError(
                "--prometheus-port needs opentelemetry-exporter-prometheus: "
                "pip install 'tracescore[consumer]'"
            ) from exc
        try:
            start_http_server(prometheus_port, addr=prometheus_host)
        except OSError as exc:
            raise click.UsageError(
                f"cannot serve metrics on {prometheus_host}:{prometheus_port}: {exc}"
            ) from exc
        readers.append(PrometheusMetricReader())
    if otlp_endpoint:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        readers.append(PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=otlp_endpoint)))
    return MeterProvider(metric_readers=readers, resource=metrics_resource(service_name))


def metrics_resource(service_name: str = "tracescore-consumer") -> Any:
    """Who reports the metrics. Each process has its own service.instance.id, so the cumulative series of
    the consumers in one group stay apart in an OTLP backend; OTEL_SERVICE_NAME and
    OTEL_RESOURCE_ATTRIBUTES still win."""
    from opentelemetry.sdk.resources import (
        SERVICE_INSTANCE_ID,
        SERVICE_NAME,
        OTELResourceDetector,
        Resource,
    )

    defaults = {SERVICE_NAME: service_name, SERVICE_INSTANCE_ID: str(uuid.uuid4())}
    return Resource.create({**defaults, **OTELResourceDetector().detect().attributes})


def service_connection(config: Any, connect_timeout: float | None, flags: dict[str, Any]) -> KafkaConnection:
    """How `tracescore alert` and `tracescore conversations` reach Kafka: TRACESCORE_KAFKA__* with the flags
    on top; the brokers from --bootstrap-servers > TRACESCORE_<COMMAND>_BOOTSTRAP_SERVERS > the config file >
    TRACESCORE_BOOTSTRAP_SERVERS (the name the SDK and consume read) > the default."""
    import os

    from pydantic import ValidationError

    from tracescore._config import problems
    from tracescore._kafka_config import kafka_settings_from_env

    given = {key.removeprefix("kafka_"): value for key, value in flags.items()}
    try:
        security = kafka_settings_from_env(**given).security()
    except ValidationError as exc:
        found = []
        for loc, message in problems(exc):
            path = [str(part) for part in loc]
            name = path[-1] if len(path) > 1 else ""
            where = f"--kafka-{name.replace('_', '-')}" if given.get(name) is not None else None
            where = where or "TRACESCORE_" + "__".join(p.upper() for p in path)
            found.append(f"invalid value for {where}: {message}")
        raise click.UsageError("; ".join(found)) from None
    servers = config.bootstrap_servers
    if "bootstrap_servers" not in config.model_fields_set:
        servers = os.environ.get("TRACESCORE_BOOTSTRAP_SERVERS") or servers
    timeout = {} if connect_timeout is None else {"connect_timeout_s": connect_timeout}
    return KafkaConnection(bootstrap_servers=servers, security=security, **timeout)
