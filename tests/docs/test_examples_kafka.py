"""docs/examples/export_all_spans.py, through the real broker: another instrumentation's spans, sent to
Kafka by tracescore.init(export_all_spans=True), are read and scored by `tracescore consume`, with the custom
metric of docs/examples/kb_metrics.py beside faithfulness as docs/offline/metrics.md registers it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from pages import DOCS

pytestmark = pytest.mark.kafka


def test_spans_of_another_instrumentation_reach_kafka_and_are_scored(
    bootstrap: str, topic_prefix: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACESCORE_")} | {
        "TRACESCORE_BOOTSTRAP_SERVERS": bootstrap,
        "TRACESCORE_TOPIC": f"{topic_prefix}.spans",
        "TRACESCORE_EVALUATIONS_TOPIC": f"{topic_prefix}.evaluations",
        "TRACESCORE_DLQ_TOPIC": f"{topic_prefix}.dlq",
        "TRACESCORE_GROUP_ID": topic_prefix,
    }

    def run(*command: str) -> str:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout

    run(sys.executable, str(DOCS / "examples" / "export_all_spans.py"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(DOCS / "examples"), os.environ.get("PYTHONPATH")]))
    metrics = "faithfulness,kb_metrics:cites_a_document"
    run(sys.executable, "-m", "tracescore.cli", "consume", "--idle-timeout", "5", "--metrics", metrics)
    lines = run(sys.executable, "-m", "tracescore.cli", "tail", "--json").splitlines()
    records = {r["metric"]: r for r in map(json.loads, lines)}
    assert sorted(records) == ["cites_a_document", "faithfulness"]
    record = records["faithfulness"]
    assert (record["convention"], record["service_name"], record["label"]) == (
        "openinference",
        "support-bot",
        "faithful",
    )
    cites = records["cites_a_document"]
    assert (cites["span_id"], cites["status"], cites["score"], cites["label"]) == (
        record["span_id"],
        "ok",
        0.0,
        "fail",
    )
    assert (cites["reason"], cites["judge"], cites["annotator_kind"]) == (
        "no [KB-nnn] citation in the answer",
        "offline",
        "CODE",
    )
    flagged = run(sys.executable, "-m", "tracescore.cli", "tail", "--flagged", "--json").splitlines()
    assert [json.loads(line)["metric"] for line in flagged] == ["cites_a_document"]
