"""Span accounting: every span handed to export is either delivered or dropped with a reason, and drops are
an OTel metric and one log line per interval, never one per span."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter

from opentelemetry import metrics

from tracescore._plural import counted

__all__ = ["DROP_REASONS", "SpanAccounting"]

_log = logging.getLogger("tracescore.export")

# queue_full: the bounded queue was full (export slower than the app, or the destination down);
# unavailable: the destination could not take the batch (no broker, rejected request);
# delivery_failed: Kafka gave up on records it had accepted (delivery timeout); shutdown: still pending when
# shutdown's time bound ran out.
DROP_REASONS = ("queue_full", "unavailable", "delivery_failed", "shutdown")


class SpanAccounting:
    """Thread-safe counts of delivered and dropped spans, also OTel metrics through the global MeterProvider
    (a no-op until the app sets one): `tracescore.sdk.spans.delivered`, `tracescore.sdk.spans.dropped`."""

    def __init__(self, log_interval_s: float = 60.0) -> None:
        self._lock = threading.Lock()
        self.delivered = 0
        self.dropped: Counter[str] = Counter()
        self._unlogged: Counter[str] = Counter()
        self._log_interval_s = log_interval_s
        self._last_log = time.monotonic()
        meter = metrics.get_meter("tracescore")
        self._dropped_metric = meter.create_counter(
            "tracescore.sdk.spans.dropped", unit="{span}", description="Spans the SDK could not deliver"
        )
        self._delivered_metric = meter.create_counter(
            "tracescore.sdk.spans.delivered", unit="{span}", description="Spans the destination acknowledged"
        )

    def deliver(self, count: int) -> None:
        with self._lock:
            self.delivered += count
        self._delivered_metric.add(count)

    def drop(self, count: int, reason: str) -> None:
        if count <= 0:
            return
        with self._lock:
            self.dropped[reason] += count
            self._unlogged[reason] += count
        self._dropped_metric.add(count, {"reason": reason})

    def total_dropped(self) -> int:
        with self._lock:
            return sum(self.dropped.values())

    def log_if_due(self, force: bool = False) -> None:
        """One warning for everything dropped since the last one, at most once per interval."""
        now = time.monotonic()
        with self._lock:
            if not self._unlogged or (not force and now - self._last_log < self._log_interval_s):
                return
            unlogged, self._unlogged = self._unlogged, Counter()
            since, self._last_log = now - self._last_log, now
        reasons = ", ".join(f"{reason}: {n}" for reason, n in sorted(unlogged.items()))
        _log.warning(
            "tracescore dropped %s in the last %.0f s (%s); the application is unaffected",
            counted(sum(unlogged.values()), "span"),
            since,
            reasons,
        )
