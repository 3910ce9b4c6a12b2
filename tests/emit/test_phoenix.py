"""Evaluation records as Phoenix span annotations, checked against a real Phoenix server.

The span is sent to Phoenix the way an app sends it (OTLP/HTTP protobuf), the annotations through
PhoenixAnnotations, and what landed is read back from Phoenix's own REST API.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx2
import pytest
from _helpers import wait_until
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from phoenix_helpers import PROJECT, SpanIds, consume_command, in_phoenix, traced_answer
from phoenix_helpers import annotations as _annotations
from phoenix_helpers import record as _record
from phoenix_helpers import traced_span as new_span

from tracescore.emit import PhoenixAnnotations, PhoenixSettings, span_annotation
from tracescore.emit._phoenix import REJECTED, UNSENT_AT_STOP
from tracescore.model import MetricStatus, annotator_kind
from tracescore.score.judges import OfflineJudge, OpenAIJudge, OpenAIJudgeSettings
from tracescore.testing.phoenix import PhoenixServer

LLM_JUDGE = "openai:gpt-4o-mini"
# How long a test waits for the sink's thread to have posted what it was given.
POSTED_S = 30.0


@pytest.fixture
def traced_span(phoenix_server: PhoenixServer, phoenix_api: httpx2.Client) -> SpanIds:
    """A fresh span, exported to Phoenix over OTLP/HTTP and visible through its REST API."""
    return new_span(phoenix_server.base_url, phoenix_api)


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
        assert sink.flush(POSTED_S)
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
        assert sink.flush(POSTED_S)
        assert sink.sent == 1
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
        # At-least-once delivery: the same record again, then a re-score of the same span and metric, each
        # posted on its own (the sink keeps only the latest of a key while waiting: test_phoenix_outage).
        for again in (record, record.model_copy(update={"score": 1.0, "label": "faithful"})):
            sink.send([again])
            assert sink.flush(POSTED_S)
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
        assert sink.send([_record(SpanIds("ab" * 16, "cd" * 8))]) == 1
        assert sink.flush(POSTED_S)
    assert sink.dropped == {REJECTED: 1}
    # The check at start said it first (test_phoenix_outage); then the post's own answer.
    [first] = [r.getMessage() for r in caplog.records if "HTTP 405" in r.getMessage()]
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
    records = [_record(SpanIds("ab" * 16, f"{i:016x}")) for i in range(4)]
    with caplog.at_level(logging.DEBUG, logger="tracescore.emit"), PhoenixAnnotations(settings) as sink:
        assert sink.send(records[:3]) == 3
        assert sink.send(records[3:]) == 1
        assert not sink.flush(0.5)  # kept for when Phoenix answers: none dropped while the sink is open
        assert (sink.sent, sink.failed, sink.pending) == (0, 0, 4)

    assert (sink.sent, sink.dropped) == (0, {UNSENT_AT_STOP: 4})
    logged = [r for r in caplog.records if r.name.startswith("tracescore.emit")]
    warnings = [r for r in logged if r.levelno >= logging.INFO]
    # The first failure, then at close the run's total (the first warning counts only its own batch).
    assert len(warnings) == 2, [r.getMessage() for r in warnings]
    assert all(r.levelno == logging.WARNING for r in warnings)
    assert "ConnectError" in warnings[0].getMessage()
    assert (
        warnings[1]
        .getMessage()
        .endswith(
            "4 annotations dropped (4 not posted before the stop, within the 5.0s closing had), 0 posted; "
            "the records are on the evaluations topic"
        )
    )
    assert "phx-secret-key" not in caplog.text


@pytest.fixture
def hung_phoenix() -> Iterator[tuple[int, list[socket.socket]]]:
    """A loopback port that takes connections and never answers (a Phoenix that hangs), and the connections
    it took so far."""
    taken: list[socket.socket] = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)

        def take() -> None:
            with contextlib.suppress(OSError):  # the listener closed: the test is over
                while True:
                    taken.append(listener.accept()[0])  # and never read nor answered

        threading.Thread(target=take, daemon=True).start()
        yield listener.getsockname()[1], taken
        listener.shutdown(socket.SHUT_RDWR)
    for connection in taken:
        connection.close()


HUNG_TIMEOUT_S = 3.0  # Phoenix's request timeout against the hung one


def test_a_hung_phoenix_costs_the_caller_nothing_and_one_request_per_pause(
    hung_phoenix: tuple[int, list[socket.socket]],
) -> None:
    """The consumer sends on the thread that polls Kafka: a wait there (one timeout per batch, before that)
    stalled it past the group's poll interval (rebalance, everything scored again) and a stop past its
    budget. The sink's own thread posts, and asks a hung Phoenix once per pause, not once per batch."""
    port, connections = hung_phoenix
    settings = PhoenixSettings(
        endpoint=f"http://127.0.0.1:{port}",
        timeout_s=HUNG_TIMEOUT_S,
        max_retries=0,
        failure_pause_s=60.0,
        batch_size=1,
    )
    records = [_record(SpanIds("ab" * 16, f"{i:016x}")) for i in range(20)]
    started = time.monotonic()
    with PhoenixAnnotations(settings) as sink:
        for record in records:
            assert sink.send([record]) == 1
        elapsed = time.monotonic() - started
        # One per batch would have made more requests since the first one timed out.
        time.sleep(HUNG_TIMEOUT_S * 1.5)
        # The check at start timed out and began the pause: no batch was posted to a Phoenix that hangs.
        assert len(connections) == 1
        assert (sink.sent, sink.failed, sink.pending) == (0, 0, 20)
    # Waiting on Phoenix, the first send alone took its timeout; not waiting, 20 sends take milliseconds (the
    # bound is that timeout's half, far above them on a loaded machine).
    assert elapsed < HUNG_TIMEOUT_S / 2, f"{elapsed:.2f}s for 20 sends: the caller waited on Phoenix"
    assert sink.dropped == {UNSENT_AT_STOP: 20}


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
    """A sink whose every post `handler` answers (no check at start: each test's answers are its posts')."""
    values: dict[str, Any] = {"endpoint": "http://phoenix.test", "retry_base_s": 0.0, **settings}
    return PhoenixAnnotations(PhoenixSettings(**values), transport=httpx2.MockTransport(handler), check=False)


