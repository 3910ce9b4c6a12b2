"""The LangChain.js app the fixtures are recorded from (fixtures/scenarios/langchain_js: a retrieval chain
and a LangGraph ReAct agent, traced by OpenInference's or OpenLLMetry's LangChain instrumentation into the
OTel Node SDK), run live through the Collector into Kafka and scored (node_apps.py), as its recordings run
it (langchain_js_collector.py, openllmetry_js.py): each interaction is read in its instrumentation's
convention, under the chain's or agent's name, and scored in the right direction.
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
from langchain_js_collector import APP, SHAPES  # noqa: E402
from node_apps import live_app, score_live  # noqa: E402
from openllmetry_js import TRACING as OPENLLMETRY  # noqa: E402

pytestmark = pytest.mark.kafka

OPENINFERENCE = {"serviceName": "aurora-support-langchain-js-live"}
SEARCH = ToolCall("search_docs", {"query": QUESTION})


def test_the_langchain_js_app_is_scored_through_the_collector(
    otelcol: Path, kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    runs = [
        # (tracing, shape, model replies, expected convention, route and label)
        (OPENINFERENCE, "rag", (FAITHFUL_ANSWER,), ("openinference", SHAPES["rag"][0], "faithful")),
        (
            OPENINFERENCE,
            "agent",
            (SEARCH, UNFAITHFUL_ANSWER),
            ("openinference", SHAPES["agent"][0], "hallucinated"),
        ),
        # OpenLLMetry's spans hang under the app's own request span; its route is the workflow it names.
        (
            OPENLLMETRY,
            "rag",
            (UNFAITHFUL_ANSWER,),
            ("openllmetry", "workflow RunnableSequence", "hallucinated"),
        ),
    ]
    with live_app(APP, otelcol, kafka_broker, tmp_path) as session:
        expected = {}
        for tracing, shape, replies, outcome in runs:
            config = {**tracing, "shape": shape, "question": QUESTION, "documents": list(DOCUMENTS)}
            report, _ = session.run("app.mjs", config, replies)
            [trace_id] = report["spanCounts"]
            expected[trace_id] = outcome

        scored = {t: (r.convention, r.route, r.label) for t, r in score_live(session).items()}
        assert scored == expected
