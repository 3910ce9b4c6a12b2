"""`tracescore alert`: a bad config or sink setting is a one-line usage error, never a traceback; what it
counts at its stop. (The running service through the CLI is exercised by the demo test too,
tests/examples/test_demo.py.)"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from alert_records import produce, record, write_config
from click.testing import CliRunner

from tracescore.cli import main


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            "rules:\n  - metric: faithfulness\n    warning: 0.5\n    critical: 0.9\n",
            "critical (0.9) must be below",
        ),
        ("rules:\n  - metric: helpfulness\n", "rules.0.metric: unknown metric 'helpfulness' (did you mean"),
        ("sinks:\n  - type: pager\n", "sinks.0"),
        (
            "sinks:\n  - type: webhook\n    url: http://x\n    secret_env: NOT_SET_ANYWHERE\n",
            "NOT_SET_ANYWHERE is not set",
        ),
    ],
)
def test_config_mistakes_are_one_line_errors(tmp_path: Path, config: str, message: str) -> None:
    path = tmp_path / "alert.yaml"
    path.write_text(config)
    result = CliRunner().invoke(main, ["alert", "--config", str(path)])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_a_missing_config_file_is_named(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["alert", "--config", str(tmp_path / "missing.yaml")])
    assert result.exit_code == 2, result.output
    assert "missing.yaml: cannot read the config file (No such file or directory)" in result.output


def test_unreachable_kafka_is_one_line_naming_the_address(closed_port: int) -> None:
    address = f"127.0.0.1:{closed_port}"  # nothing listens there
    result = CliRunner().invoke(main, ["alert", "--bootstrap-servers", address, "--connect-timeout", "1"])
    assert result.exit_code == 1
    # The line `tracescore consume` prints for the same mistake.
    assert f"Error: no Kafka broker reachable at {address} (starting; tried for 1s" in result.output
    # ...and says what to do about it, where the address came from: here the flag.
    assert "The address is the one --bootstrap-servers gave" in " ".join(result.output.split())
    assert "Traceback" not in result.output


def test_the_alert_reads_the_kafka_security_everyone_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    # The SDK's producer knobs in the shared environment are accepted; a SASL setting without its
    # mechanism is the same one-line error as for consume and the SDK; a flag names itself.
    monkeypatch.setenv("TRACESCORE_KAFKA__DELIVERY_TIMEOUT_MS", "60000")
    monkeypatch.setenv("TRACESCORE_KAFKA__TRACE_MESSAGES", "per_trace")
    monkeypatch.setenv("TRACESCORE_KAFKA__SASL_USERNAME", "scorer")
    monkeypatch.setenv("TRACESCORE_KAFKA__SASL_PASSWORD", "hunter2-secret")
    result = CliRunner().invoke(main, ["alert", "--kafka-security-protocol", "SASL_SSL"])
    assert result.exit_code == 2
    assert "needs sasl_mechanism, sasl_username and sasl_password" in result.output
    assert "hunter2-secret" not in result.output
    monkeypatch.setenv("TRACESCORE_KAFKA__SASL_MECHANISM", "SCRAM-SHA-256")
    result = CliRunner().invoke(main, ["alert"])  # SASL mechanism without a SASL protocol
    assert result.exit_code == 2
    assert "invalid value for TRACESCORE_KAFKA: sasl_mechanism SCRAM-SHA-256 needs security_protocol" in (
        result.output
    )
    monkeypatch.setenv("TRACESCORE_KAFKA__LINGER", "5")
    result = CliRunner().invoke(main, ["alert"])
    assert result.exit_code == 2
    assert "invalid value for TRACESCORE_KAFKA__LINGER: Extra inputs are not permitted" in result.output


@pytest.mark.kafka
def test_the_counts_line_counts_the_routes_too_quiet_for_their_drop_rule_to_arm(
    bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    # A drop rule that arms within 2 s (the rule's, the drop window's and the normal's spans) on a route of 10
    # answers a second: /billing's 3 answers, then nothing for the idle timeout, never get it there.
    drop = {"window_count": 2, "min_samples": 1, "normal_count": 10, "min_normal_samples": 10,
            "window_seconds": 0.5, "normal_seconds": 1}  # fmt: skip
    rule = {"warning": None, "critical": None, "window_count": 2, "min_samples": 1, "window_seconds": 0.5,
            "no_data_seconds": None, "drop": drop}  # fmt: skip
    config = write_config(tmp_path, topic_prefix, "", rules=[rule], sinks=[])
    now = datetime.now(UTC)
    produce(bootstrap, f"{topic_prefix}.evaluations", [record(1.0, now).model_dump_json().encode()] * 3)
    flags = ["--config", str(config), "--bootstrap-servers", bootstrap, "--idle-timeout", "4"]
    result = CliRunner().invoke(main, ["alert", *flags])
    assert result.exit_code == 0, result.output
    assert " evicted_routes=0 cannot_arm_routes=1 skipped: " in result.output, result.output
    assert "too few per normal_seconds to ever arm" in result.output, result.output
