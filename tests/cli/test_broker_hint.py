"""When no broker answers, the error says where the address came from: the flag, a variable, a config file or
the default. The hint named --bootstrap-servers and TRACESCORE_BOOTSTRAP_SERVERS whatever the source, and
setting that variable does nothing where a config file's bootstrap_servers comes first (`tracescore alert
--config deploy/alert/alert.yaml`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracescore.cli import main
from tracescore.cli._service import service_settings
from tracescore.conversations import load_conversations_config

GENERIC = "Give its address as host:port with --bootstrap-servers or TRACESCORE_BOOTSTRAP_SERVERS"


def _error(*args: str, env: dict[str, str] | None = None) -> str:
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("TRACESCORE_")}
    runner = CliRunner(env={**unset, **(env or {})})
    result = runner.invoke(main, [*args, "--connect-timeout", "1"], catch_exceptions=False)
    assert result.exit_code == 1, result.output
    [line] = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    return line


def test_a_config_files_address_is_named_with_the_file_not_the_variable_it_overrides(tmp_path: Path) -> None:
    config = tmp_path / "alert.yaml"
    config.write_text("bootstrap_servers: 127.0.0.1:1\n")
    said = _error("alert", "--config", str(config), env={"TRACESCORE_BOOTSTRAP_SERVERS": "127.0.0.1:2"})
    assert "no Kafka broker reachable at 127.0.0.1:1" in said, said
    assert f"The address came from bootstrap_servers in {config}: correct it there" in said, said
    assert "--bootstrap-servers, which comes first" in said and GENERIC not in said, said


@pytest.mark.parametrize(
    ("args", "variable"),
    [
        (("alert",), "TRACESCORE_BOOTSTRAP_SERVERS"),  # after the file, for the services
        (("conversations",), "TRACESCORE_CONVERSATIONS_BOOTSTRAP_SERVERS"),
        (("tail",), "TRACESCORE_BOOTSTRAP_SERVERS"),
    ],
)
def test_a_variables_address_is_named_with_the_variable(args: tuple[str, ...], variable: str) -> None:
    said = _error(*args, env={variable: "127.0.0.1:1"})
    assert f"The address came from {variable}: correct it there" in said, said


def test_a_variable_that_comes_before_the_file_is_named_over_it(tmp_path: Path) -> None:
    config = tmp_path / "tracescore.toml"
    config.write_text('[consume]\nbootstrap_servers = "127.0.0.1:2"\n')
    said = _error("tail", "--config", str(config), env={"TRACESCORE_BOOTSTRAP_SERVERS": "127.0.0.1:1"})
    assert "reachable at 127.0.0.1:1" in said and "came from TRACESCORE_BOOTSTRAP_SERVERS" in said, said


def test_the_flags_address_is_named_with_the_flag(tmp_path: Path) -> None:
    config = tmp_path / "alert.yaml"
    config.write_text("bootstrap_servers: 127.0.0.1:2\n")
    said = _error("alert", "--config", str(config), "--bootstrap-servers", "127.0.0.1:1")
    assert "reachable at 127.0.0.1:1" in said, said
    assert said.endswith("The address is the one --bootstrap-servers gave: give the broker's as host:port")


def test_no_flag_variable_or_file_names_the_default_as_the_addresss_source(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The source the error names (tests/test_kafka.py: what it says for the default). Asked of the settings,
    not of a broker: one may answer at the default address on this machine."""
    for name in [k for k in os.environ if k.startswith("TRACESCORE_")]:
        monkeypatch.delenv(name)
    _, connection = service_settings(load_conversations_config, None, 1.0, {})
    assert connection.bootstrap_origin is not None and connection.bootstrap_origin.kind == "default"
