"""`tracescore.init()`. The global TracerProvider can be set only once per process, so every scenario runs
in a process of its own. Importing tracescore and OpenTelemetry was most of each one's time (18 interpreters
doing the same imports: ~15 CPU-s), so one interpreter imports what the prelude imports, sets nothing, and
forks a process per scenario: each runs the whole prelude and its code as `python -c` would (as `__main__`,
its environment, exit code, atexit handlers and interpreter shutdown its own), started together."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from typing import Any

import pytest
from _forked import run_forked

PRELUDE = """
import json

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore
from tracescore import InstrumentSettings


@tracescore.rag
def answer(query, contexts):
    return "Paris."


def names(exporter):
    return sorted(s.name for s in exporter.get_finished_spans())


def kind(provider):
    return type(provider).__name__


def error_of(call):
    try:
        call()
    except Exception as exc:
        return {"type": type(exc).__name__, "message": str(exc)}
    return None


def report(**observed):
    # The last stdout line; the test asserts on it, this process only observes.
    print(json.dumps(observed))
"""

# Each scenario observes and reports; every check is a pytest assertion below.
SCENARIOS = {
    "installs_provider": """
        before = kind(trace.get_tracer_provider())
        exporter = InMemorySpanExporter()
        instrumentation = tracescore.init("checkout-rag", exporter=exporter)
        provider = trace.get_tracer_provider()
        answer("q", ["c"])
        tracescore.shutdown()
        report(
            before=before,
            after=kind(provider),
            instrumentation_provider_is_global=instrumentation.provider is provider,
            provider_service=provider.resource.attributes.get(SERVICE_NAME),
            spans=[[s.name, s.resource.attributes.get(SERVICE_NAME)] for s in exporter.get_finished_spans()],
        )
    """,
    "keeps_app_provider": """
        app_provider = TracerProvider(resource=Resource.create({SERVICE_NAME: "app-service"}))
        trace.set_tracer_provider(app_provider)
        exporter = InMemorySpanExporter()
        instrumentation = tracescore.init("ignored-name", exporter=exporter)
        global_is_app = trace.get_tracer_provider() is app_provider
        answer("q", ["c"])
        tracescore.shutdown()
        report(
            global_is_app=global_is_app,
            instrumentation_provider_is_app=instrumentation.provider is app_provider,
            provider_service=app_provider.resource.attributes.get(SERVICE_NAME),
            spans=[[s.name, s.resource.attributes.get(SERVICE_NAME)] for s in exporter.get_finished_spans()],
        )
    """,
    "rag_spans_only": """
        exporter = InMemorySpanExporter()
        tracescore.init("svc", exporter=exporter)
        with trace.get_tracer("app").start_as_current_span("POST /ask"):
            answer("q", ["c"])
        tracescore.shutdown()
        report(spans=names(exporter))
    """,
    "export_all_spans": """
        exporter = InMemorySpanExporter()
        tracescore.init("svc", exporter=exporter, settings=InstrumentSettings(export_all_spans=True))
        with trace.get_tracer("app").start_as_current_span("POST /ask"):
            answer("q", ["c"])
        tracescore.shutdown()
        report(spans=names(exporter))
    """,
    "no_destination": """
        early_shutdown = error_of(tracescore.shutdown)  # before init()
        error = error_of(lambda: tracescore.init("svc"))
        report(early_shutdown=early_shutdown, error=error, provider_after=kind(trace.get_tracer_provider()))
    """,
    "misspelt_broker": """
        report(error=error_of(lambda: tracescore.init("svc")))
    """,
    "bad_topic": """
        from_env = error_of(lambda: tracescore.init("svc", bootstrap_servers="127.0.0.1:1"))
        import os

        del os.environ["TRACESCORE_TOPIC"]
        from_argument = error_of(
            lambda: tracescore.init("svc", bootstrap_servers="127.0.0.1:1", topic="spans/eu")
        )
        provider_after = kind(trace.get_tracer_provider())
        report(from_env=from_env, from_argument=from_argument, provider_after=provider_after)
    """,
    "second_init": """
        first_exporter, second_exporter = InMemorySpanExporter(), InMemorySpanExporter()
        first = tracescore.init("svc", exporter=first_exporter)
        second = tracescore.init("other", exporter=second_exporter)
        answer("q", ["c"])
        tracescore.shutdown()
        report(
            second_is_first=second is first,
            first_spans=names(first_exporter),
            second_spans=names(second_exporter),
        )
    """,
    "shutdown_flushes": """
        exporter = InMemorySpanExporter()
        # A long batch delay: only the flush on shutdown can deliver these spans in time.
        tracescore.init("svc", exporter=exporter, settings=InstrumentSettings(batch_delay_ms=600_000))
        for _ in range(3):
            answer("q", ["c"])
        before_shutdown = names(exporter)
        tracescore.shutdown()
        after_shutdown = names(exporter)
        report(
            before_shutdown=before_shutdown,
            after_shutdown=after_shutdown,
            second_shutdown=error_of(tracescore.shutdown),
        )
    """,
    "broker_name_from_env": """
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            instrumentation = tracescore.init("svc")
        exporter = instrumentation.processor.exporter
        results = [answer("q", ["c"]) for _ in range(50)]  # the broker is down: every call still answers
        tracescore.shutdown()
        report(
            exporter=type(exporter).__name__,
            bootstrap=exporter.bootstrap_servers,
            deprecations=[str(w.message) for w in caught if w.category is DeprecationWarning],
            results=sorted(set(results)),
            stats=instrumentation.stats(),
        )
    """,
    "old_broker_name_from_env": """
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            instrumentation = tracescore.init("svc")
        exporter = instrumentation.processor.exporter
        tracescore.shutdown()
        report(
            bootstrap=exporter.bootstrap_servers,
            deprecations=[str(w.message) for w in caught if w.category is DeprecationWarning],
        )
    """,
    "drop_metric": """
        from opentelemetry import metrics
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader

        reader = InMemoryMetricReader()
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        settings = InstrumentSettings(max_queue_size=5, bootstrap_servers="127.0.0.1:1", shutdown_timeout_s=1)
        tracescore.init("svc", settings=settings)
        for _ in range(40):
            answer("q", ["c"])
        tracescore.shutdown()
        dropped = {}
        for resource in reader.get_metrics_data().resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == "tracescore.sdk.spans.dropped":
                        for point in metric.data.data_points:
                            dropped[point.attributes["reason"]] = point.value
        report(dropped=dropped)
    """,
    "content_from_env": """
        exporter = InMemorySpanExporter()
        tracescore.init("svc", exporter=exporter)
        answer("mail ann@example.com", ["c"])
        tracescore.shutdown()
        [span] = exporter.get_finished_spans()
        report(attributes=dict(span.attributes))
    """,
    "redact_hook_and_env": """
        exporter = InMemorySpanExporter()
        tracescore.init("svc", exporter=exporter, redact=lambda text: text.replace("Paris", "[CITY]"))
        answer("mail ann@example.com", ["c" * 100])
        tracescore.shutdown()
        [span] = exporter.get_finished_spans()
        report(attributes=dict(span.attributes))
    """,
    "record_only_under_not_sampled_upstream": """
        from opentelemetry.sdk.trace.sampling import ALWAYS_ON, Decision, ParentBased, StaticSampler
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        # Record everything (for the app's own span metrics), sample as the upstream service decided.
        record_only = StaticSampler(Decision.RECORD_ONLY)
        sampler = ParentBased(
            ALWAYS_ON, remote_parent_not_sampled=record_only, local_parent_not_sampled=record_only
        )
        trace.set_tracer_provider(TracerProvider(sampler=sampler))
        exporter = InMemorySpanExporter()
        instrumentation = tracescore.init("svc", exporter=exporter)
        upstream = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-{}"
        for flags in ("00", "01"):
            parent = TraceContextTextMapPropagator().extract({"traceparent": upstream.format(flags)})
            with trace.get_tracer("app").start_as_current_span(f"POST /ask {flags}", context=parent):
                answer("q", ["c"])
        tracescore.shutdown()
        report(
            sampled_flags=[s.context.trace_flags.sampled for s in exporter.get_finished_spans()],
            stats=instrumentation.stats(),
        )
    """,
    "sampler_raises": """
        import asyncio
        from opentelemetry.sdk.trace.sampling import ALWAYS_ON, Sampler

        class Faulty(Sampler):
            # A user's sampler with a bug for some spans; the app's own spans still get sampled.
            def should_sample(self, parent_context, trace_id, name, *args, **kwargs):
                if name != "app":
                    raise KeyError("tenant")
                return ALWAYS_ON.should_sample(parent_context, trace_id, name, *args, **kwargs)

            def get_description(self):
                return "Faulty"

        @tracescore.rag
        async def answer_async(query, contexts):
            return "Paris."

        @tracescore.generation
        def stream(prompt):
            yield "Par"
            yield "is."

        trace.set_tracer_provider(TracerProvider(sampler=Faulty()))
        exporter = InMemorySpanExporter()
        tracescore.init("svc", exporter=exporter)
        results = []
        with trace.get_tracer("app").start_as_current_span("app") as app_span:
            results.append(answer("q", ["c"]))
            results.append(asyncio.run(answer_async("q", ["c"])))
            results.append("".join(stream("p")))
            with tracescore.rag_span("manual") as span:
                span.set_query("q")
                span.set_answer("Paris.")
                inside_parent = trace.get_current_span().get_span_context().trace_id
            results.append("manual done")
        tracescore.shutdown()
        report(
            results=results,
            parent_kept=inside_parent == app_span.get_span_context().trace_id,
            exported=names(exporter),
        )
    """,
    "processor_raises": """
        from opentelemetry.sdk.trace import SpanProcessor

        class Faulty(SpanProcessor):
            def on_end(self, span):
                raise RuntimeError("disk full")

        provider = TracerProvider()
        provider.add_span_processor(Faulty())
        trace.set_tracer_provider(provider)
        tracescore.init("svc", exporter=InMemorySpanExporter())
        results = [answer("q", ["c"]) for _ in range(3)]
        tracescore.shutdown()
        report(results=results)
    """,
    "span_ended_twice": """
        exporter = InMemorySpanExporter()
        tracescore.init("svc", exporter=exporter)
        with tracescore.rag_span("manual") as span:
            span.set_query("q")
            span.set_answer("Paris.")
            span.end()
        error = error_of(span.end)
        tracescore.shutdown()
        report(error=error, exported=names(exporter))
    """,
    "noop_provider": """
        trace.set_tracer_provider(trace.NoOpTracerProvider())
        report(error=error_of(lambda: tracescore.init("svc", exporter=InMemorySpanExporter())))
    """,
}


# Environment per scenario, over one cleared of TRACESCORE_* and OTEL_* variables. Port 1: nobody listens.
SCENARIO_ENV = {
    "broker_name_from_env": {
        "TRACESCORE_BOOTSTRAP_SERVERS": "127.0.0.1:1",
        "TRACESCORE_SHUTDOWN_TIMEOUT_S": "1",
    },
    "old_broker_name_from_env": {
        "TRACESCORE_KAFKA_BOOTSTRAP": "127.0.0.1:1",
        "TRACESCORE_SHUTDOWN_TIMEOUT_S": "1",
    },
    "misspelt_broker": {"TRACESCORE_BOOTSTRAP_SERVER": "127.0.0.1:1", "TRACESCORE_GROUP_ID": "consume's"},
    "bad_topic": {"TRACESCORE_TOPIC": "spans eu"},
    "content_from_env": {"TRACESCORE_CONTENT__CAPTURE": "false"},
    "redact_hook_and_env": {
        "TRACESCORE_CONTENT__REDACT": "email",
        "TRACESCORE_CONTENT__MAX_ATTRIBUTE_CHARS": "30",
    },
}

Outcomes = dict[str, subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> Outcomes:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACESCORE_", "OTEL_"))}
    jobs = {
        name: (PRELUDE + textwrap.dedent(code), SCENARIO_ENV.get(name, {}))
        for name, code in SCENARIOS.items()
    }
    return run_forked(PRELUDE, jobs, tmp_path_factory.mktemp("scenarios"), env)


def observed(outcomes: Outcomes, scenario: str) -> dict[str, Any]:
    """What the scenario's interpreter reported (its last stdout line)."""
    result = outcomes[scenario]
    assert result.returncode == 0, f"{scenario} crashed:\n{result.stderr}"
    lines = result.stdout.strip().splitlines()
    assert lines, f"{scenario} reported nothing:\n{result.stderr}"
    report: dict[str, Any] = json.loads(lines[-1])
    return report


