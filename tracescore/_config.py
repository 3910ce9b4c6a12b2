"""Settings files shared by every command, read one way.

One file may configure several commands: `[consume]`, `[sampling]`, `[alert]` and `[conversations]` tables
in TOML or YAML (a file without any of those tables configures whichever command reads it). Each command's
settings class derives from `FileSettings`, so the precedence is the same everywhere: explicit values
(flags) > environment variables > the file > the defaults written on the class.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, InitSettingsSource, PydanticBaseSettingsSource

__all__ = ["ConfigFileError", "FileSettings", "ServiceSettings", "one_line", "read_table"]

_COMMAND_TABLES = ("consume", "sampling", "alert", "conversations")

# The file's values for the settings being built now; a ContextVar, so concurrent loads cannot mix files.
_file_values: ContextVar[Mapping[str, Any] | None] = ContextVar("tracescore_config_file_values", default=None)

SettingsT = TypeVar("SettingsT", bound="FileSettings")


class ConfigFileError(ValueError):
    """A config file that cannot be read or parsed; the message is one line that starts with the file."""


def read_table(path: Path, table: str, error: type[ConfigFileError] = ConfigFileError) -> dict[str, Any]:
    """The `table` section of the TOML/YAML file at `path` (the whole file when it has no command tables)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise error(f"{path}: cannot read the config file ({reason})") from None
    suffix = path.suffix.lower()
    try:
        if suffix == ".toml":
            data: Any = tomllib.loads(text)
        elif suffix in (".yaml", ".yml"):
            data = yaml.safe_load(text) or {}
        else:
            raise error(f"{path}: a config file must be .toml, .yaml or .yml")
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        detail = " ".join(str(exc).split())
        raise error(f"{path}: not valid {suffix.lstrip('.').upper()}: {detail}") from None
    if not isinstance(data, dict):
        raise error(f"{path}: expected a table of settings, got {type(data).__name__}")
    sectioned = any(isinstance(data.get(name), dict) for name in _COMMAND_TABLES)
    section = data.get(table, {}) if sectioned else data
    if not isinstance(section, dict):
        raise error(f"{path}: '{table}' must be a table of settings")
    return section


class FileSettings(BaseSettings):
    """Settings read from init values > environment > a config file's table > defaults."""

    @classmethod
    def from_sources(
        cls: type[SettingsT], flags: Mapping[str, Any], file_values: Mapping[str, Any]
    ) -> SettingsT:
        token = _file_values.set(file_values)
        try:
            return cls(**flags)
        finally:
            _file_values.reset(token)

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


class ServiceSettings(FileSettings):
    """What the services that re-key the evaluation records share (`tracescore alert`, `tracescore
    conversations`)."""

    bootstrap_servers: str = Field(
        default="localhost:9092",
        description="Kafka brokers; unset here, TRACESCORE_BOOTSTRAP_SERVERS (the SDK's and consume's name) "
        "comes before this default.",
    )
    health_file: Path | None = Field(
        default=None,
        description="Touched on every pass of the service loop: a liveness probe that checks its age sees a "
        "stuck loop.",
    )


def one_line(exc: ValidationError) -> str:
    """Every problem of a validation error as `field.path: message` clauses on one line."""
    problems = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "settings"
        problems.append(f"{where}: {error['msg'].removeprefix('Value error, ')}")
    return "; ".join(problems)
