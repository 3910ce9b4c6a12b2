"""The Vercel AI SDK app the fixtures are recorded from (fixtures/scenarios/vercel_ai: ai + @ai-sdk/openai,
experimental_telemetry, OTel Node SDK), run live through the Collector into Kafka and scored (node_apps.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from collector_helpers import REPO

from tracescore.consume import decode_message
from tracescore.testing.kafka_broker import KafkaBroker

FIXTURES = REPO / "tests" / "extract" / "fixtures"
sys.path[:0] = [str(FIXTURES), str(FIXTURES / "scenarios")]

from _corpus import DOCUMENTS, FAITHFUL_ANSWER, QUESTION, UNFAITHFUL_ANSWER  # noqa: E402
from _openai_server import ToolCall  # noqa: E402
from node_apps import live_app, score_live  # noqa: E402

pytestmark = pytest.mark.kafka

APP = FIXTURES / "scenarios" / "vercel_ai"
SEARCH = ToolCall("search_docs", {"query": QUESTION})
GUIDE_SEARCH = ToolCall("getInformation", {"question": QUESTION})


def test_the_ai_sdk_app_is_scored_through_the_collector(
    otelcol: Path, kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    runs = {
        # (shape, call, api): (model replies, expected label or None for a skip)
        ("tool", "generate", "chat"): ((SEARCH, FAITHFUL_ANSWER), "faithful"),
        ("tool", "stream", "responses"): ((SEARCH, UNFAITHFUL_ANSWER), "hallucinated"),
        # The documents in the system prompt under `Context:`: read from there (kind `instructions`).
        ("prompt", "generate", "chat"): ((FAITHFUL_ANSWER,), "faithful"),
        # The AI SDK's RAG guide: {name, similarity} rows from a getInformation tool, one document each.
        ("rows", "stream", "chat"): ((GUIDE_SEARCH, UNFAITHFUL_ANSWER), "hallucinated"),
    }
    with live_app(APP, otelcol, kafka_broker, tmp_path) as session:
        traces = {}
        span_names: dict[str, str] = {}
        for (shape, call, api), (replies, label) in runs.items():
            config = {
                "shape": shape,
                "call": call,
                "api": api,
                "serviceName": "aurora-support-vercel-live",
                "question": QUESTION,
                "documents": list(DOCUMENTS),
                "sessionId": f"live-{shape}-{call}",
            }
            report, messages = session.run("app.mjs", config, replies)
            [trace_id] = report["spanCounts"]
            span_names |= {s.span_id: s.name for message in messages for s in decode_message(message)}
            traces[trace_id] = (f"ai.{call}Text", label, config["sessionId"], shape)

        scored = score_live(session)
        assert len(scored) == len(runs)
        for trace_id, (span_name, label, session_id, shape) in traces.items():
            if label is None:
                assert trace_id not in scored
                continue
            record = scored[trace_id]
            assert (record.convention, record.label, record.route) == ("vercel_ai", label, "aurora-support")
            assert record.session_id == session_id
            assert span_names[record.span_id] == span_name
            if shape == "rows":  # one document a row, not the rows' JSON as one
                assert len(record.details["context_sources"]) == len(DOCUMENTS)
