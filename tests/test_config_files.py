"""One config file for every command: each reads its own table, with the same precedence and errors, and a
setting that several commands share has one default."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tracescore._config import ConfigFileError
from tracescore.alert import AlertConfig, RuleConfig, load_alert_config
from tracescore.cli import consume
from tracescore.consume import ConsumerSettings
from tracescore.conversations import ConversationsConfig, load_conversations_config
from tracescore.emit import KafkaOutputSettings
from tracescore.export import KafkaSpanExporter
from tracescore.instrument import InstrumentSettings
from tracescore.sample import CascadeConfig, load_sampling_config
from tracescore.score import Faithfulness

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


def test_every_loader_takes_the_path_as_a_string_too(tmp_path: Path) -> None:
    """A path from a variable or argv is a str: each public loader reads it as it reads a Path."""
    path = tmp_path / "all.toml"
    path.write_text(ONE_FILE_TOML)
    assert load_sampling_config(str(path)).default_rate == 0.25
    assert load_alert_config(str(path)).group_id == "alerts-eu"
    assert load_conversations_config(str(path)).quiet_seconds == 120


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


LOADERS = {
    "consume": lambda path: ConsumerSettings.load({}, path),
    "sampling": load_sampling_config,
    "alert": load_alert_config,
    "conversations": load_conversations_config,
}


@pytest.mark.parametrize(
    ("text", "meant"),
    [
        ('[consume]\ntopic = "rag-spans"\n\n[alerts]\ngroup_id = "eu"\n', "alert"),  # beside a good table
        ("[conversation]\nquiet_seconds = 120\n", "conversations"),  # alone: read as an unknown setting
        ("[consumer]\nidle_timeout_s = 3\n", "consume"),
    ],
)
@pytest.mark.parametrize("command", LOADERS)
def test_a_misnamed_table_is_said_with_the_name_meant(
    tmp_path: Path, command: str, text: str, meant: str
) -> None:
    """[alerts] beside [consume] left tracescore alert on its defaults without a word; [conversation] alone
    was an unknown setting 'conversation' (did you mean 'max_conversations'?)."""
    path = tmp_path / "tracescore.toml"
    path.write_text(text)
    with pytest.raises(ConfigFileError) as raised:
        LOADERS[command](path)
    assert f"is not a table tracescore reads (did you mean [{meant}]?)" in str(raised.value)


@pytest.mark.parametrize("command", LOADERS)
def test_a_key_beside_the_tables_is_refused_by_every_command(tmp_path: Path, command: str) -> None:
    path = tmp_path / "tracescore.toml"
    path.write_text('group_id = "eu"\n\n[consume]\ntopic = "rag-spans"\n\n[alert]\nwarning = 0.7\n')
    with pytest.raises(ConfigFileError) as raised:
        LOADERS[command](path)
    assert str(raised.value).startswith(f"{path}: group_id outside the tables [consume], [sampling], [alert]")


def test_a_services_own_tables_are_not_taken_for_misnamed_ones(tmp_path: Path) -> None:
    path = tmp_path / "alert.yaml"
    path.write_text("judge_health:\n  max_error_rate: 0.3\n")
    assert load_alert_config(path).judge_health.max_error_rate == 0.3


@pytest.mark.parametrize("load", [load_alert_config, load_conversations_config])
def test_every_service_names_a_misspelt_setting_with_the_valid_ones(load: Any, tmp_path: Path) -> None:
    path = tmp_path / "typo.toml"
    path.write_text("group_idd = 'eu'\n")
    with pytest.raises(ConfigFileError) as raised:
        load(path)
    assert "group_idd: unknown setting 'group_idd' (did you mean 'group_id'? valid: " in str(raised.value)


# Each service's internal topics (re-keyed records, state, the state of earlier versions), as every earlier
# version named them: the default group keeps them so an upgrade keeps its state.
TODAYS_TOPICS = {
    load_alert_config: {
        "routes_topic": "tracescore.alert.routes",
        "state_topic": "tracescore.alert.changelog",
        "legacy_state_topic": "tracescore.alert.state",
    },
    load_conversations_config: {
        "turns_topic": "tracescore.conversations.turns",
        "state_topic": "tracescore.conversations.changelog",
        "legacy_state_topic": "tracescore.conversations.state",
    },
}


def topics(config: BaseModel, load: Any) -> dict[str, Any]:
    return {name: getattr(config, name) for name in TODAYS_TOPICS[load]}


@pytest.mark.parametrize("load", TODAYS_TOPICS)
def test_the_default_group_keeps_the_topics_of_earlier_versions(load: Any, tmp_path: Path) -> None:
    config = load()
    assert topics(config, load) == TODAYS_TOPICS[load]
    path = tmp_path / "same.toml"
    path.write_text(f"group_id = {config.group_id!r}\n")  # named, yet the default: still today's names
    assert topics(load(path), load) == TODAYS_TOPICS[load]


@pytest.mark.parametrize(
    ("load", "keyed"), [(load_alert_config, "routes_topic"), (load_conversations_config, "turns_topic")]
)
def test_another_group_gets_topics_of_its_own(
    load: Any, keyed: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suffix = keyed.removesuffix("_topic")
    expected = {
        keyed: f"team-b.{suffix}",
        "state_topic": f"team-b.{suffix}.changelog",  # the changelog of the keyed topic: the service's own
        "legacy_state_topic": None,
    }
    assert topics(load(group_id="team-b"), load) == expected  # the flag
    path = tmp_path / "b.toml"
    path.write_text("group_id = 'team-b'\n")
    assert topics(load(path), load) == expected  # the file
    prefix = "TRACESCORE_ALERT_" if load is load_alert_config else "TRACESCORE_CONVERSATIONS_"
    monkeypatch.setenv(f"{prefix}GROUP_ID", "team-c")
    assert load().state_topic == f"team-c.{suffix}.changelog"  # the environment


@pytest.mark.parametrize(
    ("load", "keyed"), [(load_alert_config, "routes_topic"), (load_conversations_config, "turns_topic")]
)
def test_a_topic_set_explicitly_is_used_as_given(
    load: Any, keyed: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # How two groups share one state on purpose: each names the same topics.
    path = tmp_path / "shared.toml"
    path.write_text(f"group_id = 'team-b'\n{keyed} = 'shared.keyed'\nlegacy_state_topic = 'old.state'\n")
    prefix = "TRACESCORE_ALERT_" if load is load_alert_config else "TRACESCORE_CONVERSATIONS_"
    monkeypatch.setenv(f"{prefix}STATE_TOPIC", "shared.changelog")
    assert topics(load(path), load) == {
        keyed: "shared.keyed",
        "state_topic": "shared.changelog",
        "legacy_state_topic": "old.state",
    }
    assert load(path, state_topic="flag.changelog").state_topic == "flag.changelog"
    monkeypatch.delenv(f"{prefix}STATE_TOPIC")
    path.write_text("group_id = 'team-b'\nlegacy_state_topic = 'old.state'\n")
    assert load(path).state_topic == f"team-b.{keyed.removesuffix('_topic')}.changelog"  # still the group's


@pytest.mark.parametrize("load", TODAYS_TOPICS)
def test_a_group_id_that_cannot_name_a_topic_is_a_clear_error(load: Any, tmp_path: Path) -> None:
    with pytest.raises(ConfigFileError) as raised:
        load(group_id="team b")
    message = str(raised.value)
    assert "group_id 'team b' cannot name its own topics" in message and ".changelog'" in message
    assert "1 to 249 letters, digits, '.', '_' and '-', and not '.' or '..'; use such a group id" in message
    with pytest.raises(ConfigFileError, match="cannot name its own topics"):
        load(group_id="g" * 235)  # 235 characters + ".routes.changelog" is longer than Kafka allows
    keyed = next(iter(TODAYS_TOPICS[load]))
    given = load(group_id="team b", **{keyed: "b.keyed", "state_topic": "b.changelog"})
    assert given.state_topic == "b.changelog"  # both set: the group id names nothing


# Group ids a team might give both services: the scoring consumer's default, another service's default, a
# default topic's own prefix, names with dots.
GROUP_IDS = ["team-b", "tracescore", "tracescore-alert", "tracescore-conversations", "a.b", "team-b.routes"]


def internal_topics(config: BaseModel, load: Any) -> set[str]:
    return {topic for topic in topics(config, load).values() if topic}


@pytest.mark.parametrize("group", GROUP_IDS)
def test_alert_and_conversations_given_one_group_id_share_no_topic(group: str) -> None:
    """Both services once named their state `<group_id>.changelog`: given one group id, each restored the
    other's state as its own and wrote over it. Every name a service derives now ends in its own stage."""
    alert, conversations = load_alert_config(group_id=group), load_conversations_config(group_id=group)
    assert alert.state_topic != conversations.state_topic
    assert not internal_topics(alert, load_alert_config) & internal_topics(
        conversations, load_conversations_config
    )
    for config, load in ((alert, load_alert_config), (conversations, load_conversations_config)):
        # Nor does any group share one with the default groups of either service.
        defaults = internal_topics(load_alert_config(), load_alert_config) | internal_topics(
            load_conversations_config(), load_conversations_config
        )
        if config.group_id != load().group_id:
            assert not internal_topics(config, load) & defaults, (group, topics(config, load))


