"""The options of the `tracescore` commands, each declared once.

- An option that sets a setting is generated from the setting's pydantic field (`settings_options`): its
  help is the field's description, with the environment variable the settings class reads and the default
  written on the field, so a default is never written twice. A flag left out is None and overrides nothing:
  flags > environment variables > the `--config` file > defaults, for every command.
- The options that are not settings (which judge and metrics, where metrics go, how long to wait) are
  declared here once, and every command that takes one uses this declaration.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from types import UnionType
from typing import TYPE_CHECKING, Any, Literal, Union, get_args, get_origin

import click
from pydantic import BaseModel, SecretStr, ValidationError

from tracescore._config import ConfigFileError, problems, read_table
from tracescore._kafka_config import PRODUCER_ONLY, KafkaConnection, KafkaSecurity
from tracescore.model import OFFLINE_JUDGE
from tracescore.score.judges import OpenAIJudgeSettings

if TYPE_CHECKING:
    from tracescore.consume import ConsumerSettings
    from tracescore.emit import PhoenixSettings

__all__ = [
    "cli_judge",
    "config_option",
    "connect_timeout_option",
    "consumer_settings",
    "default_of",
    "env_note",
    "env_option",
    "idle_timeout_option",
    "judge_and_metrics",
    "judge_options",
    "kafka_security_options",
    "llm_judge_options",
    "nest",
    "or_usage_error",
    "otlp_metrics_option",
    "service_config_option",
    "settings_options",
]

Decorator = Callable[[Any], Any]

# Options whose name is not simply the field's: the seconds suffix reads better off ("--idle-timeout").
_RENAMED = {"bootstrap_servers": "--bootstrap-servers"}
# The SDK producer's tuning: accepted from the environment by every process, no use for a flag here.
_NO_FLAG = {("kafka", name) for name in PRODUCER_ONLY}
# The Kafka security flags of the services that re-key the records (`alert`, `conversations`): the
# passwords only from the environment.
_SERVICE_SECURITY = ("security_protocol", "sasl_mechanism", "sasl_username", "ssl_cafile", "ssl_certfile",
                     "ssl_keyfile")  # fmt: skip


def or_usage_error(factory: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`factory(...)`, its ValueError shown as a usage error (one line, exit status 2)."""
    try:
        return factory(*args, **kwargs)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc


def env_note(variable: str, default: object = None) -> str:
    """`[env: VARIABLE; default: D]`: how every option's help names the variable it reads, whoever reads it
    (the settings, or click for `env_option`), in one form (click's own says `[env var: ...]`); a whole
    float as the number it is (30, not 30.0 here and 30 there)."""
    if isinstance(default, float) and default.is_integer():
        default = int(default)
    shown = "" if default is None else f"; default: {default}"
    return f"[env: {variable}{shown}]"


def env_option(*decls: str, envvar: str, help: str, shown_default: object = None, **kwargs: Any) -> Decorator:
    """A click option click also reads from `envvar`, its help ending in `env_note` (with `shown_default`,
    the default the command applies when neither is given)."""
    return click.option(*decls, envvar=envvar, help=f"{help} {env_note(envvar, shown_default)}", **kwargs)


def default_of(model: type[BaseModel], name: str) -> Any:
    """The default of the field `name` of `model`, for an option that defaults as the setting does (the
    default is written on the field only)."""
    return model.model_fields[name].get_default(call_default_factory=True)


# Settings generated as options


def _option_name(path: tuple[str, ...]) -> str:
    dotted = ".".join(path)
    if dotted in _RENAMED:
        return _RENAMED[dotted]
    return "--" + "-".join(path).replace("_", "-").removesuffix("-s")


def _env_name(env_prefix: str, path: tuple[str, ...]) -> str:
    return env_prefix + "__".join(part.upper() for part in path)