def test_init_installs_a_provider_named_after_the_service(outcomes: Outcomes) -> None:
    seen = observed(outcomes, "installs_provider")
    assert seen["before"] == "ProxyTracerProvider", "no provider was installed before init()"
    assert seen["after"] == "TracerProvider", "init() installs an SDK TracerProvider"
    assert seen["instrumentation_provider_is_global"], "init() returns the provider it installed"
    assert seen["provider_service"] == "checkout-rag"
    assert seen["spans"] == [["answer", "checkout-rag"]], "the RAG span carries the service name"


def test_init_adds_to_the_apps_provider_without_replacing_it(outcomes: Outcomes) -> None:
    seen = observed(outcomes, "keeps_app_provider")
    assert seen["global_is_app"], "the app's provider stays the global one"
    assert seen["instrumentation_provider_is_app"], "tracescore adds its processor to the app's provider"
    assert seen["provider_service"] == "app-service", "the app's resource is not renamed"
    assert seen["spans"] == [["answer", "app-service"]], "the RAG span goes out under the app's service"


def test_only_tracescore_spans_are_exported_by_default(outcomes: Outcomes) -> None:
    assert observed(outcomes, "rag_spans_only")["spans"] == ["answer"], "the app's own span stays out"


def test_export_all_spans_exports_the_apps_spans_too(outcomes: Outcomes) -> None:
    assert observed(outcomes, "export_all_spans")["spans"] == ["POST /ask", "answer"]


