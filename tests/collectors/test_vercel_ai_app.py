"""The Vercel AI SDK app the fixtures are recorded from (fixtures/scenarios/vercel_ai), run live:

    Node app (ai + @ai-sdk/openai, experimental_telemetry, OTel Node SDK) --OTLP/HTTP protobuf-->
    Collector (collectors/otlp-to-kafka.yaml) --> Kafka --> EvaluationConsumer

Its npm packages are installed once into ~/.cache/tracescore/peers/node-<hash of package-lock.json> (the
recorder's cache, reused); the model is the recorder's scripted fake OpenAI server on loopback.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from collector_helpers import REPO

from tracescore.consume import ConsumerSettings, EvaluationConsumer, decode_message
from tracescore.model import EvaluationRecord
from tracescore.score.judges import OfflineJudge
from tracescore.score.metrics import Faithfulness
from tracescore.testing.kafka_broker import KafkaBroker

FIXTURES = REPO / "tests" / "extract" / "fixtures"
sys.path[:0] = [str(FIXTURES), str(FIXTURES / "scenarios")]

from _corpus import DOCUMENTS, FAITHFUL_ANSWER, QUESTION, UNFAITHFUL_ANSWER  # noqa: E402
from _node import NodeSession, live_session  # noqa: E402
from _openai_server import ToolCall  # noqa: E402
from peers import NodeEnv, ensure_node_env  # noqa: E402

pytestmark = pytest.mark.kafka

APP = FIXTURES / "scenarios" / "vercel_ai"
SEARCH = ToolCall("search_docs", {"query": QUESTION})


@pytest.fixture(scope="module")
def node_env() -> Path:
    return ensure_node_env(NodeEnv(APP))


@pytest.fixture
def session(
    otelcol: Path, kafka_broker: KafkaBroker, node_env: Path, tmp_path: Path
) -> Iterator[NodeSession]:
    with live_session(otelcol, kafka_broker.bootstrap_servers, node_env, APP, tmp_path) as live:
        yield live


def test_the_ai_sdk_app_is_scored_through_the_collector(session: NodeSession) -> None:
    runs = {
        # (shape, call, api): (model replies, expected label or None for a skip)
        ("tool", "generate", "chat"): ((SEARCH, FAITHFUL_ANSWER), "faithful"),
        ("tool", "stream", "responses"): ((SEARCH, UNFAITHFUL_ANSWER), "hallucinated"),
        # The documents in the system prompt under `Context:`: read from there (kind `instructions`).
        ("prompt", "generate", "chat"): ((FAITHFUL_ANSWER,), "faithful"),
    }
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
        traces[trace_id] = (f"ai.{call}Text", label, config["sessionId"])

    seen: list[EvaluationRecord] = []
    prefix = f"v{uuid.uuid4().hex[:10]}"
    settings = ConsumerSettings(
        bootstrap_servers=session.pipeline.bootstrap,
        topic=session.pipeline.topic,
        group_id=f"{prefix}.group",
        evaluations_topic=f"{prefix}.evaluations",
        dlq_topic=f"{prefix}.dlq",
        evaluation_spans_topic=f"{prefix}.evaluation-spans",
        idle_timeout_s=3,
    )
    consumer = EvaluationConsumer(
        settings, judge=OfflineJudge(), metrics=[Faithfulness()], on_evaluation=seen.append
    )
    stats = consumer.run()

    scored = {r.trace_id: r for r in seen}
    assert len(scored) == len(seen) == 3, "each interaction scored once"
    for trace_id, (span_name, label, session_id) in traces.items():
        if label is None:
            assert trace_id not in scored
            continue
        record = scored[trace_id]
        assert (record.convention, record.label, record.route) == ("vercel_ai", label, "aurora-support")
        assert record.session_id == session_id
        assert span_names[record.span_id] == span_name
    assert dict(stats.skipped) == {}
    assert stats.dead_letters == 0 and session.network_attempts() == []
