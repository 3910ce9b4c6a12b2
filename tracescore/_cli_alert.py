"""`tracescore alert`: the alerting service's command line, and how it reaches Kafka (the same
TRACESCORE_KAFKA__* security settings as the SDK and `tracescore consume`, flags on top)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any, get_args

import click

from tracescore._cli_common import or_usage_error
from tracescore._kafka_config import KafkaConnection

__all__ = ["alert"]


def _kafka_security_options(fn: Any) -> Any:
    """The Kafka security flags of `tracescore alert`, named as consume's (the password only from the
    environment)."""
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


def _alert_connection(config: Any, connect_timeout: float | None, flags: dict[str, Any]) -> KafkaConnection:
    """How `tracescore alert` reaches Kafka: TRACESCORE_KAFKA__* with the flags on top; the brokers from
    --bootstrap-servers > TRACESCORE_ALERT_BOOTSTRAP_SERVERS > the config file > TRACESCORE_BOOTSTRAP_SERVERS
    (the name the SDK and consume read) > the default."""
    import os

    from pydantic import ValidationError

    from tracescore._kafka_config import kafka_settings_from_env

    given = {key.removeprefix("kafka_"): value for key, value in flags.items()}
    try:
        security = kafka_settings_from_env(**given).security()
    except ValidationError as exc:
        problems = []
        for error in exc.errors(include_url=False):
            path = [str(part) for part in error["loc"]]
            name = path[-1] if len(path) > 1 else ""
            where = f"--kafka-{name.replace('_', '-')}" if given.get(name) is not None else None
            where = where or "TRACESCORE_" + "__".join(p.upper() for p in path)
            problems.append(f"invalid value for {where}: {error['msg'].removeprefix('Value error, ')}")
        raise click.UsageError("; ".join(problems)) from None
    servers = config.bootstrap_servers
    if "bootstrap_servers" not in config.model_fields_set:
        servers = os.environ.get("TRACESCORE_BOOTSTRAP_SERVERS") or servers
    timeout = {} if connect_timeout is None else {"connect_timeout_s": connect_timeout}
    return KafkaConnection(bootstrap_servers=servers, security=security, **timeout)


@click.command()
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="TRACESCORE_ALERT_CONFIG",
    default=None,
    help="Alert config YAML (or TOML): rules, judge health, sinks; see the docs, Alerting.",
)
@click.option("--bootstrap-servers", default=None, help="[default: from the config, else localhost:9092]")
@click.option("--evaluations-topic", default=None, help="[default: tracescore.evaluations]")
@click.option(
    "--group-id", default=None, help="Consumer group of the alert instances [default: tracescore-alert]."
)
@click.option(
    "--idle-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Stop after this many seconds without an evaluation record (demos, tests).",
)
@click.option(
    "--connect-timeout",
    type=click.FloatRange(min=0, min_open=True),
    envvar="TRACESCORE_CONNECT_TIMEOUT_S",
    show_envvar=True,
    default=None,
    help="Give up with an error if no broker answers within this time "
    f"[default: {KafkaConnection.model_fields['connect_timeout_s'].default:g}].",
)
@_kafka_security_options
def alert(
    config_path: Path | None,
    bootstrap_servers: str | None,
    evaluations_topic: str | None,
    group_id: str | None,
    idle_timeout: float | None,
    connect_timeout: float | None,
    **security: Any,
) -> None:
    """Alert on rolling scores per service and route, across every scoring consumer of the group.

    Kafka security as for `tracescore consume` and the SDK: TRACESCORE_KAFKA__* (the password only from
    TRACESCORE_KAFKA__SASL_PASSWORD), the flags below on top."""
    from tracescore._kafka import BrokerUnreachable
    from tracescore.alert import AlertConfigError, AlertService, load_alert_config, make_sink

    try:
        config = load_alert_config(
            config_path,
            bootstrap_servers=bootstrap_servers,
            evaluations_topic=evaluations_topic,
            group_id=group_id,
        )
    except AlertConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    from kafka.errors import KafkaError

    connection = _alert_connection(config, connect_timeout, security)
    sinks = [or_usage_error(make_sink, sink) for sink in config.sinks]
    try:
        service = AlertService(config, sinks, kafka=connection)
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: service.stop())
        stats = service.run(idle_timeout_s=idle_timeout)
    except BrokerUnreachable as exc:
        raise click.ClickException(str(exc)) from exc
    except KafkaError as exc:  # missing rights and the like: one line, not a traceback
        raise click.ClickException(f"Kafka at {connection.bootstrap_servers}: {exc}") from exc
    skipped = ", ".join(f"{k}={v}" for k, v in sorted(stats.skipped.items())) or "none"
    click.echo(
        f"records={stats.records} notifications={stats.notifications} "
        f"delivery_failures={stats.delivery_failures} evicted_routes={stats.evicted_routes} "
        f"skipped: {skipped}",
        err=True,
    )
