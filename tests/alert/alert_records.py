"""Evaluation records for the alert tests, and running `AlertService` against the real broker (in this
process, or `tracescore alert` as a process of its own)."""

from __future__ import annotations

import json
import threading
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml
from _helpers import WAIT_S
from service_processes import IDLE_TIMEOUT_S, SESSION_TIMEOUT_MS, ServiceProcess

from tracescore.alert import (
    AlertConfig,
    AlertEvaluator,
    AlertService,
    RuleConfig,
    WebhookSink,
    WebhookSinkConfig,
)
from tracescore.alert.testing import AlertmanagerProcess, WebhookReceiver
from tracescore.model import ConversationRecord, EvaluationRecord, MetricStatus
from tracescore.testing.kafka_topics import input_producer

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
SHIPPED_ALERTMANAGER = Path(__file__).resolve().parents[2] / "deploy" / "alertmanager" / "alertmanager.yml"


def record(
    score: float | None,
    at: datetime = T0,
    route: str = "/billing",
    service: str = "rag-api",
    metric: str = "faithfulness",
    status: MetricStatus | None = None,
    reason: str | None = None,
) -> EvaluationRecord:
    return EvaluationRecord(
        trace_id=uuid.uuid4().hex,
        span_id=uuid.uuid4().hex[:16],
        service_name=service,
        route=route,
        metric=metric,
        score=score,
        label=None,
        status=status or (MetricStatus.OK if score is not None else MetricStatus.ERROR),
        reason=reason,
        judge="offline",
        timestamp=at,
    )


def conversation(n: int, flagged: int, turns: int = 4, **fields: Any) -> ConversationRecord:
    """Conversation `n`: `turns` turns scored offline, `flagged` of them unfaithful."""
    passed = turns - flagged
    values: dict[str, Any] = {
        "conversation_id": f"c-{n}",
        "service_name": "chat-api",
        "route": "/chat",
        "started_at": T0 + timedelta(minutes=n),
        "metric": "faithfulness",
        "judge": "offline",
        "annotator_kind": "CODE",
        "selection": None,
        "turns": turns,
        "turns_judged": turns,
        "turns_scored": turns,
        "turns_passed": passed,
        "turns_flagged": flagged,
        "complete": True,
        "score": passed / turns,
        "share_lower": 0.0,
        "share_upper": 1.0,
        "confidence": 0.95,
        "label": "flagged" if flagged else "passed",
        "status": MetricStatus.OK,
        "reason": "",
        "worst_turn": None,
        "trace_ids": [],
        "span_ids": [],
        "first_turn_at": T0,
        "last_turn_at": T0,
        "timestamp": T0 + timedelta(minutes=n, seconds=30),
    }
    return ConversationRecord(**{**values, **fields})


def evaluator(max_routes: int = 100, **rule: Any) -> AlertEvaluator:
    """An evaluator of one threshold rule (warning 0.7, critical 0.4) on small windows; `rule` overrides."""
    settings: dict[str, Any] = {
        "signal": "score",  # these tests are about the mechanics, on graded scores
        "window_count": 20,
        "window_seconds": 900,
        "warning": 0.7,
        "critical": 0.4,
        "min_samples": 5,
        "confidence": 0.9,
        "hysteresis": 0.05,
        "cooldown_seconds": 300,
        "renotify_seconds": 3600,
        "no_data_seconds": 600,
        **rule,
    }
    return AlertEvaluator(AlertConfig(rules=[RuleConfig(**settings)], max_routes=max_routes))


def llm_record(
    of: EvaluationRecord,
    score: float | None,
    selection: str | None,
    inclusion_probability: float | None,
    at: datetime | None = None,
) -> EvaluationRecord:
    """The LLM judge's record of the interaction `of` (an offline record), as the cascade writes it."""
    return of.model_copy(
        update={
            "score": score,
            "status": MetricStatus.OK if score is not None else MetricStatus.ERROR,
            "judge": "openai:gpt-4o-mini",
            "annotator_kind": "LLM",
            "selection": selection,
            "inclusion_probability": inclusion_probability,
            "offline_score": of.score,
            "timestamp": at or of.timestamp,
        }
    )


