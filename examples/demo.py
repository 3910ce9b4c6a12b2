"""`make demo`: the whole flow on a real broker, ending by itself.

1. start Apache Kafka (KRaft, from Maven Central jars) on a free port, a local webhook receiver, and two
   services in the background: `tracescore consume` (offline judge) and `tracescore alert` (its rules in
   a YAML file, notifications signed and posted to the receiver). Every process the demo starts (the
   broker, the services, the app's runs) ends with it however it ends: a Ctrl-C stops them in order, and a
   SIGKILL or a closed terminal sets off their guards (`Guard`), which end them and remove the demo's folder
2. the example RAG app answers faithfully (long enough for each route to learn its normal), then its /billing
   route starts answering unfaithfully (drift): /billing's rolling share of faithful answers drops, and both
   alerts fire on the receiver: the threshold rule (below 0.7) and the drop rule (below the route's own
   normal); then the app recovers and both resolve. Every step waits for its event (a notification), never
   for a fixed time.
3. read the evaluation records back: a table, a summary, the alerts, and an HTML report
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, TopicPartition

from tracescore.alert import SIGNATURE_HEADER, AlertConfig, sign
from tracescore.alert.testing import ReceivedRequest, WebhookReceiver
from tracescore.consume import decode_message
from tracescore.model import EvaluationRecord, is_flagged
from tracescore.score import render_report
from tracescore.testing import STOP_S, Guard, end_process, run_guarded
from tracescore.testing.kafka_broker import KafkaBroker
from tracescore.testing.kafka_topics import read_topic, wait_for_records

REPO = Path(__file__).resolve().parents[1]
REQUESTS = 36  # per phase: 12 per route
HEALTHY_REQUESTS = 2 * REQUESTS  # the first phase: each route learns its normal (the drop rule's reference)
SPANS_TOPIC = "otlp_spans"
EVALUATIONS_TOPIC = "tracescore.evaluations"
REPORT = REPO / "out" / "demo-report.html"
WAIT_S = 300  # generous: a shared two-core machine can be slow, and the wait ends at the event
SERVICE_STOP_S = 120  # a service's own stop (it commits, prints its summary) before it is killed
SECRET = "demo-webhook-secret"  # the demo's own HMAC key, passed to `tracescore alert` in its environment
ALERT_CONFIG = """
rules:
  - metric: faithfulness
    signal: label         # the share of faithful answers: one invented claim (score 0.5) is hallucinated
    window_count: 8       # the last 8 answers of a route...
    window_seconds: 600   # ...from the last 10 minutes
    min_samples: 6
    warning: 0.7
    critical: null        # one severity keeps the story short; see README for warning + critical
    confidence: 0.9       # fire only when the 90% upper bound of the share is below the threshold
    hysteresis: 0.05      # resolve at 0.75, so a route hovering at 0.7 does not flap
    cooldown_seconds: 0
    renotify_seconds: 3600
    no_data_seconds: null
    drop:                 # and page when the route falls below its own normal, whatever the judge's level
      min_drop: 0.2       # at least 0.2 below it, at 99% confidence (tiny windows: the demo's few answers)
      confidence: 0.99
      window_count: 8     # the route's last 8 answers...
      min_samples: 6
      normal_count: 16    # ...against the 16 before them
      min_normal_samples: 12
sinks:
  - type: log
  - type: webhook
    url: {url}/hooks/tracescore
    secret_env: DEMO_WEBHOOK_SECRET
