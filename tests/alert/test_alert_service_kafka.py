"""`AlertService` on the real broker: records from the evaluations topic fire and resolve alerts on a real
webhook receiver; bad records are counted and skipped; alert state survives a restart; a broker restart
mid-stream loses and repeats no alert."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from _helpers import WAIT_S, not_found_errors, partitions_on_broker, wait_until
from _zygote import run as forked_run
from alert_records import Running, produce, record
from alert_records import service_config as config
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from service_processes import checkout_env

from tracescore.alert import (
    AlertKey,
    RuleConfig,
)
from tracescore.alert.testing import ReceivedRequest, WebhookReceiver
from tracescore.testing.kafka_broker import KafkaBroker
from tracescore.testing.kafka_topics import input_producer

pytestmark = pytest.mark.kafka


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as r:
        yield r


def scores(route: str, value: float, n: int = 8) -> list[bytes]:
    return [record(value, datetime.now(UTC), route=route).model_dump_json().encode() for _ in range(n)]


def about(route: str, state: str):  # type: ignore[no-untyped-def]
    return lambda got: any(_is(r, route, state) for r in got)


def _is(request: ReceivedRequest, route: str, state: str) -> bool:
    body = request.json()
    return body["route"] == route and body["state"] == state and body["alertname"].endswith("Dropped")


def test_fires_per_route_skips_bad_records_and_resolves_after_a_restart(
    bootstrap: str, topic_prefix: str, receiver: WebhookReceiver, tmp_path: Path
) -> None:
    alive = tmp_path / "alive"
    cfg = config(bootstrap, topic_prefix).model_copy(update={"health_file": alive})
    evaluations = cfg.evaluations_topic
    bad = [json.dumps({"schema_version": 99, "metric": "faithfulness"}).encode(), b"not json"]
    with Running(cfg, receiver) as service:
        produce(bootstrap, evaluations, scores("/billing", 0.1) + scores("/support", 0.95) + bad)
        receiver.wait_for(about("/billing", "firing"))
        # Every record (good and bad) went through before the counts are read.
        receiver_count = len(receiver.requests)
        produce(bootstrap, evaluations, scores("/support", 0.9, n=1))
        wait_until(lambda: service.stats.records >= 17, "every record read")
        assert service.stats.skipped == {"unknown_schema_version": 1, "invalid_record": 1}
    assert alive.is_file()  # the liveness file the Kubernetes probe checks
    # At the stop, where each route stands, the firing one first: read before closing gave them up.
    assert [(s.key.route, s.level) for s in service.stats.routes] == [
        ("/billing", "warning"),
        ("/support", "ok"),
    ]
    assert service.stats.more_routes == 0
    assert not any(_is(r, "/support", "firing") for r in receiver.requests)
    assert len(receiver.requests) == receiver_count

    # A new process with the same group: the firing alert is known (not repeated) and resolves on recovery.
    with Running(cfg, receiver):
        produce(bootstrap, evaluations, scores("/billing", 0.95))
        receiver.wait_for(about("/billing", "resolved"))
    firing = [r for r in receiver.requests if _is(r, "/billing", "firing")]
    assert len(firing) == 1


def test_an_evaluations_topic_not_written_yet_is_waited_for_and_never_created(
    bootstrap: str, topic_prefix: str, receiver: WebhookReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    """Started before `tracescore consume` wrote a record (or given a misspelt topic), the service created the
    topic it reads, with the broker's defaults: a misspelt name was left on the broker. It waits for the
    topic's writer now, says so once (kafka-python's ERROR that the topic is not found, repeated while it
    waits, is not logged) and reads it once it appears. Its routes and state topics are its own, made at
    start: partitioned as routes_partitions says, whatever the evaluations topic's partitions."""
    cfg = config(bootstrap, topic_prefix)
    evaluations = cfg.evaluations_topic
    with Running(cfg, receiver) as service:
        # Stage 2 is assigned once both stages subscribed and polled: stage 1 looked for its topic.
        wait_until(lambda: service.first_assigned_at is not None, "the routes topic's partitions assigned")
        assert partitions_on_broker(bootstrap, evaluations) is None, "the service created the topic it reads"
        assert f"the topic {evaluations} that tracescore alert reads does not exist" in caplog.text
        assert partitions_on_broker(bootstrap, cfg.state_topic) == cfg.routes_partitions
        input_producer(bootstrap, [NewTopic(evaluations, 2, 1)]).close()  # what `tracescore consume` does
        produce(bootstrap, evaluations, scores("/billing", 0.1))
        receiver.wait_for(about("/billing", "firing"))
    assert partitions_on_broker(bootstrap, cfg.routes_topic) == cfg.routes_partitions
    assert partitions_on_broker(bootstrap, cfg.state_topic) == cfg.routes_partitions
    assert not_found_errors(caplog.text) == []


