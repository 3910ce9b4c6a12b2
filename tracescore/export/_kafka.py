"""KafkaSpanExporter: spans as OTLP protobuf on a Kafka topic, read by `tracescore consume` and by the
Collector's kafka receiver.

Layout (`TRACESCORE_KAFKA__TRACE_MESSAGES`):
- `per_partition` (default): per export, one serialized `ExportTraceServiceRequest` per partition, holding
  every trace whose key (the 32-char hex trace id) the producer's default partitioner maps to that
  partition, cut into several messages when it would exceed one producer batch. Key: the hex trace id when
  the message holds one trace, else none. A trace's spans land exactly where a message keyed by its trace id
  would, so they meet on one partition with spans written in the other layout, by another process, or by a
  Collector keying by trace id with the murmur2 hasher (`collectors/otlp-to-kafka.yaml`). Fewer, larger
  messages: the consumer, the broker and this export thread all do less per span.
- `per_trace`: one message per trace keyed by the hex trace id, byte-compatible with the OpenTelemetry
  Collector's kafka exporter (`encoding: otlp_proto`, `partition_traces_by_id: true`).

`export()` hands records to the producer and returns: delivery is settled per record by the producer's
callbacks, so a span counts as dropped only when Kafka gave up on it (a 30 s outage inside the delivery
timeout loses and counts nothing). `force_flush()` returns once every record handed over so far is settled
(True only if all were delivered), and `shutdown()` never raises and never waits past its bound.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

from kafka import KafkaProducer
from kafka.errors import KafkaError, MessageSizeTooLargeError
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, attach, detach, set_value
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from tracescore._kafka_config import SPANS_TOPIC, KafkaConnection
from tracescore.export._accounting import SpanAccounting
from tracescore.export._layout import encode_partition_messages, encode_per_trace
from tracescore.export._settings import KafkaProducerSettings

__all__ = ["KafkaSpanExporter"]

_log = logging.getLogger("tracescore.export")

# No broker (bootstrap or metadata timed out), a partition the metadata does not know, a closed producer.
_UNAVAILABLE = (KafkaError, OSError, ValueError, AssertionError)
# (partition or None for the producer's choice, key, value, span count)
_Message = tuple[int | None, bytes | None, bytes, int]


class KafkaSpanExporter(SpanExporter):
    """Exports spans to `topic`. The producer is created on first export (on the export thread), so a broker
    that is down when the application starts costs counted drops, never a failed start."""

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str = SPANS_TOPIC,
        *,
        settings: KafkaProducerSettings | None = None,
        accounting: SpanAccounting | None = None,
        producer: KafkaProducer | None = None,
    ) -> None:
        self.topic = topic
        self.accounting = accounting or SpanAccounting()
        self.bootstrap_servers = bootstrap_servers
        settings = settings or KafkaProducerSettings()
        self._config = settings.producer_config()
        # For creating the topic before the first send: its wait for the metadata shares max_block_ms' bound.
        self._connection = KafkaConnection(
            bootstrap_servers=bootstrap_servers,
            security=settings.security(),
            connect_timeout_s=max(settings.max_block_ms, 1) / 1000,
        )
        self._per_trace = settings.trace_messages == "per_trace"
        self._max_message_bytes = settings.span_message_max_bytes()
        self._producer = producer
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)  # notified whenever pending spans settle
        self._pending = 0  # spans accepted by the producer and not yet settled
        self._failed = 0  # spans this exporter counted as dropped (unavailable, delivery_failed), ever
        self._failed_at_flush = 0  # ... as of the last force_flush()
        self._unsent = 0  # spans of the export() in progress not yet handed to the producer
        self._settled_all = False  # after shutdown: late callbacks were already counted
        self._shutdown = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._shutdown:
            self.accounting.drop(len(spans), "shutdown")
            return SpanExportResult.FAILURE
        # Our own producer traffic must never be traced, or exporting would create spans to export.
        token = attach(set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
        try:
            with self._lock:
                self._unsent = len(spans)
            return self._send(spans)
        finally:
            detach(token)

    def _send(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            producer = self._get_producer()
            messages = self._messages(producer, spans)
        except _UNAVAILABLE as exc:
            return self._unavailable(exc)
        result = SpanExportResult.SUCCESS
        for partition, key, value, count in messages:
            try:
                future = producer.send(self.topic, key=key, value=value, partition=partition)
            except MessageSizeTooLargeError as exc:
                # One span (or trace, per_trace) over max_request_size: only its message is lost.
                with self._lock:
                    lost = 0 if self._settled_all else count
                    self._unsent -= lost
                    self._failed += lost
                self.accounting.drop(lost, "unavailable")
                _log.debug("Kafka refused a message for topic %r: %s", self.topic, exc)
                result = SpanExportResult.FAILURE
                continue
            except _UNAVAILABLE as exc:
                return self._unavailable(exc)
            with self._lock:
                self._unsent -= count
                self._pending += count
            future.add_callback(self._settle, count, False)
            future.add_errback(self._settle, count, True)
        return result

    def _messages(self, producer: KafkaProducer, spans: Sequence[ReadableSpan]) -> list[_Message]:
        if self._per_trace:
            return [(None, key, value, count) for key, value, count in encode_per_trace(spans)]
        # Waits for the topic's metadata as send() would (the export thread only, up to max_block_ms).
        partitions = producer.partitions_for(self.topic)
        return list(encode_partition_messages(spans, partitions, self._max_message_bytes))

    def _unavailable(self, exc: BaseException) -> SpanExportResult:
        # The rest of the batch would only wait as long again, so it is dropped with it.
        with self._lock:
            rest, self._unsent = (0 if self._settled_all else self._unsent), 0
            self._failed += rest
        self.accounting.drop(rest, "unavailable")
        _log.debug("Kafka topic %r unavailable: %s", self.topic, exc)
        return SpanExportResult.FAILURE

    def _settle(self, count: int, failed: bool, _outcome: Any) -> None:
        with self._lock:
            if self._settled_all:
                return
            self._pending -= count
            if failed:
                self._failed += count
            self._settled.notify_all()
        if failed:
            self.accounting.drop(count, "delivery_failed")
        else:
            self.accounting.deliver(count)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Wait until every span handed to `export()` so far is delivered or counted as dropped: True when
        none failed since the previous flush and none is still pending when the timeout runs out."""
        deadline = time.monotonic() + max(0.0, timeout_millis / 1000)
        with self._lock:
            failed_before = self._failed_at_flush
        producer = self._producer
        if producer is not None:
            try:
                # Sends what lingers now; raises when records are still unsettled at the timeout.
                producer.flush(timeout=max(0.0, deadline - time.monotonic()))
            except KafkaError as exc:
                _log.debug("Kafka flush did not finish: %s", exc)
        with self._lock:
            # Callbacks run on the producer's IO thread and may land just after flush() returned.
            settled = self._settled.wait_for(
                lambda: self._pending == 0 or self._settled_all, max(0.0, deadline - time.monotonic())
            )
            self._failed_at_flush = self._failed
            return settled and self._pending == 0 and self._failed == failed_before

    def shutdown(self, timeout_millis: float = 5_000) -> None:
        """Flush within the bound, count what is still pending as dropped, close. Never raises."""
        self._shutdown = True
        producer = self._producer
        timeout_s = max(0.0, timeout_millis / 1000)
        if producer is not None:
            try:
                producer.flush(timeout=timeout_s)
            except Exception as exc:
                _log.debug("Kafka flush did not finish within %.1f s: %s", timeout_s, exc)
        with self._lock:
            lost = self._pending + self._unsent
            self._pending = self._unsent = 0
            self._settled_all = True  # an export still blocked on the broker, or late callbacks: counted here
            self._settled.notify_all()
        self.accounting.drop(lost, "shutdown")
        if producer is None:
            return
        try:
            producer.close(timeout=0)
        except Exception:
            # close() flushes first and raises on records still pending; force the sender down instead.
            sender = getattr(producer, "_sender", None)
            if sender is not None:
                sender.force_close()

    def _get_producer(self) -> KafkaProducer:
        # Only the export thread creates the producer, and creating it may wait for a broker: not under
        # self._lock, which shutdown() and the delivery callbacks take.
        if self._producer is None:
            # The admin client's close below and the producer's at shutdown may race their network thread's
            # read: kafka-python then logs a traceback for a transport closed on purpose (nothing is lost)
            # into the application's log. The commands' filters drop it (and other client noise) here too.
            from tracescore._kafka import ensure_topics, quiet_kafka_client_noise  # loaded on this thread

            quiet_kafka_client_noise()
            producer = KafkaProducer(bootstrap_servers=self.bootstrap_servers, **self._config)
            # A broker answered. The topic is created first when missing: its writer creates it (`tracescore
            # consume` waits for it, never creates what it reads), and a first send that makes the broker
            # auto-create it is logged by kafka-python as an ERROR ("Topic X not found in cluster metadata")
            # in the application's log. Best effort, as auto-creation is.
            ensure_topics(self._connection, [self.topic])
            self._producer = producer
        return self._producer
