"""The Genkit app the fixtures are recorded from (fixtures/scenarios/genkit), run live, as its recording runs
it (genkit_flows.py):

    Node app (genkit, enableTelemetry with an OTLP/HTTP span processor) --OTLP/HTTP protobuf-->
    Collector (collectors/otlp-to-kafka.yaml) --> Kafka --> EvaluationConsumer

So the recording program still reproduces what the committed fixtures hold: each flow is read by the Genkit
recogniser, under the flow's name, and scored in the right direction. Its npm packages are installed once into
~/.cache/tracescore/peers/node-<hash of package-lock.json> (the recorder's cache, reused); the model is the
recorder's scripted fake OpenAI server on loopback.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from _helpers import consumer_settings
from collector_helpers import REPO

from tracescore.consume import EvaluationConsumer
from tracescore.model import EvaluationRecord
from tracescore.score.judges import OfflineJudge
from tracescore.score.metrics import Faithfulness
from tracescore.testing.kafka_broker import KafkaBroker

FIXTURES = REPO / "tests" / "extract" / "fixtures"
sys.path[:0] = [str(FIXTURES), str(FIXTURES / "scenarios")]

from _corpus import DOCUMENTS, FAITHFUL_ANSWER, QUESTION, UNFAITHFUL_ANSWER  # noqa: E402
from _node import NodeSession, live_session  # noqa: E402
from _openai_server import ToolCall  # noqa: E402
from genkit_flows import APP, FLOWS  # noqa: E402
from peers import NodeEnv, ensure_node_env  # noqa: E402

pytestmark = pytest.mark.kafka


@pytest.fixture
def session(otelcol: Path, kafka_broker: KafkaBroker, tmp_path: Path) -> Iterator[NodeSession]:
    node_env = ensure_node_env(NodeEnv(APP))  # installed once: the recorder's cache
    with live_session(otelcol, kafka_broker.bootstrap_servers, node_env, APP, tmp_path) as live:
        yield live


def test_the_genkit_flows_are_scored_through_the_collector(session: NodeSession) -> None:
    runs = {
        "rag": ((FAITHFUL_ANSWER,), "faithful"),
        "tool": ((ToolCall("searchDocs", {"query": QUESTION}), UNFAITHFUL_ANSWER), "hallucinated"),
    }
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

    seen: list[EvaluationRecord] = []
    settings = consumer_settings(
        session.pipeline.bootstrap, f"g{uuid.uuid4().hex[:10]}", topic=session.pipeline.topic
    )
    stats = EvaluationConsumer(
        settings, judge=OfflineJudge(), metrics=[Faithfulness()], on_evaluation=seen.append
    ).run()

    scored = {r.trace_id: (r.convention, r.route, r.label) for r in seen}
    assert len(seen) == 2, "each flow scored once"
    assert scored == {trace_id: ("genkit", flow, label) for trace_id, (flow, label) in expected.items()}
    assert dict(stats.skipped) == {}
    assert stats.dead_letters == 0 and session.network_attempts() == []
