"""A `TRACESCORE_*` variable no setting reads (`TRACESCORE_BROKER`) is said once at start, with the name
meant: pydantic settings ignore what they do not know, so a misspelt one changed nothing, silently.

One environment (a Kubernetes ConfigMap) often serves the SDK, consume, alert and conversations alike, so a
name is checked against the variables every stage reads. Those are read from `_variables.json`, written from
the settings classes and the commands' options by `python docs/gen_reference.py` (`variables_json`; its
`--check` fails when they differ): importing every stage to list them was a third of a service's start.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any

import click
from pydantic_settings import BaseSettings

from tracescore._environment import (
    env_prefix,
    leading_words,
    misspelt_among,
    misspelt_variables,
    variables_named,
    variables_read,
)
from tracescore._lazy import LazyMapping

__all__ = ["variables_json", "warn_misspelt_variables"]

_log = logging.getLogger("tracescore.cli")
_INDEX = "_variables.json"


def _settings_read() -> list[type[BaseSettings]]:
    """Every settings class a process of tracescore reads from the environment."""
    from tracescore.alert import AlertConfig
    from tracescore.consume import ConsumerSettings
    from tracescore.conversations import ConversationsConfig
    from tracescore.emit import PhoenixSettings
    from tracescore.instrument import InstrumentSettings
    from tracescore.sample import SamplingConfig
    from tracescore.score.judges import OfflineJudgeSettings, OpenAIEmbedderSettings, OpenAIJudgeSettings

    return [
        ConsumerSettings, InstrumentSettings, SamplingConfig, AlertConfig, ConversationsConfig,
        OfflineJudgeSettings, OpenAIJudgeSettings, OpenAIEmbedderSettings, PhoenixSettings,
    ]  # fmt: skip


def _service_settings() -> list[type[BaseSettings]]:
    """The services' own settings (`TRACESCORE_ALERT_`): their prefixes are checked by that service alone,
    against the config it read (the variables a config names are the user's, whatever their prefix)."""
    from tracescore.alert import AlertConfig
    from tracescore.conversations import ConversationsConfig

    return [AlertConfig, ConversationsConfig]


def _option_variables(commands: Iterable[Any]) -> dict[str, str]:
    """The variables the commands' own options read (`TRACESCORE_PROMETHEUS_PORT`), with their help."""
    found = {}
    for command in commands:
        for option in command.params:
            names = [option.envvar] if isinstance(option.envvar, str) else list(option.envvar or ())
            found.update((name, option.help or "") for name in names if isinstance(option, click.Option))
    return found


def variables_json() -> str:
    """`_variables.json`: every variable the settings classes and the `tracescore` commands' options read
    (with the first words of what it sets: what a misspelt name is compared with), the settings' prefixes,
    and the services' own prefixes, left to them."""
    from tracescore._service import CRASH_ENV, PAUSE_ENV
    from tracescore.cli import main

    models = _settings_read()
    read = {name: "" for name in (CRASH_ENV, PAUSE_ENV)}  # the tests' crash points
    read.update(_option_variables(main.commands.values()))
    for model in models:
        read.update(variables_read(model))
    index = {
        "prefixes": sorted({env_prefix(m) for m in models}),
        "services": sorted(env_prefix(m) for m in _service_settings()),
        "variables": {name.upper(): leading_words(said) for name, said in sorted(read.items())},
    }
    return json.dumps(index, indent=1, sort_keys=True) + "\n"


def _index() -> dict[str, Any]:
    text = resources.files(__package__).joinpath(_INDEX).read_text(encoding="utf-8")
    index: dict[str, Any] = json.loads(text)
    return index


def _commands_here() -> Iterable[Any]:
    """The commands of the group this command runs in, as far as they are loaded: a program that embeds
    tracescore's commands in a click group of its own may give its options variables of ours."""
    context = click.get_current_context(silent=True)
    root = context.find_root().command if context is not None else None
    commands = root.commands if isinstance(root, click.Group) else {}
    return (commands.imported() if isinstance(commands, LazyMapping) else commands).values()


def warn_misspelt_variables(own: BaseSettings | None = None, environ: Mapping[str, str] = os.environ) -> None:
    """One warning per variable in tracescore's prefix that nothing reads, naming the closest valid one.
    `own`: the settings a service command read (`tracescore alert`'s, `tracescore conversations'`), whose
    own prefix (`TRACESCORE_ALERT_`) is checked against them too; the variables they name (a webhook's
    `secret_env`) are the user's, never warned about."""
    theirs = variables_named(own) if own is not None else set()
    names = [name for name in environ if name.upper() not in theirs]
    index = _index()
    # the index's text where it has the name (a setting's description over an option's help, as before)
    known = {**_option_variables(_commands_here()), **index["variables"]}
    found = misspelt_among(names, known, index["prefixes"], unchecked=index["services"])
    if own is not None:
        found.update(misspelt_variables(names, [type(own)]))
    for name, meant in sorted(found.items()):
        _log.warning(
            "%s is set, but no tracescore setting has that name, so it is ignored: %s (every variable: see "
            "the docs, Reference > Settings)",
            name,
            f"did you mean {meant}?" if meant else "no setting has a name like it",
        )
