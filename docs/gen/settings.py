"""The settings reference, from the pydantic settings classes: every setting with its environment variable,
config-file key, flag, type, default and description. A setting without a description, or a settings
class of the package that no section covers, is an error that names it."""

from __future__ import annotations

import importlib
import json
import pkgutil
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
import click
from pydantic import AliasChoices, BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

from gen import GENERATED, Undocumented, cell, code, table
from gen.cli import commands, environment_names, split_env_note


@dataclass(frozen=True)
class Section:
    title: str
    model: type[BaseModel]
    intro: str
    env_prefix: str
    nested: bool = True  # nested models read from PREFIX + "A__B" variables
    file_table: str | None = None  # the [table] of a --config file
    commands: tuple[str, ...] = ()  # whose flags may set it (matched by name or by variable)
    elsewhere: frozenset[str] = field(default_factory=frozenset)  # fields another section documents


def sections() -> list[Section]:
    from tracescore.alert import AlertConfig
    from tracescore.consume import ConsumerSettings
    from tracescore.conversations import ConversationsConfig
    from tracescore.emit import PhoenixSettings
    from tracescore.export import KafkaProducerSettings
    from tracescore.instrument import InstrumentSettings
    from tracescore.sample import SamplingConfig
    from tracescore.score.judges import OfflineJudgeSettings, OpenAIEmbedderSettings, OpenAIJudgeSettings

    return [
        Section(
            "SDK: `tracescore.init()`", InstrumentSettings,
            "Read once by `tracescore.init()`: its arguments > `TRACESCORE_*` variables > defaults; or pass "
            "`InstrumentSettings(...)` as `settings=`.",
            "TRACESCORE_", elsewhere=frozenset({"kafka"}),
        ),
        Section(
            "Kafka: every process", KafkaProducerSettings,
            "One model for the SDK, `tracescore consume`, `tracescore alert`, `tracescore conversations` and "
            "`tracescore tail`, so one "
            "environment configures them all. The producer tuning (from `acks` to `trace_messages`) is the "
            "SDK's: the services accept it and ignore it. An unknown `TRACESCORE_KAFKA__*` name is refused.",
            "TRACESCORE_KAFKA__", commands=("alert", "consume", "conversations", "tail"),
        ),
        Section(
            "`tracescore consume`", ConsumerSettings,
            "Flags > `TRACESCORE_*` variables > the `[consume]` table of `--config` > defaults. "
            "`tracescore tail` reads the Kafka ones the same way.",
            "TRACESCORE_", file_table="consume", commands=("consume", "tail"), elsewhere=frozenset({"kafka"}),
        ),
        Section(
            "Sampling policy", SamplingConfig,
            "Flags > `TRACESCORE_SAMPLING__*` variables (lists as JSON) > the `[sampling]` table of "
            "`--config` > defaults. `tracescore consume` refuses a setting outside the file's tables (its "
            "options go in `[consume]`); in Python, `load_sampling_config(path)` also reads a file without "
            "tables, at its top level.",
            "TRACESCORE_SAMPLING__", file_table="sampling", commands=("consume",),
        ),
        Section(
            "`tracescore alert`", AlertConfig,
            "Flags > `TRACESCORE_ALERT_*` variables (nested with `__`, lists as JSON) > the file's `alert` "
            "table (or its top level) > defaults.",
            "TRACESCORE_ALERT_", file_table="alert", commands=("alert",),
        ),
        Section(
            "`tracescore conversations`", ConversationsConfig,
            "Flags > `TRACESCORE_CONVERSATIONS_*` variables > the file's `conversations` table (or its top "
            "level) > defaults.",
            "TRACESCORE_CONVERSATIONS_", file_table="conversations", commands=("conversations",),
        ),
        Section(
            "LLM judge (`--judge openai`)", OpenAIJudgeSettings,
            "Flags (`--model`, `--base-url`) > variables > defaults; in Python "
            "`OpenAIJudge(OpenAIJudgeSettings(...))`.",
            "TRACESCORE_JUDGE_", nested=False, commands=("consume", "score"),
        ),
        Section(
            "Offline judge (`--judge offline`, the default)", OfflineJudgeSettings,
            "Variables > defaults; in Python `OfflineJudge(settings=OfflineJudgeSettings(...))`.",
            "TRACESCORE_OFFLINE_JUDGE_", nested=False, commands=("consume", "score"),
        ),
        Section(
            "Embeddings (answer relevancy)", OpenAIEmbedderSettings,
            "Setting `TRACESCORE_EMBEDDINGS_MODEL` or `_BASE_URL` switches answer relevancy to reverse "
            "questions and cosine similarity.",
            "TRACESCORE_EMBEDDINGS_", nested=False,
        ),
        Section(
            "Phoenix annotations", PhoenixSettings,
            "Used by `tracescore consume --phoenix-endpoint` (or `TRACESCORE_PHOENIX_ENDPOINT`) and "
            "`tracescore conversations --phoenix-endpoint`, each posting to the endpoint it is given; the "
            "other settings both read from these variables.",
            "TRACESCORE_PHOENIX_", nested=False, commands=("consume",),
        ),
    ]  # fmt: skip