def test_overload_is_retried_and_a_rejected_batch_is_not() -> None:
    statuses = iter([503, 429, 200, 422])
    seen: list[httpx2.Request] = []

    def phoenix(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(next(statuses), json={"data": []})

    span = SpanIds("ab" * 16, "cd" * 8)
    with _sink_over(phoenix, max_retries=2, api_key="phx-key") as sink:
        sink.send([_record(span)])  # 503, 429, then accepted
        assert sink.flush(POSTED_S)
        assert sink.sent == 1
        sink.send([_record(span)])  # 422: the same body would be rejected again
        assert sink.flush(POSTED_S)
    assert len(seen) == 4
    assert (sink.sent, sink.dropped) == (1, {REJECTED: 1})
    assert seen[0].url.path == "/v1/span_annotations"
    assert seen[0].url.params["sync"] == "false"
    assert seen[0].headers["Authorization"] == "Bearer phx-key"


def test_after_a_failure_phoenix_gets_one_attempt_per_batch_until_it_recovers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    statuses = iter([503, 503, 503, 200, 200])
    seen: list[httpx2.Request] = []

    def phoenix(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(next(statuses), json={"data": []})

    sink = _sink_over(phoenix, max_retries=1, failure_pause_s=0.0)
    with caplog.at_level(logging.INFO, logger="tracescore.emit"), sink:
        # Two attempts, both 503; failing: a single attempt (503), no retry stall; then accepted.
        sink.send([_record(SpanIds("ab" * 16, f"{1:016x}"))])
        assert sink.flush(POSTED_S)
        assert [len(seen), sink.sent] == [4, 1]
        sink.send([_record(SpanIds("ab" * 16, f"{2:016x}"))])  # healthy again
        assert sink.flush(POSTED_S)
    assert (len(seen), sink.sent, sink.failed) == (5, 2, 0)
    messages = [r.getMessage() for r in caplog.records if r.name.startswith("tracescore.emit")]
    assert len(messages) == 2, messages  # nothing dropped: no closing total
    assert "not accepting annotations" in messages[0]
    assert "accepts annotations again; posting the 1 annotation kept meanwhile" in messages[1]


def test_after_a_timeout_or_refusal_nothing_is_asked_until_the_pause_ends() -> None:
    statuses = iter([503, 200])
    asked: list[float] = []

    def phoenix(request: httpx2.Request) -> httpx2.Response:
        asked.append(time.monotonic())
        return httpx2.Response(next(statuses), json={"data": []})

    records = [_record(SpanIds("ab" * 16, f"{i:016x}")) for i in range(3)]
    with _sink_over(phoenix, max_retries=0, failure_pause_s=0.3) as sink:
        sink.send(records[:1])  # 503: the pause starts
        wait_until(lambda: asked, "the first post", every_s=0.01)
        sink.send(records[1:])  # kept unasked
        time.sleep(0.1)
        assert (len(asked), sink.pending) == (1, 3)
        assert sink.flush(POSTED_S)  # the pause over: asked again, all three in one batch, and accepted
    assert len(asked) == 2
    assert asked[1] - asked[0] >= 0.3
    assert (sink.sent, sink.failed) == (3, 0)


def test_at_the_stop_what_is_kept_is_posted_while_phoenix_answers_even_after_a_refused_batch() -> None:
    """A batch refused (422) says nothing about the next one: closing still posts it; only a Phoenix down or
    hung (test_unreachable_...) is asked nothing more at the stop."""
    statuses = iter([422, 200])
    seen: list[httpx2.Request] = []

    def phoenix(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(next(statuses), json={"data": []})

    sink = _sink_over(phoenix, max_retries=0, batch_size=1)
    sink.send([_record(SpanIds("ab" * 16, f"{i:016x}")) for i in range(2)])
    sink.close()  # at once: both still kept, or the first just refused
    assert len(seen) == 2
    assert (sink.sent, sink.dropped) == (1, {REJECTED: 1})


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
        assert sink.flush(POSTED_S)
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
        sink.send([_record(SpanIds("ab" * 16, "cd" * 8))])
        assert sink.flush(POSTED_S)
    assert sink.dropped == {REJECTED: 1}
    assert f"(HTTP 401: Invalid token; {said})" in caplog.records[0].getMessage()
    assert "phx-wrong" not in caplog.text


# --- the consumer's --phoenix-endpoint, end to end --------------------------------------------------------


def test_consume_with_phoenix_endpoint_annotates_the_scored_span_in_phoenix(
    phoenix_server: PhoenixServer, phoenix_api: httpx2.Client, bootstrap: str, topic_prefix: str
) -> None:
    """The app's span goes to Phoenix (OTLP) and to Kafka; `tracescore consume --phoenix-endpoint` scores it
    from Kafka and its result appears in Phoenix on that span, as a CODE annotation."""
    from _zygote import run
    from service_processes import checkout_env

    ids = traced_answer(
        phoenix_server.base_url, bootstrap, f"{topic_prefix}.spans", output="The battery lasts 40 hours."
    )
    done = run(
        consume_command(bootstrap, topic_prefix, phoenix_server.base_url, idle_timeout_s=3),
        env=checkout_env(),
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    assert "scored=1" in done.stderr, done.stderr

    annotations = in_phoenix(lambda: _annotations(phoenix_api, ids).get("faithfulness"), "the annotation")
    [annotation] = annotations
    assert annotation["annotator_kind"] == "CODE"
    assert annotation["result"]["label"] == "hallucinated"
    assert annotation["result"]["score"] < 0.5
    assert "40 hours" in annotation["result"]["explanation"], "the explanation names the unsupported claim"