def test_init_without_kafka_or_exporter_is_a_clear_value_error(outcomes: Outcomes) -> None:
    seen = observed(outcomes, "no_destination")
    assert seen["early_shutdown"] is None, "shutdown() before init() is harmless"
    error = seen["error"]
    assert error is not None, "init() without a destination must fail"
    assert error["type"] == "ValueError"
    message = error["message"]
    assert "TRACESCORE_BOOTSTRAP_SERVERS" in message and "OTEL_EXPORTER_OTLP_ENDPOINT" in message, message
    assert seen["provider_after"] == "ProxyTracerProvider", "the failed call installed nothing"


def test_a_misspelt_broker_variable_is_named_in_the_error_with_the_name_meant(outcomes: Outcomes) -> None:
    """TRACESCORE_BOOTSTRAP_SERVER=... (an S short) was ignored, and init() said only that no broker was
    given: the app's team set one and looked elsewhere. A variable of another command (consume's
    TRACESCORE_GROUP_ID, in a shared environment) is not called misspelt."""
    error = observed(outcomes, "misspelt_broker")["error"]
    assert error is not None and error["type"] == "ValueError", error
    message = error["message"]
    assert message.startswith("tracescore.init needs a destination"), message
    assert message.endswith(
        "TRACESCORE_BOOTSTRAP_SERVER is set, but no setting has that name: did you mean "
        "TRACESCORE_BOOTSTRAP_SERVERS?"
    ), message
    assert "GROUP_ID" not in message, message


