"""The span processor between the application and the exporter: a bounded queue and one worker thread.

Why not the SDK's BatchSpanProcessor: its queue drops are counted only by SDK-internal metrics behind an
environment flag, its shutdown waits up to 30 s on a blocked export, and spans still queued when it gives up
are never accounted for. Here `on_end` is a deque append (the app's call never waits on the destination),
every span is delivered or counted as dropped, and `shutdown()` returns within its bound.

Like the SDK's own processors it exports only sampled spans: a span the app's sampler decided to record but
not sample (RECORD_ONLY, e.g. a parent-based sampler under an upstream "not sampled") stays in the process.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from tracescore.export._accounting import SpanAccounting

__all__ = ["BoundedSpanProcessor"]


class BoundedSpanProcessor(SpanProcessor):
    def __init__(
        self,
        exporter: SpanExporter,
        *,
        accept: Callable[[ReadableSpan], bool] | None = None,
        accounting: SpanAccounting | None = None,
        max_queue_size: int = 2048,
        max_batch_size: int = 512,
        schedule_delay_s: float = 1.0,
        shutdown_timeout_s: float = 5.0,
    ) -> None:
        self.exporter = exporter
        self.accounting = accounting or getattr(exporter, "accounting", None) or SpanAccounting()
        # An exporter that settles its spans itself (Kafka: per-record delivery callbacks) says so.
        self._exporter_accounts = getattr(exporter, "accounting", None) is self.accounting
        self._accept = accept
        self._queue: deque[ReadableSpan] = deque(maxlen=max_queue_size)
        self._max_batch_size = max_batch_size
        self._delay_s = schedule_delay_s
        self.shutdown_timeout_s = shutdown_timeout_s
        self._wake = threading.Event()
        self._flushed = threading.Condition()
        self._flush_requests = 0
        self._flushes_done = 0
        self._dropped_at_flush = 0  # the accounting's drop total as of the last force_flush()
        self._stopping = False
        self._take_lock = threading.Lock()
        self._in_flight = 0  # spans of the batch the worker is exporting
        self._worker = threading.Thread(target=self._run, name="tracescore-export", daemon=True)
        self._worker.start()

    # --- the application's threads ---------------------------------------------------------------------

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is None or not context.trace_flags.sampled:
            return  # the app's sampler kept it out of export; not a drop, nothing was lost
        if self._accept is not None and not self._accept(span):
            return
        if self._stopping:
            self.accounting.drop(1, "shutdown")
            return
        queue = self._queue
        with self._take_lock:  # so a drop is counted only when the deque really evicts its oldest span
            if len(queue) == queue.maxlen:
                self.accounting.drop(1, "queue_full")
            queue.append(span)
        if len(queue) >= self._max_batch_size:
            self._wake.set()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export everything queued now and wait for the exporter's own flush (Kafka: until the producer has
        every record acknowledged or given up on), all within the timeout. True only when every span that
        ended since the previous flush was delivered: False on a timeout or any span dropped meanwhile."""
        if self._stopping:
            return False
        deadline = time.monotonic() + timeout_millis / 1000
        with self._flushed:
            self._flush_requests += 1
            wanted = self._flush_requests
            self._wake.set()
            if not self._flushed.wait_for(lambda: self._flushes_done >= wanted, timeout_millis / 1000):
                return False
        # Handed to the exporter is not delivered: a serverless runtime freezes the process right after the
        # handler returns, with records still in the exporter's buffers.
        flushed = self.exporter.force_flush(int(max(0.0, deadline - time.monotonic()) * 1000))
        dropped = self.accounting.total_dropped()
        with self._flushed:
            clean, self._dropped_at_flush = dropped == self._dropped_at_flush, dropped
        return bool(flushed) and clean

    def shutdown(self, timeout_millis: float | None = None) -> None:
        """Deliver what can be delivered within the bound (default `shutdown_timeout_s`), count the rest as
        dropped, and stop. Never raises and never waits longer than the bound."""
        if self._stopping:
            return
        bound_s = self.shutdown_timeout_s if timeout_millis is None else timeout_millis / 1000
        deadline = time.monotonic() + bound_s
        self._stopping = True
        self._wake.set()
        # The queue first (usually quick), then the exporter's own flush of what it accepted, in what is left.
        self._worker.join(max(0.0, deadline - time.monotonic()))
        with self._take_lock:
            # An export still running past the bound: an exporter that settles its own spans counts them in
            # its shutdown below; for any other the batch counts as lost here, and not again when it returns.
            lost = 0 if self._exporter_accounts else self._in_flight
            self._in_flight = 0
        self.accounting.drop(lost + len(self._take(len(self._queue))), "shutdown")
        try:
            self.exporter.shutdown(timeout_millis=max(0.0, deadline - time.monotonic()) * 1000)  # type: ignore[call-arg]
        except TypeError:
            self.exporter.shutdown()
        finally:
            self.accounting.log_if_due(force=True)

    # --- the worker thread -----------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stopping:
            self._wake.wait(self._delay_s)
            self._wake.clear()
            with self._flushed:
                wanted = self._flush_requests
            self._drain()
            with self._flushed:
                self._flushes_done = max(self._flushes_done, wanted)
                self._flushed.notify_all()
            self.accounting.log_if_due()
        self._drain()  # shutdown: one last pass, bounded by the join in shutdown()

    def _drain(self) -> None:
        while batch := self._take(self._max_batch_size):
            self._in_flight = len(batch)
            try:
                result = self.exporter.export(batch)
            except Exception:
                result = SpanExportResult.FAILURE
            with self._take_lock:
                counted, self._in_flight = self._in_flight, 0
            if not self._exporter_accounts and counted:
                if result is SpanExportResult.SUCCESS:
                    self.accounting.deliver(counted)
                else:
                    self.accounting.drop(counted, "unavailable")

    def _take(self, count: int) -> list[ReadableSpan]:
        with self._take_lock:
            batch = []
            queue = self._queue
            while queue and len(batch) < count:
                batch.append(queue.popleft())
            return batch
