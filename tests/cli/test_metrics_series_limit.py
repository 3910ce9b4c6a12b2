"""`tracescore consume --metrics-max-series`: the series each metric keeps, through the real Prometheus
endpoint the consumer serves. A platform of many routes raises it so every tenant keeps a series of its own;
past it new routes go to the one overflow series, and the consumer says so once per metric at that limit."""

from __future__ import annotations

import logging
import urllib.request
from datetime import UTC, datetime

import pytest

from tracescore.cli._service import serving_metrics
from tracescore.emit import EvaluationMetrics
from tracescore.model import EvaluationRecord, MetricStatus
from tracescore.testing import free_port

ROUTES = 7


def _answer(route: str) -> EvaluationRecord:
    return EvaluationRecord(
        trace_id="0" * 31 + "1", span_id="0" * 15 + "1", service_name="rag-platform", route=route,
        metric="faithfulness", score=1.0, label="faithful", status=MetricStatus.OK, judge="offline",
        timestamp=datetime.now(UTC),
    )  # fmt: skip


def _scraped(max_series: int) -> list[str]:
    """The `tracescore_evaluations_total` lines served after ROUTES routes' answers."""
    port = free_port()
    with serving_metrics(None, "127.0.0.1", port, max_series=max_series) as provider:
        out = EvaluationMetrics(provider.get_meter("tracescore.consumer"), max_series)
        for n in range(ROUTES):
            out.evaluated(_answer(f"/tenant/{n}"))
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
            text = response.read().decode()
    return [line for line in text.splitlines() if line.startswith("tracescore_evaluations_total{")]


def test_a_limit_above_the_routes_keeps_a_series_per_route(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "tracescore.emit")
    lines = _scraped(max_series=ROUTES)
    assert len(lines) == ROUTES and not any("otel_metric_overflow" in line for line in lines)
    assert all(f'tracescore_route="/tenant/{n}"' in "".join(lines) for n in range(ROUTES))
    assert not caplog.records


def test_past_the_limit_new_routes_share_the_overflow_series_and_it_is_said_at_that_limit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, "tracescore.emit")
    lines = _scraped(max_series=4)
    overflow = [line for line in lines if 'otel_metric_overflow="true"' in line]
    kept = [line for line in lines if 'tracescore_route="/tenant/' in line]
    assert len(kept) == 4 and len(overflow) == 1, lines  # the first four routes, then the overflow
    assert overflow[0].endswith(" 3.0"), overflow  # the last three routes' answers, without their route
    said = [
        r.getMessage() for r in caplog.records if r.getMessage().startswith("metric tracescore.evaluations:")
    ]
    assert len(said) == 1 and "more than 4 series" in said[0] and "--metrics-max-series" in said[0]