"""


def wait_for_evaluations(bootstrap: str, count: int) -> None:
    if len(wait_for_records(bootstrap, EVALUATIONS_TOPIC, count, timeout_s=WAIT_S)) < count:
        raise SystemExit(f"the consumer wrote fewer than {count} evaluation records in {WAIT_S:.0f}s")


def wait_for_alert_service(bootstrap: str, timeout_s: float) -> None:
    """Until `tracescore alert` has read every evaluation record written so far (both of its stages have
    committed up to the ends of their topics). Then the next phase's records reach its windows after this
    phase's, as in a live stream; had it joined its group late, it would read both phases' records one
    evaluations partition after the other, mixed."""
    stages = (
        (AlertConfig.model_fields["group_id"].default, EVALUATIONS_TOPIC),
        (
            f"{AlertConfig.model_fields['group_id'].default}.routes",
            AlertConfig.model_fields["routes_topic"].default,
        ),
    )

    def caught_up() -> bool:
        for group, topic in stages:  # in order: the first stage feeds the second's topic
            consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
            try:
                tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
                ends = consumer.end_offsets(tps)
                if not tps or any(end and (consumer.committed(tp) or 0) < end for tp, end in ends.items()):
                    return False
            finally:
                consumer.close()
        return True

    deadline = time.monotonic() + timeout_s
    while not caught_up():
        if time.monotonic() > deadline:
            raise SystemExit(f"tracescore alert did not read the evaluation records in {timeout_s:.0f}s")
        time.sleep(0.5)


def step(text: str) -> None:
    print(f"\n== {text}", flush=True)


def print_alert(request: ReceivedRequest) -> None:
    verified = request.headers.get(SIGNATURE_HEADER) == sign(SECRET.encode(), request.body)
    body = request.json()
    print(
        f"  webhook <- [{body['headline']}:{body['severity']}] {body['summary']}"
        f" (signature {'verified' if verified else 'INVALID'})",
        flush=True,
    )


THRESHOLD_ALERT, DROP_ALERT = "TracescoreFaithfulnessDropped", "TracescoreFaithfulnessBelowNormal"


def is_alert(state: str, route: str = "/billing") -> Callable[[list[ReceivedRequest]], bool]:
    """Both rules' alerts of `route` have reached `state`."""

    def reached(got: list[ReceivedRequest]) -> bool:
        bodies = [r.json() for r in got]
        seen = {b["alertname"] for b in bodies if b["state"] == state and b["route"] == route}
        return {THRESHOLD_ALERT, DROP_ALERT} <= seen

    return reached


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="tracescore-demo-") as tmp_dir:
        tmp = Path(tmp_dir)
        step("starting Apache Kafka (KRaft, single node) and a local webhook receiver")
        with KafkaBroker() as broker, WebhookReceiver(on_request=print_alert) as receiver:
            bootstrap = broker.bootstrap_servers
            print(f"broker at {bootstrap}, webhook receiver at {receiver.url}")
            config = tmp / "alert.yaml"
            config.write_text(ALERT_CONFIG.format(url=receiver.url))
            env = {"DEMO_WEBHOOK_SECRET": SECRET}
            step("background services: tracescore consume (offline judge) and tracescore alert")
            services = [
                start_service(["consume", "--bootstrap-servers", bootstrap, "--topic", SPANS_TOPIC], tmp),
                start_service(["alert", "--config", str(config), "--bootstrap-servers", bootstrap], tmp, env),
            ]
            expected: dict[str, Any] = {}
            sent = 0  # requests, one evaluation record each (a question asked twice has one expectation)
            try:
                for phase, requests, title, waiting_for in (
                    ("healthy", HEALTHY_REQUESTS, "the app answers faithfully: each route's normal", None),
                    ("drift", REQUESTS, "/billing starts answering unfaithfully", "firing"),
                    ("healthy", REQUESTS, "/billing recovers", "resolved"),
                ):
                    step(f"example RAG app, {requests} requests: {title}")
                    out = tmp / f"expected-{phase}-{len(expected)}.json"
                    expected |= run_app(bootstrap, phase, requests, out)
                    sent += requests
                    if waiting_for is None:  # the baseline is in the alert windows before the drift starts
                        wait_for_evaluations(bootstrap, sent)
                        wait_for_alert_service(bootstrap, timeout_s=WAIT_S)
                    else:
                        print(f"  waiting for both /billing alerts to be {waiting_for} ...", flush=True)
                        receiver.wait_for(is_alert(waiting_for), timeout_s=WAIT_S)
                # Stopping the scorer leaves traces it has not read yet for a restart: wait until it read all.
                wait_for_evaluations(bootstrap, sent)
            finally:
                step("stopping the services")
                for service in services:
                    stop_service(service)
            queries = spans_by_id([m.value for m in read_topic(bootstrap, SPANS_TOPIC)])
            records = [
                EvaluationRecord.model_validate_json(m.value)
                for m in read_topic(bootstrap, EVALUATIONS_TOPIC)
            ]
            alerts = [r.json() for r in receiver.requests]
    report(records, queries, expected, alerts)
    return 0 if is_alert("resolved")(receiver.requests) else 1


def run_app(bootstrap: str, phase: str, requests: int, expected_path: Path) -> dict[str, Any]:
    """One run of the example app, guarded as the services are (`start_service`); `expected_path` is in the
    demo's folder."""
    run_guarded(
        [
            *(sys.executable, "-m", "examples.rag_app", "--bootstrap", bootstrap, "--topic", SPANS_TOPIC),
            *("--requests", str(requests), "--phase", phase, "--expected-out", str(expected_path)),
        ],
        check=True,
        remove=[expected_path.parent],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
    )
    return json.loads(expected_path.read_text())


def _pythonpath() -> str:
    return os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)


@dataclass(frozen=True)
class Service:
    """A `tracescore` command the demo runs in the background (`start_service`, `stop_service`)."""

    name: str
    process: subprocess.Popen[bytes]
    guard: Guard | None
    log: Path


