"""The fault suite's fuzz run: 1,000 messages of garbage, truncated, wrongly encoded, empty, huge and absurd
spans among 200 good ones on the spans topic, through the real broker (the fault suite: test_faults.py).

Every undecodable message ends on the DLQ once, saying why (a huge one kept as a prefix); a decodable but
absurd one as a score or a counted skip; every good span with its record. The consumer never stops.
"""

from __future__ import annotations

import base64
import gzip
import json
import random
from collections.abc import Iterator

import pytest
from fault_helpers import APP, Topics, outcome, rag_spans_on, report
from kafka import KafkaProducer
from kafka_helpers import assert_all_committed, end_offsets, run_instrumented_app
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tracescore.consume import EvaluationConsumer
from tracescore.score.judges import OfflineJudge
from tracescore.score.metrics import Faithfulness
from tracescore.testing.kafka_topics import read_topic

pytestmark = pytest.mark.kafka


def _kv(key: str, value: AnyValue) -> KeyValue:
    return KeyValue(key=key, value=value)


def _absurd(rng: random.Random, template: ExportTraceServiceRequest) -> bytes:
    """Valid protobuf, absurd content: what a buggy or hostile producer can send."""
    request = ExportTraceServiceRequest()
    request.CopyFrom(template)
    span = request.resource_spans[0].scope_spans[0].spans[0]
    span.trace_id, span.span_id = rng.randbytes(16), rng.randbytes(8)
    kind = rng.randrange(8)
    if kind == 0:  # ids of the wrong length
        span.trace_id = rng.randbytes(rng.choice([0, 3, 15, 17, 64]))
    elif kind == 1:  # clock skew: ends before it starts, in the year 2200
        span.start_time_unix_nano, span.end_time_unix_nano = 7_258_118_400 * 10**9, 1
    elif kind == 2:  # thousands of attributes
        span.attributes.extend(_kv(f"a{i}", AnyValue(int_value=-(2**63))) for i in range(2000))
    elif kind == 3:  # the RAG attributes with the wrong types
        for kv in span.attributes:
            kv.value.CopyFrom(AnyValue(array_value={"values": [AnyValue(double_value=float("nan"))] * 50}))
    elif kind == 4:  # deeply nested values
        value = AnyValue(string_value="leaf")
        for _ in range(25):  # protobuf itself refuses messages nested past 100 levels
            value = AnyValue(kvlist_value={"values": [_kv("k", value)]})
        span.attributes.append(_kv("nested", value))
    elif kind == 5:  # a span that is its own parent, and a thousand copies of it in one trace
        span.parent_span_id = span.span_id
        spans = request.resource_spans[0].scope_spans[0].spans
        spans.extend([Span(**{"trace_id": span.trace_id, "span_id": span.span_id, "name": "x"})] * 1000)
    elif kind == 6:  # no spans at all
        del request.resource_spans[0].scope_spans[0].spans[:]
    else:  # empty strings everywhere
        span.name = ""
        for kv in span.attributes:
            kv.value.CopyFrom(AnyValue(string_value=""))
    return request.SerializeToString()


def _poison(rng: random.Random, template: bytes) -> Iterator[tuple[str, bytes]]:
    parsed = ExportTraceServiceRequest.FromString(template)
    document = {"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "é"}]}]}]}
    as_json = json.dumps(document, ensure_ascii=False)
    for i in range(1000):
        kind = i % 10
        if kind in (0, 1):
            fresh = ExportTraceServiceRequest()
            fresh.CopyFrom(parsed)
            fresh.resource_spans[0].scope_spans[0].spans[0].trace_id = rng.randbytes(16)
            whole = fresh.SerializeToString()
            yield "truncated", whole[: rng.randrange(1, len(whole))]
        elif kind in (2, 3):
            yield "garbage", rng.randbytes(rng.randrange(1, 4096))
        elif kind == 4:
            yield (
                "wrong_encoding",
                rng.choice(
                    [
                        as_json.encode("utf-16"),
                        as_json.encode("latin-1"),
                        gzip.compress(template),
                        base64.b64encode(template),
                        b"{" + rng.randbytes(100),
                        b'{"resourceSpans": 5}',
                        b"[" * 100_000,
                    ]
                ),
            )
        elif kind == 5:
            yield "empty", rng.choice([b"", b" ", b"\n", b"{}", b"\x0a\x00"])
        elif i % 200 == 6:
            yield "huge", (b"\x0a" + rng.randbytes(900_000)) if i % 400 == 6 else b"{" * 900_000
        else:
            yield "absurd", _absurd(rng, parsed)


def test_1000_fuzzed_messages_among_200_good_spans(topics: Topics) -> None:
    run_instrumented_app(topics.bootstrap, topics.spans, APP.format(n=200))
    good_messages = read_topic(topics.bootstrap, topics.spans)
    expected = rag_spans_on(topics.bootstrap, topics.spans)
    assert len(expected) == 200
    rng = random.Random(8)
    kinds: dict[str, int] = {}
    producer = KafkaProducer(bootstrap_servers=topics.bootstrap, acks="all", max_request_size=1_000_000)
    # The poison's template: one good span (the SDK's messages may hold many traces; copies of them all
    # would turn the poison into duplicates of the good spans).
    template = ExportTraceServiceRequest.FromString(good_messages[0].value)
    del template.resource_spans[0].scope_spans[0].spans[1:]
    for kind, value in _poison(rng, template.SerializeToString()):
        kinds[kind] = kinds.get(kind, 0) + 1
        producer.send(topics.spans, key=rng.randbytes(8).hex().encode(), value=value)
    producer.flush(60)
    producer.close()
    stats = EvaluationConsumer(topics.settings(), judge=OfflineJudge(), metrics=[Faithfulness()]).run()

    assert (
        stats.messages
        == len(good_messages) + 1000
        == sum(end_offsets(topics.bootstrap, topics.spans).values())
    )
    dead = read_topic(topics.bootstrap, topics.dlq, 60)
    assert len(dead) == stats.dead_letters > 0, "every undecodable message is on the DLQ, once"
    assert all(dict(m.headers).get("tracescore.error") for m in dead), "each says why"
    cut = [m for m in dead if dict(m.headers).get("tracescore.truncated") == b"1"]
    assert len(cut) == kinds["huge"], "the huge ones are kept as a prefix, with their original size"
    assert all(len(m.value) <= 64 * 1024 and dict(m.headers)["tracescore.original-size"] for m in cut)
    # Decodable poison ends as a score or a counted skip.
    assert stats.scored >= 200 and sum(stats.skipped.values()) > 0
    assert_all_committed(topics.bootstrap, topics.group, topics.spans)
    result = outcome(topics, expected, others_allowed=True)
    result.extra.update(
        poison=kinds, dead_lettered=stats.dead_letters, skipped=dict(stats.skipped), scored=stats.scored
    )
    report("1,000 fuzzed messages among 200 good spans", result)
    assert result.lost == 0 and result.unexplained == 0, result
    assert result.unique == stats.scored, "every scored interaction has its record"
