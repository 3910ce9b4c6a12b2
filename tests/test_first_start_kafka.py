"""A team's first start, as processes on a broker where none of their topics exists yet: the application
with the SDK, then `tracescore consume`, `tracescore alert` and `tracescore conversations`. Each creates
what it writes (what it reads is its writer's), and none logs an ERROR line (kafka-python's "Topic X not
found in cluster metadata" when a topic is auto-created by a first send, or asked for before the broker's
metadata shows it, used to be one on the application's first start)."""

from __future__ import annotations

import os
import re
import sys
import textwrap
from pathlib import Path

import pytest
from _zygote import run
from service_processes import checkout_env

from tracescore.testing.kafka_topics import read_topic

pytestmark = pytest.mark.kafka

REPO = Path(__file__).resolve().parents[1]
ERROR_LINE = re.compile(r"\bERROR\b")

APP = """
import logging
import tracescore

logging.basicConfig(level=logging.WARNING)  # as an application logs: kafka-python's errors would show
tracescore.init(service_name="first-app", bootstrap_servers={bootstrap!r}, topic={topic!r})

@tracescore.rag(route="/ask")
def answer(query, contexts):
    return "The head office is in Delhi."

answer("Where is the Oberoi Group's head office?", ["The Oberoi Group's head office is in Delhi."])
tracescore.shutdown(timeout_s=60)
"""


def _run(args: list[str], env: dict[str, str] | None = None) -> str:
    # The runner's own TRACESCORE_* variables must not reach the processes (a topic or a group of theirs).
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TRACESCORE_")}
    done = run([sys.executable, *args], timeout=240, cwd=REPO, env=checkout_env({**clean, **(env or {})}))
    assert done.returncode == 0, done.stderr
    return done.stderr


def _errors(log: str) -> list[str]:
    return [line for line in log.splitlines() if ERROR_LINE.search(line)]


def test_the_first_start_of_the_app_and_of_each_service_logs_no_error(
    bootstrap: str, topic_prefix: str
) -> None:
    p = topic_prefix
    service = ["-m", "tracescore.cli"]
    logs = {
        "app (SDK)": _run(["-c", textwrap.dedent(APP.format(bootstrap=bootstrap, topic=f"{p}.spans"))]),
        "consume": _run([
            *service, "consume", "--bootstrap-servers", bootstrap, "--topic", f"{p}.spans", "--group-id", p,
            "--evaluations-topic", f"{p}.evaluations", "--dlq-topic", f"{p}.dlq",
            "--conversation-evidence-topic", f"{p}.evidence", "--idle-timeout", "2",
        ]),
        "alert": _run([
            *service, "alert", "--bootstrap-servers", bootstrap, "--evaluations-topic", f"{p}.evaluations",
            "--group-id", f"{p}-alert", "--idle-timeout", "1",
        ]),
        "conversations": _run(
            [
                *service, "conversations", "--bootstrap-servers", bootstrap,
                "--evaluations-topic", f"{p}.evaluations", "--conversations-topic", f"{p}.conversations",
                "--evidence-topic", f"{p}.evidence", "--group-id", f"{p}-conversations",
                "--idle-timeout", "1",
            ],
            env={"TRACESCORE_CONVERSATIONS_SPANS_TOPIC": f"{p}.spans"},
        ),
    }  # fmt: skip
    # Records went through: the services wrote and read, not only started.
    assert len(read_topic(bootstrap, f"{p}.evaluations")) == 1
    assert "records=1" in logs["alert"], logs["alert"]
    assert {name: _errors(log) for name, log in logs.items()} == {name: [] for name in logs}
