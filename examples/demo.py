"""`make demo`: the whole flow on a real broker, ending by itself.

1. start Apache Kafka (KRaft, from Maven Central jars) on a free port
2. run the example RAG app: 36 instrumented requests, some deliberately unfaithful -> spans on Kafka
3. run `tracescore consume` (offline judge) until every RAG span is scored
4. read the evaluation records back, print a table, a summary and the alerts; stop the broker
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from kafka import KafkaConsumer, TopicPartition

from tracescore.alert import RollingScoreAlerter
from tracescore.consume import decode_message
from tracescore.emit import EvaluationRecord
from tracescore.testing.kafka_broker import KafkaBroker

REPO = Path(__file__).resolve().parents[1]
REQUESTS = 36
SPANS_TOPIC = "otlp_spans"
EVALUATIONS_TOPIC = "tracescore.evaluations"


def read_topic(bootstrap: str, topic: str) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    end = consumer.end_offsets(tps)
    values: list[bytes] = []
    while any(consumer.position(tp) < end[tp] for tp in tps):
        for batch in consumer.poll(timeout_ms=500).values():
            values.extend(m.value for m in batch)
    consumer.close()
    return values


def step(text: str) -> None:
    print(f"\n== {text}", flush=True)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="tracescore-demo-") as tmp:
        expected_path = Path(tmp) / "expected.json"
        step("starting Apache Kafka (KRaft, single node)")
        with KafkaBroker() as broker:
            bootstrap = broker.bootstrap_servers
            print(f"broker at {bootstrap}")

            step(f"example RAG app: {REQUESTS} requests -> spans on topic {SPANS_TOPIC!r}")
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "examples.rag_app",
                    "--bootstrap",
                    bootstrap,
                    "--topic",
                    SPANS_TOPIC,
                    "--requests",
                    str(REQUESTS),
                    "--expected-out",
                    str(expected_path),
                ],
                cwd=REPO,
                check=True,
            )

            step("tracescore consume (offline judge) until every RAG span is scored")
            subprocess.run(
                [
                    "tracescore",
                    "consume",
                    "--bootstrap-servers",
                    bootstrap,
                    "--topic",
                    SPANS_TOPIC,
                    "--group-id",
                    "demo",
                    "--max-records",
                    str(REQUESTS),
                    "--idle-timeout",
                    "30",
                    "--alert-window",
                    "8",
                    "--alert-threshold",
                    "0.7",
                ],
                check=True,
            )

            queries = {}
            for value in read_topic(bootstrap, SPANS_TOPIC):
                for span in decode_message(value):
                    if "input.value" in span.attributes:
                        queries[span.span_id] = (
                            span.attributes["input.value"],
                            span.attributes.get("output.value", ""),
                        )
            records = [
                EvaluationRecord.model_validate_json(v) for v in read_topic(bootstrap, EVALUATIONS_TOPIC)
            ]
        expected = json.loads(expected_path.read_text())

    report(records, queries, expected)
    return 0 if len(records) >= REQUESTS else 1


def report(records: list[EvaluationRecord], queries: dict[str, tuple[str, str]], expected: dict) -> None:
    step("scores")
    print(f"{'route':<9} {'faithfulness':>12}  {'verdict':<12} {'deliberate':<10} query")
    caught = missed = false_alarms = 0
    by_route: dict[str, list[float]] = defaultdict(list)
    alerter = RollingScoreAlerter([], window=8, threshold=0.7)
    alerts = []
    for record in sorted(records, key=lambda r: r.timestamp):
        query, answer = queries.get(record.span_id, ("?", "?"))
        truth = expected.get(f"{query}\n{answer}", {})
        altered = bool(truth.get("altered"))
        score = "n/a" if record.score is None else f"{record.score:.2f}"
        verdict = record.label or record.status.value
        print(f"{record.route:<9} {score:>12}  {verdict:<12} {'altered' if altered else '':<10} {query[:70]}")
        if record.score is not None:
            by_route[record.route].append(record.score)
            flagged = record.score < 0.5
            caught += altered and flagged
            missed += altered and not flagged
            false_alarms += (not altered) and flagged
        if alert := alerter.observe(record):
            alerts.append(alert)

    step("summary")
    scored = [s for scores in by_route.values() for s in scores]
    print(f"{len(records)} evaluations, mean faithfulness {sum(scored) / max(1, len(scored)):.2f}")
    for route, scores in sorted(by_route.items()):
        print(f"  {route:<9} n={len(scores):<3} mean faithfulness {sum(scores) / len(scores):.2f}")
    print(
        f"deliberately unfaithful answers caught: {caught}/{caught + missed}; "
        f"faithful answers flagged: {false_alarms}/{len(scored) - caught - missed}"
    )
    step("alerts (rolling faithfulness per service and route, window 8, threshold 0.70)")
    for alert in alerts:
        print(alert.summary())
    if not alerts:
        print("none")


if __name__ == "__main__":
    sys.exit(main())
