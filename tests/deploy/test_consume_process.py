"""The `tracescore consume` of the Prometheus path (conftest.py's `start_consume`) ends with the test worker
that started it, however the worker ends, as the Collector, Prometheus and Alertmanager beside it do."""

from __future__ import annotations

import uuid
from pathlib import Path

from _helpers import ends_with_its_owner

from tracescore.testing import free_port
from tracescore.testing.kafka_broker import KafkaBroker

# Starts the consumer as the stack does (its topic: the marker; its log in the test's folder) and waits.
_OWNER = """
import json, sys
from pathlib import Path
sys.path[:0] = ["tests/deploy", "tests"]  # this folder's conftest, and what it imports
from conftest import start_consume

consumer, _ = start_consume({bootstrap!r}, {topic!r}, {otlp_port}, Path({log!r}))
print(json.dumps({{"pid": consumer.pid, "marker": {topic!r}}}), flush=True)
sys.stdin.read()
"""


def test_the_stacks_consumer_ends_with_the_process_that_started_it(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    """A test worker killed on a timeout (SIGKILL: no fixture teardown) left the stack's consumer running for
    good, scoring and exporting into a Collector that is gone."""
    topic = f"promspans-guarded-{uuid.uuid4().hex[:8]}"
    bootstrap, log = kafka_broker.bootstrap_servers, str(tmp_path / "consume.log")
    owner = _OWNER.format(bootstrap=bootstrap, topic=topic, otlp_port=free_port(), log=log)
    ends_with_its_owner(owner, "the consumer")
