"""The consumer's metrics on a platform of many routes: past the OpenTelemetry SDK's series limit per
instrument a new route's measurements go to one overflow series without service or route; the consumer says
so once, naming the instrument, instead of the route silently missing from every per-route panel and rule."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from tracescore.emit import SERIES_LIMIT, EvaluationMetrics
from tracescore.model import EvaluationRecord, MetricStatus

OVERFLOW = "otel.metric.overflow"


def _answer(route: str) -> EvaluationRecord:
    return EvaluationRecord(
        trace_id="0" * 31 + "1", span_id="0" * 15 + "1", service_name="rag-platform", route=route,
        metric="faithfulness", score=1.0, label="faithful", status=MetricStatus.OK, judge="offline",
        timestamp=datetime.now(UTC),
    )  # fmt: skip


def _routes(reader: InMemoryMetricReader, name: str) -> list[object]:
    data = reader.get_metrics_data()
    return [
        point.attributes.get("tracescore.route", OVERFLOW if point.attributes.get(OVERFLOW) else None)
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
        if metric.name == name
        for point in metric.data.data_points
    ]


def test_a_route_past_the_sdks_series_limit_is_said_once(caplog: pytest.LogCaptureFixture) -> None:
    reader = InMemoryMetricReader()
    out = EvaluationMetrics(MeterProvider(metric_readers=[reader]).get_meter("test"))
    caplog.set_level(logging.WARNING, "tracescore.emit")

    for n in range(SERIES_LIMIT):  # one series a route in each instrument (offline judge, one metric)
        out.evaluated(_answer(f"/tenant/{n}"))
    assert OVERFLOW not in _routes(reader, "tracescore.evaluations")
    assert not caplog.records

    out.evaluated(_answer("/tenant/new"))  # the SDK's own limit: this route has no series of its own
    routes = _routes(reader, "tracescore.evaluations")
    assert OVERFLOW in routes and "/tenant/new" not in routes
    said = sorted(r.getMessage() for r in caplog.records)
    assert [line.split(":")[0] for line in said] == [  # each instrument once
        "metric tracescore.evaluation.score",
        "metric tracescore.evaluations",
    ]
    assert all("more than 2000 series" in line for line in said)
    assert all('otel_metric_overflow="true", without service or route' in line for line in said)

    for n in range(50):  # more new routes: said already
        out.evaluated(_answer(f"/later/{n}"))
    assert len(caplog.records) == 2
