"""`tracescore alert`: the alerting service's command line, and how it reaches Kafka (the same
TRACESCORE_KAFKA__* security settings as the SDK and `tracescore consume`, flags on top)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tracescore.alert import AlertConfig
from tracescore.cli._options import (
    connect_timeout_option,
    idle_timeout_option,
    kafka_security_options,
    or_usage_error,
    service_config_option,
    settings_options,
)
from tracescore.cli._service import named_counts, run_service, service_settings

__all__ = ["alert"]


def _without_config() -> str:
    """What runs without a config file, as the service's start line says it: the default rules and sinks
    (built without the environment, which --help does not read)."""
    from tracescore.alert import make_sink, start_line

    defaults = AlertConfig.model_construct()
    return start_line(defaults, [make_sink(sink) for sink in defaults.sinks])


@click.command(short_help="Alert on rolling scores per service and route (a service).")
@service_config_option(
    "alert",
    "Alert config YAML (or TOML): rules, judge health, sinks; see the docs, Alerting. Without one: "
    f"{_without_config()}.",
)
@settings_options(AlertConfig, only=("bootstrap_servers", "evaluations_topic", "group_id"))
@idle_timeout_option("")
@connect_timeout_option
@kafka_security_options
def alert(
    config_path: Path | None, idle_timeout: float | None, connect_timeout: float | None, **flags: Any
) -> None:
    """Alert on rolling scores per service and route, across every scoring consumer of the group.

    Kafka security as for `tracescore consume` and the SDK: TRACESCORE_KAFKA__* (the password only from
    TRACESCORE_KAFKA__SASL_PASSWORD), the flags below on top."""
    from tracescore.alert import AlertService, describe_routes, load_alert_config, make_sink

    config, connection = service_settings(load_alert_config, config_path, connect_timeout, flags)
    sinks = [or_usage_error(make_sink, sink) for sink in config.sinks]
    stats = run_service(
        lambda: AlertService(config, sinks, kafka=connection),
        lambda service: service.run(idle_timeout_s=idle_timeout),
        connection.bootstrap_servers,
    )
    click.echo(
        f"records={stats.records} notifications={stats.notifications} "
        f"delivery_failures={stats.delivery_failures} evicted_routes={stats.evicted_routes} "
        f"cannot_arm_routes={stats.cannot_arm_routes} "
        f"skipped: {named_counts(stats.skipped)} "
        f"state: {named_counts(stats.state)}",
        err=True,
    )
    for line in describe_routes(stats.routes, stats.more_routes):
        click.echo(line, err=True)
