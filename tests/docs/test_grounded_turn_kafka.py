"""docs/examples/grounded_turn.json, the record docs/conversations.md shows, is what a run writes: `tracescore
consume` then `tracescore conversations`, the commands themselves, on a three-turn chat recorded from the
OpenAI SDK under OpenInference whose app keeps only questions and answers; the third turn's revised record,
its time aside (TRACESCORE_DOCS_RECORD=1 writes it again)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pages import DOCS, RECORD

from tracescore.testing.kafka_topics import input_producer, read_topic

pytestmark = pytest.mark.kafka

EXAMPLE = DOCS / "examples" / "grounded_turn.json"
FIXTURES = Path(__file__).parents[1] / "extract" / "fixtures"
SOURCE = "openinference_openai_conversation"
CHAT = "qa_only_faithful"


def chat() -> list[tuple[str, bytes, int]]:
    folder = FIXTURES / SOURCE if (FIXTURES / SOURCE).is_dir() else FIXTURES / "unread" / SOURCE
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    return [
        (entry["trace_id"], (folder / name).read_bytes(), entry["conversation"]["turn"])
        for name, entry in sorted(manifest["scenarios"].items())
        if entry["scenario"].startswith(f"{CHAT}_turn")
    ]


def test_the_grounded_follow_up_the_page_shows_is_what_consume_and_conversations_write(
    bootstrap: str, topic_prefix: str
) -> None:
    turns = chat()
    producer = input_producer(bootstrap, [f"{topic_prefix}.spans"], acks="all")
    for trace_id, payload, _ in turns:
        producer.send(f"{topic_prefix}.spans", key=trace_id.encode(), value=payload)
    producer.flush()
    producer.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACESCORE_")} | {
        "TRACESCORE_BOOTSTRAP_SERVERS": bootstrap,
        "TRACESCORE_TOPIC": f"{topic_prefix}.spans",
        "TRACESCORE_EVALUATIONS_TOPIC": f"{topic_prefix}.evaluations",
        "TRACESCORE_DLQ_TOPIC": f"{topic_prefix}.dlq",
        "TRACESCORE_GROUP_ID": topic_prefix,
        "TRACESCORE_CONVERSATION_EVIDENCE_TOPIC": f"{topic_prefix}.evidence",
        "TRACESCORE_CONVERSATIONS_EVALUATIONS_TOPIC": f"{topic_prefix}.evaluations",
        "TRACESCORE_CONVERSATIONS_EVIDENCE_TOPIC": f"{topic_prefix}.evidence",
        "TRACESCORE_CONVERSATIONS_GROUP_ID": f"{topic_prefix}.conversations",
        "TRACESCORE_CONVERSATIONS_TURNS_TOPIC": f"{topic_prefix}.turns",
        "TRACESCORE_CONVERSATIONS_STATE_TOPIC": f"{topic_prefix}.state",
        "TRACESCORE_CONVERSATIONS_CONVERSATIONS_TOPIC": f"{topic_prefix}.conversations",
        "TRACESCORE_CONVERSATIONS_SPANS_TOPIC": "",
    }
    for command in (
        ["consume", "--idle-timeout", "3"],
        ["conversations", "--quiet-seconds", "1", "--idle-timeout", "3"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "tracescore.cli", *command], env=env, capture_output=True, text=True,
            timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    summary = done.stderr.splitlines()[-1]
    assert "1 turn record revised; grounded=1" in summary, done.stderr

    third = next(trace_id for trace_id, _, turn in turns if turn == 3)
    evaluations = [json.loads(m.value) for m in read_topic(bootstrap, f"{topic_prefix}.evaluations")]
    [revised] = [r for r in evaluations if r["revision"] > 0]
    assert revised["trace_id"] == third
    if RECORD:
        EXAMPLE.write_text(json.dumps(revised, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        return
    shown = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    assert {**shown, "timestamp": None} == {**revised, "timestamp": None}, f"{EXAMPLE.name} is stale"
