"""How exported spans become Kafka messages: per trace (the Collector's `partition_traces_by_id` layout) or
per partition (fewer, larger messages on the same partitions).

Per partition, each trace goes to the partition a message keyed by its 32-char hex trace id would get from
the producer's default partitioner (kafka-python's `DefaultPartitioner`: murmur2 of the key over the sorted
partition ids, as the Java client does), so a trace's spans meet on one partition whichever process wrote
them and in which layout. Pure functions: a benchmark builds the exporter's exact bytes without a broker.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from google.protobuf.message import Message
from kafka.partitioner import DefaultPartitioner
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["encode_partition_messages", "encode_trace_messages", "trace_key"]

# A length-delimited field's framing at most: a one-byte tag (OTLP's field numbers are < 16) and a length
# varint of at most 5 bytes (any length < 32 GiB).
_FIELD = 6
_TOPIC = "spans"  # any name: the partitioner only needs one topic's partitions


def trace_key(trace_id: int) -> bytes:
    """The message key of a trace: its id as 32 lowercase hex characters, as the Collector writes it."""
    return format(trace_id, "032x").encode()


def encode_trace_messages(spans: Sequence[ReadableSpan]) -> list[tuple[bytes, bytes]]:
    """(key, value) Kafka messages: one OTLP ExportTraceServiceRequest per trace, key = hex trace id."""
    return [(key, value) for key, value, _ in encode_per_trace(spans)]


def encode_per_trace(spans: Sequence[ReadableSpan]) -> list[tuple[bytes, bytes, int]]:
    """(key, value, span count) per trace."""
    return [
        (trace_key(trace_id), encode_spans(group).SerializeToString(), len(group))
        for trace_id, group in _by_trace(spans).items()
    ]


def encode_partition_messages(
    spans: Sequence[ReadableSpan], partitions: Iterable[int], max_bytes: int
) -> list[tuple[int, bytes | None, bytes, int]]:
    """(partition, key, value, span count) messages, each an OTLP ExportTraceServiceRequest: per partition of
    `partitions` (the topic's partition ids, `KafkaProducer.partitions_for(topic)`), the spans of every
    trace whose trace-id key the default partitioner maps there, in as few messages of at most `max_bytes`
    as fit (a trace may be split across them; they share its partition). A single span larger than
    `max_bytes` is a message of its own. Key: the hex trace id when a message holds one trace, else None."""
    cluster = _PartitionIds(partitions)
    partitioner = DefaultPartitioner()
    by_partition: dict[int, list[list[ReadableSpan]]] = defaultdict(list)
    for trace_id, group in _by_trace(spans).items():
        key = trace_key(trace_id)
        by_partition[partitioner.partition(_TOPIC, key, key, None, None, cluster)].append(group)
    messages: list[tuple[int, bytes | None, bytes, int]] = []
    for partition, traces in by_partition.items():
        request = encode_spans([span for group in traces for span in group])
        if request.ByteSize() <= max_bytes:  # the usual case: one message for the partition
            key = trace_key(traces[0][0].context.trace_id) if len(traces) == 1 else None
            count = sum(len(group) for group in traces)
            messages.append((partition, key, request.SerializeToString(), count))
            continue
        for part, count, trace_ids in _split(request, max_bytes):
            key = trace_ids.pop().hex().encode() if len(trace_ids) == 1 else None
            messages.append((partition, key, part.SerializeToString(), count))
    return messages


def _by_trace(spans: Sequence[ReadableSpan]) -> dict[int, list[ReadableSpan]]:
    by_trace: dict[int, list[ReadableSpan]] = defaultdict(list)
    for span in spans:
        by_trace[span.context.trace_id].append(span)
    return by_trace


class _PartitionIds:
    """The part of kafka-python's ClusterMetadata that a partitioner reads (its `cluster` argument), for a
    known list of partition ids."""

    def __init__(self, partitions: Iterable[int]) -> None:
        self._partitions = set(partitions)
        if not self._partitions:
            raise ValueError("a topic has at least one partition")

    def topics(self) -> set[str]:
        return {_TOPIC}

    def partitions_for_topic(self, topic: str) -> set[int]:
        return self._partitions

    def available_partitions_for_topic(self, topic: str) -> set[int]:
        return self._partitions


def _split(
    request: ExportTraceServiceRequest, max_bytes: int
) -> list[tuple[ExportTraceServiceRequest, int, set[bytes]]]:
    """`request` cut into requests of at most `max_bytes` (request, span count, trace ids), in order. The
    encoded spans are copied, never encoded again. A part's size is bounded from above by its spans, its
    resources' and scopes' own fields, and the most a field's framing costs, so every part fits."""
    parts: list[tuple[ExportTraceServiceRequest, int, set[bytes]]] = []
    part, used, count, trace_ids = ExportTraceServiceRequest(), 0, 0, set[bytes]()
    for resource_spans in request.resource_spans:
        rs_shell, out_rs = _without(resource_spans, "scope_spans"), None
        rs_head = _FIELD + rs_shell.ByteSize()
        for scope_spans in resource_spans.scope_spans:
            ss_shell, out_ss = _without(scope_spans, "spans"), None
            ss_head = _FIELD + ss_shell.ByteSize()
            for span in scope_spans.spans:
                cost = _FIELD + span.ByteSize()
                heads = (rs_head if out_rs is None else 0) + (ss_head if out_ss is None else 0)
                if count and used + heads + cost > max_bytes:
                    parts.append((part, count, trace_ids))
                    part, used, count, trace_ids = ExportTraceServiceRequest(), 0, 0, set()
                    out_rs = out_ss = None
                    heads = rs_head + ss_head
                if out_rs is None:
                    out_rs = part.resource_spans.add()
                    out_rs.CopyFrom(rs_shell)
                if out_ss is None:
                    out_ss = out_rs.scope_spans.add()
                    out_ss.CopyFrom(ss_shell)
                out_ss.spans.append(span)
                used += heads + cost
                count += 1
                trace_ids.add(span.trace_id)
    if count:
        parts.append((part, count, trace_ids))
    return parts


def _without(message: Message, children: str) -> Message:
    """A copy of `message` (a ResourceSpans or ScopeSpans) with every field but its list of `children`."""
    return type(message)(
        **{field.name: value for field, value in message.ListFields() if field.name != children}
    )
