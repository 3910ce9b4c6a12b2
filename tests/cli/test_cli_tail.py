"""`tracescore tail` against the real broker: readable records, filters, JSON lines, --follow, bad messages
counted and explained, the same Kafka settings (and precedence) as `tracescore consume`, one line when no
broker answers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kafka
import pytest
from _zygote import popen, run
from click.testing import CliRunner, Result
from service_processes import checkout_env

from tracescore.cli import main
from tracescore.model import ConversationRecord, EvaluationRecord, MetricStatus, Usage, WorstTurn
from tracescore.testing.kafka_topics import input_producer

pytestmark = pytest.mark.kafka

FAILED_CLAIM = {
    "claim": "The Aurora X2 weighs 3 kg.",
    "verdict": "NO_EVIDENCE",
    "reason": "The context does not contain '3'.",
    "evidence": "The Aurora X2 weighs 1.2 kg.",
}


def _record(n: int, **fields: Any) -> EvaluationRecord:
    values: dict[str, Any] = {
        "trace_id": f"{n:032x}",
        "span_id": f"{n:016x}",
        "service_name": "shop",
        "route": "/ask",
        "metric": "faithfulness",
        "score": 1.0,
        "label": "faithful",
        "status": MetricStatus.OK,
        "judge": "offline",
        "timestamp": datetime(2026, 3, 4, 5, 6, n, tzinfo=UTC),
    }
    return EvaluationRecord(**{**values, **fields})


HALLUCINATED = _record(
    2,
    route="/billing",
    score=0.0,
    label="hallucinated",
    details={"claims": [FAILED_CLAIM, {"claim": "It is grey.", "verdict": "FULLY_SUPPORTED"}]},
)
FAILED = _record(3, score=None, label=None, status=MetricStatus.ERROR, reason="judge timed out after 3 tries")


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = input_producer(bootstrap, [topic])
    for value in values:
        producer.send(topic, key=b"k", value=value).get(timeout=30)  # one key: one partition, in order
    producer.close()


def _tail(*args: str, env: dict[str, str] | None = None) -> Result:
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("TRACESCORE_")}
    runner = CliRunner(env={**unset, **(env or {})})
    return runner.invoke(main, ["tail", "--connect-timeout", "20", *args], catch_exceptions=False)


@pytest.fixture
def evaluations(bootstrap: str, topic_prefix: str) -> str:
    """A topic holding a faithful record, a hallucinated one, a failed evaluation, and three messages no
    reader can use: not JSON, a foreign JSON object, and a record of a future schema version."""
    topic = f"{topic_prefix}.evaluations"
    future = {**json.loads(_record(9).model_dump_json()), "schema_version": 2}
    _produce(
        bootstrap,
        topic,
        [
            _record(1).model_dump_json().encode(),
            b"\xff not json",
            HALLUCINATED.model_dump_json().encode(),
            json.dumps({"event": "page_view", "user": 7}).encode(),
            json.dumps(future).encode(),
            FAILED.model_dump_json().encode(),
        ],
    )
    return topic


def test_prints_each_record_readably_and_explains_what_it_skips(bootstrap: str, evaluations: str) -> None:
    result = _tail("--bootstrap-servers", bootstrap, "--evaluations-topic", evaluations)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "ok       faithfulness 1.00  faithful  shop /ask  (offline)" in out
    assert "FLAGGED  faithfulness 0.00  hallucinated  shop /billing  (offline)" in out
    assert "    claim NO_EVIDENCE: The Aurora X2 weighs 3 kg." in out
    assert "      reason:   The context does not contain '3'." in out
    assert "      evidence: The Aurora X2 weighs 1.2 kg." in out
    assert "It is grey." not in out, "supported claims are not shown"
    assert f"    trace {HALLUCINATED.trace_id}  span {HALLUCINATED.span_id}" in out
    assert "ERROR    faithfulness -  error" in out and "reason: judge timed out after 3 tries" in out
    assert out.index("faithful  shop /ask") < out.index("hallucinated") < out.index("ERROR")
    # Bad messages: each reason explained once, with where it was and why; then all are counted.
    err = result.stderr
    assert "offset 1: invalid_record: not JSON" in err
    assert "unknown_schema_version: an evaluation record of schema_version 2, written by a newer" in err
    assert err.count("invalid_record:") == 1, "a reason is explained once; the count carries the rest"
    assert "3 records shown, 3 skipped (invalid_record=2, unknown_schema_version=1)" in err
    assert "Traceback" not in err


def test_flagged_and_route_filters(bootstrap: str, evaluations: str) -> None:
    flagged = _tail("--bootstrap-servers", bootstrap, "--evaluations-topic", evaluations, "--flagged")
    assert "hallucinated" in flagged.stdout and "ERROR" in flagged.stdout
    assert " ok " not in flagged.stdout
    assert "2 records shown, 1 filtered out" in flagged.stderr
    routed = _tail("--bootstrap-servers", bootstrap, "--evaluations-topic", evaluations, "--route", "/bill*")
    assert routed.stdout.count("trace ") == 1 and "/billing" in routed.stdout
    # Two services may name a route alike: --service tells them apart.
    served = _tail("--bootstrap-servers", bootstrap, "--evaluations-topic", evaluations, "--service", "sh*")
    assert served.stdout.count("trace ") == 3 and "3 records shown" in served.stderr
    other = _tail(
        "--bootstrap-servers", bootstrap, "--evaluations-topic", evaluations, "--service", "billing"
    )
    assert other.stdout == "" and "0 records shown, 3 filtered out" in other.stderr


def test_failed_shows_only_the_failed_evaluations_with_their_reason(bootstrap: str, evaluations: str) -> None:
    """The first step of a judge-health page: the evaluations the judge failed and why, without the
    hallucinated answers `--flagged` shows beside them."""
    failed = _tail("--bootstrap-servers", bootstrap, "--evaluations-topic", evaluations, "--failed")
    assert failed.exit_code == 0, failed.output
    assert "ERROR    faithfulness -  error" in failed.stdout
    assert "reason: judge timed out after 3 tries" in failed.stdout
    assert "hallucinated" not in failed.stdout and " ok " not in failed.stdout
    assert "1 record shown, 2 filtered out" in failed.stderr


def test_flagged_shows_the_revision_that_clears_a_flagged_answer_shown(
    bootstrap: str, topic_prefix: str
) -> None:
    """A follow-up flagged, then grounded in an earlier turn (its revision 1): `--flagged` shows both, so the
    answer does not read as flagged where its latest revision, the one that counts, passed. A revision of an
    answer not shown flagged, and an unrelated passing answer, stay filtered out."""
    flagged = _record(7, score=0.0, label="hallucinated", session_id="chat-1")
    grounded = _record(7, revision=1, supersedes=f"{7:032x}:{7:016x}:0", session_id="chat-1")
    other_metric = _record(7, metric="answer_relevancy", revision=1, supersedes=f"{7:032x}:{7:016x}:0")
    unrelated = _record(8, revision=1, supersedes=f"{8:032x}:{8:016x}:0")
    topic = f"{topic_prefix}.evaluations"
    records = [flagged, other_metric, grounded, unrelated]
    _produce(bootstrap, topic, [r.model_dump_json().encode() for r in records])
    shown = _tail("--bootstrap-servers", bootstrap, "--evaluations-topic", topic, "--flagged")
    lines = shown.stdout.splitlines()
    assert [line.split()[2] for line in lines if line.startswith("2026")] == ["FLAGGED", "ok"]
    assert lines[0].endswith("/ask  session chat-1  (offline)"), "the line names the conversation"
    assert "    replaces revision 0 of this answer (the latest revision is the one that counts)" in lines
    assert "2 records shown, 2 filtered out" in shown.stderr


def test_json_lines_are_the_records(bootstrap: str, evaluations: str) -> None:
    result = _tail(
        "--bootstrap-servers", bootstrap, "--evaluations-topic", evaluations, "--json", "--flagged"
    )
    records = [EvaluationRecord.model_validate_json(line) for line in result.stdout.splitlines()]
    assert records == [HALLUCINATED, FAILED]


def test_last_starts_that_many_records_before_the_end(bootstrap: str, evaluations: str) -> None:
    result = _tail("--bootstrap-servers", bootstrap, "--evaluations-topic", evaluations, "--last", "2")
    assert result.stdout.count("trace ") == 1 and "ERROR" in result.stdout  # the last two: future, failed
    assert "1 record shown, 1 skipped (unknown_schema_version=1)" in result.stderr


def test_records_deleted_under_the_read_are_skipped_not_everything_after_them(
    bootstrap: str, evaluations: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Retention deleting records between the tail's look at where a partition begins and its first fetch
    made that fetch out of range, and the reader (kafka-python's default reset) jumped to the END: nothing
    was printed. It reads on from the earliest record left. Here the deletion comes right after the look."""

    class RetentionRightAfterTheLook(kafka.KafkaConsumer):
        def beginning_offsets(self, partitions: Any, timeout_ms: Any = None) -> Any:
            starts = super().beginning_offsets(partitions, timeout_ms=timeout_ms)
            (held,) = [
                tp for tp, end in self.end_offsets(partitions).items() if end
            ]  # one key: one partition
            admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap)
            admin.delete_records({held: 2})  # the first two records
            admin.close()
            return starts

    monkeypatch.setattr(kafka, "KafkaConsumer", RetentionRightAfterTheLook)
    result = _tail("--bootstrap-servers", bootstrap, "--evaluations-topic", evaluations, "--last", "6")
    assert result.exit_code == 0, result.output
    assert "hallucinated" in result.stdout and "ERROR" in result.stdout
    assert "2 records shown, 2 skipped (invalid_record=1, unknown_schema_version=1)" in result.stderr


