"""`tracescore alert` and `tracescore conversations` name a misspelt variable of theirs at start, as
`tracescore consume` does: each against its own settings (`TRACESCORE_ALERT_*`, `TRACESCORE_CONVERSATIONS_*`)
and the ones every command shares (`TRACESCORE_*`). The variables a config names (a webhook's `secret_env`)
are the user's, whatever their name: never warned about."""

from __future__ import annotations

import logging
import os
from importlib import resources
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracescore.cli import main
from tracescore.cli._environment import variables_json
from tracescore.testing import closed_port

WARNED = "is set, but no tracescore setting has that name, so it is ignored"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the variables a test sets: the runner's own TRACESCORE_* would be warned about too."""
    for name in [n for n in os.environ if n.upper().startswith("TRACESCORE_")]:
        monkeypatch.delenv(name)


def _warnings(caplog: pytest.LogCaptureFixture, *args: str) -> list[str]:
    """What the command warned about misspelt variables, started against a port where nothing listens (it
    stops at once, after reading its settings)."""
    with closed_port() as port, caplog.at_level(logging.WARNING, logger="tracescore.cli"):
        address = f"127.0.0.1:{port}"
        result = CliRunner().invoke(main, [*args, "--bootstrap-servers", address, "--connect-timeout", "1"])
    assert result.exit_code == 1 and "no Kafka broker reachable" in result.output, result.output
    return sorted(r.getMessage() for r in caplog.records if WARNED in r.getMessage())


@pytest.mark.parametrize(
    ("command", "misspelt", "meant", "valid"),
    [
        (
            "alert",
            "TRACESCORE_ALERT_GROUPID",
            "TRACESCORE_ALERT_GROUP_ID",
            "TRACESCORE_ALERT_ROUTES_PARTITIONS",
        ),
        (
            "conversations",
            "TRACESCORE_CONVERSATIONS_QUIET_SECOND",
            "TRACESCORE_CONVERSATIONS_QUIET_SECONDS",
            "TRACESCORE_CONVERSATIONS_FORGET_SECONDS",
        ),
    ],
)
def test_a_service_names_a_misspelt_variable_of_its_own_with_the_name_meant(
    command: str,
    misspelt: str,
    meant: str,
    valid: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in {
        misspelt: "3",
        valid: "6000" if command == "conversations" else "6",
        "TRACESCORE_BROKER": "kafka:9092",  # a shared one, misspelt: the service reads the brokers' too
        "TRACESCORE_KAFKA__SECURITY_PROTOCOL": "PLAINTEXT",  # valid, shared
        # the other service's, valid or not: its own to say
        "TRACESCORE_ALERT_GROUP_ID"
        if command == "conversations"
        else "TRACESCORE_CONVERSATIONS_GROUP_ID": "g",
        "TRACESCORE_CONVERSATIONS_QUIET_SECOND" if command == "alert" else "TRACESCORE_ALERT_GROUPID": "x",
        "KAFKA_BROKER": "kafka:9092",  # not ours
    }.items():
        monkeypatch.setenv(name, value)
    see = "(every variable: see the docs, Reference > Settings)"
    assert _warnings(caplog, command) == sorted(
        [
            f"{misspelt} {WARNED}: did you mean {meant}? {see}",
            f"TRACESCORE_BROKER {WARNED}: did you mean TRACESCORE_BOOTSTRAP_SERVERS? {see}",
        ]
    )


def test_the_variables_an_alert_config_names_are_the_user_s_never_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Named in our prefixes on purpose: a name like ours is still theirs.
    config = tmp_path / "alert.yaml"
    config.write_text(
        "sinks:\n"
        "  - type: webhook\n    url: http://127.0.0.1:9/a\n    secret_env: TRACESCORE_ALERT_HOOK_KEY\n"
        "  - type: webhook\n    url: http://127.0.0.1:9/b\n    secret_env: TRACESCORE_WEBHOOK_SECRET\n"
    )
    monkeypatch.setenv("TRACESCORE_ALERT_HOOK_KEY", "k1")
    monkeypatch.setenv("TRACESCORE_WEBHOOK_SECRET", "k2")
    monkeypatch.setenv("TRACESCORE_ALERT_HOOK_KEYS", "k3")  # named by no sink: a misspelt one
    [warned] = _warnings(caplog, "alert", "--config", str(config))
    assert warned.startswith(f"TRACESCORE_ALERT_HOOK_KEYS {WARNED}"), warned


def test_the_variables_the_check_reads_are_the_ones_the_settings_and_options_read() -> None:
    """The check reads every stage's variables from a list written from the settings classes and the
    commands' options (importing every stage at each start cost a third of it): the list is theirs now."""
    committed = resources.files("tracescore.cli").joinpath("_variables.json").read_text(encoding="utf-8")
    assert committed == variables_json(), "tracescore/cli/_variables.json is stale: run docs/gen_reference.py"
