"""Settings files shared by every command, read one way.

One file may configure several commands: `[consume]`, `[sampling]`, `[alert]` and `[conversations]` tables
in TOML or YAML (a file without any of those tables configures whichever command reads it). Each command's
settings class derives from `FileSettings`, so the precedence is the same everywhere: explicit values
(flags) > environment variables > the file > the defaults written on the class.
"""

from __future__ import annotations

import difflib
import os
import tomllib
import types
from collections.abc import Callable, Collection, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, Field, PrivateAttr, ValidationError, model_validator
from pydantic_settings import BaseSettings, InitSettingsSource, PydanticBaseSettingsSource

from tracescore._kafka_config import (
    DEFAULT_BOOTSTRAP_SERVERS,
    TOPIC_NAME_RULE,
    RebalanceProtocol,
    SettingOrigin,
    TopicSettings,
    is_topic_name,
    max_poll_interval_field,
    rebalance_protocol_field,
    session_timeout_field,
)

__all__ = [
    "ConfigFileError",
    "FileSettings",
    "ServiceSettings",
    "did_you_mean",
    "fields_at",
    "group_topic_field",
    "keys_outside_tables",
    "load_service_settings",
    "one_line",
    "problems",
    "read_table",
    "unknown_name",
]

_COMMAND_TABLES = ("consume", "sampling", "alert", "conversations")

# The file's values for the settings being built now; a ContextVar, so concurrent loads cannot mix files.
_file_values: ContextVar[Mapping[str, Any] | None] = ContextVar("tracescore_config_file_values", default=None)

SettingsT = TypeVar("SettingsT", bound="FileSettings")


class ConfigFileError(ValueError):
    """A config file that cannot be read or parsed; the message is one line that starts with the file."""


def read_table(path: Path, table: str, error: type[ConfigFileError] = ConfigFileError) -> dict[str, Any]:
    """The `table` section of the TOML/YAML file at `path` (the whole file when it has no command tables). A
    key beside the tables of a file that has them is an error: no command would read it."""
    data = _read_tables(path, error)
    if _sectioned(data) and (stray := _outside(data)):
        raise error(
            f"{path}: {', '.join(stray)} outside the tables {_TABLES}, so no command reads it: put each key "
            "under its command's table"
        )
    section = data.get(table, {}) if _sectioned(data) else data
    if not isinstance(section, dict):
        raise error(f"{path}: '{table}' must be a table of settings")
    return section


def keys_outside_tables(path: Path, error: type[ConfigFileError] = ConfigFileError) -> list[str]:
    """The keys of the file at `path` outside the commands' tables ([consume], [sampling], ...): every key of
    a file of settings at its top level, and the stray ones beside the tables of one that has them (which no
    command reads); empty when all sit in tables, or the file holds nothing."""
    return _outside(_read_tables(path, error))


def _outside(data: Mapping[str, Any]) -> list[str]:
    return sorted(k for k, v in data.items() if not (k in _COMMAND_TABLES and isinstance(v, dict)))


_TABLES = ", ".join(f"[{name}]" for name in _COMMAND_TABLES)


def _read_tables(path: Path, error: type[ConfigFileError]) -> dict[str, Any]:
    """The file read, with a table misnamed ([alerts], [conversation]) said with the name meant, where it
    would otherwise leave its command on its defaults or name it an unknown setting: in a file with command
    tables any other table; in one without, a table named close to a command's (the settings of one
    command hold tables of their own, such as judge_health)."""
    data = _read(path, error)
    for key, value in data.items():
        if not isinstance(value, dict) or key in _COMMAND_TABLES:
            continue
        meant = did_you_mean(key, _COMMAND_TABLES, shown=lambda table: f"[{table}]")
        if meant or _sectioned(data):
            hint = f" ({meant})" if meant else ""
            raise error(f"{path}: [{key}] is not a table tracescore reads{hint}; its tables are {_TABLES}")
    return data


def _sectioned(data: Mapping[str, Any]) -> bool:
    return any(isinstance(data.get(name), dict) for name in _COMMAND_TABLES)


