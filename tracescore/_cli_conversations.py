"""`tracescore conversations`: the conversation service's command line (Kafka reached as by `tracescore
alert`: TRACESCORE_KAFKA__* security settings, flags on top)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tracescore import __version__
from tracescore._cli_common import (
    connect_timeout_option,
    kafka_security_options,
    meter_provider,
    run_service,
    service_connection,
)
from tracescore.conversations._config import ConversationsConfig

__all__ = ["conversations"]


def _default(name: str) -> str:
    """The setting's default, from the settings class (written there only)."""
    return f"[default: {ConversationsConfig.model_fields[name].default}]"


@click.command()
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="TRACESCORE_CONVERSATIONS_CONFIG",
    default=None,
    help="Config YAML (or TOML): its `conversations` table, or its top level; see the docs, Conversations.",
)
@click.option("--bootstrap-servers", default=None, help="[default: from the config, else localhost:9092]")
@click.option("--evaluations-topic", default=None, help=_default("evaluations_topic"))
@click.option("--conversations-topic", default=None, help=_default("conversations_topic"))
@click.option(
    "--group-id",
    default=None,
    help=f"Consumer group of the conversations instances {_default('group_id')}.",
)
@click.option(
    "--quiet-seconds",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help=f"Write a conversation's record once no turn arrived for this long {_default('quiet_seconds')}.",
)
@click.option(
    "--phoenix-endpoint",
    default=None,
    help="Also post each record to this Arize Phoenix as a session annotation, e.g. http://127.0.0.1:6006 "
    "(env TRACESCORE_CONVERSATIONS_PHOENIX_ENDPOINT; API key from TRACESCORE_PHOENIX_API_KEY or "
    "PHOENIX_API_KEY).",
)
@click.option(
    "--otlp-metrics-endpoint",
    envvar="TRACESCORE_OTLP_METRICS_ENDPOINT",
    show_envvar=True,
    default=None,
    help="Send the conversation metrics over OTLP/HTTP, e.g. http://127.0.0.1:4318/v1/metrics.",
)
@click.option(
    "--idle-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Stop after this many seconds without a record once every open conversation is written (demos, "
    "tests).",
)
@connect_timeout_option
@kafka_security_options
def conversations(
    config_path: Path | None,
    bootstrap_servers: str | None,
    evaluations_topic: str | None,
    conversations_topic: str | None,
    group_id: str | None,
    quiet_seconds: float | None,
    phoenix_endpoint: str | None,
    otlp_metrics_endpoint: str | None,
    idle_timeout: float | None,
    connect_timeout: float | None,
    **security: Any,
) -> None:
    """Write one record per conversation (its turns' scores) once it goes quiet, across every scoring
    consumer of the group.

    Kafka security as for `tracescore consume` and the SDK: TRACESCORE_KAFKA__* (the password only from
    TRACESCORE_KAFKA__SASL_PASSWORD), the flags below on top."""
    from tracescore.conversations import (
        ConversationsConfigError,
        ConversationService,
        load_conversations_config,
    )
    from tracescore.emit import ConversationMetrics, PhoenixAnnotations, PhoenixSettings

    try:
        config = load_conversations_config(
            config_path,
            bootstrap_servers=bootstrap_servers,
            evaluations_topic=evaluations_topic,
            conversations_topic=conversations_topic,
            group_id=group_id,
            quiet_seconds=quiet_seconds,
            phoenix_endpoint=phoenix_endpoint,
        )
    except ConversationsConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    connection = service_connection(config, connect_timeout, security)
    endpoint = config.phoenix_endpoint
    phoenix = PhoenixAnnotations(PhoenixSettings(endpoint=endpoint)) if endpoint else None
    provider = meter_provider(otlp_metrics_endpoint, service_name="tracescore-conversations")
    metrics = ConversationMetrics(provider.get_meter("tracescore.conversations", __version__))
    try:
        stats = run_service(
            lambda: ConversationService(config, kafka=connection, phoenix=phoenix, metrics=metrics),
            connection,
            idle_timeout,
        )
    finally:
        provider.shutdown()  # exports what was recorded since the last interval
    skipped = ", ".join(f"{k}={v}" for k, v in sorted(stats.skipped.items())) or "none"
    click.echo(
        f"turn_records={stats.turn_records} records={stats.records} (revisions {stats.revisions}) "
        f"evicted={stats.evicted} forgotten={stats.forgotten} skipped: {skipped}",
        err=True,
    )