def _fields(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """(path, field) of every field of `model`, nested models flattened."""
    out = []
    for name, info in model.model_fields.items():
        path = (*prefix, name)
        if path in _NO_FLAG:
            continue
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            out += _fields(annotation, path)
        else:
            out.append((path, info))
    return out


def _click_type(annotation: Any) -> tuple[Any, bool]:
    """(click type, is a boolean flag) for a field annotation."""
    args = [a for a in get_args(annotation) if a is not type(None)]
    if get_origin(annotation) in (Union, UnionType) and len(args) == 1:
        annotation = args[0]
    elif bool in args and all(a is bool or get_origin(a) is Literal for a in args):
        return click.BOOL, True  # on or off as a flag (`--x/--no-x`); its words (auto) from env or file
    if get_origin(annotation) is Literal:
        return click.Choice([str(a) for a in get_args(annotation)]), False
    if annotation is bool:
        return click.BOOL, True
    if annotation is int:
        return click.INT, False
    if annotation is float:
        return click.FLOAT, False
    if annotation is Path:
        return click.Path(path_type=Path), False
    return click.STRING, False


def settings_options(
    model: type[BaseModel],
    only: Collection[str] | None = None,
    *,
    under: tuple[str, ...] = (),
    env_prefix: str | None = None,
    types: Mapping[str, click.ParamType] | None = None,
) -> Decorator:
    """Click options for every field of `model` (nested models flattened), or for the fields named in `only`
    (a nested model's name takes all of its fields), in the model's order. `under` places the model inside
    a larger one (the Kafka settings under `kafka`); `env_prefix` defaults to the model's own; `types`
    replaces the type read from the annotation (a range click checks itself). Values land in `**flags`
    under the path joined by `__` (`assembly__grace_s`), None when not given."""
    prefix = model.model_config.get("env_prefix", "") if env_prefix is None else env_prefix

    def decorate(fn: Any) -> Any:
        for path, info in reversed(_fields(model, under)):
            if only is not None and path[len(under)] not in only:
                continue
            kind, is_flag = _click_type(info.annotation)
            kind = (types or {}).get(path[-1], kind)
            default = info.get_default(call_default_factory=True)
            shown = "********" if info.annotation in (SecretStr, SecretStr | None) and default else default
            note = env_note(_env_name(prefix, path), None if default is None else shown)
            help_text = f"{(info.description or '').rstrip('.')}. {note}"
            name = _option_name(path)
            declaration = f"{name}/--no-{name[2:]}" if is_flag else name
            fn = click.option(
                declaration, "__".join(path), type=kind, default=None, help=help_text.lstrip(". ")
            )(fn)
        return fn

    return decorate


def nest(flags: Mapping[str, Any]) -> dict[str, Any]:
    """{"assembly__grace_s": 1} -> {"assembly": {"grace_s": 1}}, leaving out flags not given."""
    nested: dict[str, Any] = {}
    for key, value in flags.items():
        if value is None:
            continue
        *parents, leaf = key.split("__")
        target = nested
        for parent in parents:
            target = target.setdefault(parent, {})
        target[leaf] = value
    return nested


def consumer_settings(flags: Mapping[str, Any], config_file: Path | None) -> ConsumerSettings:
    """The settings of `tracescore consume` (and the Kafka ones of `tracescore tail`) from the flags, the
    environment and the file; a problem is one usage line naming the flag, or the variable and the key."""
    from tracescore.consume import ConsumerSettings  # the consume stage: not for alert's or conversations'

    try:
        return ConsumerSettings.load(nest(flags), config_file)
    except ConfigFileError as exc:
        raise click.UsageError(str(exc)) from exc
    except ValidationError as exc:
        env_prefix = ConsumerSettings.model_config.get("env_prefix", "")
        in_file = read_table(config_file, "consume") if config_file is not None else {}
        found = []
        for loc, message in problems(exc, ConsumerSettings):
            path = tuple(str(part) for part in loc)
            variable, key = _env_name(env_prefix, path), ".".join(path)
            set_as_variable = variable.lower() in {name.lower() for name in os.environ}  # as pydantic reads
            if flags.get("__".join(path)) is not None:
                where = _option_name(path)
            elif _holds(in_file, path) and not set_as_variable:  # the file's key, no variable of the user's
                where = f"`{key}` in the [consume] table of {config_file}"
            else:
                where = f"{variable} (or `{key}` in --config)"
            found.append(f"invalid value for {where}: {message}")
        raise click.UsageError("; ".join(found)) from exc


def phoenix_settings(endpoint: str) -> PhoenixSettings:
    """Phoenix's settings for `endpoint`, the rest from TRACESCORE_PHOENIX_*: a bad value is one usage line
    naming its variable, as a bad flag's is."""
    from tracescore.emit import PhoenixSettings

    try:
        return PhoenixSettings(endpoint=endpoint)
    except ValidationError as exc:
        prefix = PhoenixSettings.model_config.get("env_prefix", "")
        found = [
            f"invalid value for {_env_name(prefix, tuple(str(part) for part in loc))}: {message}"
            for loc, message in problems(exc, PhoenixSettings)
        ]
        raise click.UsageError("; ".join(found)) from exc


def _holds(table: Mapping[str, Any], path: tuple[str, ...]) -> bool:
    """Whether the file's table has the key at `path` (nested tables followed)."""
    for part in path:
        if not isinstance(table, Mapping) or part not in table:
            return False
        table = table[part]
    return True


# Where the settings come from

# The settings file of consume, and of every command that reaches Kafka the way consume does (tail).
config_option = click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),  # a missing file: the services' one message
    default=None,
    help="TOML file of settings (a [consume] table of the options' field names); flags and TRACESCORE_* "
    "variables override it.",
)