def service_config(bootstrap: str, prefix: str, **settings: Any) -> AlertConfig:
    """`AlertService`'s config on the test's own topics; by default one rule that fires once 8 records are
    low (`rules=None`: the config's own default, the rule run without a config)."""
    rule = RuleConfig(window_count=8, min_samples=8, critical=None, cooldown_seconds=0, no_data_seconds=None)
    values: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "evaluations_topic": f"{prefix}.evaluations",
        "routes_topic": f"{prefix}.routes",
        "state_topic": f"{prefix}.state",
        "group_id": f"{prefix}-alert",
        "tick_seconds": 0.5,
        "rules": [rule],
    }
    chosen = {**values, **settings}
    if chosen["rules"] is None:
        del chosen["rules"]
    return AlertConfig(**chosen)


class Running:
    """An AlertService on its own thread, notifying a webhook receiver; stopped and joined on exit."""

    def __init__(self, cfg: AlertConfig, receiver: WebhookReceiver) -> None:
        self.service = AlertService(cfg, [WebhookSink(WebhookSinkConfig(url=receiver.url))])
        self._thread = threading.Thread(target=self.service.run, daemon=True)

    def __enter__(self) -> AlertService:
        self._thread.start()
        return self.service

    def __exit__(self, *exc: object) -> None:
        self.service.stop()
        self._thread.join(WAIT_S)  # returns as soon as the member stopped
        assert not self._thread.is_alive()


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = input_producer(bootstrap, [topic], acks="all")
    for i, value in enumerate(values):
        producer.send(topic, key=f"{i:032x}".encode(), value=value)
    producer.flush()
    producer.close()


def write_config(tmp_path: Path, prefix: str, url: str, **settings: Any) -> Path:
    """`tracescore alert`'s file: one rule that fires once 8 records are low, one webhook sink at `url`."""
    quiet = {"no_data_seconds": None, "renotify_seconds": None}  # no reminder: one notification per alert
    config = {
        "evaluations_topic": f"{prefix}.evaluations",
        "routes_topic": f"{prefix}.routes",
        "state_topic": f"{prefix}.state",
        "group_id": f"{prefix}-alert",
        "tick_seconds": 0.5,
        "session_timeout_ms": SESSION_TIMEOUT_MS,
        "rules": [{"window_count": 8, "min_samples": 8, "critical": None, "cooldown_seconds": 0, **quiet}],
        "sinks": [{"type": "webhook", "url": url}],
        **settings,
    }
    path = tmp_path / "alert.yaml"
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


def alert_process(
    bootstrap: str,
    config: Path,
    crash_at: str | None = None,
    pause_at: str | None = None,
    until_idle: bool = True,
) -> ServiceProcess:
    """`tracescore alert` with `config`, until its idle timeout (or a crash point), or until stopped."""
    args = ["--config", str(config), "--bootstrap-servers", bootstrap]
    stop = ("--idle-timeout", IDLE_TIMEOUT_S) if until_idle and crash_at is None else ()
    return ServiceProcess("alert", [*args, *stop], {}, crash_at=crash_at, pause_at=pause_at)


def shipped_alertmanager(webhook_url: str) -> AlertmanagerProcess:
    """The real Alertmanager running the shipped deploy/alertmanager/alertmanager.yml (its routes, grouping
    and inhibition), its receivers pointed at `webhook_url` and its waits shortened to a second; enter it to
    start it."""
    config = yaml.safe_load(SHIPPED_ALERTMANAGER.read_text())
    config["route"].update(group_wait="1s", group_interval="1s")
    for receiver in config["receivers"]:
        for hook in receiver.get("webhook_configs", []):
            hook["url"] = webhook_url
    manager = AlertmanagerProcess(webhook_url)
    manager.config_path.write_text(json.dumps(config))  # JSON is YAML
    return manager