def test_reads_kafka_settings_as_consume_does(bootstrap: str, evaluations: str, tmp_path: Path) -> None:
    """flags > TRACESCORE_* > the [consume] table of --config > defaults."""
    config = tmp_path / "tracescore.toml"
    config.write_text(f'[consume]\nbootstrap_servers = "{bootstrap}"\nevaluations_topic = "{evaluations}"\n')
    from_file = _tail("--config", str(config))
    assert from_file.stderr.endswith(
        "3 records shown, 3 skipped (invalid_record=2, unknown_schema_version=1)\n"
    )
    from_env = _tail("--config", str(config), env={"TRACESCORE_EVALUATIONS_TOPIC": f"{evaluations}.absent"})
    assert f"topic {evaluations}.absent does not exist" in from_env.stderr
    from_flag = _tail(
        "--config", str(config), "--evaluations-topic", evaluations,
        env={"TRACESCORE_EVALUATIONS_TOPIC": f"{evaluations}.absent"},
    )  # fmt: skip
    assert "3 records shown" in from_flag.stderr
    invalid = _tail("--config", str(config), env={"TRACESCORE_KAFKA__SECURITY_PROTOCOL": "SASL_SSL"})
    assert invalid.exit_code == 2 and "invalid value for TRACESCORE_KAFKA" in invalid.stderr
    assert "needs sasl_mechanism" in invalid.stderr and "Traceback" not in invalid.stderr


