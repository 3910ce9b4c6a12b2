"""Consumer settings: one precedence (flags > environment > config file > defaults), clear errors, secrets
that never print."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tracescore.cli import consume
from tracescore.consume import ConfigFileError, ConsumerSettings


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tracescore.toml"
    path.write_text(text)
    return path


def test_flags_beat_environment_beat_file_beat_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write(
        tmp_path,
        """
        [consume]
        topic = "from-file"
        group_id = "file-group"
        dlq_topic = "file-dlq"
        [consume.assembly]
        grace_s = 7.0
        """,
    )
    monkeypatch.setenv("TRACESCORE_GROUP_ID", "env-group")
    monkeypatch.setenv("TRACESCORE_DLQ_TOPIC", "env-dlq")
    monkeypatch.setenv("TRACESCORE_ASSEMBLY__MAX_WAIT_S", "9")
    settings = ConsumerSettings.load({"dlq_topic": "flag-dlq"}, config)
    assert settings.dlq_topic == "flag-dlq", "a flag beats the environment and the file"
    assert settings.group_id == "env-group", "the environment beats the file"
    assert settings.topic == "from-file", "the file beats the default"
    assert settings.evaluations_topic == "tracescore.evaluations", "the default otherwise"
    assert (settings.assembly.grace_s, settings.assembly.max_wait_s) == (7.0, 9.0), "nested from both"


def test_a_config_file_that_is_not_toml_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigFileError, match=r"tracescore.toml: not valid TOML"):
        ConsumerSettings.load({}, write(tmp_path, "topic = [unclosed"))


def test_unknown_settings_in_the_file_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="topik"):
        ConsumerSettings.load({}, write(tmp_path, 'topik = "typo"'))


def test_sasl_password_never_prints(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACESCORE_KAFKA__SECURITY_PROTOCOL", "SASL_PLAINTEXT")
    monkeypatch.setenv("TRACESCORE_KAFKA__SASL_MECHANISM", "SCRAM-SHA-512")
    monkeypatch.setenv("TRACESCORE_KAFKA__SASL_USERNAME", "scorer")
    monkeypatch.setenv("TRACESCORE_KAFKA__SASL_PASSWORD", "hunter2-secret")
    settings = ConsumerSettings.load({})
    assert "hunter2-secret" not in repr(settings) and "hunter2-secret" not in str(settings.model_dump())
    config = settings.client_config()
    assert config["sasl_plain_password"] == "hunter2-secret" and config["sasl_mechanism"] == "SCRAM-SHA-512"
    assert config["security_protocol"] == "SASL_PLAINTEXT"


def test_the_sdk_s_producer_settings_in_the_shared_environment_are_accepted_and_ignored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One ConfigMap for the app and the service: the SDK's knobs must not stop the consumer.
    monkeypatch.setenv("TRACESCORE_KAFKA__DELIVERY_TIMEOUT_MS", "60000")
    monkeypatch.setenv("TRACESCORE_KAFKA__LINGER_MS", "20")
    monkeypatch.setenv("TRACESCORE_KAFKA__TRACE_MESSAGES", "per_trace")
    settings = ConsumerSettings.load({})
    assert settings.kafka.delivery_timeout_ms == 60_000 and settings.kafka.trace_messages == "per_trace"
    config = settings.client_config()
    assert not {"delivery_timeout_ms", "linger_ms", "trace_messages"} & set(config)
    help_text = CliRunner().invoke(consume, ["--help"], terminal_width=400).output
    assert "--kafka-delivery-timeout-ms" not in help_text and "--kafka-sasl-mechanism" in help_text
    assert "--kafka-trace-messages" not in help_text


def test_an_unknown_kafka_variable_is_one_line_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACESCORE_KAFKA__DELIVERY_TIMEOUT", "60000")  # _MS missing
    result = CliRunner().invoke(consume, [])
    assert result.exit_code == 2
    [line] = [line for line in result.output.splitlines() if line.startswith("Error")]
    assert "TRACESCORE_KAFKA__DELIVERY_TIMEOUT " in line
    assert "unknown setting 'delivery_timeout' (did you mean 'delivery_timeout_ms'? valid: " in line


def test_a_misspelt_assembly_setting_is_refused_in_the_file_and_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, "[consume.assembly]\nmax_wiat_s = 60\n")
    result = CliRunner().invoke(consume, ["--config", str(path)])
    assert result.exit_code == 2
    assert "unknown setting 'max_wiat_s' (did you mean 'max_wait_s'?" in result.output, result.output
    monkeypatch.setenv("TRACESCORE_ASSEMBLY__MAX_WIAT_S", "60")
    result = CliRunner().invoke(consume, [])
    assert result.exit_code == 2
    assert "unknown setting 'max_wiat_s' (did you mean 'max_wait_s'?" in result.output, result.output


def test_a_misspelt_setting_in_the_config_file_is_named_with_the_valid_ones(tmp_path: Path) -> None:
    # A judge is chosen on the command line; in the [consume] table it is a setting that does not exist.
    path = write(tmp_path, '[consume]\ntopik = "spans"\njudge = "openai"\n')
    result = CliRunner().invoke(consume, ["--config", str(path)])
    assert result.exit_code == 2
    [line] = [line for line in result.output.splitlines() if line.startswith("Error")]
    # Named as the file's keys: there is no TRACESCORE_TOPIK the user could look for.
    table = f"in the [consume] table of {path}: unknown setting"
    assert f"invalid value for `topik` {table} 'topik' (did you mean 'topic'? valid: " in line, line
    assert f"invalid value for `judge` {table} 'judge' (valid: " in line, line
    assert "TRACESCORE_TOPIK" not in line, line


def test_a_sampling_rule_naming_a_metric_that_does_not_exist_stops_the_consumer(tmp_path: Path) -> None:
    path = write(tmp_path, "[[sampling.rates]]\nmetric = 'answer_relevance'\nrate = 0.1\n")
    result = CliRunner().invoke(
        consume, ["--config", str(path), "--metrics", "faithfulness,answer_relevancy"]
    )
    assert result.exit_code == 2, result.output
    assert (
        "rates.0.metric: unknown metric 'answer_relevance' (did you mean 'answer_relevancy'?" in result.output
    )


def test_sasl_without_a_mechanism_is_one_line_for_the_consumer_as_for_the_sdk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TRACESCORE_KAFKA__SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("TRACESCORE_KAFKA__SASL_USERNAME", "scorer")
    monkeypatch.setenv("TRACESCORE_KAFKA__SASL_PASSWORD", "hunter2-secret")
    result = CliRunner().invoke(consume, [])
    assert result.exit_code == 2
    assert "needs sasl_mechanism, sasl_username and sasl_password" in result.output
    assert "hunter2-secret" not in result.output


def test_help_names_every_option_s_environment_variable_and_default() -> None:
    shown = CliRunner().invoke(consume, ["--help"], terminal_width=400).output
    for line in (
        "TRACESCORE_BOOTSTRAP_SERVERS",
        "TRACESCORE_ASSEMBLY__GRACE_S",
        "TRACESCORE_KAFKA__SASL_PASSWORD",
    ):
        assert line in shown
    assert "--idle-timeout" in shown and "--max-in-flight" in shown and "--kafka-security-protocol" in shown
    assert "default: otlp_spans" in shown


def test_an_invalid_flag_is_one_usage_line_naming_the_flag() -> None:
    result = CliRunner().invoke(consume, ["--max-in-flight", "0"])
    assert result.exit_code == 2
    assert "invalid value for --max-in-flight: Input should be greater than or equal to 1" in result.output


# consume's topic settings: its input (`topic`) and every `*_topic`, as for alert and conversations.
TOPIC_SETTINGS = [n for n in ConsumerSettings.model_fields if n == "topic" or n.endswith("_topic")]
KAFKA_RULE = (
    "is not a topic Kafka accepts: a Kafka topic name is 1 to 249 letters, digits, '.', '_' and '-', and not "
    "'.' or '..'"
)


def test_every_topic_setting_of_consume_is_checked() -> None:
    assert TOPIC_SETTINGS == [
        "topic", "evaluations_topic", "dlq_topic", "evaluation_spans_topic", "conversation_evidence_topic",
    ]  # fmt: skip


@pytest.mark.parametrize("setting", TOPIC_SETTINGS)
@pytest.mark.parametrize("name", ["team b.spans", "team/b", "t" * 250, ".", "..", "état"])
def test_a_topic_kafka_refuses_stops_consume_at_start_naming_the_setting(
    setting: str, name: str, tmp_path: Path
) -> None:
    """The rule and the words of `tracescore alert` and `tracescore conversations`, from a flag, the
    environment or the file alike: one line at start, not an InvalidTopicException once running."""
    variable = f"TRACESCORE_{setting.upper()}"
    path = write(tmp_path, f"[consume]\n{setting} = {name!r}\n")
    for args, env, where in (
        ([f"--{setting.replace('_', '-')}", name], {}, f"--{setting.replace('_', '-')}"),
        ([], {variable: name}, f"{variable} (or `{setting}` in --config)"),
        (["--config", str(path)], {}, f"`{setting}` in the [consume] table of {path}"),
    ):
        result = CliRunner().invoke(consume, args, env=env)
        assert result.exit_code == 2, result.output
        errors = [line for line in result.output.splitlines() if line.startswith("Error")]
        assert errors == [f"Error: invalid value for {where}: {name!r} {KAFKA_RULE}"], (args, env)


@pytest.mark.parametrize("setting", TOPIC_SETTINGS)
def test_a_topic_name_of_249_characters_is_accepted(setting: str) -> None:
    assert getattr(ConsumerSettings.load({setting: "Team_B-2.x" * 24 + "abcdefghi"}), setting) == (
        "Team_B-2.x" * 24 + "abcdefghi"
    )


def test_an_evaluation_spans_topic_left_empty_is_the_spans_topic() -> None:
    assert ConsumerSettings.load({"evaluation_spans_topic": "", "topic": "spans"}).spans_out_topic == "spans"
    assert ConsumerSettings.load({"conversation_evidence_topic": ""}).conversation_evidence_topic is None
