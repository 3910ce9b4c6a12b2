"""Helpers for tests that talk to the real broker: produce raw messages, run an instrumented app, wait. A
topic is read back with `tracescore.testing.kafka_topics.read_topic`; offsets with _helpers' `committed` and
`end_offsets` (re-exported here)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Protocol

from _helpers import committed, end_offsets
from _zygote import run
from kafka import KafkaConsumer
from service_processes import checkout_env

from tracescore.consume import ConsumerSettings, EvaluationConsumer
from tracescore.model import EvaluationRecord
from tracescore.score import OfflineJudge
from tracescore.score.metrics import Faithfulness
from tracescore.testing.kafka_topics import input_producer

REPO = Path(__file__).resolve().parents[2]


def produce(bootstrap: str, topic: str, messages: list[tuple[bytes | None, bytes]]) -> None:
    producer = input_producer(bootstrap, [topic], acks="all")
    for key, value in messages:
        producer.send(topic, key=key, value=value).get(timeout=30)
    producer.close()


def assert_all_committed(bootstrap: str, group_id: str, topic: str, *logs: str) -> None:
    """The group's committed offset is the end of every partition that holds messages. `logs` (the
    consumers' output) are shown when it is not, to say why."""
    ends = end_offsets(bootstrap, topic)
    done = committed(bootstrap, group_id, topic)
    expected = {p: end for p, end in ends.items() if end}
    assert {p: done[p] for p in expected} == expected, "\n\n".join(
        [f"committed {done} but the partitions end at {ends}", *logs]
    )


def run_instrumented_app(bootstrap: str, topic: str, body: str) -> subprocess.CompletedProcess[str]:
    """Run `body` as a separate application process that calls tracescore.init and shutdown, as a real app
    does (the global TracerProvider is per process, so the SDK path is exercised end to end). Forked from the
    worker's zygote (tests/_zygote.py): `python -c` with its imports done, not its cold start."""
    script = (
        textwrap.dedent(
            f"""
        import tracescore
        tracescore.init(service_name="test-app", bootstrap_servers={bootstrap!r}, topic={topic!r})
        """
        )
        + textwrap.dedent(body)
        # Generous: on a broker started moments ago, creating the topic can outlast the default 5 s bound,
        # and the test needs its spans, not a bounded exit.
        + "\ntracescore.shutdown(timeout_s=60)\n"
    )
    done = run([sys.executable, "-c", script], env=checkout_env(), cwd=REPO, timeout=180)
    assert done.returncode == 0, done.stderr
    assert "tracescore dropped" not in done.stderr, f"the app's spans did not all reach Kafka:\n{done.stderr}"
    return done


class ConsumerFactory(Protocol):
    def __call__(
        self, bootstrap: str, prefix: str, **overrides: Any
    ) -> tuple[EvaluationConsumer, list[EvaluationRecord]]: ...


def make_consumer(
    bootstrap: str,
    prefix: str,
    *,
    judge: Any = None,
    metrics_out: Any = None,
    kafka_consumer: KafkaConsumer | None = None,
    **overrides: Any,
) -> tuple[EvaluationConsumer, list[EvaluationRecord]]:
    """A consumer of `<prefix>.spans` in group `<prefix>.group` writing to `<prefix>.evaluations` and
    `<prefix>.dlq`, stopping after 3 s idle, scoring faithfulness with the offline judge (unless
    overridden); the records it wrote are collected in the returned list. `kafka_consumer`: the client it
    reads with (default: its own)."""
    seen: list[EvaluationRecord] = []
    settings = ConsumerSettings.model_validate(
        {
            "bootstrap_servers": bootstrap,
            "topic": f"{prefix}.spans",
            "group_id": f"{prefix}.group",
            "evaluations_topic": f"{prefix}.evaluations",
            "dlq_topic": f"{prefix}.dlq",
            "idle_timeout_s": 3,
            **overrides,
        }
    )
    consumer = EvaluationConsumer(
        settings,
        judge=judge or OfflineJudge(),
        metrics=[Faithfulness()],
        on_evaluation=seen.append,
        metrics_out=metrics_out,
        consumer=kafka_consumer,
    )
    return consumer, seen
