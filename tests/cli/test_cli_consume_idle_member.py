"""`tracescore consume` started beyond its topic's partitions (a replica scaled past them): its closing
summary says why it read nothing, instead of asking whether the app sends there."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest
from _helpers import wait_until
from _zygote import popen, run
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from service_processes import checkout_env

pytestmark = pytest.mark.kafka


def _consume(bootstrap: str, prefix: str, *args: str) -> list[str]:
    return [
        *(sys.executable, "-m", "tracescore.cli", "consume", "--bootstrap-servers", bootstrap),
        *("--topic", f"{prefix}.spans", "--group-id", prefix, "--evaluations-topic", f"{prefix}.evaluations"),
        *("--dlq-topic", f"{prefix}.dlq", "--conversation-evidence-topic", "", *args),
    ]


def test_a_member_beyond_the_partitions_says_it_was_given_none(
    bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    """A member of a group that already had a member per partition was given none and read nothing; its
    summary said "nothing read from <topic>: does your app (or Collector) send there?", sending whoever
    scaled the Deployment past the partitions to look at the apps."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(f"{topic_prefix}.spans", 1, 1)])
    finally:
        admin.close()
    log = tmp_path / "first.log"
    with log.open("w") as stderr:
        first = popen(_consume(bootstrap, topic_prefix), stderr=stderr, env=checkout_env())
    try:
        partition = f"'{topic_prefix}.spans[0]'"
        wait_until(lambda: partition in log.read_text(), "the first member holds the one partition", 60)
        idle = _consume(bootstrap, topic_prefix, "--idle-timeout", "3")
        second = run(idle, env=checkout_env(), timeout=120)
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=60)
    assert second.returncode == 0, second.stderr
    said = " ".join(second.stderr.split())
    assert f"this member was given no partition of {topic_prefix}.spans: group {topic_prefix}" in said, said
    assert "Deploy > Topics" in said and "nothing read from" not in said, said
    assert first.returncode == 0 and "given no partition" not in log.read_text()


def test_a_member_of_an_empty_topic_still_asks_about_the_app(bootstrap: str, topic_prefix: str) -> None:
    """Given its partition and nothing in it, the member says what it said before: the app may send
    elsewhere."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(f"{topic_prefix}.spans", 1, 1)])
    finally:
        admin.close()
    done = run(_consume(bootstrap, topic_prefix, "--idle-timeout", "2"), env=checkout_env(), timeout=120)
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stderr.split())
    assert f"nothing read from {topic_prefix}.spans" in said and "given no partition" not in said, said
