"""The rolling faithfulness estimate exists three times: `tracescore alert`'s window (alert/_estimate.py), the
consumer's OTel sums (`tracescore.estimate.sums` and the score histogram, emit/_metrics.py) and the shipped
Prometheus recording rules over those sums (deploy/prometheus/tracescore-rules.yaml). The same records go
to all three here: the window directly; the sums through the real OTel SDK and its Prometheus exporter; the
exposed series through the rules, evaluated by the real promtool. The estimates must agree.

The window refines the correction with a fitted slope (λ) from 10 baseline pairs on; the sums and the rules
carry the plain difference (λ = 1), which is what the window uses below 10 pairs. The records here keep
fewer than 10 pairs per route, so the three must be equal, not merely close.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tracescore.alert import EstimateWindow
from tracescore.emit import EvaluationMetrics
from tracescore.model import EvaluationRecord, MetricStatus

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "tracescore-rules.yaml"
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
SERVICE = "northwind"
ROUTES = ("/billing", "/support")
TOLERANCE = 1e-6


def _record(route: str, score: float, at: datetime, **llm: object) -> EvaluationRecord:
    return EvaluationRecord(
        trace_id=uuid.uuid4().hex,
        span_id=uuid.uuid4().hex[:16],
        service_name=SERVICE,
        route=route,
        metric="faithfulness",
        score=score,
        label=None,
        status=MetricStatus.OK,
        judge="offline",
        annotator_kind="CODE",
        timestamp=at,
        **llm,
    )


def traffic(route: str, rng: random.Random, answers: int = 60) -> list[EvaluationRecord]:
    """Offline scores for every answer; the cascade's LLM judge on the suspicious ones (π = 1) and a
    uniform baseline at two rates (π = 0.1 and 0.25, as from two consumer configurations), at most 9
    pairs; the LLM judge disagrees with the offline one by a noisy margin."""
    out: list[EvaluationRecord] = []
    pairs = 0
    for index in range(answers):
        at = T0 + timedelta(seconds=index)
        offline = round(rng.uniform(0.05, 0.98), 3)
        first = _record(route, offline, at)
        out.append(first)
        llm_score = round(min(1.0, max(0.0, offline + rng.uniform(-0.3, 0.2))), 3)
        update = {"judge": "openai:gpt-4o-mini", "annotator_kind": "LLM", "offline_score": offline}
        if offline < 0.4:
            update |= {"selection": "cascade", "inclusion_probability": 1.0}
        elif pairs < 9 and rng.random() < 0.2:
            pairs += 1
            update |= {"selection": "baseline", "inclusion_probability": rng.choice((0.1, 0.25))}
        else:
            continue
        out.append(first.model_copy(update={**update, "score": llm_score, "span_id": first.span_id}))
    return out


def window_estimate(records: list[EvaluationRecord]) -> float:
    window = EstimateWindow(maxlen=len(records), signal="score")
    for record in records:
        window.add(record)
    estimate = window.estimate(0.9)
    assert estimate is not None and estimate.calibrated
    return estimate.value


def exposed_series(records: list[EvaluationRecord]) -> dict[str, float]:
    """The consumer's metrics for `records` as Prometheus exposes them: series -> value."""
    registry = CollectorRegistry()
    provider = MeterProvider(metric_readers=[PrometheusMetricReader(registry=registry)])
    sink = EvaluationMetrics(provider.get_meter("tracescore.consumer"))
    for record in records:
        sink.evaluated(record)
    series = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            if sample.name.startswith("tracescore_") and sample.name.endswith(("_total", "_sum", "_count")):
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
                series[f"{sample.name}{{{labels}}}"] = sample.value
    provider.shutdown()
    return series


def _labels(route: str) -> str:
    return f'{{service_name="{SERVICE}",tracescore_route="{route}"}}'


def promtool_test(tmp_path: Path, series: dict[str, float], expected: dict[str, float]) -> str:
    """Run the rules on `series` (0 for ten minutes, then their value) and check at 20 minutes that the
    15-minute estimate of each route is within TOLERANCE of `expected`; promtool's output."""
    checks = [
        {
            "expr": f'abs(tracescore:faithfulness:estimate_15m{{tracescore_route="{route}"}} - {value!r})'
            f" < bool {TOLERANCE}",
            "eval_time": "20m",
            "exp_samples": [{"labels": _labels(route), "value": 1}],
        }
        for route, value in expected.items()
    ]
    # What the rules computed, for the failure message: an expectation that cannot hold prints it.
    checks.append({"expr": "tracescore:faithfulness:estimate_15m", "eval_time": "20m", "exp_samples": []})
    test = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": s, "values": f"0x9 {v!r}x10"} for s, v in series.items()],
                "promql_expr_test": checks,
            }
        ],
    }
    path = tmp_path / "estimate.test.yaml"
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    promtool = shutil.which("promtool")
    assert promtool, "promtool is not installed: run `make promtool` (Debian package prometheus)"
    done = subprocess.run(
        [promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=60, check=False
    )
    return done.stdout + done.stderr


def test_the_window_the_otel_sums_and_the_prometheus_rules_give_one_estimate(tmp_path: Path) -> None:
    rng = random.Random(26)
    by_route = {route: traffic(route, rng) for route in ROUTES}
    expected = {route: window_estimate(records) for route, records in by_route.items()}
    assert all(0.0 < value < 1.0 for value in expected.values()), expected  # the rules clamp to 0..1
    series = exposed_series([r for records in by_route.values() for r in records])
    output = promtool_test(tmp_path, series, expected)
    # Only the deliberately impossible last check fails, printing what the rules computed.
    assert 'expr: "tracescore:faithfulness:estimate_15m", time: 20m' in output, output
    assert "abs(" not in output, f"the rules differ from the window's {expected}:\n{output}"


@pytest.mark.parametrize("route", ROUTES)
def test_the_otel_sums_count_what_the_window_counts(route: str) -> None:
    records = traffic(route, random.Random(26))
    window = EstimateWindow(maxlen=len(records), signal="score")
    for record in records:
        window.add(record)
    estimate = window.estimate(0.9)
    assert estimate is not None
    series = exposed_series(records)

    def total(name: str, **labels: str) -> float:
        wanted = [f'{k}="{v}"' for k, v in labels.items()]
        return sum(v for s, v in series.items() if s.startswith(name + "{") and all(w in s for w in wanted))

    census = sum(r.inclusion_probability == 1.0 for r in records)
    assert total("tracescore_estimate_sums_total", stratum="census", term="pairs") == census
    assert total("tracescore_estimate_sums_total", stratum="sample", term="pairs") == estimate.pairs
    assert total("tracescore_evaluation_score_count", selection="none") == estimate.n