def service_config_option(command: str, help_text: str) -> Decorator:
    """`--config` of a service that re-keys the records (`alert`, `conversations`): YAML or TOML, its table
    named after the command; also from TRACESCORE_<COMMAND>_CONFIG."""
    return env_option(
        "--config",
        "config_path",
        type=click.Path(dir_okay=False, path_type=Path),
        envvar=f"TRACESCORE_{command.upper()}_CONFIG",
        default=None,
        help=help_text,
    )


# Reaching Kafka (alert, conversations; consume and tail generate theirs from ConsumerSettings)

connect_timeout_option = env_option(
    "--connect-timeout",
    type=click.FloatRange(min=0, min_open=True),
    envvar="TRACESCORE_CONNECT_TIMEOUT_S",
    default=None,
    help=KafkaConnection.model_fields["connect_timeout_s"].description or "",  # the setting's own words
    shown_default=default_of(KafkaConnection, "connect_timeout_s"),
)

kafka_security_options = settings_options(
    KafkaSecurity, only=_SERVICE_SECURITY, under=("kafka",), env_prefix="TRACESCORE_"
)


def idle_timeout_option(done: str) -> Decorator:
    """`--idle-timeout` of a service that re-keys the records (demos and tests stop it this way); `done`:
    what else must hold before it stops."""
    help_text = (
        f"Stop once everything is read{done} and no record arrived for this many seconds (counted from the "
        "last one read, at the earliest from joining the group). For demos and tests; unset, it runs until "
        "stopped (SIGTERM, Ctrl-C)."
    )
    return click.option(
        "--idle-timeout", type=click.FloatRange(min=0, min_open=True), default=None, help=help_text
    )


def otlp_metrics_option(what: str) -> Decorator:
    """`--otlp-metrics-endpoint`: where a service sends `what` (its OTel metrics) over OTLP/HTTP."""
    return env_option(
        "--otlp-metrics-endpoint",
        envvar="TRACESCORE_OTLP_METRICS_ENDPOINT",
        default=None,
        help=f"Send {what} over OTLP/HTTP, e.g. http://127.0.0.1:4318/v1/metrics.",
    )