@dataclass(frozen=True)
class Row:
    key: str
    envs: tuple[str, ...]
    info: FieldInfo
    owner: str  # class.field, for error messages


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds (a list's or a union's members included)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models(arg)]


def _is_sequence(annotation: Any) -> bool:
    origin = get_origin(annotation)
    if origin is Annotated:
        return _is_sequence(get_args(annotation)[0])
    return origin in (list, tuple, frozenset, set)


def _rows(section: Section) -> Iterator[Row]:
    def walk(model: type[BaseModel], path: tuple[str, ...], key: str, env: bool) -> Iterator[Row]:
        for name, info in model.model_fields.items():
            if not path and name in section.elsewhere:
                continue
            here = (*path, name)
            dotted = f"{key}.{name}" if key else name
            envs = _env_names(section, here, info) if env else ()
            owner = f"{model.__name__}.{name}"
            members = _models(info.annotation)
            if members and not _is_sequence(info.annotation):
                if section.nested:
                    yield from walk(members[0], here, dotted, env)
                continue
            yield Row(dotted, envs, info, owner)
            for member in members:  # a list of tables: each item's keys, set in the file or as JSON
                tag = _discriminator(member)
                yield from walk(member, here, f"{dotted}[{tag}]", env=False)

    yield from walk(section.model, (), "", env=True)


def _discriminator(model: type[BaseModel]) -> str:
    kind = model.model_fields.get("type")
    return f"type={kind.default}" if kind is not None and isinstance(kind.default, str) else ""


def _env_names(section: Section, path: tuple[str, ...], info: FieldInfo) -> tuple[str, ...]:
    alias = info.validation_alias
    if isinstance(alias, AliasChoices):
        return tuple(c for c in alias.choices if isinstance(c, str) and c.isupper())
    return (section.env_prefix + "__".join(p.upper() for p in path),)


def _flags(section: Section, row: Row, options: list[tuple[str, click.Option]]) -> str:
    names = {row.key.replace(".", "__"), row.key.replace(".", "_")}
    if section.title.startswith("Kafka"):
        names |= {f"kafka__{row.key}", f"kafka_{row.key}"}
    found: dict[str, list[str]] = {}
    for command, option in options:
        # Names follow the field only where options are generated from nested settings (consume, alert).
        by_name = section.nested and command in section.commands and option.name in names
        by_env = bool(set(row.envs) & set(environment_names(option)))
        if by_name or by_env:
            found.setdefault(option.opts[-1], []).append(command)
    return ", ".join(f"{code(flag)} ({', '.join(sorted(set(cmds)))})" for flag, cmds in found.items())


def _type(annotation: Any) -> str:
    if annotation is None or annotation is type(None):
        return "unset"
    origin = get_origin(annotation)
    if origin is Annotated:
        return _type(get_args(annotation)[0])
    if origin is Literal:
        return " | ".join(str(a) for a in get_args(annotation))
    if origin in (Union, types.UnionType):
        return " | ".join(_type(a) for a in get_args(annotation) if a is not type(None))
    if origin in (list, tuple, frozenset, set):
        inner = [a for a in get_args(annotation) if a is not Ellipsis]
        return f"list of {_type(inner[0]) if inner else 'values'}"
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return "table"
        if issubclass(annotation, Enum):
            return " | ".join(str(m.value) for m in annotation)
        names = {
            str: "text",
            int: "integer",
            float: "number",
            bool: "boolean",
            Path: "path",
            SecretStr: "secret",
        }
        return names.get(annotation, annotation.__name__)
    return str(annotation)


def _bounds(info: FieldInfo) -> str:
    symbols = {
        annotated_types.Ge: "≥",
        annotated_types.Gt: ">",
        annotated_types.Le: "≤",
        annotated_types.Lt: "<",
    }
    found = []
    for meta in info.metadata:
        for kind, symbol in symbols.items():
            if isinstance(meta, kind):
                found.append(f"{symbol} {getattr(meta, kind.__name__.lower())}")
    return f" {', '.join(found)}" if found else ""


def _optional(annotation: Any) -> str:
    optional = get_origin(annotation) in (Union, types.UnionType) and type(None) in get_args(annotation)
    return ", optional" if optional else ""


