"""Evaluation records as Phoenix span annotations, checked against a real Phoenix server.

The span is sent to Phoenix the way an app sends it (OTLP/HTTP protobuf), the annotations through
PhoenixAnnotations, and what landed is read back from Phoenix's own REST API.
"""

from __future__ import annotations

import functools
import logging
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx2
import pytest
from _helpers import wait_until
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracescore.emit import PhoenixAnnotations, PhoenixSettings, span_annotation
from tracescore.model import EvaluationRecord, MetricStatus, annotator_kind
from tracescore.score.judges import OfflineJudge, OpenAIJudge, OpenAIJudgeSettings
from tracescore.testing.kafka_topics import input_producer
from tracescore.testing.phoenix import PhoenixServer

# Phoenix inserts spans and annotations asynchronously: what a test wrote is polled for, gently.
in_phoenix = functools.partial(wait_until, every_s=0.2)

LLM_JUDGE = "openai:gpt-4o-mini"
PROJECT = "default"  # where Phoenix puts spans whose resource names no project


@dataclass(frozen=True)
class SpanIds:
    trace_id: str
    span_id: str


def _record(span: SpanIds, **fields: Any) -> EvaluationRecord:
    values: dict[str, Any] = {
        "trace_id": span.trace_id,
        "span_id": span.span_id,
        "service_name": "rag-api",
        "route": "/billing",
        "metric": "faithfulness",
        "score": 0.5,
        "label": "partially_faithful",
        "status": MetricStatus.OK,
        "reason": "one of two claims is unsupported",
        "judge": "offline",
        "timestamp": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        "details": {"claims": 2},
    }
    return EvaluationRecord(**{**values, **fields})


@pytest.fixture
def traced_span(phoenix_server: PhoenixServer, phoenix_api: httpx2.Client) -> SpanIds:
    """A fresh span, exported to Phoenix over OTLP/HTTP and visible through its REST API."""
    provider = TracerProvider(resource=Resource.create({"service.name": "rag-api"}))
    provider.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{phoenix_server.base_url}/v1/traces"))
    )
    with provider.get_tracer("tests").start_as_current_span("answer") as span:
        context = span.get_span_context()
    provider.shutdown()
    ids = SpanIds(format(context.trace_id, "032x"), format(context.span_id, "016x"))

    def spans() -> list[dict[str, Any]]:
        response = phoenix_api.get(f"/v1/projects/{PROJECT}/spans", params={"span_id": ids.span_id})
        return response.json()["data"] if response.status_code == 200 else []

    in_phoenix(spans, f"span {ids.span_id}")
    return ids


def _annotations(api: httpx2.Client, span: SpanIds) -> dict[str, list[dict[str, Any]]]:
    """The span's annotations in Phoenix, by name."""
    response = api.get(f"/v1/projects/{PROJECT}/span_annotations", params={"span_ids": span.span_id})
    response.raise_for_status()
    by_name: dict[str, list[dict[str, Any]]] = {}
    for annotation in response.json()["data"]:
        by_name.setdefault(annotation["name"], []).append(annotation)
    return by_name


# --- against the real Phoenix ---------------------------------------------------------------------------


def test_records_become_annotations_on_the_scored_span(
    phoenix_server: PhoenixServer, phoenix_api: httpx2.Client, traced_span: SpanIds
) -> None:
    records = [
        _record(traced_span),  # the offline judge
        _record(
            traced_span,
            metric="answer_relevancy",
            score=0.875,
            label="relevant",
            reason="the answer addresses the question",
            judge=LLM_JUDGE,
        ),
        _record(
            traced_span,
            metric="context_relevance",
            score=None,
            label=None,
            status=MetricStatus.ERROR,
            reason="judge timed out",
            judge=LLM_JUDGE,
        ),
    ]
    with PhoenixAnnotations(PhoenixSettings(endpoint=phoenix_server.base_url)) as sink:
        assert sink.send(records) == 3
        assert (sink.sent, sink.failed) == (3, 0)

    def all_three() -> dict[str, list[dict[str, Any]]] | None:
        found = _annotations(phoenix_api, traced_span)
        return found if len(found) == 3 else None

    landed = in_phoenix(all_three, "three annotations")
    assert {name: len(found) for name, found in landed.items()} == {
        "faithfulness": 1,
        "answer_relevancy": 1,
        "context_relevance": 1,
    }
    faithfulness = landed["faithfulness"][0]
    assert faithfulness["annotator_kind"] == "CODE"
    assert faithfulness["result"] == {
        "label": "partially_faithful",
        "score": 0.5,
        "explanation": "one of two claims is unsupported",
    }
    assert faithfulness["metadata"]["trace_id"] == traced_span.trace_id
    assert faithfulness["metadata"]["details"] == {"claims": 2}

    relevancy = landed["answer_relevancy"][0]
    assert relevancy["annotator_kind"] == "LLM"
    assert relevancy["result"] == {
        "label": "relevant",
        "score": 0.875,
        "explanation": "the answer addresses the question",
    }
    assert relevancy["metadata"]["judge"] == LLM_JUDGE

    failed = landed["context_relevance"][0]
    assert failed["annotator_kind"] == "LLM"
    assert failed["result"] == {"label": "error", "score": None, "explanation": "error: judge timed out"}