def _read(path: Path, error: type[ConfigFileError]) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise error(f"{path}: cannot read the config file ({reason})") from None
    suffix = path.suffix.lower()
    parse: Callable[[str], Any]
    invalid: type[Exception]
    if suffix == ".toml":
        parse, invalid = tomllib.loads, tomllib.TOMLDecodeError
    elif suffix in (".yaml", ".yml"):
        import yaml  # only for a YAML file: a service started without one never loads the parser

        parse, invalid = yaml.safe_load, yaml.YAMLError
    else:
        raise error(f"{path}: a config file must be .toml, .yaml or .yml")
    try:
        data: Any = parse(text) or {}
    except invalid as exc:
        detail = " ".join(str(exc).split())
        raise error(f"{path}: not valid {suffix.lstrip('.').upper()}: {detail}") from None
    if not isinstance(data, dict):
        raise error(f"{path}: expected a table of settings, got {type(data).__name__}")
    return data


class FileSettings(TopicSettings):
    """Settings read from init values > environment > a config file's table > defaults. Every topic setting
    (`topic`, `*_topic`) is checked against Kafka's naming rule (`TopicSettings`), whichever source gave
    it."""

    # What each source gave (read once, by from_sources), so that a message can say where a value came from.
    _flags_given: frozenset[str] = PrivateAttr(default=frozenset())
    _file_given: frozenset[str] = PrivateAttr(default=frozenset())
    _file: Path | None = PrivateAttr(default=None)

    @classmethod
    def from_sources(
        cls: type[SettingsT],
        flags: Mapping[str, Any],
        file_values: Mapping[str, Any],
        file: Path | None = None,
    ) -> SettingsT:
        token = _file_values.set(file_values)
        try:
            settings = cls(**flags)
        finally:
            _file_values.reset(token)
        settings._flags_given, settings._file_given = frozenset(flags), frozenset(file_values)
        settings._file = file
        return settings

    @classmethod
    def variable(cls, name: str) -> str:
        """The environment variable of the top-level setting `name`."""
        return str(cls.model_config.get("env_prefix", "")).upper() + name.upper()

    @classmethod
    def named(cls, name: str) -> str:
        """The setting `name` as a message names it: with its variable and its key in a config file."""
        return f"{name} ({cls.variable(name)}, or `{name}` in --config)"

    def origin(self, name: str) -> SettingOrigin | None:
        """Which source gave the setting `name` (a top-level one) its value, by the sources' precedence; None
        when it was given but not through `from_sources` (a keyword in Python)."""
        if name in self._flags_given:
            return SettingOrigin(kind="flag")
        variable = self.variable(name)
        if variable in {set_name.upper() for set_name in os.environ}:  # as pydantic-settings reads them
            return SettingOrigin(kind="variable", name=variable)
        if name in self._file_given:
            return SettingOrigin(kind="file", name=None if self._file is None else str(self._file))
        return SettingOrigin(kind="default") if name not in self.model_fields_set else None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, env_settings, InitSettingsSource(settings_cls, dict(_file_values.get() or {}))


# Where a group topic field keeps the name it takes under another group id (a `{group_id}` pattern, or None).
_OF_ANOTHER_GROUP = "of_another_group"


def group_topic_field(default: str | None, of_another_group: str | None, description: str) -> Any:
    """A service's internal topic (the re-keyed records, the state): it belongs to the consumer group, as
    Kafka Streams' changelog and repartition topics belong to their application id. The default group id
    keeps `default` (the name of every earlier version, so an upgrade keeps its state); another group id
    gets `of_another_group` with `{group_id}` filled in (None: no topic). Every pattern ends in the service's
    own stage (`.routes`, `.turns`; the state `.routes.changelog`, the changelog of its source), so two
    services given one group id never share a topic.
    A name given explicitly (flag, environment, file) is used as given, once Kafka would accept it: how two
    groups share state deliberately."""
    derived = "unset" if of_another_group is None else f"`{of_another_group.format(group_id='<group_id>')}`"
    return Field(
        default=default,
        description=f"{description} That default is the default group_id's; under another group_id it is "
        f"{derived}, so two groups share it only when it is set.",
        json_schema_extra={_OF_ANOTHER_GROUP: of_another_group},
    )


