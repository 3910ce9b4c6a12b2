"""LiteLLM's GenAI events, sent by LiteLLM's own exporters, through the real Collector and scored:

    the real LiteLLM (`otel` callback, LITELLM_OTEL_INTEGRATION_ENABLE_EVENTS=true, content capture true)
        --its OTLP/HTTP traces + logs--> Collector (otlp-to-kafka.yaml + genai-log-events.yaml)
        --> one spans topic --> tracescore consumer

The app is the litellm_otel_events fixture's (fixtures/scenarios/litellm_otel_events.py) in its recorder's env
(LiteLLM 1.110.2, built by fixtures/record.py, reused), configured as LiteLLM's docs say (OTEL_EXPORTER,
OTEL_ENDPOINT): its `litellm_request` spans carry no message and no operation, each message is a log
record LiteLLM names in an `event_name` attribute. LiteLLM exports from its logging threads after each call,
so the app keeps flushing its providers until the test has read every call's spans and events from the
topic.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
import uuid
from collections import defaultdict
from pathlib import Path

import pytest
from _helpers import consumer_settings
from collector_helpers import COLLECTORS, REPO, CollectorProcess, create_topics

from tracescore.consume import AssemblyCount, EvaluationConsumer, decode_message
from tracescore.model import EvaluationRecord
from tracescore.score.judges import OfflineJudge
from tracescore.score.metrics import Faithfulness
from tracescore.testing import end_process
from tracescore.testing.collector import ingest_env
from tracescore.testing.kafka_broker import KafkaBroker
from tracescore.testing.kafka_topics import read_topic

FIXTURES = REPO / "tests" / "extract" / "fixtures"
sys.path[:0] = [str(FIXTURES), str(FIXTURES / "scenarios")]

from envs import SOURCES  # noqa: E402
from record import ensure_env  # noqa: E402

pytestmark = pytest.mark.kafka

PARTITIONS = 6
WAIT_S = 90
RESPONSE_ID = "gen_ai.response.id"
PROMPT, COMPLETION = "gen_ai.content.prompt", "gen_ai.content.completion"
APP = """
import json, os, sys, time
from pathlib import Path

endpoint, runs_file, stop_file = sys.argv[1:4]
os.environ.update(
    OTEL_EXPORTER="otlp_http",
    OTEL_ENDPOINT=endpoint + "/v1/traces",  # LiteLLM sends its log records to /v1/logs beside it
    OTEL_SERVICE_NAME="aurora-support-litellm-live",
    LITELLM_LOCAL_MODEL_COST_MAP="True",
    LITELLM_OTEL_INTEGRATION_ENABLE_EVENTS="true",
    OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="true",
)
import litellm
from _corpus import INTERACTIONS, QUESTION
from _openai_server import MODEL, FakeOpenAI
from _stuffed import CONTEXT, user_prompt
from opentelemetry import _logs, trace

litellm.callbacks = ["otel"]
runs = {}
with FakeOpenAI() as server:
    for interaction in INTERACTIONS:
        server.script(interaction.answer)
        response = litellm.completion(
            model=f"openai/{MODEL}", messages=user_prompt(QUESTION, CONTEXT), api_base=server.base_url,
            api_key="sk-fake",
        )
        runs[response.id] = interaction.faithful
    Path(runs_file).write_text(json.dumps(runs))
    deadline = time.monotonic() + 120
    while not Path(stop_file).exists() and time.monotonic() < deadline:
        trace.get_tracer_provider().force_flush()
        _logs.get_logger_provider().force_flush()
        time.sleep(0.3)
"""


def test_litellm_events_sent_by_its_own_exporters_are_scored_through_the_collector(
    otelcol: Path, kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    env = SOURCES["litellm_otel_events"]
    ensure_env(env, rebuild=False)
    bootstrap = kafka_broker.bootstrap_servers
    prefix = f"l{uuid.uuid4().hex[:10]}"
    topic = f"{prefix}.spans"
    create_topics(bootstrap, [topic], PARTITIONS)
    collector_env, http_port = ingest_env(bootstrap, topic)
    runs_file, stop_file = tmp_path / "runs.json", tmp_path / "stop"
    with CollectorProcess(
        otelcol,
        [COLLECTORS / "otlp-to-kafka.yaml", COLLECTORS / "genai-log-events.yaml"],
        collector_env,
        tmp_path / "otelcol.log",
    ):
        endpoint = f"http://127.0.0.1:{http_port}"
        with (tmp_path / "app.log").open("wb") as app_log:
            app = subprocess.Popen(
                [str(env.python), "-c", textwrap.dedent(APP), endpoint, str(runs_file), str(stop_file)],
                cwd=FIXTURES / "scenarios",
                env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(FIXTURES / "scenarios")},
                stdout=subprocess.DEVNULL,
                stderr=app_log,
            )
            try:
                runs, by_response, events = _written(bootstrap, topic, runs_file, app)
            finally:
                stop_file.touch()  # the app stops flushing and exits (by itself after 120 s)
                end_process(app, timeout_s=30)
    log = (tmp_path / "app.log").read_text(errors="replace")
    assert set(by_response) == set(runs), log
    trace_ids = {by_response[response] for response in runs}
    assert len(trace_ids) == len(runs)
    # Each call's messages, named only in the `event_name` attribute, read as GenAI events of its trace.
    assert all(set(events[trace_id]) == {PROMPT, COMPLETION} for trace_id in trace_ids), events

    seen: list[EvaluationRecord] = []
    stats = EvaluationConsumer(
        consumer_settings(bootstrap, prefix),
        judge=OfflineJudge(),
        metrics=[Faithfulness()],
        on_evaluation=seen.append,
    ).run()

    scored = {record.trace_id: (record.convention, record.label) for record in seen}
    expected = {
        by_response[response]: ("genai", "faithful" if faithful else "hallucinated")
        for response, faithful in runs.items()
    }
    assert scored == expected
    assert dict(stats.skipped) == {} and stats.dead_letters == 0
    assert stats.assembly[AssemblyCount.LOG_EVENTS] == sum(len(names) for names in events.values())
    assert AssemblyCount.LOG_RECORDS_NOT_EVENTS not in stats.assembly


def _written(
    bootstrap: str, topic: str, runs_file: Path, app: subprocess.Popen[bytes]
) -> tuple[dict[str, bool], dict[str, str], dict[str, list[str]]]:
    """Once every call the app made has its span and its completion event on the topic: the app's calls
    (response id -> faithful), each call's trace (response id -> trace id), and each trace's event names."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline and app.poll() is None:
        runs = json.loads(runs_file.read_text()) if runs_file.exists() else None
        by_response: dict[str, str] = {}
        events: dict[str, list[str]] = defaultdict(list)
        for message in read_topic(bootstrap, topic):
            decoded = decode_message(message.value)
            if type(decoded) is not list:  # a logs message gives a list of its own type
                for event in decoded:
                    events[event.trace_id].append(event.event.name)
                continue
            for span in decoded:
                if isinstance(response := span.attributes.get(RESPONSE_ID), str):
                    by_response[response] = span.trace_id
        done = runs is not None and set(by_response) >= set(runs)
        if done and all(COMPLETION in events[by_response[response]] for response in runs):
            return runs, by_response, events
        time.sleep(0.5)
    raise AssertionError(f"the app's calls did not all reach {topic} in {WAIT_S}s (app exit {app.poll()})")
