"""`tracescore conversations`: a bad config is a one-line usage error, unreachable Kafka one line naming the
address, never a traceback. (The service itself runs through the real broker in tests/conversations.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from _helpers import wait_until
from click.testing import CliRunner

from tracescore.cli import main
from tracescore.testing.kafka_topics import input_producer
from tracescore.testing.phoenix import PhoenixServer


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("quiet_seconds: 600\nforget_seconds: 60\n", "forget_seconds (60) is below quiet_seconds (600)"),
        ("max_turns: 0\n", "max_turns: Input should be greater than or equal to 1"),
        ("quiet: 5\n", "quiet: unknown setting 'quiet' (valid: "),
    ],
)
def test_config_mistakes_are_one_line_errors(tmp_path: Path, config: str, message: str) -> None:
    path = tmp_path / "conversations.yaml"
    path.write_text(config)
    result = CliRunner().invoke(main, ["conversations", "--config", str(path)])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_unreachable_kafka_is_one_line_naming_the_address(closed_port: int) -> None:
    address = f"127.0.0.1:{closed_port}"  # nothing listens there
    result = CliRunner().invoke(
        main, ["conversations", "--bootstrap-servers", address, "--connect-timeout", "1"]
    )
    assert result.exit_code == 1
    assert f"Error: no Kafka broker reachable at {address} (starting; tried for 1s" in result.output
    assert "Traceback" not in result.output


@pytest.mark.kafka
def test_the_command_writes_a_record_per_conversation_and_says_what_it_did(
    bootstrap: str, topic_prefix: str
) -> None:
    _writes_a_record_per_conversation(bootstrap, topic_prefix, phoenix=None)


@pytest.mark.kafka
def test_the_command_with_phoenix_writes_a_record_per_conversation_and_posts_it(
    bootstrap: str, topic_prefix: str, phoenix_server: PhoenixServer
) -> None:
    """The session's real Phoenix (asked for by name, so this test runs on its worker): the conversation's
    record is posted as a session annotation."""
    _writes_a_record_per_conversation(bootstrap, topic_prefix, phoenix=phoenix_server.base_url)


def _writes_a_record_per_conversation(bootstrap: str, topic_prefix: str, phoenix: str | None) -> None:
    from tracescore.model import EvaluationRecord, MetricStatus

    producer = input_producer(bootstrap, [f"{topic_prefix}.evaluations"], acks="all")
    for n, session in enumerate(["s-1", "s-1", None]):
        record = EvaluationRecord(
            trace_id=f"{n:032x}", span_id=f"{n:016x}", service_name="chat", route="/chat",
            metric="faithfulness", score=1.0, label="faithful", status=MetricStatus.OK, judge="offline",
            session_id=session, timestamp="2026-01-01T00:00:00Z",
        )  # fmt: skip
        producer.send(f"{topic_prefix}.evaluations", value=record.model_dump_json().encode()).get(30)
    producer.close()
    env = {
        "TRACESCORE_CONVERSATIONS_TURNS_TOPIC": f"{topic_prefix}.turns",
        "TRACESCORE_CONVERSATIONS_STATE_TOPIC": f"{topic_prefix}.state",
        "TRACESCORE_CONVERSATIONS_SPANS_TOPIC": f"{topic_prefix}.spans",
        # Not the default name, which other tests' consumers write on the shared broker: once it exists,
        # stage 1 joins its group too (and another test's records are read).
        "TRACESCORE_CONVERSATIONS_EVIDENCE_TOPIC": f"{topic_prefix}.evidence",
    }
    flags = [
        "--bootstrap-servers", bootstrap, "--evaluations-topic", f"{topic_prefix}.evaluations",
        "--conversations-topic", f"{topic_prefix}.conversations", "--group-id", topic_prefix,
        "--quiet-seconds", "1", "--idle-timeout", "3",
    ]  # fmt: skip
    if phoenix is not None:
        flags += ["--phoenix-endpoint", phoenix]
    result = CliRunner().invoke(main, ["conversations", *flags], env=env)
    assert result.exit_code == 0, result.output
    assert "turn_records=2 records=1 (revisions 0)" in result.output
    assert "skipped: no_conversation=1" in result.output
    assert "state: partitions_read=6" in result.output, "the state of each turns partition read back once"
    # The Phoenix sink's counts, when it ran, as `tracescore consume`'s summary says them.
    said = "  phoenix: posted=1; dropped: none"
    assert (said in result.output.splitlines()) is (phoenix is not None), result.output


@pytest.mark.kafka
def test_a_member_rebalancing_unlike_its_group_is_refused_with_one_line_saying_what_to_do(
    bootstrap: str, topic_prefix: str
) -> None:
    """An upgrade run side by side with members of the other rebalance protocol (tracescore before it had
    the setting rebalances eagerly): kafka-python refuses one member mixing both."""
    import threading

    from tracescore.conversations import ConversationsConfig, ConversationService

    env = {
        "TRACESCORE_CONVERSATIONS_TURNS_TOPIC": f"{topic_prefix}.turns",
        "TRACESCORE_CONVERSATIONS_STATE_TOPIC": f"{topic_prefix}.state",
        "TRACESCORE_CONVERSATIONS_SPANS_TOPIC": f"{topic_prefix}.spans",
        # Not the default name, which other tests' consumers write on the shared broker: once it exists,
        # stage 1 joins its group too (and another test's records are read).
        "TRACESCORE_CONVERSATIONS_EVIDENCE_TOPIC": f"{topic_prefix}.evidence",
        "TRACESCORE_CONVERSATIONS_REBALANCE_PROTOCOL": "cooperative",
    }
    names = {name.removeprefix("TRACESCORE_CONVERSATIONS_").lower(): value for name, value in env.items()}
    older = ConversationService(
        ConversationsConfig(
            **{**names, "rebalance_protocol": "eager"},
            bootstrap_servers=bootstrap,
            evaluations_topic=f"{topic_prefix}.evaluations",
            group_id=topic_prefix,
        )
    )
    running = threading.Thread(target=older.run, daemon=True)
    running.start()
    try:
        wait_until(lambda: older.first_assigned_at is not None, "the older member in the group first")
        flags = [
            "--bootstrap-servers", bootstrap, "--evaluations-topic", f"{topic_prefix}.evaluations",
            "--group-id", topic_prefix, "--idle-timeout", "30",
        ]  # fmt: skip
        result = CliRunner().invoke(main, ["conversations", *flags], env=env)
    finally:
        older.stop()
        running.join(60)
    assert result.exit_code == 1, result.output
    assert f"group '{topic_prefix}' refused this member: its members rebalance eagerly" in result.output
    assert "start new members with rebalance_protocol eager until the old ones are gone" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(("quiet", "said"), [([], True), (["--quiet-seconds", "5"], False)])
def test_an_idle_timeout_shorter_than_the_quiet_period_says_how_long_it_will_wait(
    closed_port: int, quiet: list[str], said: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """`--idle-timeout 10` alone (no --quiet-seconds) ran 15 minutes past the last turn, silently: a team
    trying it took it for hung. The line comes before the service connects."""
    caplog.set_level("INFO", logger="tracescore.conversations")
    flags = [
        "--bootstrap-servers",
        f"127.0.0.1:{closed_port}",
        "--connect-timeout",
        "1",
        "--idle-timeout",
        "10",
    ]
    result = CliRunner().invoke(main, ["conversations", *flags, *quiet])
    assert result.exit_code == 1, result.output  # nothing listens there: it stops after saying it
    hint = (
        "--idle-timeout 10s stops once every open conversation is written, each 900s after its last turn "
        "(quiet_seconds); to try it, give --quiet-seconds 5"
    )
    assert (hint in caplog.messages) is said, caplog.messages