def start_service(args: list[str], folder: Path, env: Mapping[str, str] | None = None) -> Service:
    """`tracescore <args>` from this checkout (`env` added to the demo's environment), logging to a file in
    the demo's `folder`: the demo prints what the receiver gets, and the service's closing summary once
    stopped. Guarded: if the demo dies without stopping it (a SIGKILL, its terminal closed), the guard ends it
    (SIGTERM, SIGKILL after STOP_S) and removes the `folder`, which the demo's own exit would have; without it
    the service runs on for good."""
    log = folder / f"{args[0]}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "tracescore.cli", *args],
            env={**os.environ, "PYTHONPATH": _pythonpath(), **(env or {})},
            stderr=out,
        )
    return Service(args[0], process, Guard.start(process, STOP_S, [folder]), log)


def stop_service(service: Service) -> None:
    """SIGTERM (its own stop), SIGKILL if it has not stopped in SERVICE_STOP_S; then its summary is shown."""
    end_process(service.process, SERVICE_STOP_S, service.guard)
    if service.process.returncode == -signal.SIGKILL:
        print(f"tracescore {service.name} did not stop in time and was killed", flush=True)
    lines = service.log.read_text(errors="replace").splitlines()
    summary = [line for line in lines if line.strip() and not line[:4].isdigit()]  # no timestamp on them
    print(f"tracescore {service.name} stopped:", *(f"  {line}" for line in summary), sep="\n", flush=True)


def spans_by_id(values: list[bytes]) -> dict[str, dict[str, Any]]:
    spans = {}
    for value in values:
        for span in decode_message(value):
            if "input.value" in span.attributes:
                contexts = [
                    str(v) for k, v in sorted(span.attributes.items()) if k.startswith("retrieval.documents.")
                ]
                spans[span.span_id] = {
                    "query": str(span.attributes["input.value"]),
                    "answer": str(span.attributes.get("output.value", "")),
                    "contexts": contexts,
                }
    return spans


def report(
    records: list[EvaluationRecord],
    spans: dict[str, dict[str, Any]],
    expected: dict[str, Any],
    alerts: list[dict[str, Any]],
) -> None:
    step("scores")
    print(f"{'route':<9} {'faithfulness':>12}  {'verdict':<12} {'deliberate':<10} query")
    caught = missed = false_alarms = 0
    by_route: dict[str, list[float]] = defaultdict(list)
    rows = []
    for i, record in enumerate(sorted(records, key=lambda r: r.timestamp)):
        span = spans.get(record.span_id, {"query": "?", "answer": "?", "contexts": []})
        altered = bool(expected.get(f"{span['query']}\n{span['answer']}", {}).get("altered"))
        score = "n/a" if record.score is None else f"{record.score:.2f}"
        verdict = record.label or record.status.value
        deliberate = "altered" if altered else ""
        print(f"{record.route:<9} {score:>12}  {verdict:<12} {deliberate:<10} {span['query'][:70]}")
        rows.append(
            {
                **span,
                "id": f"{record.route} {record.trace_id[:8]}",
                "line": i + 1,
                record.metric: record.score,
                "reason": record.reason if record.score is None else None,
                "results": {record.metric: record.model_dump(mode="json")},
            }
        )
        if record.score is not None:
            by_route[record.route].append(record.score)
            # The record's label is the metric's (README, What "hallucinated" means): an invented sentence
            # beside a true one scores 0.5 and is still hallucinated.
            flagged = is_flagged({"score": record.score, "label": record.label})
            caught += altered and flagged
            missed += altered and not flagged
            false_alarms += (not altered) and flagged

    step("summary")
    scored = [s for scores in by_route.values() for s in scores]
    print(f"{len(records)} evaluations, mean faithfulness {sum(scored) / max(1, len(scored)):.2f}")
    for route, scores in sorted(by_route.items()):
        print(f"  {route:<9} n={len(scores):<3} mean faithfulness {sum(scores) / len(scores):.2f}")
    print(
        f"deliberately unfaithful answers caught: {caught}/{caught + missed}; "
        f"faithful answers flagged: {false_alarms}/{len(scored) - caught - missed}"
    )
    step(
        "alerts received by the webhook (tracescore alert: share of faithful answers per service and route, "
        "against 0.7 and against the route's own normal)"
    )
    for alert in alerts:
        print(f"{alert['headline']:<9} {alert['severity']:<8} {alert['summary']}")
    if not alerts:
        print("none")
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(render_report(rows, title="tracescore demo: Northwind assistant"))
    print(f"\nHTML report: {REPORT}")


if __name__ == "__main__":
    sys.exit(main())
