"""`tracescore alert`: a bad config or sink setting is a one-line usage error, never a traceback.
(The running service through the CLI is exercised by the demo test, tests/examples/test_demo.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tracescore.cli import main


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            "rules:\n  - metric: faithfulness\n    warning: 0.5\n    critical: 0.9\n",
            "critical (0.9) must be below",
        ),
        ("rules:\n  - metric: helpfulness\n", "unknown metric helpfulness"),
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


def test_unreachable_kafka_is_one_line_naming_the_address() -> None:
    from tracescore.alert.testing import free_port

    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    result = CliRunner().invoke(main, ["alert", "--bootstrap-servers", address])
    assert result.exit_code == 1
    assert f"Error: Kafka at {address}:" in result.output
    assert "Traceback" not in result.output
