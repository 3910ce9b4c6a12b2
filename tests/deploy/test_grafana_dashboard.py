"""The Grafana dashboard: valid JSON whose every panel query the real Prometheus accepts, and whose score
panels show the data that went through the real Collector."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from deploy_stack import REPO, PrometheusStack

pytestmark = pytest.mark.kafka

DASHBOARD = REPO / "deploy" / "grafana" / "tracescore-dashboard.json"
# What Grafana substitutes before sending a query: its interval macros and the template variables' All.
GRAFANA_VALUES = {
    "$__rate_interval": "1m",
    "$__interval": "15s",
    "$service": ".*",
    "$route": ".*",
    "$group": ".*",
}


def load(path: Path = DASHBOARD) -> dict[str, Any]:
    return json.loads(path.read_text())


def expressions(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            out.append((panel["title"], target["expr"]))
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]["query"]
            # label_values(<selector>, label) is Grafana's; Prometheus is asked for the selector.
            out.append(
                (f"variable {variable['name']}", query.removeprefix("label_values(").rsplit(",", 1)[0])
            )
    return out


def grafana(expr: str) -> str:
    for macro, value in GRAFANA_VALUES.items():
        expr = expr.replace(macro, value)
    return expr


def test_dashboard_shape() -> None:
    dashboard = load()
    assert dashboard["uid"] == "tracescore-overview"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    titles = " | ".join(p["title"] for p in dashboard["panels"])
    for topic in (
        "Mean score per route",
        "Rolling faithfulness estimate",
        "Judge agreement",
        "skipped by reason",
        "Judge error",
        "Judge tokens",
        "lag",
    ):
        assert topic in titles
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}"
        assert {"x", "y", "w", "h"} <= panel["gridPos"].keys()


def test_every_query_is_accepted_by_prometheus(drifted_stack: PrometheusStack) -> None:
    rejected = []
    for title, expr in expressions(load()):
        try:
            drifted_stack.prometheus.query(grafana(expr))
        except ValueError as exc:
            rejected.append(f"{title}: {exc}")
    assert not rejected, "\n".join(rejected)


def test_score_panels_show_the_scored_routes(drifted_stack: PrometheusStack) -> None:
    panels = {p["title"]: p for p in load()["panels"]}
    for title in (
        "Mean score per route and judge (all metrics)",
        "Rolling faithfulness estimate (15 min, 95% band) against the alert thresholds",
    ):
        result = drifted_stack.prometheus.query(grafana(panels[title]["targets"][0]["expr"]))["result"]
        routes = {r["metric"]["tracescore_route"] for r in result}
        assert routes == {"/billing", "/support", "/product"}, title