def test_a_conversation_record_of_a_newer_tracescore_is_skipped_saying_so(
    bootstrap: str, topic_prefix: str, receiver: WebhookReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    """A conversation record of a future schema version was skipped as an "evaluation record" of a
    schema_version this version does not read: the warning names what was read, its version, what this
    tracescore reads, and to upgrade."""
    rule = RuleConfig(
        signal="conversation_label", window_count=8, min_samples=8, critical=None, no_data_seconds=None
    )
    cfg = config(bootstrap, topic_prefix, conversations_topic=f"{topic_prefix}.conversations", rules=[rule])
    newer = json.dumps({"schema_version": 2, "conversation_id": "c-1", "turns": 3}).encode()
    produce(bootstrap, cfg.evaluations_topic, scores("/billing", 0.9, n=1))
    produce(bootstrap, cfg.conversations_topic, [newer])
    with Running(cfg, receiver) as service:
        wait_until(lambda: service.stats.skipped, "the conversation record read")
    assert service.stats.skipped == {"unknown_schema_version": 1}
    assert (
        "skipped a message (unknown_schema_version): a conversation record of schema_version 2, written by a "
        "newer tracescore; this one reads up to 1: upgrade tracescore to read it" in caplog.text
    )


def test_no_record_name_or_stored_state_stops_the_service(
    bootstrap: str, topic_prefix: str, receiver: WebhookReceiver
) -> None:
    cfg = config(bootstrap, topic_prefix)
    odd_route = "/billing\x1fv2\\"  # a separator and a backslash, as any span attribute may hold
    # Valid JSON whose route is no Unicode text (a lone surrogate escape): it could never become a Kafka key.
    not_unicode = scores("/x", 0.1, n=1)[0].replace(b'"/x"', b'"/x\\ud800"')
    assert b"\\ud800" in not_unicode
    # An evaluations topic that allows 8 MB: a record with 2 MB of details, and one whose route is 1.5 MB.
    big = record(0.1, datetime.now(UTC), route=odd_route).model_copy(update={"details": {"x": "y" * 2**21}})
    huge_route = scores("/" + "r" * 1_500_000, 0.1, n=1)[0]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    allows_8_mb = {"max.message.bytes": str(2**23)}
    compacted = {"cleanup.policy": "compact"}
    admin.create_topics(
        [
            NewTopic(cfg.evaluations_topic, 1, 1, topic_configs=allows_8_mb),
            NewTopic(cfg.state_topic, cfg.routes_partitions, 1, topic_configs=compacted),
        ]
    )
    admin.close()
    # Not what the service writes, on three partitions of its state topic.
    garbage = [
        (b"\xff\xfe", b'{"schema_version": 2}'),
        (b"one\x1ftwo", b'{"schema_version": 2, "alert": {}}'),
        (b"s\x1f/r\x1fm", b"{not json"),
        (b"s\x1f/r\x1fm2", b'{"schema_version": 7, "alert": {"level": "critical"}}'),  # a newer version's
    ]
    produce_keyed(bootstrap, cfg.state_topic, garbage, partitions=True)
    with Running(cfg, receiver) as service:
        values = [not_unicode, huge_route, big.model_dump_json().encode(), *scores(odd_route, 0.1, n=7)]
        produce_keyed(bootstrap, cfg.evaluations_topic, [(b"k", value) for value in values])
        receiver.wait_for(about(odd_route, "firing"))
        wait_until(lambda: service.stats.records >= 8, "every record read")
        assert service.stats.skipped["invalid_record"] == 1
        assert service.stats.skipped["oversized_record"] == 1
        # The state topic is read at every assignment: 4 bad entries each time, never a stop.
        assert service.stats.skipped["invalid_state"] >= 3
        assert service.stats.skipped["future_state_version"] >= 1
        assert set(service.stats.skipped) == {
            "invalid_record",
            "oversized_record",
            "invalid_state",
            "future_state_version",
        }
    # Restarted, it finds the odd route's state under its own key: no second page, and the recovery resolves.
    with Running(cfg, receiver):
        produce(bootstrap, cfg.evaluations_topic, scores(odd_route, 0.95))
        receiver.wait_for(about(odd_route, "resolved"))
    assert len([r for r in receiver.requests if _is(r, odd_route, "firing")]) == 1


def produce_keyed(
    bootstrap: str, topic: str, messages: list[tuple[bytes, bytes]], partitions: bool = False
) -> None:
    producer = input_producer(bootstrap, [topic], acks="all", max_request_size=2**23)
    for n, (key, value) in enumerate(messages):
        producer.send(topic, key=key, value=value, partition=n % 6 if partitions else None).get(60)
    producer.close()


def test_two_instances_split_the_routes_and_notify_each_alert_once(
    bootstrap: str, topic_prefix: str, receiver: WebhookReceiver
) -> None:
    cfg = config(bootstrap, topic_prefix)
    routes = [f"/r{i}" for i in range(6)]
    with Running(cfg, receiver) as first, Running(cfg, receiver) as second:
        wait_until(
            lambda: None not in (first.first_assigned_at, second.first_assigned_at), "both members assigned"
        )
        produce(bootstrap, cfg.evaluations_topic, [v for route in routes for v in scores(route, 0.1)])
        receiver.wait_for(lambda got: all(any(_is(r, route, "firing") for r in got) for route in routes))
        wait_until(lambda: first.stats.records + second.stats.records >= len(routes) * 8, "every record read")
    firing = sorted(r.json()["route"] for r in receiver.requests if r.json()["state"] == "firing")
    assert firing == routes  # each route's alert exactly once, whichever instance owned it


# A storm member's timeouts, well inside the test's shortest wait (WAIT_S): one that stops heartbeating, or
# heartbeats but stops polling, is out of the group and its partitions given to the others before a wait
# gives up (the defaults, 45 s and 300 s, outlast the waits).
STORM_MEMBER = {"session_timeout_ms": 20_000, "max_poll_interval_ms": 60_000}
assert sum(STORM_MEMBER.values()) / 1000 < WAIT_S


def test_members_joining_and_leaving_in_turn_notify_each_alert_once(
    bootstrap: str, topic_prefix: str, receiver: WebhookReceiver
) -> None:
    """A rebalance storm: a second and a third instance join and leave around every batch, leaving while the
    batch's routes fire and the previous batch's resolve. Each alert fires once and resolves once."""
    cfg = config(bootstrap, topic_prefix, **STORM_MEMBER)
    batches = [[f"/s{b}-{i}" for i in range(4)] for b in range(4)]

    def each(state: str, routes: list[str]):  # type: ignore[no-untyped-def]
        return lambda got: all(any(_is(r, route, state) for r in got) for route in routes)

    with Running(cfg, receiver) as steady:
        wait_until(lambda: steady.first_assigned_at is not None, "the member assigned")
        for b, batch in enumerate(batches):
            with Running(cfg, receiver) as second, Running(cfg, receiver) as third:
                wait_until(
                    lambda: None not in (second.first_assigned_at, third.first_assigned_at), "both joined"
                )
                earlier = batches[b - 1] if b else []
                values = [v for route in batch for v in scores(route, 0.1)]
                produce(
                    bootstrap, cfg.evaluations_topic, values + [v for r in earlier for v in scores(r, 0.95)]
                )
                receiver.wait_for(lambda got: any(_is(r, route, "firing") for r in got for route in batch))  # noqa: B023
        produce(bootstrap, cfg.evaluations_topic, [v for route in batches[-1] for v in scores(route, 0.95)])
        routes = [route for batch in batches for route in batch]
        receiver.wait_for(lambda got: each("firing", routes)(got) and each("resolved", routes)(got), 180)
    sent = sorted((r.json()["route"], r.json()["state"]) for r in receiver.requests)
    assert sent == sorted((route, state) for route in routes for state in ("firing", "resolved"))


def test_a_judge_outage_alerts_as_judge_health_never_as_a_faithfulness_drop(
    bootstrap: str, topic_prefix: str, receiver: WebhookReceiver, closed_port: int
) -> None:
    """The real app drifts on /billing while the LLM judge is unreachable: the real consumer writes error
    records, and the only alerts are judge-health ones."""
    cfg = config(bootstrap, topic_prefix)
    spans = f"{topic_prefix}.spans"
    repo = Path(__file__).resolve().parents[2]
    env = checkout_env()
    app = forked_run(
        [
            sys.executable,
            "-m",
            "examples.rag_app",
            "--bootstrap",
            bootstrap,
            "--topic",
            spans,
            *("--phase", "drift"),
        ],
        cwd=repo,
        env=env,
        timeout=300,
    )
    assert app.returncode == 0, app.stderr[-3000:]
    judge_down = f"http://127.0.0.1:{closed_port}/v1"  # nothing listens: every judge call fails at once
    consume = forked_run(
        [
            *(sys.executable, "-m", "tracescore.cli", "consume", "--bootstrap-servers", bootstrap),
            *(
                "--topic",
                spans,
                "--group-id",
                f"{topic_prefix}-scorers",
                "--evaluations-topic",
                cfg.evaluations_topic,
            ),
            # The LLM judge scores every span (no offline first pass), so its outage leaves no score at all.
            *("--judge", "openai", "--no-cascade", "--base-url", judge_down, "--model", "judge-test"),
            *("--max-records", "36", "--idle-timeout", "60"),
        ],
        env=checkout_env({**env, "TRACESCORE_JUDGE_API_KEY": "unused", "TRACESCORE_JUDGE_MAX_RETRIES": "0"}),
        timeout=600,
    )
    assert consume.returncode == 0, consume.stderr[-3000:]
    with Running(cfg, receiver) as service:
        receiver.wait_for(
            lambda got: (
                {r.json()["route"] for r in got if r.json()["alertname"] == "TracescoreJudgeUnhealthy"}
                == {"/billing", "/support", "/product"}
            )
        )
        wait_until(lambda: service.stats.records >= 36, "every record read")
    alerts = [r.json() for r in receiver.requests]
    assert {a["alertname"] for a in alerts} == {"TracescoreJudgeUnhealthy"}
    assert all("scores are missing, not low" in a["summary"] for a in alerts)


def test_a_broker_restart_mid_stream_loses_and_repeats_no_alert(
    own_broker: KafkaBroker, topic_prefix: str, receiver: WebhookReceiver
) -> None:
    bootstrap = own_broker.bootstrap_servers
    cfg = config(bootstrap, topic_prefix)
    before, after = ["/a0", "/a1", "/a2"], ["/b0", "/b1", "/b2"]
    with Running(cfg, receiver):
        produce(bootstrap, cfg.evaluations_topic, [v for route in before for v in scores(route, 0.1)])
        receiver.wait_for(about(before[0], "firing"))  # notifications and states being saved
        own_broker.restart()  # same data, same port
        produce(bootstrap, cfg.evaluations_topic, [v for route in after for v in scores(route, 0.1)])
        receiver.wait_for(
            lambda got: all(any(_is(r, route, "firing") for r in got) for route in before + after),
            timeout_s=240,
        )
    firing = sorted(r.json()["route"] for r in receiver.requests if r.json()["state"] == "firing")
    assert firing == before + after  # each once


def test_the_state_topic_of_the_earlier_version_is_carried_over(
    bootstrap: str, topic_prefix: str, receiver: WebhookReceiver
) -> None:
    """An upgrade: /billing was firing under the earlier version (its state on the one-partition topic)."""
    old = f"{topic_prefix}.old-state"
    cfg = config(bootstrap, topic_prefix).model_copy(update={"legacy_state_topic": old})
    firing = {"level": "warning", "level_since": datetime.now(UTC).isoformat(), "notified_at": None}
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(old, 1, 1, topic_configs={"cleanup.policy": "compact"})])
    admin.close()
    key = AlertKey("rag-api", "/billing", "faithfulness").encode()
    produce_keyed(bootstrap, old, [(key, json.dumps(firing).encode())])
    with Running(cfg, receiver) as service:
        produce(bootstrap, cfg.evaluations_topic, scores("/billing", 0.95))
        receiver.wait_for(about("/billing", "resolved"))
    assert service.stats.state["migrated"] == 1
    assert not any(_is(r, "/billing", "firing") for r in receiver.requests), "known to be firing: no new page"
    with Running(cfg, receiver) as again:
        produce(bootstrap, cfg.evaluations_topic, scores("/support", 0.95, n=1))
        wait_until(lambda: again.stats.records >= 9, "every record read")
    assert again.stats.state["migrated"] == 0, "read once: the new state topic has it now"
    assert again.stats.state["restored"] >= 1