def test_an_annotation_posted_before_its_span_reached_phoenix_lands_when_the_span_does(
    phoenix_server: PhoenixServer, phoenix_api: httpx2.Client
) -> None:
    """Through the egress Collector the app's spans may reach Phoenix after consume posted their scores
    (docs/operating/troubleshooting.md): Phoenix keeps the annotation and attaches it once the span comes."""
    held = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "rag-api"}))
    provider.add_span_processor(SimpleSpanProcessor(held))
    with provider.get_tracer("tests").start_as_current_span("answer") as span:
        context = span.get_span_context()
    provider.shutdown()
    late = SpanIds(format(context.trace_id, "032x"), format(context.span_id, "016x"))
    with PhoenixAnnotations(PhoenixSettings(endpoint=phoenix_server.base_url)) as sink:
        assert sink.send([_record(late)]) == 1
    # Only now does the span reach Phoenix (until then Phoenix may not even have the project).
    exporter = OTLPSpanExporter(endpoint=f"{phoenix_server.base_url}/v1/traces")
    assert exporter.export(held.get_finished_spans()).name == "SUCCESS"
    exporter.shutdown()

    def attached() -> list[dict[str, Any]]:
        # 404 until Phoenix has inserted the span's project (asynchronously, as everything it is sent)
        response = phoenix_api.get(
            f"/v1/projects/{PROJECT}/span_annotations", params={"span_ids": late.span_id}
        )
        return response.json()["data"] if response.status_code == 200 else []

    (annotation,) = in_phoenix(attached, "the annotation on the late span")
    assert (annotation["name"], annotation["result"]["score"]) == ("faithfulness", 0.5)


def test_a_replayed_record_overwrites_its_annotation_instead_of_adding_one(
    phoenix_server: PhoenixServer, phoenix_api: httpx2.Client, traced_span: SpanIds
) -> None:
    record = _record(traced_span)
    with PhoenixAnnotations(PhoenixSettings(endpoint=phoenix_server.base_url)) as sink:
        sink.send([record])
        first = in_phoenix(lambda: _annotations(phoenix_api, traced_span).get("faithfulness"), "annotation")
        # At-least-once delivery: the same record again, then a re-score of the same span and metric.
        sink.send([record])
        sink.send([record.model_copy(update={"score": 1.0, "label": "faithful"})])
        assert (sink.sent, sink.failed) == (3, 0)

    # Phoenix applies queued annotations in order, so once the re-score shows, the replay was applied.
    def rescore() -> list[dict[str, Any]]:
        faithfulness = _annotations(phoenix_api, traced_span)["faithfulness"]
        return [a for a in faithfulness if a["result"]["score"] == 1.0]

    rescored = in_phoenix(rescore, "the re-scored annotation")
    annotations = _annotations(phoenix_api, traced_span)["faithfulness"]
    assert len(annotations) == 1
    assert annotations[0]["id"] == first[0]["id"] == rescored[0]["id"]
    assert annotations[0]["result"]["label"] == "faithful"