class ServiceSettings(FileSettings):
    """What the services that re-key the evaluation records share (`tracescore alert`, `tracescore
    conversations`). A subclass declares `group_id` and its internal topics with `group_topic_field`."""

    bootstrap_servers: str = Field(
        default=DEFAULT_BOOTSTRAP_SERVERS,
        description="Kafka brokers; unset here, TRACESCORE_BOOTSTRAP_SERVERS (the SDK's and consume's name) "
        "comes before this default.",
    )
    health_file: Path | None = Field(
        default=None,
        description="Touched on every pass of the service loop: a liveness probe that checks its age sees a "
        "stuck loop.",
    )
    session_timeout_ms: int = session_timeout_field(
        "both consumer groups (the input's and the re-keyed topic's)"
    )
    rebalance_protocol: RebalanceProtocol = rebalance_protocol_field("both consumer groups")
    max_poll_interval_ms: int = max_poll_interval_field(
        "Of both consumer groups: a restore, a checkpoint or an alert's deliveries between two polls must "
        "end within it."
    )
    stop_timeout_s: float = Field(
        default=20.0,
        gt=0,
        description="On SIGTERM/SIGINT, the closing steps (write the outputs decided, save the state, commit "
        "the input offsets it covers, deliver alert notifications, close the clients) get this long, counted "
        "from the signal; 2 s past it the process exits all the same (status 1): 22 s in all, inside "
        "Kubernetes' 30 s grace period. What is not done (the broker gone, a receiver hanging) is said in "
        "one line and done by the next start: nothing is lost, it may be decided or sent again.",
    )
    restore_retries: int = Field(
        default=5,
        ge=0,
        description="Restoring newly assigned partitions (their state read back) while the broker does "
        "not answer: each broker call waits 10 s at most, and a read that gets no answer is tried again this "
        "many times, waiting 1 s, 2 s, 4 s ... (at most 30 s) between tries, each said in a warning; after "
        "the last the service exits (status 1) with one line that says what it waited for (about 1.5 min in "
        "all by default). Nothing of those partitions is applied or committed before all is read, so nothing "
        "is lost: the next start (the pod restarted) restores them again. A large state topic that is being "
        "read is never cut short.",
    )

    @model_validator(mode="before")
    @classmethod
    def _topics_of_the_group(cls, values: Any) -> Any:
        """Name the internal topics left unset after a group id other than the default."""
        default_group = cls.model_fields["group_id"].default
        group = values.get("group_id", default_group) if isinstance(values, dict) else default_group
        if group == default_group or not isinstance(group, str):
            return values
        derived = {
            name: None if pattern is None else pattern.format(group_id=group)
            for name, pattern in _group_topic_patterns(cls).items()
            if name not in values
        }
        invalid = sorted(
            name for name, topic in derived.items() if topic is not None and not is_topic_name(topic)
        )
        if invalid:
            raise ValueError(
                f"group_id {group!r} cannot name its own topics ({', '.join(invalid)}: "
                f"{', '.join(repr(derived[name]) for name in invalid)}): {TOPIC_NAME_RULE}; use such a "
                "group id, or set those topics"
            )
        # A group named like a default topic's prefix ("tracescore.alert") would derive the default group's
        # topic, and share its state: refused, as a shared topic must be set on purpose.
        defaults = {cls.model_fields[name].default for name in _group_topic_patterns(cls)}
        taken = sorted(name for name, topic in derived.items() if topic in defaults)
        if taken:
            raise ValueError(
                f"group_id {group!r} would name {', '.join(taken)} "
                f"{', '.join(repr(derived[name]) for name in taken)}, the default group's: use another "
                "group id, or set those topics (to share the default group's on purpose)"
            )
        return {**values, **derived}


