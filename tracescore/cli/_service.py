"""Running a service (`tracescore consume`, `alert`, `conversations`; `tail --follow` stops the same way): one
way to build it, stop it on SIGINT/SIGTERM and report Kafka's errors, and what reports its metrics.

The signal handlers are the process's, so they are installed for the run only and the ones found are put
back when it returns, an exception included: a program that runs a command in process (a test through
click's CliRunner, an application embedding a service) keeps its own Ctrl-C afterwards.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import click

from tracescore._extras import install_line
from tracescore._kafka_config import KafkaConnection
from tracescore.cli._options import nest

if TYPE_CHECKING:
    from tracescore.emit import PhoenixAnnotations

__all__ = [
    "STOP_SIGNALS",
    "metrics_resource",
    "named_counts",
    "phoenix_summary",
    "run_service",
    "service_connection",
    "service_settings",
    "serving_metrics",
    "stop_on_signals",
]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Service(Protocol):
    def stop(self) -> None:
        """Ask run() to finish and return; called from a signal handler."""


S = TypeVar("S", bound=Service)
T = TypeVar("T")
C = TypeVar("C")


@contextlib.contextmanager
def stop_on_signals(stop: Callable[[], None]) -> Iterator[None]:
    """SIGINT and SIGTERM call `stop` while the block runs; afterwards (an exception included) the handlers
    found before are back. Python lets only the main thread install handlers: elsewhere (a command run
    from a worker thread) nothing is installed and the process's signals stay as they were."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    found = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    try:
        for signum in STOP_SIGNALS:
            signal.signal(signum, lambda *_: stop())
        yield
    finally:
        for signum, handler in found.items():
            # None: a handler installed outside Python, which cannot be put back; the default is closest.
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)


def run_service(
    build: Callable[[], S],
    run: Callable[[S], T],
    bootstrap_servers: str,
    one_line: tuple[type[Exception], ...] = (),
) -> T:
    """Build a service and run it until it returns or SIGINT/SIGTERM asks it to stop; return what run
    returned. Kafka's errors, building included, and the `one_line` errors are one line, not a
    traceback."""
    from kafka.errors import KafkaError

    from tracescore._kafka import BrokerUnreachable

    try:
        service = build()
        with stop_on_signals(service.stop):
            return run(service)
    except (BrokerUnreachable, *one_line) as exc:
        raise click.ClickException(str(exc)) from exc
    except KafkaError as exc:  # missing rights and the like
        raise click.ClickException(f"Kafka at {bootstrap_servers}: {exc}") from exc


def named_counts(counts: Mapping[str, int]) -> str:
    """A closing summary's counts (`skipped`, `state`) as `name=n, ...`, the zeros left out; "none"."""
    return ", ".join(f"{name}={n}" for name, n in sorted(counts.items()) if n) or "none"


def phoenix_summary(phoenix: PhoenixAnnotations) -> str:
    """A closing summary's line of the Phoenix sink's counts, the dropped by reason:
    `  phoenix: posted=12; dropped: unsent_at_stop=3` (`dropped: none`)."""
    return f"  phoenix: posted={phoenix.sent}; dropped: {named_counts(phoenix.dropped)}"


def service_settings(
    load: Callable[..., C], config_path: Path | None, connect_timeout: float | None, flags: Mapping[str, Any]
) -> tuple[C, KafkaConnection]:
    """The config of `tracescore alert` or `tracescore conversations` (`load`: flags > its environment > its
    file > defaults) and how it reaches Kafka; a mistake in either is one usage line."""
    from tracescore._config import ConfigFileError
    from tracescore.cli._environment import warn_misspelt_variables

    given = nest(flags)
    given.pop("kafka", None)  # the security flags: the connection's
    try:
        config = load(config_path, **given)
    except ConfigFileError as exc:
        raise click.UsageError(str(exc)) from exc
    warn_misspelt_variables(config)
    return config, service_connection(config, connect_timeout, flags)


def service_connection(
    config: Any, connect_timeout: float | None, flags: Mapping[str, Any]
) -> KafkaConnection:
    """How `tracescore alert` and `tracescore conversations` reach Kafka: TRACESCORE_KAFKA__* with the
    `kafka__*` flags on top; the brokers from --bootstrap-servers > TRACESCORE_<COMMAND>_BOOTSTRAP_SERVERS >
    the config file > TRACESCORE_BOOTSTRAP_SERVERS (the name the SDK and consume read) > the default."""
    from pydantic import ValidationError

    from tracescore._config import problems
    from tracescore._kafka_config import SettingOrigin, kafka_settings_from_env

    given = {key.removeprefix("kafka__"): value for key, value in flags.items() if key.startswith("kafka__")}
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
    servers, origin = config.bootstrap_servers, config.origin("bootstrap_servers")
    if "bootstrap_servers" not in config.model_fields_set and os.environ.get("TRACESCORE_BOOTSTRAP_SERVERS"):
        servers = os.environ["TRACESCORE_BOOTSTRAP_SERVERS"]
        origin = SettingOrigin(kind="variable", name="TRACESCORE_BOOTSTRAP_SERVERS")
    timeout = {} if connect_timeout is None else {"connect_timeout_s": connect_timeout}
    return KafkaConnection(bootstrap_servers=servers, security=security, bootstrap_origin=origin, **timeout)


@contextlib.contextmanager
def serving_metrics(
    otlp_endpoint: str | None,
    prometheus_host: str = "",
    prometheus_port: int | None = None,
    service_name: str = "tracescore-consumer",
    max_series: int | None = None,
) -> Iterator[Any]:
    """The MeterProvider a service reports its metrics through: OTLP/HTTP and/or a Prometheus endpoint. On
    exit it exports what was recorded since the last interval and the Prometheus endpoint stops listening,
    so a service run in process leaves the port as it found it. `max_series`: the series each of its
    instruments keeps (None: the SDK's own limit)."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.view import View

    readers: list[Any] = []
    server = None
    if prometheus_port is not None:
        try:
            from opentelemetry.exporter.prometheus import PrometheusMetricReader
            from prometheus_client import start_http_server
        except ImportError as exc:
            raise click.UsageError(
                "--prometheus-port needs opentelemetry-exporter-prometheus: " + install_line("consumer")
            ) from exc
        try:
            server, _ = start_http_server(prometheus_port, addr=prometheus_host)
        except OSError as exc:
            raise click.UsageError(
                f"cannot serve metrics on {prometheus_host}:{prometheus_port}: {exc}"
            ) from exc
        readers.append(PrometheusMetricReader())
    if otlp_endpoint:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        readers.append(PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=otlp_endpoint)))
    # An instrument no view names keeps the SDK's defaults, so one view over every instrument changes only
    # the limit (each instrument's own bucket advice still applies).
    limit = (
        [] if max_series is None else [View(instrument_name="*", aggregation_cardinality_limit=max_series)]
    )
    provider = MeterProvider(metric_readers=readers, resource=metrics_resource(service_name), views=limit)
    try:
        yield provider
    finally:
        provider.shutdown()
        if server is not None:
            server.shutdown()
            server.server_close()


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