@pytest.mark.parametrize("path", ["/v1/traces", "/v1"])
def test_phoenix_s_otlp_endpoint_given_for_its_base_url_is_named(
    phoenix_server: PhoenixServer, caplog: pytest.LogCaptureFixture, path: str
) -> None:
    """A Phoenix app's PHOENIX_COLLECTOR_ENDPOINT is often http://host:6006/v1/traces; Phoenix answers the
    annotations posted under it with a bare 405."""
    endpoint = f"{phoenix_server.base_url}{path}"
    with (
        caplog.at_level(logging.WARNING, logger="tracescore.emit"),
        PhoenixAnnotations(PhoenixSettings(endpoint=endpoint)) as sink,
    ):
        assert sink.send([_record(SpanIds("ab" * 16, "cd" * 8))]) == 0
    first = caplog.records[0].getMessage()
    assert "HTTP 405" in first
    assert f"Phoenix at {endpoint} is not accepting annotations (HTTP 405: " in first
    assert "; the endpoint is Phoenix's base URL, without /v1 (http://host:6006))" in first


def test_unreachable_phoenix_is_counted_and_logged_once_without_raising(
    caplog: pytest.LogCaptureFixture, closed_port: int
) -> None:
    settings = PhoenixSettings(
        endpoint=f"http://127.0.0.1:{closed_port}",
        api_key="phx-secret-key",
        max_retries=2,
        retry_base_s=0.0,
        batch_size=2,
    )
    records = [_record(SpanIds("ab" * 16, f"{i:016x}")) for i in range(3)]
    with caplog.at_level(logging.DEBUG, logger="tracescore.emit"), PhoenixAnnotations(settings) as sink:
        assert sink.send(records) == 0
        assert sink.send(records[:1]) == 0

    assert (sink.sent, sink.failed) == (0, 4)
    logged = [r for r in caplog.records if r.name.startswith("tracescore.emit")]
    warnings = [r for r in logged if r.levelno >= logging.INFO]
    # The first failure, then at close the run's total (the first warning counts only its own batch).
    assert len(warnings) == 2, [r.getMessage() for r in warnings]
    assert all(r.levelno == logging.WARNING for r in warnings)
    assert "ConnectError" in warnings[0].getMessage()
    assert (
        warnings[1]
        .getMessage()
        .endswith("4 annotations dropped, 0 posted; the records are on the evaluations topic")
    )
    assert "phx-secret-key" not in caplog.text