def _default(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    value = info.get_default(call_default_factory=True)
    if value is None or value in ((), [], frozenset()):
        return ""
    if isinstance(value, BaseModel):
        return ""
    if isinstance(value, list) and all(isinstance(v, BaseModel) for v in value):
        text = json.dumps([v.model_dump(mode="json", exclude_defaults=True) for v in value])
        return code(text) if len(text) <= 60 else f"{len(value)} with the defaults below"
    if isinstance(value, SecretStr):
        return "(set)"
    if isinstance(value, Enum):
        value = value.value
    return code(json.dumps(value) if isinstance(value, str | bool) and value != "" else value)


def settings_classes() -> set[type[BaseSettings]]:
    """Every BaseSettings subclass the package defines that is read from the environment (private helper
    classes and the FileSettings base excluded)."""
    import tracescore

    for module in pkgutil.walk_packages(tracescore.__path__, "tracescore."):
        if ".testing" not in module.name:
            importlib.import_module(module.name)
    found: set[type[BaseSettings]] = set()
    pending = list(BaseSettings.__subclasses__())
    while pending:
        cls = pending.pop()
        pending += cls.__subclasses__()
        ours = cls.__module__.startswith("tracescore") and not cls.__name__.startswith("_")
        if ours and cls.model_config.get("env_prefix"):
            found.add(cls)
    return found


def page() -> str:
    options = [
        (name.removeprefix("tracescore").strip(), param)
        for name, command in commands()
        for param in command.params
        if isinstance(param, click.Option)
    ]
    problems: list[str] = []
    covered = {s.model for s in sections()}
    problems += [
        f"settings class {cls.__module__}.{cls.__name__} has no section in docs/gen/settings.py"
        for cls in sorted(settings_classes() - covered, key=lambda c: c.__name__)
    ]
    out = [
        GENERATED,
        "# Settings\n\n",
        "Every setting, with the environment variable, config-file key and flag that set it. One precedence "
        "everywhere: flags > environment variables > the `--config` file > defaults. Invalid values stop a "
        "command at start with one line naming the flag or variable; so does a topic setting (`topic`, "
        "`*_topic`, any command) that Kafka would refuse: a topic name is 1 to 249 letters, digits, `.`, `_` "
        "and `-`, and not `.` or `..`; the SDK's topic (`TRACESCORE_TOPIC`, `init(topic=)`) is checked "
        "alike, `tracescore.init()` raising pydantic's ValidationError with the same message. One file may "
        "hold the `[consume]`, `[sampling]`, `[alert]` and `[conversations]` tables; any other table (a "
        "misspelt `[alerts]`, said with the name meant) or a key beside them is an error at start, never a "
        "command left on its defaults. Nested settings read variables joined "
        "with `__` (`TRACESCORE_ASSEMBLY__GRACE_S`); lists of tables are JSON in a variable, or tables in "
        "the file (`[[sampling.rates]]`). A `TRACESCORE_*` variable that no setting reads (a misspelt "
        "`TRACESCORE_BROKER`) is named in a warning when `tracescore consume`, `tracescore alert` or "
        "`tracescore conversations` starts, with the valid name most like it; a settings group's variables "
        "(`TRACESCORE_JUDGE_*`, `TRACESCORE_SAMPLING__*`, `TRACESCORE_PHOENIX_*`, `TRACESCORE_EMBEDDINGS_*`) "
        "are compared with that group's (`TRACESCORE_JUDGE_MODLE`: did you mean `TRACESCORE_JUDGE_MODEL`?); "
        "alert and conversations "
        "check their own `TRACESCORE_ALERT_*` and `TRACESCORE_CONVERSATIONS_*` variables against their "
        "settings too. A variable a config names (a webhook's `secret_env`) is yours, whatever its name: "
        "never warned about.\n",
    ]
    documented: set[str] = set()
    for section in sections():
        rows = list(_rows(section))
        body = []
        for row in rows:
            description = row.info.description or ""
            if not description.strip():
                problems.append(f"{row.owner} ({', '.join(row.envs) or row.key}) has no description")
            documented.update(row.envs)
            file_key = f"[{section.file_table}] {row.key}" if section.file_table else ""
            body.append([
                code(row.key),
                "<br>".join(code(env) for env in row.envs),
                code(file_key) if file_key else "",
                _flags(section, row, options),
                cell(_type(row.info.annotation) + _bounds(row.info) + _optional(row.info.annotation)),
                _default(row.info),
                cell(description),
            ])  # fmt: skip
        out.append(f"\n## {section.title}\n\n{section.intro}\n\n")
        out.append(table(["Setting", "Environment", "File", "Flag", "Type", "Default", "Description"], body))
    out.append(_command_line_only(options, documented))
    if problems:
        raise Undocumented(problems)
    return "".join(out)


def _command_line_only(options: list[tuple[str, click.Option]], documented: set[str]) -> str:
    """Options that read a variable no settings class defines (click reads it for them). Their help ends in
    the variable and the default (`[env: X; default: D]`): here those have columns of their own."""
    rows: dict[str, list[str]] = {}
    for command, option in options:
        envs = [e for e in environment_names(option) if e not in documented and e == option.envvar]
        for env in envs:
            description, default = split_env_note(option.help or "", env)
            flag = f"{code(option.opts[-1])} ({command})"
            rows.setdefault(env, [code(env), "", flag, code(default) if default else "", cell(description)])
            if command not in rows[env][2]:
                rows[env][2] += f", {flag}"
    if not rows:
        return ""
    intro = (
        "\n## Command-line options with a variable\n\n"
        "Options of one command that read a variable of their own.\n\n"
    )
    header = ["Environment", "File", "Flag", "Default", "Description"]
    return intro + table(header, [rows[e] for e in sorted(rows)])
