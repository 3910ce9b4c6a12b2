"""`tracescore consume` as users run it: a process that stops by itself and prints its counts; and what it
says of bad flags, files and variables (in process: `consume_with_bad_input`)."""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from _helpers import not_found_errors, wait_until
from _zygote import ZygoteProcess, popen, run
from click.testing import CliRunner
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from service_processes import checkout_env

from tests.consume.kafka_helpers import run_instrumented_app
from tracescore.cli import main
from tracescore.model import read_evaluation_record
from tracescore.testing.kafka_topics import input_producer, read_topic

pytestmark = pytest.mark.kafka


def test_consume_stops_on_idle_timeout_and_reports_counts(bootstrap: str, topic_prefix: str) -> None:
    producer = input_producer(bootstrap, [f"{topic_prefix}.spans"])
    producer.send(f"{topic_prefix}.spans", b"garbage").get(timeout=30)
    producer.close()
    done = run(
        [sys.executable, "-m", "tracescore.cli", "consume", "--bootstrap-servers", bootstrap,
         "--topic", f"{topic_prefix}.spans", "--group-id", topic_prefix,
         "--dlq-topic", f"{topic_prefix}.dlq", "--idle-timeout", "3"],
        env=checkout_env(), timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "dead_letters=1" in done.stderr and "messages=1" in done.stderr
    assert "dead-lettered" in done.stderr


def test_a_topic_nothing_was_written_to_says_what_to_check(bootstrap: str, topic_prefix: str) -> None:
    # A misspelt --topic: the consumer waits for it, never creating it (a topic nobody writes would be left
    # on the broker); the log and the summary say why nothing came, once: kafka-python's ERROR that the topic
    # is not found (at once, then every 30 s) is not logged on top.
    topic = f"{topic_prefix}.spnas"
    done = run(
        [sys.executable, "-m", "tracescore.cli", "consume", "--bootstrap-servers", bootstrap,
         "--topic", topic, "--group-id", topic_prefix, "--idle-timeout", "2"],
        env=checkout_env(), timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stderr.split())
    assert f"the spans topic {topic} does not exist" in said and "waiting for it" in said, said
    assert not_found_errors(done.stderr) == []
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        assert topic not in admin.list_topics(), "the consumer created the topic it reads"
    finally:
        admin.close()
    assert "give their topic with --topic or TRACESCORE_TOPIC" in said, said
    assert f"nothing read from {topic} at {bootstrap}" in said, said
    assert "a new --group-id reads the topic again" in said and "Nothing is scored?" in said, said


# One faithful answer, as an app's code: tracescore.init and shutdown around it (run_instrumented_app).
ANSWER = """
@tracescore.rag(route="/ask")
def answer(query, contexts):
    return "The head office is in Delhi."

answer("Where is the Oberoi Group's head office?", ["The Oberoi Group's head office is in Delhi."])
"""


def test_consume_started_before_the_app_scores_what_the_app_then_sends(
    bootstrap: str, topic_prefix: str
) -> None:
    """The consumer does not create its spans topic: started first (as the demo starts it), it waits until
    the app's SDK creates the topic at its first export, then reads it from the start. Stopped once the
    evaluation is written (an idle timeout raced the app's start on a loaded machine)."""
    topic, evaluations = f"{topic_prefix}.spans", f"{topic_prefix}.evaluations"
    consume = _consume_process(bootstrap, topic_prefix)
    log: list[str] = []
    reader = threading.Thread(target=_collect, args=(consume, log), daemon=True)
    reader.start()
    try:
        wait_until(lambda: _said(log, "does not exist"), "waiting for the topic")
        run_instrumented_app(bootstrap, topic, ANSWER)
        wait_until(lambda: len(read_topic(bootstrap, evaluations)) >= 1, "the evaluation", every_s=0.5)
        consume.send_signal(signal.SIGTERM)
        consume.wait(timeout=120)
    finally:
        if consume.poll() is None:
            consume.kill()
    reader.join(30)  # its last lines, the counts, read to the end of its stderr
    said = "".join(log)
    assert consume.returncode == 0, said
    assert f"the spans topic {topic} does not exist" in said, said
    assert "interactions=1 scored=1 " in said, said


# Twelve faithful answers: twelve traces, spread over the spans topic's partitions by trace id.
TWELVE_ANSWERS = """
@tracescore.rag(route="/ask")
def answer(query, contexts):
    return "The head office is in Delhi."

for n in range(12):
    answer(f"Where is the head office? ({n})", ["The Oberoi Group's head office is in Delhi."])
"""


def test_two_consumers_started_before_the_app_score_each_trace_once(
    bootstrap: str, topic_prefix: str
) -> None:
    """Two replicas of the consumer, one group, deployed before the app sent anything: both wait for the
    spans topic, and once it appears both are given partitions and every trace is scored once. One replica
    was left out of the group for good (elected leader of a rebalance it never finished): given none, it
    scored nothing."""
    topic, evaluations = f"{topic_prefix}.spans", f"{topic_prefix}.evaluations"
    consumers = [_consume_process(bootstrap, topic_prefix) for _ in range(2)]
    logs: list[list[str]] = [[], []]
    readers = [
        threading.Thread(target=_collect, args=(c, log), daemon=True)
        for c, log in zip(consumers, logs, strict=True)
    ]
    for reader in readers:
        reader.start()
    try:
        wait_until(lambda: all(_said(log, "does not exist") for log in logs), "both waiting for the topic")
        input_producer(bootstrap, [NewTopic(topic, 4, 1)]).close()  # as the app's first export does
        wait_until(lambda: all(_said(log, "assigned partitions: ['") for log in logs), "both assigned")
        run_instrumented_app(bootstrap, topic, TWELVE_ANSWERS)
        wait_until(lambda: len(read_topic(bootstrap, evaluations)) >= 12, "the 12 evaluations", every_s=0.5)
        for consume in consumers:
            consume.send_signal(signal.SIGTERM)
            consume.wait(timeout=120)
    finally:
        for consume in consumers:
            if consume.poll() is None:
                consume.kill()
    for reader in readers:
        reader.join(30)  # their last lines, the counts, read to the end of their stderr
    said = ["".join(log) for log in logs]
    assert [c.returncode for c in consumers] == [0, 0], said
    scored = [int(m.group(1)) for text in said for m in [re.search(r" scored=(\d+) ", text)] if m]
    assert len(scored) == 2 and sum(scored) == 12 and all(scored), said
    traces = [read_evaluation_record(m.value).trace_id for m in read_topic(bootstrap, evaluations)]
    assert len(traces) == len(set(traces)) == 12


def _collect(process: ZygoteProcess, lines: list[str]) -> None:
    for line in process.stderr or ():
        lines.append(line)


def _said(log: list[str], words: str) -> bool:
    return any(words in line for line in list(log))


def _consume_process(bootstrap: str, prefix: str, *args: str) -> ZygoteProcess:
    """`tracescore consume` reading `prefix`.spans in group `prefix`, writing `prefix`.evaluations; its log
    on its stderr."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TRACESCORE_")}
    return popen(
        [sys.executable, "-m", "tracescore.cli", "consume", "--bootstrap-servers", bootstrap,
         "--topic", f"{prefix}.spans", "--group-id", prefix, "--evaluations-topic", f"{prefix}.evaluations",
         "--dlq-topic", f"{prefix}.dlq", *args],
        stderr=subprocess.PIPE, text=True, env=checkout_env(clean),
    )  # fmt: skip


@dataclass(frozen=True)
class _Refused:
    exit_code: int
    errors: list[str]  # the lines click printed as its error ("Error: ...")
    warnings: list[str]  # what the command logged at WARNING or above


@pytest.fixture
def consume_with_bad_input(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., _Refused]:
    """`tracescore consume` given bad input, in process through the command's own entry (`main`): these tests
    are about reading flags, files and variables, not about the process, so none starts an interpreter
    (~1 CPU-s of imports each). Only the variables a test sets: the runner's own TRACESCORE_* would be read
    too. Port 1: nothing listens there, so the command fails on its input, or at once on Kafka."""
    for name in [n for n in os.environ if n.upper().startswith("TRACESCORE_")]:
        monkeypatch.delenv(name)

    def run(*args: str, env: dict[str, str] | None = None) -> _Refused:
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            command = ["consume", "--bootstrap-servers", "127.0.0.1:1", *args]
            result = CliRunner().invoke(main, command, env=env)
        # A crash, not a clear error: an exception other than the exit click makes, or a logged traceback.
        crash = result.exception if not isinstance(result.exception, SystemExit) else None
        assert crash is None, "".join(traceback.format_exception(crash))
        assert not [r for r in caplog.records if r.exc_info], caplog.text
        return _Refused(
            result.exit_code,
            [line for line in result.stderr.splitlines() if line.startswith("Error:")],
            [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING],
        )

    return run


def test_illegal_topic_name_fails_at_startup_with_a_one_line_error(
    consume_with_bad_input: Callable[..., _Refused],
) -> None:
    done = consume_with_bad_input("--evaluations-topic", "no spaces allowed")
    assert done.exit_code == 2, f"a usage error ({done.exit_code}): {done.errors}"
    assert done.errors == [
        "Error: invalid value for --evaluations-topic: 'no spaces allowed' is not a topic Kafka accepts: a "
        "Kafka topic name is 1 to 249 letters, digits, '.', '_' and '-', and not '.' or '..'"
    ]


@pytest.mark.parametrize("key", ["idle_timeout_s = 3", "default_rate = 0.5"])
def test_a_config_file_without_tables_says_which_table_each_setting_goes_in(
    tmp_path: Path, key: str, consume_with_bad_input: Callable[..., _Refused]
) -> None:
    # consume reads its file twice (its options, the sampling policy): a file without tables used to fail one
    # of the two, listing the other's settings as the valid ones.
    path = tmp_path / "consume.toml"
    path.write_text(key + "\n")
    done = consume_with_bad_input("--config", str(path))
    assert done.exit_code == 2, done.errors
    [error] = done.errors
    assert error.startswith(f"Error: {path}: settings outside a table ({key.split()[0]}): "), error
    assert "options from a [consume] table and the sampling policy from a [sampling] table" in error


def test_a_setting_beside_the_tables_is_refused_not_ignored(
    tmp_path: Path, consume_with_bad_input: Callable[..., _Refused]
) -> None:
    # A sampling key at the top level of a file with a [consume] table was read by neither reader.
    path = tmp_path / "consume.toml"
    path.write_text('default_rate = 0.5\n\n[consume]\ntopic = "spans"\n')
    done = consume_with_bad_input("--config", str(path), "--connect-timeout", "1")
    assert done.exit_code == 2, done.errors
    [error] = done.errors
    assert error.startswith(f"Error: {path}: settings outside a table (default_rate): "), error


_UNBOUNDED = "the LLM judge's spend is unbounded"
_LLM_JUDGE = ("--judge", "openai", "--base-url", "http://127.0.0.1:9/v1", "--connect-timeout", "1")


def test_an_llm_judge_without_a_budget_is_said_once_at_start(
    consume_with_bad_input: Callable[..., _Refused],
) -> None:
    """Without llm_budget (the default) the cascade sends the LLM judge every answer above its floor: on a
    route of long answers a quarter to a half of them (194 of 800 in one walk), and nothing said so."""
    done = consume_with_bad_input(*_LLM_JUDGE, env={"OPENAI_API_KEY": "sk-test"})
    warned = [line for line in done.warnings if _UNBOUNDED in line]
    assert len(warned) == 1, done.warnings
    [line] = warned
    assert "above cascade.min_probability (0.5)" in line and "long answers" in line
    assert "TRACESCORE_SAMPLING__LLM_BUDGET__TOKENS_PER_HOUR" in line
    assert "Sampling and the cascade > Long answers and the LLM budget" in line


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (_LLM_JUDGE, {"TRACESCORE_SAMPLING__LLM_BUDGET__TOKENS_PER_HOUR": "100000"}),
        (_LLM_JUDGE, {"TRACESCORE_SAMPLING__LLM_BUDGET__TOKENS_PER_DAY": "1500000"}),
        (_LLM_JUDGE, {"TRACESCORE_SAMPLING__CASCADE__SHARE": "0.05"}),
        (("--connect-timeout", "1"), {}),  # the offline judge alone spends nothing
    ],
    ids=["hour-budget", "day-budget", "share", "offline"],
)
def test_a_bounded_or_offline_consumer_says_nothing_of_llm_spend(
    consume_with_bad_input: Callable[..., _Refused], args: tuple[str, ...], env: dict[str, str]
) -> None:
    done = consume_with_bad_input(*args, env={"OPENAI_API_KEY": "sk-test", **env})
    assert not [line for line in done.warnings if _UNBOUNDED in line], done.warnings


def test_an_llm_budget_with_no_cascade_is_refused_not_ignored(
    consume_with_bad_input: Callable[..., _Refused],
) -> None:
    """The budget caps the cascade only: with --no-cascade, tokens_per_hour = 5000 spent 208,518 tokens on
    200 answers in a budget owner's walk, and nothing said so."""
    done = consume_with_bad_input(
        *_LLM_JUDGE, "--no-cascade",
        env={"OPENAI_API_KEY": "sk-test", "TRACESCORE_SAMPLING__LLM_BUDGET__TOKENS_PER_HOUR": "5000"},
    )  # fmt: skip
    assert done.exit_code == 2, done.errors
    [error] = done.errors
    assert "[sampling.llm_budget] caps the cascade's LLM judge only" in error
    assert "rate_limit.per_minute" in error and "Drop --no-cascade" in error


@pytest.mark.parametrize(
    ("env", "warned"),
    [
        ({}, True),
        ({"TRACESCORE_SAMPLING__RATE_LIMIT__PER_MINUTE": "60"}, False),
        ({"TRACESCORE_SAMPLING__DEFAULT_RATE": "0.1"}, False),
    ],
    ids=["unbounded", "rate-limit", "rate"],
)
def test_no_cascade_without_a_bound_says_the_spend_is_unbounded(
    consume_with_bad_input: Callable[..., _Refused], env: dict[str, str], warned: bool
) -> None:
    done = consume_with_bad_input(*_LLM_JUDGE, "--no-cascade", env={"OPENAI_API_KEY": "sk-test", **env})
    said = [line for line in done.warnings if "--no-cascade sends it every answer read" in line]
    assert len(said) == warned, done.warnings


def test_a_disabled_cascade_says_the_llm_judge_is_never_called(
    consume_with_bad_input: Callable[..., _Refused],
) -> None:
    """cascade.enabled = false with --judge openai: every record was the offline judge's, silently."""
    env = {"OPENAI_API_KEY": "sk-test", "TRACESCORE_SAMPLING__CASCADE__ENABLED": "false"}
    done = consume_with_bad_input(*_LLM_JUDGE, env=env)
    assert [line for line in done.warnings if "the LLM judge (--judge openai) is never called" in line]


def test_a_misspelt_variable_is_said_once_with_the_name_meant(
    consume_with_bad_input: Callable[..., _Refused],
) -> None:
    """TRACESCORE_BROKER was silently ignored (pydantic settings ignore names they do not know): the consumer
    went on with the default broker. Said once at start; the variables of other tools, and the valid ones,
    are not."""
    env = {
        "TRACESCORE_BROKER": "kafka:9092",
        "TRACESCORE_TOPIC": "spans",
        "TRACESCORE_ASSEMBLY__GRACE_S": "2",
        "TRACESCORE_ALERT_GROUP_ID": "alerts",  # another command's
        "TRACESCORE_PROMETHEUS_PORT": "9464",  # an option's own variable
        "KAFKA_BROKER": "kafka:9092",  # outside our prefix
    }
    done = consume_with_bad_input("--connect-timeout", "1", env=env)
    warned = [line for line in done.warnings if "no tracescore setting has that name" in line]
    assert len(warned) == 1, done.warnings
    assert (
        "TRACESCORE_BROKER is set" in warned[0] and "did you mean TRACESCORE_BOOTSTRAP_SERVERS?" in warned[0]
    )


def test_a_misspelt_variable_of_a_settings_group_is_said_with_the_group_s_name_meant(
    consume_with_bad_input: Callable[..., _Refused],
) -> None:
    """The judge's, sampling's, Phoenix's and the embeddings' variables have longer prefixes, which were
    taken for another command's and never checked: TRACESCORE_JUDGE_MODLE left the judge on its default
    model, silently. Another service's own (TRACESCORE_ALERT_*) is still that service's to say."""
    env = {
        "TRACESCORE_JUDGE_MODLE": "gpt-4o",
        "TRACESCORE_JUDGE_BASE_URL": "http://127.0.0.1:9/v1",  # valid
        "TRACESCORE_SAMPLING__DEFAULT_RAT": "0.5",
        "TRACESCORE_PHOENIX_ENDPIONT": "http://phoenix:6006",
        "TRACESCORE_EMBEDDINGS_MODLE": "text-embedding-3-small",
        "TRACESCORE_ALERT_GROUPID": "alerts",  # alert's own: said by tracescore alert
    }
    done = consume_with_bad_input("--connect-timeout", "1", env=env)
    warned = sorted(line for line in done.warnings if "no tracescore setting has that name" in line)
    meant = [
        ("TRACESCORE_EMBEDDINGS_MODLE", "TRACESCORE_EMBEDDINGS_MODEL"),
        ("TRACESCORE_JUDGE_MODLE", "TRACESCORE_JUDGE_MODEL"),
        ("TRACESCORE_PHOENIX_ENDPIONT", "TRACESCORE_PHOENIX_ENDPOINT"),
        ("TRACESCORE_SAMPLING__DEFAULT_RAT", "TRACESCORE_SAMPLING__DEFAULT_RATE"),
    ]
    assert len(warned) == len(meant), done.warnings
    for line, (name, valid) in zip(warned, meant, strict=True):
        assert f"{name} is set" in line and f"did you mean {valid}?" in line, line


def test_invalid_setting_from_the_environment_names_the_variable(
    consume_with_bad_input: Callable[..., _Refused],
) -> None:
    done = consume_with_bad_input(env={"TRACESCORE_POLL_TIMEOUT_MS": "0"})
    assert done.exit_code == 2, f"a usage error ({done.exit_code}): {done.errors}"
    [error] = done.errors
    assert error.startswith("Error: invalid value for TRACESCORE_POLL_TIMEOUT_MS "), error
    assert "greater than or equal to 1" in error


def test_each_consumer_process_reports_metrics_as_its_own_instance(monkeypatch: pytest.MonkeyPatch) -> None:
    from tracescore.cli._service import metrics_resource as _consumer_resource

    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    one, other = _consumer_resource().attributes, _consumer_resource().attributes
    assert one["service.name"] == "tracescore-consumer"
    assert one["service.instance.id"] != other["service.instance.id"]  # a group's series stay apart

    monkeypatch.setenv("OTEL_SERVICE_NAME", "evals-eu")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.instance.id=pod-7,deployment.environment=prod")
    configured = _consumer_resource().attributes
    assert configured["service.name"] == "evals-eu" and configured["service.instance.id"] == "pod-7"
    assert configured["deployment.environment"] == "prod"