def threshold_option(counted_in: str) -> Decorator:
    """`--threshold` of `tracescore score` and `report`: scores below it fail too, in `counted_in`."""
    return click.option(
        "--threshold",
        type=click.FloatRange(0, 1),
        default=None,
        help=f"Also count scores below this as failing ({counted_in}) [default: each metric's label decides; "
        "see the docs, Offline evaluation > Metrics].",
    )


# Judging (consume, score)


def _judge_choice(help_text: str) -> list[Decorator]:
    return [
        click.option(
            "--judge",
            type=click.Choice([OFFLINE_JUDGE, "openai"]),
            default=OFFLINE_JUDGE,
            show_default=True,
            help=help_text,
        ),
        click.option(
            "--model",
            default=None,
            help="Judge model (openai judge). "
            + env_note(_judge_env("model"), default_of(OpenAIJudgeSettings, "model")),
        ),
        click.option(
            "--base-url",
            default=None,
            help="OpenAI-compatible base URL (openai judge; unset: "
            + ", else ".join([*OpenAIJudgeSettings.base_url_variables()[1:], "the OpenAI API"])
            + "). A local server's needs no API key. "
            + env_note(_judge_env("base_url")),
        ),
    ]


def _judge_env(name: str) -> str:
    """The variable the LLM judge's settings read `name` from (a flag left out leaves it to them)."""
    return OpenAIJudgeSettings.model_config.get("env_prefix", "") + name.upper()


def _applied(options: list[Decorator]) -> Decorator:
    def decorate(fn: Any) -> Any:
        for option in reversed(options):
            fn = option(fn)
        return fn

    return decorate


def llm_judge_options(help_text: str) -> Decorator:
    """--judge, --model and --base-url alone (a service that judges again what consume judged)."""
    return _applied(_judge_choice(help_text))


def judge_options(default_metrics: str) -> Decorator:
    """--judge, --model, --base-url, --metrics (with this default) and --metric-config."""
    options = [
        *_judge_choice("offline: deterministic, no network. openai: any OpenAI-compatible endpoint."),
        click.option(
            "--metrics",
            default=default_metrics,
            show_default=True,
            help="Comma-separated metric names: faithfulness, answer_relevancy, context_relevance, quality, "
            "distinct_2, an agent run's tool_errors, ungrounded_answer, unused_tool_results, "
            "repeated_tool_calls, run_budget, tool_selection, goal_completion, names from --metric-config, "
            "installed plugins or package.module:attr paths.",
        ),
        click.option(
            "--metric-config",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            default=None,
            help="TOML file declaring custom metrics ([[metric]] tables).",
        ),
    ]
    return _applied(options)


def _names_in(csv_names: str) -> list[str]:
    return [n.strip() for n in csv_names.split(",") if n.strip()]


def judge_and_metrics(
    judge: str, model: str | None, base_url: str | None, metrics: str, metric_config: Path | None
) -> tuple[Any, list[Any]]:
    """The judge and the metrics the judge options name; a mistake is a usage error."""
    from tracescore.score import make_metrics

    return (
        cli_judge(judge, model, base_url),
        or_usage_error(make_metrics, _names_in(metrics), metric_config),
    )


def cli_judge(judge: str, model: str | None, base_url: str | None) -> Any:
    """The judge `--judge` names; a mistake is a usage error, a missing API key said with the flag and the
    variables to set (not the class that needs it)."""
    from tracescore.score import make_judge
    from tracescore.score.judges import MissingApiKey

    try:
        return make_judge(judge, model=model, base_url=base_url)
    except MissingApiKey as exc:
        keys = " or ".join(OpenAIJudgeSettings.key_variables())
        urls = " or ".join(OpenAIJudgeSettings.base_url_variables())
        raise click.UsageError(
            f"--judge {judge} needs an API key: set {keys}; a local OpenAI-compatible server needs none, "
            f"give its address with --base-url ({urls}) instead"
        ) from exc
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