def test_a_topic_kafka_would_refuse_fails_at_init_with_the_services_message(outcomes: Outcomes) -> None:
    """TRACESCORE_TOPIC="spans eu" (or init(topic=...)) was taken, and the exports failed on it once
    running: the SDK checks the topic against the rule every service's topic settings are checked against."""
    seen = observed(outcomes, "bad_topic")
    rule = "a Kafka topic name is 1 to 249 letters, digits, '.', '_' and '-', and not '.' or '..'"
    for given, error in (("spans eu", seen["from_env"]), ("spans/eu", seen["from_argument"])):
        assert error is not None, f"init() took the topic {given!r}"
        assert error["type"] == "ValidationError" and "topic" in error["message"], error
        assert f"{given!r} is not a topic Kafka accepts: {rule}" in error["message"], error
    assert seen["provider_after"] == "ProxyTracerProvider", "the failed calls installed nothing"


def test_second_init_returns_the_first_instrumentation(outcomes: Outcomes) -> None:
    seen = observed(outcomes, "second_init")
    assert seen["second_is_first"], "a second init() returns the first instrumentation"
    assert seen["first_spans"] == ["answer"], "spans keep going to the first exporter"
    assert seen["second_spans"] == [], "the second exporter is ignored"


def test_shutdown_flushes_spans_ended_right_before_it(outcomes: Outcomes) -> None:
    seen = observed(outcomes, "shutdown_flushes")
    assert seen["before_shutdown"] == [], "the batch delay holds the spans back until shutdown"
    assert seen["after_shutdown"] == ["answer", "answer", "answer"], "shutdown() flushes every ended span"
    assert seen["second_shutdown"] is None, "a second shutdown() is harmless"


