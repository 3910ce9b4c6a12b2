"""`tracescore alert` and `tracescore conversations` as users start them, against the real broker."""

from __future__ import annotations

import os
import sys

import pytest
from _helpers import not_found_errors, partitions_on_broker
from _zygote import run
from service_processes import checkout_env

pytestmark = pytest.mark.kafka


@pytest.mark.parametrize("command", ["alert", "conversations"])
def test_a_topic_nothing_was_written_to_is_said_at_start(
    bootstrap: str, topic_prefix: str, command: str
) -> None:
    """A misspelt --evaluations-topic: the service says so and waits for it, never creating it, as consume
    does for its spans topic (it created the topic, which was left on the broker); kafka-python's ERROR that
    the topic is not found is not logged on top of the warning."""
    topic = f"{topic_prefix}.evalutions"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TRACESCORE_")}
    done = run(
        [sys.executable, "-m", "tracescore.cli", command, "--bootstrap-servers", bootstrap,
         "--evaluations-topic", topic, "--group-id", f"{topic_prefix}-{command}", "--idle-timeout", "1"],
        timeout=180, env=checkout_env(clean),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stderr.split())
    assert (
        f"WARNING tracescore.{command}: the topic {topic} that tracescore {command} reads does not exist"
        in said
    ), said
    variable = f"TRACESCORE_{command.upper()}_EVALUATIONS_TOPIC"
    assert f"give that one in evaluations_topic ({variable}, or `evaluations_topic` in --config" in said, said
    assert partitions_on_broker(bootstrap, topic) is None, f"tracescore {command} created the topic it reads"
    assert not_found_errors(done.stderr) == []
