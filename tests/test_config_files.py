"""One config file for every command: each reads its own table, with the same precedence and errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracescore._config import ConfigFileError
from tracescore.alert import load_alert_config
from tracescore.consume import ConsumerSettings
from tracescore.conversations import load_conversations_config
from tracescore.sample import load_sampling_config

ONE_FILE_TOML = """
[consume]
topic = "rag-spans"

[sampling]
default_rate = 0.25

[alert]
group_id = "alerts-eu"

[conversations]
quiet_seconds = 120
"""

ONE_FILE_YAML = """
consume:
  topic: rag-spans
sampling:
  default_rate: 0.25
alert:
  group_id: alerts-eu
conversations:
  quiet_seconds: 120
"""


@pytest.mark.parametrize(("name", "text"), [("all.toml", ONE_FILE_TOML), ("all.yaml", ONE_FILE_YAML)])
def test_one_file_configures_every_command_from_its_own_table(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert ConsumerSettings.load({}, path).topic == "rag-spans"
    assert load_sampling_config(path).default_rate == 0.25
    assert load_alert_config(path).group_id == "alerts-eu"
    assert load_conversations_config(path).quiet_seconds == 120


def test_a_table_for_another_command_does_not_leak_into_this_one(tmp_path: Path) -> None:
    path = tmp_path / "consume-only.toml"
    path.write_text('[consume]\ntopic = "rag-spans"\n')
    # The sampling policy and the alerter see no table of theirs, so they keep their defaults.
    assert load_sampling_config(path).default_rate == load_sampling_config().default_rate
    assert load_alert_config(path).group_id == load_alert_config().group_id


def test_every_command_reports_a_broken_file_the_same_way(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text("topic = [unclosed\n")
    for load in (lambda: ConsumerSettings.load({}, path), lambda: load_sampling_config(path),
                 lambda: load_alert_config(path), lambda: load_conversations_config(path)):  # fmt: skip
        with pytest.raises(ConfigFileError) as raised:
            load()
        assert str(raised.value).startswith(f"{path}: not valid TOML") and "\n" not in str(raised.value)