def test_init_refuses_a_provider_that_cannot_take_processors(outcomes: Outcomes) -> None:
    error = observed(outcomes, "noop_provider")["error"]
    assert error is not None, "a NoOpTracerProvider cannot export spans"
    assert error["type"] == "RuntimeError"
    assert "NoOpTracerProvider" in error["message"], error["message"]


def test_the_broker_address_is_tracescore_bootstrap_servers_as_for_the_consumer(outcomes: Outcomes) -> None:
    seen = observed(outcomes, "broker_name_from_env")
    assert (seen["exporter"], seen["bootstrap"]) == ("KafkaSpanExporter", "127.0.0.1:1")
    assert seen["deprecations"] == []
    assert seen["results"] == ["Paris."]
    assert seen["stats"]["delivered"] == 0
    assert sum(seen["stats"]["dropped"].values()) == 50  # every span accounted for, none silently lost


def test_the_old_broker_variable_still_works_with_a_deprecation_warning(outcomes: Outcomes) -> None:
    seen = observed(outcomes, "old_broker_name_from_env")
    assert seen["bootstrap"] == "127.0.0.1:1"
    assert len(seen["deprecations"]) == 1 and "TRACESCORE_BOOTSTRAP_SERVERS" in seen["deprecations"][0]
    assert "deprecated" in outcomes["old_broker_name_from_env"].stderr  # logged too, where people look


def test_content_capture_switched_off_by_environment_variable(outcomes: Outcomes) -> None:
    attributes = observed(outcomes, "content_from_env")["attributes"]
    assert attributes["tracescore.content.captured"] is False
    assert not [
        key for key in attributes if key.startswith(("input.", "output.", "retrieval.", "gen_ai.input"))
    ]


def test_redaction_hook_from_init_and_builtin_redactors_from_environment(outcomes: Outcomes) -> None:
    attributes = observed(outcomes, "redact_hook_and_env")["attributes"]
    assert attributes["input.value"] == "mail [REDACTED_EMAIL]"
    assert attributes["output.value"] == "[CITY]."
    assert attributes["retrieval.documents.0.document.content"] == "c" * 30
    assert attributes["tracescore.truncated"] == ["retrieval.documents.0.document.content"]


def test_dropped_spans_are_an_otel_metric_by_reason(outcomes: Outcomes) -> None:
    dropped = observed(outcomes, "drop_metric")["dropped"]
    assert sum(dropped.values()) == 40, dropped
    assert dropped["queue_full"] >= 30  # a queue of 5 against 40 spans and no broker


def test_a_span_the_apps_sampler_records_but_does_not_sample_is_not_exported(outcomes: Outcomes) -> None:
    seen = observed(outcomes, "record_only_under_not_sampled_upstream")
    assert seen["sampled_flags"] == [True], "only the rag span under the sampled upstream leaves the app"
    assert seen["stats"] == {"delivered": 1, "dropped": {}}, "a sampling decision is not a drop"


def test_a_sampler_that_raises_never_breaks_the_call_and_is_named_once(outcomes: Outcomes) -> None:
    seen = observed(outcomes, "sampler_raises")
    assert seen["results"] == ["Paris.", "Paris.", "Paris.", "manual done"], "every call shape answers"
    assert seen["parent_kept"], "inside an untraced call the app's span stays the current one"
    assert seen["exported"] == [], "calls without a span export nothing"
    stderr = outcomes["sampler_raises"].stderr
    assert stderr.count("the TracerProvider raised KeyError") == 1, stderr  # once, not once per call
    assert "custom sampler" in stderr and "'answer'" in stderr


def test_a_span_ended_twice_is_exported_once_with_a_clear_warning(outcomes: Outcomes) -> None:
    seen = observed(outcomes, "span_ended_twice")
    assert seen["error"] is None, "ending twice never raises"
    assert seen["exported"] == ["manual"], "the span is exported once"
    stderr = outcomes["span_ended_twice"].stderr
    assert stderr.count("span 'manual' was ended twice") == 1, stderr
    assert "Calling end() on an ended span" not in stderr, "the SDK never sees the second end"


def test_a_span_processor_that_raises_on_end_never_breaks_the_call(outcomes: Outcomes) -> None:
    assert observed(outcomes, "processor_raises")["results"] == ["Paris."] * 3
    stderr = outcomes["processor_raises"].stderr
    assert stderr.count("ending span 'answer' raised RuntimeError") == 1, stderr