def _group_topic_patterns(cls: type[BaseModel]) -> dict[str, str | None]:
    """The fields declared with `group_topic_field`, with the name each takes under another group id."""
    return {
        name: extra[_OF_ANOTHER_GROUP]
        for name, field in cls.model_fields.items()
        if isinstance(extra := field.json_schema_extra, dict) and _OF_ANOTHER_GROUP in extra
    }


def load_service_settings(
    cls: type[SettingsT],
    table: str,
    error: type[ConfigFileError],
    path: str | Path | None,
    flags: Mapping[str, Any],
) -> SettingsT:
    """A service's settings from `flags` (None means not given), the environment, the `table` of the file at
    `path` and the defaults. Every problem is one line in `error`; a misspelt name comes with valid ones."""
    path = Path(path) if path is not None else None
    given = {k: v for k, v in flags.items() if v is not None}
    file_values = read_table(path, table, error) if path is not None else {}
    try:
        return cls.from_sources(given, file_values, path)
    except ValidationError as exc:
        where = f" in {path}" if path else ""
        raise error(f"invalid {table} config{where}: {one_line(exc, cls)}") from exc


def one_line(exc: ValidationError, model: type[BaseModel] | None = None) -> str:
    """Every problem of a validation error as `field.path: message` clauses on one line (see `problems`)."""
    # A check across fields (a model validator) has no location; its message names the fields itself.
    return "; ".join(f"{'.'.join(map(str, loc))}: {msg}" if loc else msg for loc, msg in problems(exc, model))


def problems(exc: ValidationError, model: type[BaseModel] | None = None) -> list[tuple[tuple[Any, ...], str]]:
    """(location, message) per problem of a validation error. With the `model` that was validated, a key it
    does not have (a misspelt field) is named with the valid ones."""
    found = []
    for error in exc.errors(include_url=False):
        loc = tuple(error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        if model is not None and error["type"] == "extra_forbidden":
            valid = fields_at(model, loc[:-1])
            if valid:
                message = unknown_name("setting", str(loc[-1]), valid)
        found.append((loc, message))
    return found


def unknown_name(what: str, name: str, valid: Collection[str]) -> str:
    """`unknown metric 'answer_relevance' (did you mean 'answer_relevancy'? valid: ...)`."""
    meant = did_you_mean(name, valid)
    hint = f"{meant} " if meant else ""
    return f"unknown {what} {name!r} ({hint}valid: {', '.join(sorted(valid))})"


def did_you_mean(name: str, valid: Collection[str], shown: Callable[[str], str] = repr) -> str | None:
    """`did you mean 'answer_relevancy'?` for the valid name closest to a misspelt one, written as `shown`
    writes it (a table: `[alert]`); None when none is."""
    close = difflib.get_close_matches(name, list(valid), n=1)
    return f"did you mean {shown(close[0])}?" if close else None


def fields_at(model: type[BaseModel], path: tuple[int | str, ...]) -> list[str] | None:
    """The field names of the model found at `path` (an error's location) inside `model`; None when the path
    leads elsewhere. List positions are skipped; a tagged union's member is picked by its tag."""
    current: list[type[BaseModel]] = [model]
    for part in path:
        if isinstance(part, int):
            continue
        holder = next((m for m in current if part in m.model_fields), None)
        if holder is not None:
            current = _models_in(holder.model_fields[part].annotation)
            continue
        # A tagged union puts the tag in the path: `sinks.0.webhook.urll`.
        tagged = [m for m in current if _tag(m) == part]
        if not tagged:
            return None
        current = tagged
    return sorted(current[0].model_fields) if len(current) == 1 else None


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds: itself, in a list, tuple or dict, optional, or in a union."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Annotated:
        return _models_in(args[0])
    if origin in (Union, types.UnionType, list, tuple, frozenset, set):
        return [m for arg in args for m in _models_in(arg)]
    if origin is dict and len(args) == 2:
        return _models_in(args[1])
    return []


def _tag(model: type[BaseModel]) -> Any:
    field = model.model_fields.get("type")
    return None if field is None else field.default
