"""RollingScoreAlerter: one alert per transition of a (service, route)'s rolling mean."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tracescore.alert import Alert, RollingScoreAlerter
from tracescore.emit import EvaluationRecord
from tracescore.score import MetricStatus


class RecordingNotifier:
    def __init__(self) -> None:
        self.alerts: list[Alert] = []

    def notify(self, alert: Alert) -> None:
        self.alerts.append(alert)


def record(
    score: float | None,
    route: str = "/billing",
    service: str = "rag-api",
    metric: str = "faithfulness",
) -> EvaluationRecord:
    return EvaluationRecord(
        trace_id="0af7651916cd43dd8448eb211c80319c",
        span_id="b7ad6b7169203331",
        service_name=service,
        route=route,
        metric=metric,
        score=score,
        label=None,
        status=MetricStatus.OK if score is not None else MetricStatus.ERROR,
        judge="offline",
        timestamp=datetime.now(UTC),
    )


@pytest.fixture
def notifier() -> RecordingNotifier:
    return RecordingNotifier()


@pytest.fixture
def alerter(notifier: RecordingNotifier) -> RollingScoreAlerter:
    return RollingScoreAlerter([notifier], threshold=0.7, window=4, min_samples=3)


def feed(alerter: RollingScoreAlerter, scores: list[float | None], **kw: str) -> list[Alert | None]:
    return [alerter.observe(record(s, **kw)) for s in scores]


def test_no_alert_before_min_samples(alerter: RollingScoreAlerter, notifier: RecordingNotifier) -> None:
    assert feed(alerter, [0.0, 0.0]) == [None, None]
    assert notifier.alerts == []
    assert alerter.firing() == []


def test_fires_once_while_low_and_resolves_once(
    alerter: RollingScoreAlerter, notifier: RecordingNotifier
) -> None:
    results = feed(alerter, [0.1, 0.2, 0.3])
    assert results[:2] == [None, None]
    fired = results[2]
    assert fired is not None
    assert fired.state == "firing"
    assert (fired.service_name, fired.route, fired.metric) == ("rag-api", "/billing", "faithfulness")
    assert fired.rolling_mean == pytest.approx(0.2)
    assert fired.threshold == 0.7
    assert fired.window == 3
    assert alerter.firing() == [("rag-api", "/billing")]

    # Still low: no repeat.
    assert feed(alerter, [0.2, 0.4]) == [None, None]
    # Window (4) now [0.3, 0.2, 0.4, 1.0] -> 0.475, then [0.2, 0.4, 1.0, 1.0] -> 0.65: still below.
    assert feed(alerter, [1.0, 1.0]) == [None, None]
    resolved = alerter.observe(record(1.0))  # [0.4, 1.0, 1.0, 1.0] -> 0.85
    assert resolved is not None
    assert resolved.state == "resolved"
    assert resolved.rolling_mean == pytest.approx(0.85)
    assert resolved.window == 4
    assert alerter.firing() == []
    assert feed(alerter, [1.0, 1.0]) == [None, None]

    assert notifier.alerts == [fired, resolved]


def test_fires_again_after_resolving(alerter: RollingScoreAlerter, notifier: RecordingNotifier) -> None:
    feed(alerter, [0.0, 0.0, 0.0])
    feed(alerter, [1.0, 1.0, 1.0, 1.0])
    feed(alerter, [0.0, 0.0, 0.0, 0.0])
    assert [a.state for a in notifier.alerts] == ["firing", "resolved", "firing"]


def test_healthy_scores_never_alert(alerter: RollingScoreAlerter, notifier: RecordingNotifier) -> None:
    assert feed(alerter, [0.9, 0.8, 1.0, 0.7, 0.75]) == [None] * 5
    assert notifier.alerts == []


def test_routes_and_services_are_independent(
    alerter: RollingScoreAlerter, notifier: RecordingNotifier
) -> None:
    feed(alerter, [0.1, 0.1], route="/billing")
    feed(alerter, [1.0, 1.0, 1.0], route="/shipping")
    feed(alerter, [0.1], route="/billing")
    feed(alerter, [1.0, 1.0, 1.0], route="/billing", service="other-api")
    assert [(a.state, a.service_name, a.route) for a in notifier.alerts] == [
        ("firing", "rag-api", "/billing")
    ]
    assert alerter.firing() == [("rag-api", "/billing")]


def test_other_metrics_and_unscored_records_are_ignored(
    alerter: RollingScoreAlerter, notifier: RecordingNotifier
) -> None:
    assert feed(alerter, [0.0, 0.0, 0.0, 0.0], metric="answer_relevancy") == [None] * 4
    assert feed(alerter, [None, None, None, None]) == [None] * 4
    assert notifier.alerts == []
    # The ignored records did not count towards min_samples.
    assert feed(alerter, [0.0, 0.0]) == [None, None]
    assert alerter.observe(record(0.0)) is not None


def test_every_notifier_gets_the_alert(notifier: RecordingNotifier) -> None:
    second = RecordingNotifier()
    alerter = RollingScoreAlerter([notifier, second], threshold=0.5, window=5, min_samples=1)
    alert = alerter.observe(record(0.2))
    assert alert is not None
    assert notifier.alerts == second.alerts == [alert]


def test_summary_mentions_service_route_and_mean(alerter: RollingScoreAlerter) -> None:
    [*_, alert] = feed(alerter, [0.3, 0.4, 0.5])
    assert alert is not None
    summary = alert.summary()
    assert "rag-api" in summary
    assert "/billing" in summary
    assert "0.40" in summary
    assert "faithfulness" in summary
    assert "FIRING" in summary
