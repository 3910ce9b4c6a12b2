"""`tracescore conversations`: the conversation service's command line (Kafka reached as by `tracescore
alert`: TRACESCORE_KAFKA__* security settings, flags on top)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import click

from tracescore import __version__
from tracescore._plural import counted
from tracescore.cli._options import (
    cli_judge,
    connect_timeout_option,
    idle_timeout_option,
    kafka_security_options,
    llm_judge_options,
    otlp_metrics_option,
    phoenix_settings,
    service_config_option,
    settings_options,
)
from tracescore.cli._service import (
    named_counts,
    phoenix_summary,
    run_service,
    service_settings,
    serving_metrics,
)
from tracescore.conversations import ConversationsConfig
from tracescore.model import OFFLINE_JUDGE

__all__ = ["conversations"]

_log = logging.getLogger("tracescore.conversations")

_FLAGS = ("bootstrap_servers", "evaluations_topic", "conversations_topic", "group_id", "quiet_seconds",
          "phoenix_endpoint", "evidence_topic")  # fmt: skip


@click.command(short_help="One record per conversation once it goes quiet (a service).")
@service_config_option(
    "conversations",
    "Config YAML (or TOML): its `conversations` table, or its top level; see the docs, Conversations.",
)
@settings_options(
    ConversationsConfig, only=_FLAGS, types={"quiet_seconds": click.FloatRange(min=0, min_open=True)}
)
@otlp_metrics_option("the conversation metrics")
@idle_timeout_option(", every open conversation written,")
@connect_timeout_option
@kafka_security_options
@llm_judge_options(
    "Who judges again an LLM record's claims an earlier turn may support (the offline judge's records are "
    "always judged again by the offline judge). openai: the OpenAI-compatible judge tracescore consume "
    "uses (the same --model: a record of another model says it was not judged again)."
)
def conversations(
    config_path: Path | None,
    otlp_metrics_endpoint: str | None,
    idle_timeout: float | None,
    connect_timeout: float | None,
    judge: str,
    model: str | None,
    base_url: str | None,
    **flags: Any,
) -> None:
    """Write one record per conversation (its turns' scores) once it goes quiet, across every scoring
    consumer of the group.

    Kafka security as for `tracescore consume` and the SDK: TRACESCORE_KAFKA__* (the password only from
    TRACESCORE_KAFKA__SASL_PASSWORD), the flags below on top."""
    from tracescore.conversations import (
        SKIP_REASONS,
        ConversationService,
        load_conversations_config,
    )
    from tracescore.emit import ConversationMetrics, PhoenixAnnotations

    config, connection = service_settings(load_conversations_config, config_path, connect_timeout, flags)
    if idle_timeout is not None and config.quiet_seconds > idle_timeout:
        # Tried with --idle-timeout alone, the service sat silent for quiet_seconds (15 minutes) past the last
        # turn, as it must write every open conversation first: said before it waits.
        _log.info(
            "--idle-timeout %gs stops once every open conversation is written, each %gs after its last turn "
            "(quiet_seconds); to try it, give --quiet-seconds 5",
            idle_timeout,
            config.quiet_seconds,
        )
    llm_judge = None if judge == OFFLINE_JUDGE else cli_judge(judge, model, base_url)
    endpoint = config.phoenix_endpoint
    phoenix_config = phoenix_settings(endpoint) if endpoint else None
    with serving_metrics(otlp_metrics_endpoint, service_name="tracescore-conversations") as provider:
        phoenix_meter = provider.get_meter("tracescore.phoenix", __version__)
        phoenix = PhoenixAnnotations(phoenix_config, meter=phoenix_meter) if phoenix_config else None
        metrics = ConversationMetrics(
            provider.get_meter("tracescore.conversations", __version__), SKIP_REASONS
        )
        stats = run_service(
            lambda: ConversationService(
                config, kafka=connection, phoenix=phoenix, metrics=metrics, llm_judge=llm_judge
            ),
            lambda service: service.run(idle_timeout_s=idle_timeout),
            connection.bootstrap_servers,
        )
    click.echo(
        f"turn_records={stats.turn_records} records={stats.records} (revisions {stats.revisions}) "
        f"evicted={stats.evicted} forgotten={stats.forgotten} skipped: {named_counts(stats.skipped)} "
        f"state: {named_counts(stats.state)}",
        err=True,
    )
    grounding = ", ".join(f"{k}={v}" for k, v in sorted(stats.grounding.counts.items()))
    if stats.grounding.evidence or grounding:
        click.echo(
            f"  grounding across turns: documents of {counted(stats.grounding.evidence, 'turn')} read, "
            f"{counted(stats.turns_revised, 'turn record')} revised; {grounding or 'nothing judged again'}",
            err=True,
        )
    if phoenix is not None:
        click.echo(phoenix_summary(phoenix), err=True)
