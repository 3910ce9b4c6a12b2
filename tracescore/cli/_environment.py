"""A `TRACESCORE_*` variable no setting reads (`TRACESCORE_BROKER`) is said once at start, with the name
meant: pydantic settings ignore what they do not know, so a misspelt one changed nothing, silently."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

import click
from pydantic_settings import BaseSettings

from tracescore._environment import misspelt_variables, variables_named
from tracescore._service import CRASH_ENV, PAUSE_ENV

__all__ = ["warn_misspelt_variables"]

_log = logging.getLogger("tracescore.cli")


def _settings_read() -> list[type[BaseSettings]]:
    """Every settings class a process of tracescore reads from the environment: one environment (a
    Kubernetes ConfigMap) often serves the SDK, consume, alert and conversations alike."""
    from tracescore.alert import AlertConfig
    from tracescore.consume import ConsumerSettings
    from tracescore.conversations import ConversationsConfig
    from tracescore.emit import PhoenixSettings
    from tracescore.instrument import InstrumentSettings
    from tracescore.sample import SamplingConfig
    from tracescore.score.judges import OpenAIEmbedderSettings, OpenAIJudgeSettings

    return [
        ConsumerSettings, InstrumentSettings, SamplingConfig, AlertConfig, ConversationsConfig,
        OpenAIJudgeSettings, OpenAIEmbedderSettings, PhoenixSettings,
    ]  # fmt: skip


def _service_prefixes() -> list[str]:
    """The prefixes of the services' own settings (`TRACESCORE_ALERT_`): checked by that service alone,
    against the config it read (the variables a config names are the user's, whatever their prefix)."""
    from tracescore.alert import AlertConfig
    from tracescore.conversations import ConversationsConfig

    return [str(m.model_config.get("env_prefix", "")) for m in (AlertConfig, ConversationsConfig)]


def _option_variables() -> dict[str, str]:
    """The variables the commands' own options read (`TRACESCORE_PROMETHEUS_PORT`), with their help."""
    context = click.get_current_context(silent=True)
    root = context.find_root().command if context is not None else None
    commands = root.commands.values() if isinstance(root, click.Group) else []
    found = {name: "" for name in (CRASH_ENV, PAUSE_ENV)}  # the tests' crash points
    for command in commands:
        for option in command.params:
            names = [option.envvar] if isinstance(option.envvar, str) else list(option.envvar or ())
            found.update((name, option.help or "") for name in names if isinstance(option, click.Option))
    return found


def warn_misspelt_variables(own: BaseSettings | None = None, environ: Mapping[str, str] = os.environ) -> None:
    """One warning per variable in tracescore's prefix that nothing reads, naming the closest valid one.
    `own`: the settings a service command read (`tracescore alert`'s, `tracescore conversations'`), whose
    own prefix (`TRACESCORE_ALERT_`) is checked against them too; the variables they name (a webhook's
    `secret_env`) are the user's, never warned about."""
    theirs = variables_named(own) if own is not None else set()
    names = [name for name in environ if name.upper() not in theirs]
    found = misspelt_variables(names, _settings_read(), _option_variables(), unchecked=_service_prefixes())
    if own is not None:
        found.update(misspelt_variables(names, [type(own)]))
    for name, meant in sorted(found.items()):
        _log.warning(
            "%s is set, but no tracescore setting has that name, so it is ignored: %s (every variable: see "
            "the docs, Reference > Settings)",
            name,
            f"did you mean {meant}?" if meant else "no setting has a name like it",
        )