@pytest.fixture
def hung_port() -> Iterator[int]:
    """A loopback port that takes connections and never answers: a Phoenix that hangs."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)  # the kernel completes the handshakes; nothing ever reads or replies
        yield listener.getsockname()[1]


def test_a_hung_phoenix_costs_one_timeout_per_pause_not_one_per_batch(hung_port: int) -> None:
    """The consumer posts on the thread that polls Kafka: one timeout per batch stalled it past the group's
    poll interval (rebalance, everything scored again) and a stop past its budget."""
    settings = PhoenixSettings(
        endpoint=f"http://127.0.0.1:{hung_port}", timeout_s=0.5, max_retries=0, failure_pause_s=60.0
    )
    records = [_record(SpanIds("ab" * 16, f"{i:016x}")) for i in range(20)]
    started = time.monotonic()
    with PhoenixAnnotations(settings) as sink:
        for record in records:
            assert sink.send([record]) == 0
    elapsed = time.monotonic() - started
    assert (sink.sent, sink.failed) == (0, 20)
    assert elapsed < 0.5 * 3, f"{elapsed:.1f}s for 20 batches: more than the first one timed out"


# --- without a server: mapping, judge kinds, retry policy -----------------------------------------------


def test_span_annotation_is_the_phoenix_payload_for_the_record() -> None:
    span = SpanIds("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331")
    payload = span_annotation(_record(span, judge=LLM_JUDGE, evaluation_span_id="00f067aa0ba902b7"))
    assert payload == {
        "span_id": "b7ad6b7169203331",
        "name": "faithfulness",
        "annotator_kind": "LLM",
        "identifier": f"tracescore:{LLM_JUDGE}",
        "result": {
            "label": "partially_faithful",
            "score": 0.5,
            "explanation": "one of two claims is unsupported",
        },
        "metadata": {
            "trace_id": "0af7651916cd43dd8448eb211c80319c",
            "evaluation_span_id": "00f067aa0ba902b7",
            "service_name": "rag-api",
            "route": "/billing",
            "status": "ok",
            "judge": LLM_JUDGE,
            "details": {"claims": 2},
            "revision": 0,
        },
    }
    # Nothing to score is not an error: the label says why there is no score.
    skipped = span_annotation(
        _record(span, score=None, label=None, status=MetricStatus.NOT_APPLICABLE, reason="a refusal")
    )
    assert skipped["result"] == {"label": "not_applicable", "score": None, "explanation": "a refusal"}


def test_a_shells_generic_api_key_is_not_sent_to_phoenix(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TRACESCORE_PHOENIX_API_KEY", "PHOENIX_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("API_KEY", "another-service-s-secret")
    assert PhoenixSettings().api_key is None
    key = PhoenixSettings(api_key="phx").api_key
    assert key is not None and key.get_secret_value() == "phx"
    monkeypatch.setenv("PHOENIX_API_KEY", "from-phoenix-s-variable")
    key = PhoenixSettings().api_key
    assert key is not None and key.get_secret_value() == "from-phoenix-s-variable"


def test_annotator_kind_follows_the_judges_own_names() -> None:
    assert annotator_kind(OfflineJudge().name) == "CODE"
    assert annotator_kind(OpenAIJudge(OpenAIJudgeSettings(api_key="unused", model="gpt-4o")).name) == "LLM"
    assert annotator_kind("some-custom-llm-judge") == "LLM"


def _sink_over(handler: Callable[[httpx2.Request], httpx2.Response], **settings: Any) -> PhoenixAnnotations:
    values: dict[str, Any] = {"endpoint": "http://phoenix.test", "retry_base_s": 0.0, **settings}
    return PhoenixAnnotations(PhoenixSettings(**values), transport=httpx2.MockTransport(handler))


def test_overload_is_retried_and_a_rejected_batch_is_not() -> None:
    statuses = iter([503, 429, 200, 422])
    seen: list[httpx2.Request] = []

    def phoenix(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(next(statuses), json={"data": []})

    span = SpanIds("ab" * 16, "cd" * 8)
    with _sink_over(phoenix, max_retries=2, api_key="phx-key") as sink:
        assert sink.send([_record(span)]) == 1  # 503, 429, then accepted
        assert sink.send([_record(span)]) == 0  # 422: the same body would be rejected again
    assert len(seen) == 4
    assert (sink.sent, sink.failed) == (1, 1)
    assert seen[0].url.path == "/v1/span_annotations"
    assert seen[0].url.params["sync"] == "false"
    assert seen[0].headers["Authorization"] == "Bearer phx-key"


def test_after_a_failure_phoenix_gets_one_attempt_per_batch_until_it_recovers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    statuses = iter([503, 503, 503, 200, 200])

    def phoenix(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(next(statuses), json={"data": []})

    span = SpanIds("ab" * 16, "cd" * 8)
    sink = _sink_over(phoenix, max_retries=1, failure_pause_s=0.0)
    with caplog.at_level(logging.INFO, logger="tracescore.emit"), sink:
        assert sink.send([_record(span)]) == 0  # two attempts, both 503
        assert sink.send([_record(span)]) == 0  # failing: a single attempt, no retry stall
        assert sink.send([_record(span)]) == 1
        assert sink.send([_record(span)]) == 1
    assert (sink.sent, sink.failed) == (2, 2)
    messages = [r.getMessage() for r in caplog.records if r.name.startswith("tracescore.emit")]
    assert len(messages) == 3, messages
    assert "not accepting annotations" in messages[0]
    assert "accepts annotations again; 2 annotations dropped meanwhile" in messages[1]
    assert "2 annotations dropped, 2 posted" in messages[2]


def test_after_a_timeout_or_refusal_nothing_is_asked_until_the_pause_ends() -> None:
    statuses = iter([503, 200])
    seen: list[httpx2.Request] = []

    def phoenix(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(next(statuses), json={"data": []})

    span = SpanIds("ab" * 16, "cd" * 8)
    with _sink_over(phoenix, max_retries=0, failure_pause_s=0.3) as sink:
        assert sink.send([_record(span)]) == 0  # 503: the pause starts
        assert sink.send([_record(span), _record(span)]) == 0  # dropped unasked
        assert len(seen) == 1
        time.sleep(0.35)
        assert sink.send([_record(span)]) == 1  # the pause over: asked again, and it accepts
    assert len(seen) == 2
    assert (sink.sent, sink.failed) == (1, 3)


def test_an_empty_api_key_variable_is_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """`export PHOENIX_API_KEY=` sent the header `Bearer `, which the client refused for every batch."""
    monkeypatch.delenv("TRACESCORE_PHOENIX_API_KEY", raising=False)
    monkeypatch.setenv("PHOENIX_API_KEY", "")
    assert PhoenixSettings().api_key is None
    assert PhoenixSettings(api_key="  ").api_key is None
    seen: list[httpx2.Request] = []

    def phoenix(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(200, json={"data": []})

    with _sink_over(phoenix) as sink:
        assert sink.send([_record(SpanIds("ab" * 16, "cd" * 8))]) == 1
    assert "Authorization" not in seen[0].headers


@pytest.mark.parametrize(
    ("api_key", "said"),
    [
        (None, "Phoenix has auth on: set its API key in TRACESCORE_PHOENIX_API_KEY or PHOENIX_API_KEY "
         "(none was sent)"),
        ("phx-wrong", "Phoenix refused the API key from TRACESCORE_PHOENIX_API_KEY or PHOENIX_API_KEY"),
    ],
)  # fmt: skip
def test_a_refused_request_names_the_api_key_variables(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, api_key: str | None, said: str
) -> None:
    for name in ("TRACESCORE_PHOENIX_API_KEY", "PHOENIX_API_KEY"):
        monkeypatch.delenv(name, raising=False)

    def phoenix(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(401, text="Invalid token")  # Phoenix 20's answer with auth on

    with (
        caplog.at_level(logging.WARNING, logger="tracescore.emit"),
        _sink_over(phoenix, api_key=api_key) as sink,
    ):
        assert sink.send([_record(SpanIds("ab" * 16, "cd" * 8))]) == 0
    assert f"(HTTP 401: Invalid token; {said})" in caplog.records[0].getMessage()
    assert "phx-wrong" not in caplog.text


# --- the consumer's --phoenix-endpoint, end to end --------------------------------------------------------


def test_consume_with_phoenix_endpoint_annotates_the_scored_span_in_phoenix(
    phoenix_server: PhoenixServer, phoenix_api: httpx2.Client, bootstrap: str, topic_prefix: str
) -> None:
    """The app's span goes to Phoenix (OTLP) and to Kafka; `tracescore consume --phoenix-endpoint` scores it
    from Kafka and its result appears in Phoenix on that span, as a CODE annotation."""
    import sys

    from _zygote import run
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from service_processes import checkout_env

    from tracescore.export import encode_trace_messages

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "rag-api"}))
    provider.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{phoenix_server.base_url}/v1/traces"))
    )
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("tracescore").start_as_current_span("answer") as span:
        span.set_attributes(
            {
                "openinference.span.kind": "CHAIN",
                "input.value": "How long does the battery last?",
                "retrieval.documents.0.document.content": "The battery lasts 14 hours.",
                "output.value": "The battery lasts 40 hours.",
            }
        )
        context = span.get_span_context()
    provider.shutdown()
    ids = SpanIds(format(context.trace_id, "032x"), format(context.span_id, "016x"))
    producer = input_producer(bootstrap, [f"{topic_prefix}.spans"], acks="all")
    for key, value in encode_trace_messages(memory.get_finished_spans()):
        producer.send(f"{topic_prefix}.spans", key=key, value=value).get(30)
    producer.close()

    done = run(
        [
            sys.executable, "-m", "tracescore.cli", "consume",
            "--bootstrap-servers", bootstrap,
            "--topic", f"{topic_prefix}.spans",
            "--group-id", f"{topic_prefix}.group",
            "--evaluations-topic", f"{topic_prefix}.evaluations",
            "--dlq-topic", f"{topic_prefix}.dlq",
            "--idle-timeout", "3",
            "--phoenix-endpoint", phoenix_server.base_url,
        ],
        env=checkout_env(), timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "scored=1" in done.stderr, done.stderr

    annotations = in_phoenix(lambda: _annotations(phoenix_api, ids).get("faithfulness"), "the annotation")
    [annotation] = annotations
    assert annotation["annotator_kind"] == "CODE"
    assert annotation["result"]["label"] == "hallucinated"
    assert annotation["result"]["score"] < 0.5
    assert "40 hours" in annotation["result"]["explanation"], "the explanation names the unsupported claim"
