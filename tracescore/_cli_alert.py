"""`tracescore alert`: the alerting service's command line, and how it reaches Kafka (the same
TRACESCORE_KAFKA__* security settings as the SDK and `tracescore consume`, flags on top)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tracescore._cli_common import (
    connect_timeout_option,
    kafka_security_options,
    or_usage_error,
    run_service,
    service_connection,
)

__all__ = ["alert"]


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
@connect_timeout_option
@kafka_security_options
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
    connection = service_connection(config, connect_timeout, security)
    sinks = [or_usage_error(make_sink, sink) for sink in config.sinks]
    stats = run_service(lambda: AlertService(config, sinks, kafka=connection), connection, idle_timeout)
    skipped = ", ".join(f"{k}={v}" for k, v in sorted(stats.skipped.items())) or "none"
    click.echo(
        f"records={stats.records} notifications={stats.notifications} "
        f"delivery_failures={stats.delivery_failures} evicted_routes={stats.evicted_routes} "
        f"skipped: {skipped}",
        err=True,
    )