@pytest.mark.parametrize(
    ("load", "group"),
    [(load_alert_config, "tracescore.alert"), (load_conversations_config, "tracescore.conversations")],
)
def test_a_group_id_that_would_take_the_default_groups_topic_is_a_clear_error(load: Any, group: str) -> None:
    with pytest.raises(ConfigFileError) as raised:
        load(group_id=group)
    assert f"group_id {group!r} would name" in str(raised.value) and "the default group's" in str(
        raised.value
    )


TOPIC_SETTINGS = {
    load_alert_config: [
        "evaluations_topic", "conversations_topic", "routes_topic", "state_topic", "legacy_state_topic",
    ],
    load_conversations_config: [
        "evaluations_topic", "conversations_topic", "turns_topic", "state_topic", "legacy_state_topic",
        "spans_topic", "evidence_topic",
    ],
}  # fmt: skip


@pytest.mark.parametrize(
    ("load", "setting"), [(load, s) for load, names in TOPIC_SETTINGS.items() for s in names]
)
@pytest.mark.parametrize("name", ["team b.changelog", "team/b", "t" * 250, ".", "..", "état"])
def test_a_topic_name_kafka_refuses_is_a_config_error_naming_the_setting(
    load: Any, setting: str, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A topic set explicitly is used as given, but a name the broker refuses (InvalidTopicException, once
    running) is said at start, naming the setting, from a flag, the environment or the file alike."""
    rule = "is not a topic Kafka accepts: a Kafka topic name is 1 to 249 letters, digits, '.', '_' and '-'"
    with pytest.raises(ConfigFileError, match=f"{setting}: .* {rule}"):
        load(**{setting: name})
    prefix = "TRACESCORE_ALERT_" if load is load_alert_config else "TRACESCORE_CONVERSATIONS_"
    monkeypatch.setenv(f"{prefix}{setting.upper()}", name)
    with pytest.raises(ConfigFileError, match=f"{setting}: .* {rule}"):
        load()
    monkeypatch.delenv(f"{prefix}{setting.upper()}")
    path = tmp_path / "topics.yaml"
    path.write_text(f"{setting}: {name!r}\n")
    with pytest.raises(ConfigFileError, match=f"in {path}: {setting}: .* {rule}"):
        load(path)
    assert getattr(load(**{setting: "Team_B-2.x" * 24}), setting) == "Team_B-2.x" * 24  # 240: accepted


def test_an_optional_topic_left_empty_is_none_and_a_required_one_is_an_error() -> None:
    assert load_conversations_config(spans_topic="", legacy_state_topic="").spans_topic in ("", None)
    with pytest.raises(ConfigFileError, match="evaluations_topic: '' is not a topic Kafka accepts"):
        load_alert_config(evaluations_topic="")


def default(model: type[BaseModel], field: str) -> Any:
    return model.model_fields[field].default


def test_a_setting_the_commands_share_has_one_default() -> None:
    # A default written twice drifts: the services once looked for `localhost:9092`, consume `127.0.0.1:9092`.
    brokers = {default(m, "bootstrap_servers") for m in (ConsumerSettings, AlertConfig, ConversationsConfig)}
    assert len(brokers) == 1, brokers
    exporter_topic = inspect.signature(KafkaSpanExporter).parameters["topic"].default
    spans = {
        default(ConsumerSettings, "topic"),  # what consume scores
        default(InstrumentSettings, "topic"),  # what the SDK writes
        exporter_topic,
        default(KafkaOutputSettings, "spans_topic"),  # where evaluation spans go back to
        default(ConversationsConfig, "spans_topic"),
    }
    assert len(spans) == 1, spans
    evaluations = {
        default(m, "evaluations_topic")
        for m in (ConsumerSettings, KafkaOutputSettings, AlertConfig, ConversationsConfig)
    }
    assert len(evaluations) == 1, evaluations
    assert default(ConsumerSettings, "dlq_topic") == default(KafkaOutputSettings, "dlq_topic")
    largest = {
        default(m, "max_message_bytes") for m in (ConsumerSettings, KafkaOutputSettings, ConversationsConfig)
    }
    assert len(largest) == 1, largest


def test_every_command_defaults_to_the_same_metric() -> None:
    # What the consumer scores is what the cascade ranks and an alert rule watches, unless configured.
    scored = next(p.default for p in consume.params if p.name == "metrics")
    assert scored == default(CascadeConfig, "metric") == default(RuleConfig, "metric") == Faithfulness.name
