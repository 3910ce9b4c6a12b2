"""Every tracescore metric the shipped dashboard, Prometheus rules, metrics Collector config and docs name is
one the services export, under the name the real metrics Collector gives it. Prometheus accepts a query on a
metric that does not exist (it answers nothing), so test_grafana_dashboard's check cannot see a misspelt or
renamed one; this test asks the Collector for every instrument the code declares."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2
import pytest
from deploy_stack import REPO, metrics_collector, wait_until
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.metrics import Meter, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

from tracescore.emit import ConversationMetrics, EvaluationMetrics
from tracescore.model import EvaluationRecord, MetricStatus

# Where a metric's Prometheus name is written for people or for Prometheus.
NAMED_IN = [
    REPO / "deploy" / "grafana" / "tracescore-dashboard.json",
    REPO / "deploy" / "prometheus" / "tracescore-rules.yaml",
    REPO / "deploy" / "prometheus" / "tracescore-rules.test.yaml",
    REPO / "collectors" / "otlp-metrics-to-prometheus.yaml",
    REPO / "README.md",
    *sorted((REPO / "docs").rglob("*.md")),
]


class _EveryInstrumentOnce:
    """A Meter that records one value in every instrument made through it, so each one is exported."""

    def __init__(self, meter: Meter) -> None:
        self._meter = meter

    def __getattr__(self, name: str) -> Any:
        make = getattr(self._meter, name)
        if name.startswith("create_observable_"):
            observe = [lambda _: [Observation(0.5)]]
            return lambda *args, callbacks=(), **kw: make(*args, callbacks=observe, **kw)
        if not name.startswith("create_"):
            return make

        def made(*args: Any, **kw: Any) -> Any:
            instrument = make(*args, **kw)
            (instrument.add if hasattr(instrument, "add") else instrument.record)(1)
            return instrument

        return made


@pytest.fixture
def collector_scrape(otelcol: Path, tmp_path: Path) -> Iterator[tuple[set[str], set[str]]]:
    """(metric names, label names) the real metrics Collector serves for every instrument of the consumer and
    the conversations service, recorded once (and the labels a scored record and a skip give)."""
    with metrics_collector(otelcol, tmp_path / "collector.log") as collector:
        exporter_to_collector = OTLPMetricExporter(
            endpoint=f"http://127.0.0.1:{collector.otlp_port}/v1/metrics"
        )
        # Exported by force_flush below, not on a timer.
        reader = PeriodicExportingMetricReader(exporter_to_collector, export_interval_millis=3_600_000)
        provider = MeterProvider(metric_readers=[reader])
        try:
            _record_every_instrument(provider)
            provider.force_flush()
            url = f"http://127.0.0.1:{collector.exporter_port}/metrics"

            def served() -> str | None:
                body = httpx2.get(url, timeout=5).text
                return body if "tracescore_spans_skipped" in body else None

            text = wait_until("the Collector serves what was sent", served, timeout_s=60)
        finally:
            provider.shutdown(timeout_millis=5_000)
    series = [line for line in text.splitlines() if line and not line.startswith("#")]
    names = {re.match(r"[\w:]+", line)[0] for line in series}  # type: ignore[index]
    labels = {label for line in series for label in re.findall(r'[{,](\w+)="', line)}
    yield names, labels


def _record_every_instrument(provider: MeterProvider) -> None:
    """One value in every instrument of the consumer and the conversations service (and the labels a scored
    record and a skip give)."""
    meter = _EveryInstrumentOnce(provider.get_meter("tracescore.consumer"))
    metrics = EvaluationMetrics(meter)  # type: ignore[arg-type]
    ConversationMetrics(meter)  # type: ignore[arg-type]
    metrics.evaluated(
        EvaluationRecord(
            trace_id="0" * 32,
            span_id="0" * 16,
            service_name="svc",
            route="/r",
            metric="faithfulness",
            score=0.5,
            label="faithful",
            status=MetricStatus.OK,
            judge="offline",
            timestamp=datetime.now(UTC),
        )
    )
    metrics.skipped("not_rag", "svc", "scope")


def _named(text: str) -> set[str]:
    """The tracescore_* names in a text, `name_{bucket,sum,count}` spelt out."""
    spelt = re.sub(
        r"\b(tracescore_\w*)\{(\w+(?:, ?\w+)+)\}",
        lambda m: " ".join(m[1] + part.strip() for part in m[2].split(",")),
        text,
    )
    return set(re.findall(r"\btracescore_\w+", spelt))


def test_every_metric_named_is_one_the_collector_exports(collector_scrape: tuple[set[str], set[str]]) -> None:
    exported, labels = collector_scrape
    assert {"tracescore_route", "tracescore_scope"} <= labels, "the scored record's and the skip's labels"
    unknown = {
        str(path.relative_to(REPO)): sorted(_named(path.read_text()) - exported - labels) for path in NAMED_IN
    }
    assert not {path: names for path, names in unknown.items() if names}, f"exported: {sorted(exported)}"


def test_the_prometheus_port_serves_the_names_the_collector_does(
    collector_scrape: tuple[set[str], set[str]],
) -> None:
    """`--prometheus-port` (its PrometheusMetricReader) and the metrics Collector name every metric alike, so
    one dashboard and one set of rules serve either path (a gauge of unit 1 named without `_ratio` gets it
    from the Collector only)."""
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from prometheus_client import REGISTRY, generate_latest

    exported, _ = collector_scrape
    reader = PrometheusMetricReader()  # what meter_provider gives --prometheus-port: the default registry
    provider = MeterProvider(metric_readers=[reader])
    try:
        _record_every_instrument(provider)
        text = generate_latest(REGISTRY).decode()
    finally:
        provider.shutdown(timeout_millis=5_000)  # unregisters the reader's collector
    # prometheus_client adds a `_created` series beside each counter and histogram: not a name of ours.
    served = {name for name in re.findall(r"^(tracescore_\w+)", text, re.M) if not name.endswith("_created")}
    assert served == {name for name in exported if name.startswith("tracescore_")}
