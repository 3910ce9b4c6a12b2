"""The Genkit app the fixtures are recorded from (fixtures/scenarios/genkit: genkit, enableTelemetry with an
OTLP/HTTP span processor), run live through the Collector into Kafka and scored (node_apps.py), as its
recording runs it (genkit_flows.py): each flow is read by the Genkit recogniser, under the flow's name, and
scored in the right direction.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from collector_helpers import REPO

from tracescore.testing.kafka_broker import KafkaBroker

FIXTURES = REPO / "tests" / "extract" / "fixtures"
sys.path[:0] = [str(FIXTURES), str(FIXTURES / "scenarios")]

from _corpus import DOCUMENTS, FAITHFUL_ANSWER, QUESTION, UNFAITHFUL_ANSWER  # noqa: E402
from _openai_server import ToolCall  # noqa: E402
from genkit_flows import APP, FLOWS  # noqa: E402
from node_apps import live_app, score_live  # noqa: E402

pytestmark = pytest.mark.kafka


def test_the_genkit_flows_are_scored_through_the_collector(
    otelcol: Path, kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    runs = {
        "rag": ((FAITHFUL_ANSWER,), "faithful"),
        "tool": ((ToolCall("searchDocs", {"query": QUESTION}), UNFAITHFUL_ANSWER), "hallucinated"),
    }
    with live_app(APP, otelcol, kafka_broker, tmp_path) as session:
        expected = {}
        for flow, (replies, label) in runs.items():
            config = {
                "flow": flow,
                "serviceName": "aurora-support-genkit-live",
                "question": QUESTION,
                "documents": list(DOCUMENTS),
            }
            report, _ = session.run("app.mjs", config, replies)
            [trace_id] = report["spanCounts"]
            expected[trace_id] = (FLOWS[flow][0], label)

        scored = {t: (r.convention, r.route, r.label) for t, r in score_live(session).items()}
        assert scored == {trace_id: ("genkit", flow, label) for trace_id, (flow, label) in expected.items()}
