"""Pipeline: recorded OTLP messages in, admitted interactions and counted skips out, with no broker (the
messages are kafka-python's own ConsumerRecord, as a poll returns them)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from kafka import TopicPartition
from kafka.consumer.fetcher import ConsumerRecord
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, MetricsData

from tracescore.consume import AssemblySettings, ConsumerStats, TraceAssembler, decode_message
from tracescore.consume._assemble import SPAN_OBJECT_BYTES
from tracescore.consume._handover import Handover
from tracescore.consume._pipeline import Pipeline
from tracescore.consume._shared_policy import SharedPolicy
from tracescore.emit import EVALUATION_SPANS_HEADER, EvaluationMetrics
from tracescore.extract import Found
from tracescore.model import ExtractSkip, Interaction, Trace
from tracescore.sample import (
    CascadePolicy,
    Decision,
    Escalation,
    RateRule,
    SamplingConfig,
    SamplingPolicy,
    SkipReason,
)

FIXTURES = Path(__file__).parents[1] / "extract" / "fixtures"
READ = FIXTURES / "openinference_manual" / "faithful.binpb"  # one interaction, openinference
UNFAITHFUL = FIXTURES / "openinference_manual" / "unfaithful.binpb"  # another trace, one interaction
# An OpenLLMetry workflow whose documents are pasted into its prompt with no label naming them: a skip.
NO_RETRIEVAL = FIXTURES / "openllmetry_openai_stuffed" / "unlabelled.binpb"
TRACE_ID = "f264428dc99ff7574806d7a7056ec517"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def message(value: bytes, offset: int = 0, partition: int = 0, headers: list | None = None) -> ConsumerRecord:
    return ConsumerRecord(
        "spans", partition, -1, offset, 0, 0, None, value, headers or [], None, -1, len(value), -1
    )


def pipeline(
    policy: SamplingPolicy | None = None, metrics_out: EvaluationMetrics | None = None
) -> tuple[Pipeline, Clock]:
    clock = Clock()
    assembler = TraceAssembler(AssemblySettings(grace_s=2.0), clock=clock)
    locked = SharedPolicy(policy) if policy is not None else None
    return Pipeline(assembler, ConsumerStats(), policy=locked, metrics_out=metrics_out), clock


def test_a_buffered_message_counts_its_bytes_and_its_spans_objects_against_max_bytes() -> None:
    """Decoded, a span holds more than its share of the message (BENCHMARKS.md, "The trace buffer's
    memory"): the bound counts both, so max_bytes bounds the memory held."""
    steps, _ = pipeline()
    value = READ.read_bytes()
    steps.take([message(value, offset=41)])
    assert steps.assembler.buffered_bytes == len(value) + 3 * SPAN_OBJECT_BYTES  # its three spans


def test_a_recorded_trace_becomes_one_admitted_interaction_once_its_grace_passed() -> None:
    steps, clock = pipeline()
    taken = steps.take([message(READ.read_bytes(), offset=41)])
    assert taken.admitted == [] and taken.dead_letters == []  # buffered: the grace period has not passed
    assert steps.ready() == []
    clock.now += 2.5
    [trace] = steps.ready()
    assert trace.offsets == {TopicPartition("spans", 0): 41}
    [(revision, metrics)] = trace.interactions
    assert revision.interaction.span.trace_id == TRACE_ID
    assert revision.interaction.record.query == "How long does the Aurora X2 battery last?"
    assert revision.revision == 0 and metrics is None  # no policy: every metric
    stats = steps.stats
    assert (stats.messages, stats.spans, stats.traces, stats.interactions) == (1, 3, 1, 1)
    with pytest.warns(DeprecationWarning, match="use ConsumerStats.interactions"):
        assert stats.rag_spans == 1  # the former name, for code that read it
    assert stats.assembly["released_complete"] == 1


def test_traces_released_together_are_read_in_the_order_released_and_let_go_once_read() -> None:
    steps, _ = pipeline()
    released = [
        Trace(spans[0].trace_id, tuple(spans))
        for spans in (decode_message(READ.read_bytes()), decode_message(UNFAITHFUL.read_bytes()))
    ]
    order = [t.trace_id for t in released]
    assert order[0] != order[1]
    handed = list(released)
    admitted = steps.extract_and_admit(handed)
    assert [a.trace_id for a in admitted] == order, "read in the order released"
    assert handed == [], "each trace is let go once read"
    assert steps.stats.traces == 2 and steps.stats.interactions == 2


def test_a_message_that_is_not_otlp_is_a_dead_letter_and_the_rest_of_the_batch_goes_on() -> None:
    steps, _ = pipeline()
    taken = steps.take([message(b"not a trace", offset=3, partition=2), message(READ.read_bytes(), offset=4)])
    [dead] = taken.dead_letters
    assert dead.partition == TopicPartition("spans", 2) and dead.message.offset == 3
    assert "OTLP" in str(dead.error)
    assert steps.stats.dead_letters == 1 and steps.stats.spans == 3
    assert len(steps.flush()) == 1


def test_our_own_evaluation_spans_read_back_are_counted_not_decoded() -> None:
    steps, _ = pipeline()
    taken = steps.take([message(b"never decoded", headers=[(EVALUATION_SPANS_HEADER, b"1")])])
    assert taken.dead_letters == [] and steps.stats.spans == 0
    assert steps.stats.assembly["evaluation_span_messages"] == 1


def test_a_trace_with_nothing_to_judge_is_a_counted_explained_skip() -> None:
    steps, _ = pipeline()
    steps.take([message(NO_RETRIEVAL.read_bytes())])
    assert steps.flush() == []
    stats = steps.stats
    assert stats.traces == 1 and stats.interactions == 0
    assert stats.skipped[ExtractSkip.NO_RETRIEVAL] == 1
    [(_, scope, _)] = [k for k in stats.skipped_by_source if k[2] == ExtractSkip.NO_RETRIEVAL]
    assert scope == "traceloop.tracer"


def health_check() -> bytes:
    """One trace of one span no RAG convention describes: a web framework's health check."""
    request = ExportTraceServiceRequest()
    resource = request.resource_spans.add()
    attribute = resource.resource.attributes.add()
    attribute.key, attribute.value.string_value = "service.name", "shop"
    scoped = resource.scope_spans.add()
    scoped.scope.name = "opentelemetry.instrumentation.fastapi"
    one = scoped.spans.add()
    one.trace_id, one.span_id, one.name = bytes.fromhex(TRACE_ID), bytes(range(1, 9)), "GET /health"
    one.start_time_unix_nano, one.end_time_unix_nano = 1, 2
    return request.SerializeToString()


def test_a_trace_that_is_not_rag_is_said_once_with_where_to_look_next(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Most traffic is not RAG, so it is said once, at INFO; the line is all a user whose RAG traffic is read
    as not_rag has to go on: it names the docs page listing every producer read, and `@tracescore.rag`."""
    caplog.set_level(logging.INFO, logger="tracescore")
    steps, _ = pipeline()
    steps.take([message(health_check(), offset=n) for n in range(2)])
    assert steps.flush() == []
    assert steps.stats.skipped[ExtractSkip.NOT_RAG] == 1
    [said] = [r for r in caplog.records if ExtractSkip.NOT_RAG in r.getMessage()]
    assert said.levelno == logging.INFO
    assert "docs/integrations/index.md" in said.getMessage() and "@tracescore.rag" in said.getMessage()


def test_the_policy_admits_and_chooses_the_metrics() -> None:
    config = SamplingConfig(rates=(RateRule(metric="answer_relevancy", rate=0.0),))
    policy = CascadePolicy(config, metrics=["faithfulness", "answer_relevancy"])
    steps, _ = pipeline(policy)
    steps.take([message(READ.read_bytes())])
    [trace] = steps.flush()
    assert [metrics for _, metrics in trace.interactions] == [("faithfulness",)]


def test_an_interaction_the_policy_leaves_out_is_counted_by_reason() -> None:
    steps, _ = pipeline(CascadePolicy(SamplingConfig(default_rate=0.0)))
    steps.take([message(READ.read_bytes())])
    assert steps.flush() == []
    assert steps.stats.interactions == 1 and steps.stats.sampled_out == 1
    assert steps.stats.sampling == {"rate": 1}


class SkippedMetric:
    """The metrics' `skipped` counter, recorded: (reason, service, scope) -> count added."""

    def __init__(self) -> None:
        self.added: dict[tuple[str, str, str], int] = {}

    def skipped(self, reason: str, service: str, scope: str, count: int) -> None:
        self.added[reason, service, scope] = self.added.get((reason, service, scope), 0) + count


def test_interactions_turned_away_in_one_batch_are_counted_per_source_once() -> None:
    metric = SkippedMetric()
    assembler = TraceAssembler(AssemblySettings(grace_s=2.0), clock=Clock())
    policy = SharedPolicy(CascadePolicy(SamplingConfig(default_rate=0.0)))
    steps = Pipeline(assembler, ConsumerStats(), policy=policy, metrics_out=metric)  # type: ignore[arg-type]
    manual, langchain = FIXTURES / "openinference_manual", FIXTURES / "openinference_langchain"
    steps.take([message((manual / "faithful.binpb").read_bytes(), offset=0)])
    steps.take([message((langchain / "faithful.binpb").read_bytes(), offset=1)])
    assert steps.flush() == []
    assert (steps.stats.sampled_out, steps.stats.not_admitted) == (2, {"rate": 1 + 1})
    assert metric.added == {
        ("rate", "aurora-support-manual", "aurora_support.rag"): 1,
        ("rate", "aurora-support-langchain", "openinference.instrumentation.langchain"): 1,
    }
    steps.take([message((manual / "unfaithful.binpb").read_bytes(), offset=2)])
    assert steps.flush() == []  # a later batch adds its own, and only its own
    assert (steps.stats.sampled_out, steps.stats.not_admitted) == (3, {"rate": 3})
    assert metric.added[("rate", "aurora-support-manual", "aurora_support.rag")] == 2


def built_interactions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The anchor span ids of the interactions built (as records to score or to show a policy's admit)."""
    built: list[str] = []
    interaction = Found.interaction

    def counted(self: Found) -> Interaction:
        built.append(self.span.span_id)
        return interaction(self)

    monkeypatch.setattr(Found, "interaction", counted)
    return built


def test_an_interaction_the_policy_turns_away_by_its_span_and_route_is_never_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built = built_interactions(monkeypatch)
    steps, _ = pipeline(CascadePolicy(SamplingConfig(default_rate=0.0)))
    steps.take([message(READ.read_bytes())])
    assert steps.flush() == []
    assert (steps.stats.interactions, steps.stats.sampled_out, steps.stats.sampling) == (1, 1, {"rate": 1})
    assert built == [], "turned away by its rate: nothing to build"


class AdmitsNone(SamplingPolicy):
    """A policy of its own that decides on the whole interaction (no `screen`)."""

    def __init__(self) -> None:
        self.seen: list[Interaction] = []

    def admit(self, interaction: Interaction) -> Decision:
        self.seen.append(interaction)
        return Decision(metrics=(), skip=SkipReason.RATE)

    def escalate(self, interaction: Interaction, offline_results: object) -> Escalation:
        return Escalation(to_llm=False)

    def charge(self, tokens: int, *, reserved: int = 0) -> None:
        return None


def test_a_policy_without_a_screen_is_shown_every_interaction_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    built = built_interactions(monkeypatch)
    policy = AdmitsNone()
    steps, _ = pipeline(policy)  # type: ignore[arg-type]
    steps.take([message(READ.read_bytes())])
    assert steps.flush() == []
    [seen] = policy.seen
    assert seen.record.query == "How long does the Aurora X2 battery last?" and seen.record.contexts
    assert len(built) == 1 and steps.stats.sampled_out == 1


def test_a_message_read_again_after_a_rebalance_keeps_only_the_traces_left_unfinished() -> None:
    steps, _ = pipeline()
    tp = TopicPartition("spans", 0)
    recording = READ.read_bytes()
    steps.handovers[tp] = Handover.build(10, ["another trace"], None)  # this one was scored already
    steps.take([message(recording, offset=4), message(b"dead-lettered already", offset=5)])
    assert steps.flush() == [] and steps.stats.spans == 0
    assert steps.stats.assembly["handed_over_spans_skipped"] == 3
    assert steps.stats.dead_letters == 0 and steps.stats.assembly["handed_over_messages_skipped"] == 1

    steps.handovers[tp] = Handover.build(10, [TRACE_ID], None)  # left unfinished: read again
    steps.take([message(recording, offset=6)])
    assert len(steps.flush()) == 1

    other = NO_RETRIEVAL.read_bytes()  # another trace, not in the handover
    steps.take([message(other, offset=10)])  # past what the previous owner read: everything is new
    assert tp not in steps.handovers and steps.stats.assembly["handed_over_spans_skipped"] == 3
    assert steps.stats.traces == 1 and steps.assembler.buffered_traces == 1


def test_traces_read_again_go_on_without_a_new_grace_once_the_previous_owners_messages_are_read() -> None:
    steps, _ = pipeline()  # a grace of 2 s, never waited here
    tp = TopicPartition("spans", 0)
    steps.handovers[tp] = Handover.build(7, [TRACE_ID], None)  # the previous owner had read up to 6
    assert steps.take([message(READ.read_bytes(), offset=5)]).admitted == [], "more of it may come up to 6"
    taken = steps.take([message(b"dead-lettered already", offset=6)])
    [trace] = taken.admitted  # its root is there and it waited its grace at the previous owner
    assert trace.trace_id == TRACE_ID and steps.stats.assembly["released_after_handover"] == 1
    assert tp not in steps.handovers and taken.dead_letters == []


LOGFIRE_TURNS = [FIXTURES / "logfire_conversation" / f"resent_faithful_turn{n}.binpb" for n in (1, 2)]
SCRUBBED = "[Scrubbed due to 'session']"


def scrubbed(recorded: Path) -> bytes:
    """A recorded Logfire turn as Logfire's default scrubbing sends it: `session.id` replaced, and listed."""
    request = ExportTraceServiceRequest.FromString(recorded.read_bytes())
    spans = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    for span in spans:
        for attribute in [a for a in span.attributes if a.key == "session.id"]:
            attribute.value.string_value = SCRUBBED
            marker = span.attributes.add()
            marker.key = "logfire.scrubbed"
            marker.value.string_value = json.dumps(
                [{"path": ["attributes", "session.id"], "matched_substring": "session"}]
            )
    return request.SerializeToString()


def test_turns_whose_session_id_logfire_scrubbed_are_counted_and_said_once_per_service(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A session id Logfire's scrubbing replaced is not read (one placeholder would be every user's session),
    and the turn was silently read as a one-turn interaction. It is still scored, counted apart from what is
    not scored, and said once per service with where the docs show how to keep the id."""
    caplog.set_level(logging.INFO, logger="tracescore")
    reader = InMemoryMetricReader()
    steps, _ = pipeline(metrics_out=EvaluationMetrics(MeterProvider(metric_readers=[reader]).get_meter("t")))
    steps.take([message(scrubbed(path), offset=n) for n, path in enumerate(LOGFIRE_TURNS)])
    admitted = steps.flush()
    turns = [revision.interaction for trace in admitted for revision, _ in trace.interactions]
    assert len(turns) == 2 and all(turn.session_id is None for turn in turns)
    stats = steps.stats
    assert stats.read_partly == {ExtractSkip.SESSION_ID_SCRUBBED: 2}
    assert stats.interactions == 2 and not stats.skipped, stats.skipped  # scored: not a skip
    assert "2 with their session id scrubbed: read as one-turn interactions" in stats.partly_read()
    [said] = [r for r in caplog.records if ExtractSkip.SESSION_ID_SCRUBBED in r.getMessage()]
    assert said.levelno == logging.WARNING
    assert "logfire.md#keep-the-session-id-through-scrubbing" in said.getMessage()
    # And as an OTel metric with the others, by reason, service and scope (a dashboard sees it, not only
    # the log): before, only the counts and the log line had it.
    [counted] = [
        point
        for rm in (reader.get_metrics_data() or MetricsData([])).resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
        if metric.name == "tracescore.interactions.read_partly"
        for point in metric.data.data_points
    ]
    [turn] = {span.service_name: span for span in (t.span for t in turns)}.values()
    assert counted.value == 2 and counted.attributes == {
        "reason": "session_id_scrubbed",
        "service.name": turn.service_name,
        "tracescore.scope": turn.scope_name,
    }
    # The same turns with the id kept (a scrubbing callback): read as a conversation, nothing said.
    kept, _ = pipeline()
    kept.take([message(path.read_bytes(), offset=n) for n, path in enumerate(LOGFIRE_TURNS)])
    kept_turns = [r.interaction for trace in kept.flush() for r, _ in trace.interactions]
    assert {turn.session_id for turn in kept_turns} != {None} and not kept.stats.read_partly


STRANDS_DEFAULT = FIXTURES / "strands" / "legacy_faithful.binpb"


def events_lost_by_the_producer(recorded: Path, span_name: str, dropped: int) -> bytes:
    """A recorded Strands run whose SDK dropped some of a span's events (its span event limit)."""
    request = ExportTraceServiceRequest.FromString(recorded.read_bytes())
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                if span.name == span_name:
                    span.dropped_events_count = dropped
    return request.SerializeToString()


def test_messages_written_as_span_events_are_scored_and_lost_events_counted_and_said_once_per_service(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Strands' default writes the messages as span events: the run is scored from them. A span that lost
    events (past the producer's or the decoder's limits) may have lost messages: scored all the same, counted
    apart and said once per service."""
    caplog.set_level(logging.INFO, logger="tracescore")
    whole, _ = pipeline()
    whole.take([message(STRANDS_DEFAULT.read_bytes())])
    [run] = [r.interaction for trace in whole.flush() for r, _ in trace.interactions]
    assert run.convention == "strands" and run.record.query and run.record.contexts and run.record.answer
    assert not whole.stats.read_partly and not whole.stats.skipped

    steps, _ = pipeline()
    steps.take([message(events_lost_by_the_producer(STRANDS_DEFAULT, "chat", 3))])
    [partly] = [r.interaction for trace in steps.flush() for r, _ in trace.interactions]
    assert partly.record == run.record
    stats = steps.stats
    assert stats.read_partly == {ExtractSkip.SPAN_EVENTS_DROPPED: 1} and not stats.skipped
    assert "1 whose spans lost span events past the limits" in stats.partly_read()
    [said] = [r for r in caplog.records if ExtractSkip.SPAN_EVENTS_DROPPED in r.getMessage()]
    assert said.levelno == logging.WARNING and "lost 3" in said.getMessage()