def test_follow_prints_new_records_until_interrupted(bootstrap: str, topic_prefix: str) -> None:
    topic = f"{topic_prefix}.evaluations"
    _produce(bootstrap, topic, [_record(1).model_dump_json().encode()])
    follower = popen(
        [sys.executable, "-m", "tracescore.cli", "tail", "--follow", "--flagged",
         "--bootstrap-servers", bootstrap, "--evaluations-topic", topic],
        env=checkout_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines: list[str] = []
    seen = threading.Event()

    def read() -> None:
        assert follower.stdout is not None
        for line in follower.stdout:
            lines.append(line)
            if line.startswith("    trace "):
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        # Produced until the follower shows it: it may still be starting when the first one is sent.
        for _ in range(60):  # a bound, not a timing assertion: 2 minutes for a line that takes seconds
            if seen.wait(timeout=2):
                break
            assert follower.poll() is None, follower.communicate()
            _produce(bootstrap, topic, [HALLUCINATED.model_dump_json().encode()])
    finally:
        follower.send_signal(signal.SIGINT)
        _, err = follower.communicate(timeout=60)
    reader.join(timeout=10)
    assert follower.returncode == 0, err
    assert seen.is_set(), f"--follow never printed the new record: {lines}"
    assert any("FLAGGED  faithfulness 0.00  hallucinated" in line for line in lines)
    assert "filtered out" in err and "Traceback" not in err


def test_no_broker_is_one_line_and_exit_1() -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TRACESCORE_")}
    done = run(
        [sys.executable, "-m", "tracescore.cli", "tail", "--bootstrap-servers", "127.0.0.1:1",
         "--connect-timeout", "1"],
        timeout=120, env=checkout_env(clean),
    )  # fmt: skip
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    [error] = [line for line in done.stderr.splitlines() if line.strip()]
    assert error.startswith("Error: no Kafka broker reachable at 127.0.0.1:1"), error


def test_evidence_from_an_earlier_turn_says_how_many_turns_back(bootstrap: str, topic_prefix: str) -> None:
    """A follow-up judged against an earlier turn's tool result: the claim's evidence says where it was."""
    source = {"span_id": "00000000000000aa", "kind": "earlier_turn", "turns_back": 1}
    claim = {**FAILED_CLAIM, "context_index": 0, "evidence_source": source}
    follow_up = _record(
        5, score=0.0, label="hallucinated", details={"claims": [claim], "context_sources": [source]}
    )
    this_turn = {**claim, "evidence_source": {**source, "kind": "tool", "turns_back": 0}}
    turn = _record(6, score=0.0, label="hallucinated", details={"claims": [this_turn]})
    topic = f"{topic_prefix}.evaluations"
    _produce(bootstrap, topic, [follow_up.model_dump_json().encode(), turn.model_dump_json().encode()])
    lines = _tail("--bootstrap-servers", bootstrap, "--evaluations-topic", topic).stdout.splitlines()
    evidence = [line for line in lines if line.startswith("      evidence:")]
    assert evidence == [
        "      evidence: The Aurora X2 weighs 1.2 kg.  (1 turn back)",
        "      evidence: The Aurora X2 weighs 1.2 kg.",
    ]


def _written_by_an_older_consumer(n: int, **fields: Any) -> bytes:
    """A record as the first consumers wrote it: none of the fields added since (annotator_kind, selection,
    convention, session ids, ...)."""
    record = {
        "schema_version": 1, "trace_id": f"{n:032x}", "span_id": f"{n:016x}", "evaluation_span_id": None,
        "service_name": "shop", "route": "/ask", "metric": "faithfulness", "score": 0.0,
        "label": "hallucinated", "status": "ok", "reason": None, "judge": "openai:gpt-4o-mini",
        "timestamp": f"2026-03-04T05:06:{n:02d}Z", "details": {}, "usage": {"calls": 1},
    }  # fmt: skip
    return json.dumps({**record, **fields}).encode()


def test_records_of_an_older_consumer_are_printed_or_counted_never_a_crash(
    bootstrap: str, topic_prefix: str
) -> None:
    """Bad input from the past: records without today's fields, with old selection names, and details of
    shapes no current metric writes (claims as text, a verdict as a list, evidence sources as text)."""
    topic = f"{topic_prefix}.evaluations"
    old_claim = {"claim": "Old.", "verdict": "NO_EVIDENCE"}
    odd_claims = [
        "a claim as plain text",
        {"claim": "It ships in 3 days.", "verdict": ["NO_EVIDENCE"]},
        {"claim": "It weighs 3 kg.", "verdict": "NO_EVIDENCE", "evidence": "1.2 kg", "evidence_source": "x"},
        {"claim": "It is red.", "verdict": "CONTRADICTORY", "evidence_source": {"turns_back": "1"}},
        {"verdict": "NO_EVIDENCE"},
    ]
    _produce(
        bootstrap,
        topic,
        [
            _written_by_an_older_consumer(1, details={"claims": [old_claim]}),
            _written_by_an_older_consumer(2, selection="uniform", details={"claims": odd_claims}),
            _written_by_an_older_consumer(3, details={"claims": {"0": "not a list"}, "capped": "yes"}),
            _written_by_an_older_consumer(4, details=["not", "a", "table"]),
        ],
    )
    result = _tail("--bootstrap-servers", bootstrap, "--evaluations-topic", topic)
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    out = result.stdout
    assert "    claim NO_EVIDENCE: Old." in out, "a record without today's fields reads as it did"
    assert "(openai:gpt-4o-mini, uniform)" in out
    assert "    claim NO_EVIDENCE: It weighs 3 kg." in out and "      evidence: 1.2 kg" in out
    assert "    claim CONTRADICTORY: It is red." in out
    assert "3 records shown, 1 skipped (invalid_record=1)" in result.stderr, "the rest counted, with why"


def _conversation(conversation_id: str, **fields: Any) -> ConversationRecord:
    values: dict[str, Any] = {
        "conversation_id": conversation_id, "service_name": "support-chat", "route": "/chat",
        "started_at": datetime(2026, 3, 4, 5, 0, tzinfo=UTC), "metric": "faithfulness", "judge": "offline",
        "annotator_kind": "CODE", "selection": None, "turns": 2, "turns_judged": 2, "turns_scored": 2,
        "turns_passed": 1, "turns_flagged": 1, "complete": True, "score": 0.5, "share_lower": 0.0945,
        "share_upper": 0.9055, "confidence": 0.95, "label": "flagged", "status": MetricStatus.OK,
        "reason": "1 of 2 scored turns pass faithfulness", "trace_ids": [f"{1:032x}", f"{2:032x}"],
        "span_ids": [f"{1:016x}", f"{2:016x}"],
        "worst_turn": WorstTurn(trace_id=f"{2:032x}", span_id=f"{2:016x}", score=0.0, label="hallucinated"),
        "first_turn_at": datetime(2026, 3, 4, 5, 0, tzinfo=UTC),
        "last_turn_at": datetime(2026, 3, 4, 5, 1, tzinfo=UTC),
        "timestamp": datetime(2026, 3, 4, 5, 16, tzinfo=UTC),
    }  # fmt: skip
    return ConversationRecord(**{**values, **fields})


def test_conversation_records_print_one_line_each(bootstrap: str, topic_prefix: str) -> None:
    """The records of `tracescore conversations` were all skipped as invalid evaluation records. Each is now
    one line known by its fields (not by the topic's name), next to evaluation records on the same topic;
    a broken one is explained as a conversation record, and so is one of a newer tracescore (it was said to
    be an evaluation record's version, asking nothing of the reader)."""
    topic = f"{topic_prefix}.conversations"
    revised = _conversation(
        "session-2", revision=1, supersedes=0, selection="baseline", judge="openai:gpt-4o-mini",
        turns_passed=2, turns_flagged=0, score=1.0, label="passed", worst_turn=None,
        annotator_kind="LLM",
    )  # fmt: skip
    broken = {**json.loads(_conversation("session-3").model_dump_json()), "turns": "many"}
    newer = {**json.loads(_conversation("session-4").model_dump_json()), "schema_version": 2}
    _produce(
        bootstrap,
        topic,
        [
            _conversation("session-1").model_dump_json().encode(),
            revised.model_dump_json().encode(),
            json.dumps(broken).encode(),
            HALLUCINATED.model_dump_json().encode(),
            json.dumps(newer).encode(),
        ],
    )
    result = _tail("--bootstrap-servers", bootstrap, "--evaluations-topic", topic)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == (
        "2026-03-04 05:16:00  FLAGGED  conversation faithfulness 0.50 [0.09, 0.91]  flagged  support-chat "
        f"session-1  (2 turns: 2 scored, 1 flagged)  (offline)  worst trace {2:032x}"
    )
    assert lines[1] == (
        "2026-03-04 05:16:00  ok       conversation faithfulness 1.00 [0.09, 0.91]  passed  support-chat "
        "session-2  (2 turns: 2 scored, 0 flagged)  (openai:gpt-4o-mini, baseline, revision 1)"
    )
    assert "FLAGGED  faithfulness 0.00  hallucinated  shop /billing  (offline)" in result.stdout
    assert "offset 2: invalid_record: not a conversation record: turns:" in result.stderr
    assert (
        "offset 4: unknown_schema_version: a conversation record of schema_version 2, written by a newer "
        "tracescore; this one reads up to 1: upgrade tracescore to read it" in result.stderr
    )
    assert "3 records shown, 2 skipped (invalid_record=1, unknown_schema_version=1)" in result.stderr
    flagged = _tail("--bootstrap-servers", bootstrap, "--evaluations-topic", topic, "--flagged", "--json")
    assert [json.loads(line).get("conversation_id") for line in flagged.stdout.splitlines()] == [
        "session-1",
        None,
    ]
    assert "2 records shown, 1 filtered out, 2 skipped" in flagged.stderr


def test_the_summary_says_what_the_llm_judge_cost_over_the_records_shown(
    bootstrap: str, topic_prefix: str
) -> None:
    """ "What did the judge cost for the billing team?": `--service` picks the team, the summary adds up the
    records' usage (the offline judge's cost nothing and are not in it)."""
    topic = f"{topic_prefix}.evaluations"

    def llm(n: int, service: str, selection: str, prompt: int, cost: float) -> bytes:
        usage = Usage(calls=2, prompt_tokens=prompt, completion_tokens=100, cost_usd=cost)
        record = _record(
            n, service_name=service, judge="openai:gpt-4o-mini", annotator_kind="LLM", selection=selection,
            usage=usage,
        )  # fmt: skip
        return record.model_dump_json().encode()

    _produce(
        bootstrap,
        topic,
        [
            _record(1, service_name="billing").model_dump_json().encode(),
            llm(2, "billing", "cascade", 900, 0.0003),
            llm(3, "billing", "baseline", 400, 0.0002),
            llm(4, "search", "baseline", 5000, 0.0010),
        ],
    )
    result = _tail("--bootstrap-servers", bootstrap, "--evaluations-topic", topic, "--service", "billing")
    assert result.exit_code == 0, result.output
    summary = result.stderr.strip().splitlines()[-1]
    assert summary == (
        "3 records shown, 1 filtered out; LLM judge over them: 4 calls, 1,300 prompt + 200 completion "
        "tokens, $0.0005; by service: billing 1,500 tokens $0.0005 (cascade 1,000, baseline 500)"
    ), summary
