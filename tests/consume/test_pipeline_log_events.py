"""Pipeline: a producer that writes its messages as OTel log records (opentelemetry-util-genai with content
capture EVENT_ONLY, recorded from the real library) is scored once its log records are read from the spans
topic beside its spans, in either order; the records it cannot read are counted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kafka import TopicPartition
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from test_pipeline import message, pipeline

from tracescore.consume import AssemblyCount, assemble_messages
from tracescore.consume._assemble import SPAN_OBJECT_BYTES
from tracescore.consume._handover import Handover
from tracescore.model import ExtractSkip

FIXTURES = Path(__file__).parents[1] / "extract" / "fixtures" / "otel_genai"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())
ENTRY = MANIFEST["scenarios"]["event_only_faithful.binpb"]
SPANS = (FIXTURES / "event_only_faithful.binpb").read_bytes()
LOGS = (FIXTURES / ENTRY["logs"]["file"]).read_bytes()


@pytest.mark.parametrize("logs_first", [True, False], ids=["logs-first", "spans-first"])
def test_an_event_only_trace_is_scored_once_its_log_records_are_read_in_either_order(
    logs_first: bool,
) -> None:
    steps, clock = pipeline()
    batch = [message(LOGS, offset=1), message(SPANS, offset=2)]
    steps.take(batch if logs_first else batch[::-1])
    clock.now += 2.5

    [trace] = steps.ready()

    [(revision, _)] = trace.interactions
    record = revision.interaction.record
    assert (record.query, record.answer) == (ENTRY["question"], ENTRY["answer"])
    assert all(document in record.contexts[0] for document in ENTRY["documents"])
    assert trace.offsets == {TopicPartition("spans", 0): 1}  # the log records' offset is held too
    stats = steps.stats
    assert (stats.messages, stats.spans, stats.dead_letters) == (2, ENTRY["span_count"], 0)
    assert stats.assembly[AssemblyCount.LOG_EVENTS] == ENTRY["logs"]["record_count"]
    assert steps.assembler.buffered_bytes == 0


def test_without_its_log_records_the_trace_is_skipped_as_content_not_captured() -> None:
    steps, clock = pipeline()
    steps.take([message(SPANS)])
    clock.now += 2.5
    assert steps.ready() == []
    assert steps.stats.skipped[ExtractSkip.CONTENT_NOT_CAPTURED] == 1


def test_assembled_messages_read_the_log_records_as_the_pipeline_does() -> None:
    [trace] = assemble_messages([LOGS, SPANS])
    assert [event.name for span in trace.spans for event in span.events] == [
        "gen_ai.client.inference.operation.details"
    ]


def test_log_records_that_are_not_genai_events_or_have_no_trace_are_counted_not_buffered() -> None:
    logs = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    logger = provider.get_logger("app")
    logger.emit(body="GET /search 200", timestamp=1)
    logger.emit(event_name="gen_ai.client.inference.operation.details", timestamp=2)
    value = encode_logs(logs.get_finished_logs()).SerializeToString()
    steps, _ = pipeline()

    taken = steps.take([message(value)])

    assert taken.dead_letters == [] and steps.assembler.buffered_traces == 0
    assert steps.stats.assembly[AssemblyCount.LOG_RECORDS_WITHOUT_TRACE] == 2
    assert AssemblyCount.LOG_EVENTS not in steps.stats.assembly


def test_log_records_count_their_bytes_as_spans_do() -> None:
    steps, _ = pipeline()
    steps.take([message(LOGS)])
    assert steps.assembler.buffered_bytes == len(LOGS) + SPAN_OBJECT_BYTES * ENTRY["logs"]["record_count"]


def test_log_records_read_again_after_a_rebalance_keep_only_the_traces_left_unfinished() -> None:
    steps, _ = pipeline()
    steps.handovers[TopicPartition("spans", 0)] = Handover.build(10, ["another trace"], None)

    steps.take([message(LOGS, offset=4)])

    assert steps.assembler.buffered_traces == 0
    assert steps.stats.assembly[AssemblyCount.HANDED_OVER_LOG_EVENTS_SKIPPED] == 1
    assert AssemblyCount.HANDED_OVER_SPANS_SKIPPED not in steps.stats.assembly
