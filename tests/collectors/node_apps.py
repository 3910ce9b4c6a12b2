"""A recorded Node app (tests/extract/fixtures/scenarios/<app>) run live as its recording runs it, and scored:

    Node app --OTLP/HTTP protobuf--> Collector (collectors/otlp-to-kafka.yaml) --> Kafka --> consumer

So a recording program still reproduces what the committed fixtures hold. The app's npm packages are installed
once into ~/.cache/tracescore/peers/node-<hash of package-lock.json> (the recorder's cache, reused); the model
is the recorder's scripted fake OpenAI server on loopback. Imported after the test put tests/extract/fixtures
and its scenarios/ on sys.path (the recorder's modules are not a package).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from _helpers import consumer_settings
from _node import NodeSession, live_session
from peers import NodeEnv, ensure_node_env

from tracescore.consume import EvaluationConsumer
from tracescore.model import EvaluationRecord
from tracescore.score.judges import OfflineJudge
from tracescore.score.metrics import Faithfulness
from tracescore.testing.kafka_broker import KafkaBroker


@contextmanager
def live_app(app: Path, otelcol: Path, broker: KafkaBroker, workdir: Path) -> Iterator[NodeSession]:
    """The app folder `app` beside its installed packages, the Collector `otelcol` writing to `broker`."""
    node_env = ensure_node_env(NodeEnv(app))
    with live_session(otelcol, broker.bootstrap_servers, node_env, app, workdir) as session:
        yield session


def score_live(session: NodeSession) -> dict[str, EvaluationRecord]:
    """Every trace the Collector wrote in `session` scored by a consumer (the offline judge, faithfulness),
    by trace id: each once, nothing skipped or dead-lettered, no network access beyond loopback."""
    seen: list[EvaluationRecord] = []
    settings = consumer_settings(
        session.pipeline.bootstrap, f"n{uuid.uuid4().hex[:10]}", topic=session.pipeline.topic
    )
    stats = EvaluationConsumer(
        settings, judge=OfflineJudge(), metrics=[Faithfulness()], on_evaluation=seen.append
    ).run()
    scored = {record.trace_id: record for record in seen}
    assert len(scored) == len(seen), "each interaction scored once"
    assert dict(stats.skipped) == {}
    assert stats.dead_letters == 0 and session.network_attempts() == []
    return scored
