"""What `@tracescore.rag` adds to the application's call, what queued spans cost in memory, and what the
KafkaSpanExporter's OTLP encoding (and kafka-python's CRC32C over the result) costs per span.

    python benchmarks/sdk_overhead.py [--calls 20000] [--repeat 5] [--memory-calls 10000]

One process, a real SDK TracerProvider from `tracescore.init(service_name=..., exporter=...)` whose exporter
drops the spans: export runs on the BatchSpanProcessor's worker thread, off the application's call, exactly
as in production, so what is timed here is the decorated call itself. Every figure pairs a decorated and an
undecorated function measured in the same repetition (the machine is noisy); medians over the repetitions.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import inspect
import json
import logging
import statistics
import sys
import threading
import time
import timeit
import tracemalloc
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import cast

from kafka.record import util as kafka_record_util
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import Span

import tracescore
from tracescore.export import encode_trace_messages
from tracescore.instrument._decorators import (
    SCOPE_NAME,
    _build_spec,
    _Outcome,
    _record_answer,
    _record_inputs,
)

QUERY = "Which magazine was started first, Arthur's Magazine or First for Women?"
# A short LLM-sized answer (~300 chars); the generator variant streams it in 10 chunks.
ANSWER = (
    "Arthur's Magazine was started first: it was published in Philadelphia from 1844 to 1846, while "
    "First for Women is a modern magazine published by Bauer Media Group in the USA. The two were never "
    "in print at the same time, so Arthur's Magazine predates First for Women by well over a century."
)
CHUNKS = [ANSWER[i * len(ANSWER) // 10 : (i + 1) * len(ANSWER) // 10] for i in range(10)]


def _contexts(size: int, salt: str = "") -> list[str]:
    """Three retrieved passages of `size` characters each (distinct text, like real retrieval)."""
    base = "Arthur's Magazine (1844-1846) was an American literary periodical published in Philadelphia. "
    return [(f"[{n}{salt}] " + base * (size // len(base) + 1))[:size] for n in range(3)]


class DropExporter(SpanExporter):
    """Drops spans (optionally keeping them for the encode benchmark); `stall()` makes export block, as an
    unreachable Kafka does, so the batch processor's queue fills up."""

    def __init__(self) -> None:
        self.received = 0
        self.capture: list[ReadableSpan] | None = None
        self._flowing = threading.Event()
        self._flowing.set()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self._flowing.wait()
        self.received += len(spans)
        if self.capture is not None:
            self.capture.extend(spans)
        return SpanExportResult.SUCCESS

    def stall(self) -> None:
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def shutdown(self) -> None:
        self.resume()


# --- the functions under test: each pair has the same body ---------------------------------------------


def answer(query: str, contexts: list[str]) -> str:
    return ANSWER


async def answer_async(query: str, contexts: list[str]) -> str:
    return ANSWER


def answer_stream(query: str, contexts: list[str]) -> Iterator[str]:
    yield from CHUNKS


_plain_tracer = trace.get_tracer(SCOPE_NAME)  # same scope, so these spans take the same processor path


def answer_plain_span(query: str, contexts: list[str]) -> str:
    """The floor: an OTel span with no attributes, started, made current and ended around the body."""
    with _plain_tracer.start_as_current_span("answer"):
        return ANSWER


rag_answer = tracescore.rag(answer)
rag_answer_async = tracescore.rag(answer_async)
rag_answer_stream = tracescore.rag(answer_stream)


# --- timing --------------------------------------------------------------------------------------------


def _time_sync(fn: Callable[[str, list[str]], object], contexts: list[str], calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        fn(QUERY, contexts)
    return time.perf_counter() - started


def _time_stream(fn: Callable[[str, list[str]], Iterator[str]], contexts: list[str], calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        "".join(fn(QUERY, contexts))
    return time.perf_counter() - started


def _time_async(fn: Callable[[str, list[str]], Awaitable[str]], contexts: list[str], calls: int) -> float:
    async def loop() -> float:
        # Timed inside the running loop so event-loop start-up is not part of the figure.
        started = time.perf_counter()
        for _ in range(calls):
            await fn(QUERY, contexts)
        return time.perf_counter() - started

    return asyncio.run(loop())


@dataclass
class Case:
    name: str
    bare: Callable[[], float]
    decorated: Callable[[], float]
    bare_us: list[float] = field(default_factory=list)
    decorated_us: list[float] = field(default_factory=list)


def timing_cases(calls: int) -> list[Case]:
    small, large = _contexts(1_000), _contexts(20_000)

    def sync(fn: Callable[[str, list[str]], object], ctx: list[str]) -> Callable[[], float]:
        return lambda: _time_sync(fn, ctx, calls)

    return [
        Case("sync, 3 x 1 KB contexts", sync(answer, small), sync(rag_answer, small)),
        Case("sync, 3 x 20 KB contexts", sync(answer, large), sync(rag_answer, large)),
        Case(
            "async, 3 x 1 KB contexts",
            lambda: _time_async(answer_async, small, calls),
            lambda: _time_async(rag_answer_async, small, calls),
        ),
        Case(
            "generator, 10 chunks, 3 x 1 KB",
            lambda: _time_stream(answer_stream, small, calls),
            lambda: _time_stream(rag_answer_stream, small, calls),
        ),
        Case("reference: plain OTel span, no attrs", sync(answer, small), sync(answer_plain_span, small)),
    ]


def run_timing(calls: int, repeat: int) -> list[Case]:
    cases = timing_cases(calls)
    for case in cases:  # warm-up: first calls pay for imports, caches and the proxy tracer's resolution
        case.bare(), case.decorated()
    for _ in range(repeat):
        # Interleaved per repetition, so a noisy moment hits both sides of a pair alike.
        for case in cases:
            case.bare_us.append(case.bare() / calls * 1e6)
            case.decorated_us.append(case.decorated() / calls * 1e6)
    return cases


def print_timing(cases: list[Case], calls: int, repeat: int) -> None:
    print(f"decorated call cost: {calls} calls x {repeat} repetitions, median per call")
    print(
        f"{'case':<38} {'bare us':>8} {'rag us':>8} {'overhead us':>12} {'ratio':>7}  {'overhead range':>15}"
    )
    for case in cases:
        overheads = [d - b for b, d in zip(case.bare_us, case.decorated_us, strict=True)]
        ratios = [d / b for b, d in zip(case.bare_us, case.decorated_us, strict=True)]
        print(
            f"{case.name:<38} {statistics.median(case.bare_us):8.2f} "
            f"{statistics.median(case.decorated_us):8.2f} {statistics.median(overheads):12.2f} "
            f"{statistics.median(ratios):6.0f}x  {min(overheads):7.2f}-{max(overheads):<7.2f}"
        )
    # A bare function is ~0.1 us, so the ratio above is huge by construction; the SDK's own span is the
    # meaningful yardstick for what tracescore adds on top of OpenTelemetry.
    plain = cases[-1].decorated_us
    for case in cases[:-1]:
        ratios = [d / p for d, p in zip(case.decorated_us, plain, strict=True)]
        print(f"{case.name:<38} = {statistics.median(ratios):.2f} x a plain OTel span (same repetitions)")


# --- where the decorated call's time goes -------------------------------------------------------------


class _NoopSpan:
    """Takes attributes and does nothing: isolates tracescore's own recording code from the SDK's."""

    def is_recording(self) -> bool:
        return True

    def set_attribute(self, key: str, value: object) -> None:
        return None


def run_components(
    exporter: DropExporter, instrumentation: tracescore.Instrumentation, calls: int, repeat: int
) -> None:
    """The decorated sync call split into what the SDK costs and what tracescore's code costs, with the
    decorator's own 10 attributes (captured from a decorated call) so the values are the real ones."""
    contexts = _contexts(1_000)
    [captured] = capture_spans(exporter, instrumentation, contexts, 1)
    attributes = dict(captured.attributes or {})
    tracer = trace.get_tracer(SCOPE_NAME)
    signature = inspect.signature(answer)
    spec = _build_spec(answer, None, None, None, None, None, None)
    noop = cast(Span, _NoopSpan())
    outcome = _Outcome(noop, value=ANSWER)
    user = [{"role": "user", "parts": [{"type": "text", "content": QUERY}]}]
    assistant = [
        {"role": "assistant", "parts": [{"type": "text", "content": ANSWER}], "finish_reason": "stop"}
    ]

    def sdk_span() -> None:
        span = tracer.start_span("answer")
        with trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
            pass
        span.end()

    def sdk_span_attributes() -> None:
        span = tracer.start_span("answer")
        for key, value in attributes.items():
            span.set_attribute(key, value)
        with trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
            pass
        span.end()

    def recording() -> None:
        _record_inputs(noop, spec, (QUERY, contexts), {})
        _record_answer(noop, spec, outcome)

    def bind() -> None:
        signature.bind_partial(QUERY, contexts).apply_defaults()

    def dumps() -> None:
        json.dumps(user), json.dumps(assistant)

    def dumps_text_only() -> None:
        # Same bytes (checked below): only the variable text goes through the encoder.
        '[{"role": "user", "parts": [{"type": "text", "content": ' + json.dumps(QUERY) + "}]}]"
        (
            '[{"role": "assistant", "parts": [{"type": "text", "content": '
            + json.dumps(ANSWER)
            + '}], "finish_reason": "stop"}]'
        )

    assert attributes["gen_ai.input.messages"] == (
        '[{"role": "user", "parts": [{"type": "text", "content": ' + json.dumps(QUERY) + "}]}]"
    )
    rows = [
        ("decorated call (sync, 3 x 1 KB)", lambda: rag_answer(QUERY, contexts)),
        ("A SDK span: start_span, use_span, end", sdk_span),
        ("B   same + the 10 attributes (set_attribute)", sdk_span_attributes),
        ("C tracescore recording code on a no-op span", recording),
        ("    of which Signature.bind_partial+defaults", bind),
        ("    of which json.dumps of 2 GenAI messages", dumps),
        ("    same strings, json.dumps of the text only", dumps_text_only),
    ]
    number = max(1, calls // 4)
    times: dict[str, list[float]] = {label: [] for label, _ in rows}
    for _ in range(repeat):  # interleaved, like the timing cases
        for label, fn in rows:
            times[label].append(timeit.timeit(fn, number=number) / number * 1e6)
    median = {label: statistics.median(t) for label, t in times.items()}
    print(f"\nwhere the decorated call's time goes: {number} calls x {repeat} repetitions, median per call")
    for label, _ in rows:
        print(f"{label:<48} {median[label]:8.2f} us")
    full, b, c = (median[rows[i][0]] for i in (0, 2, 3))
    print(f"{'D rest: wrapper (contextmanager, _Outcome, ...)':<48} {full - b - c:8.2f} us  (call - B - C)")


# --- memory --------------------------------------------------------------------------------------------


def run_memory(exporter: DropExporter, instrumentation: tracescore.Instrumentation, calls: int) -> None:
    """tracemalloc over `calls` decorated calls, each with freshly built contexts (retrieval returns new
    strings per request, which the span keeps alive until it is exported)."""
    print(f"\nmemory: {calls} decorated calls, fresh contexts per call, default max_queue_size")
    print(
        f"{'exporter, contexts':<36} {'peak growth MB':>15} {'held after MB':>14} {'spans held':>11} "
        f"{'dropped':>8} {'KB/held span':>13}"
    )
    for label, size, stalled in (
        ("draining (drops spans), 3 x 1 KB", 1_000, False),
        ("stalled (Kafka down), 3 x 1 KB", 1_000, True),
        ("stalled (Kafka down), 3 x 20 KB", 20_000, True),
    ):
        instrumentation.force_flush()
        gc.collect()
        before_received = exporter.received
        if stalled:
            exporter.stall()
        tracemalloc.start()
        base, _ = tracemalloc.get_traced_memory()
        for i in range(calls):
            rag_answer(QUERY, _contexts(size, salt=f"-{i}"))
        gc.collect()
        current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        exporter.resume()
        instrumentation.force_flush()
        # A stalled exporter holds one batch inside export() plus a full queue; both arrive after the resume.
        arrived = exporter.received - before_received
        held = f"{arrived:>11}" if stalled else f"{'-':>11}"
        per_span = f"{(current - base) / arrived / 1e3:13.1f}" if stalled else f"{'-':>13}"
        print(
            f"{label:<36} {(peak - base) / 1e6:15.1f} {(current - base) / 1e6:14.1f} {held} "
            f"{calls - arrived:>8} {per_span}"
        )


# --- OTLP encoding (what KafkaSpanExporter does on the worker thread) ---------------------------------


def capture_spans(
    exporter: DropExporter, instrumentation: tracescore.Instrumentation, contexts: list[str], n: int
) -> list[ReadableSpan]:
    instrumentation.force_flush()  # spans of earlier calls must not be captured
    exporter.capture = []
    for _ in range(n):
        rag_answer(QUERY, contexts)
    instrumentation.force_flush()
    spans, exporter.capture = exporter.capture, None
    return spans


def crc32c_implementation() -> str:
    """Which CRC32C kafka-python uses for record batches: the `crc32c` C package if installed, else Python."""
    impl = kafka_record_util._crc32c
    return "pure Python (kafka.record._crc32c)" if impl.__module__.startswith("kafka.") else impl.__module__


def run_encode(exporter: DropExporter, instrumentation: tracescore.Instrumentation, repeat: int) -> None:
    """Both run on background threads (the BatchSpanProcessor's worker, kafka-python's sender): off the call,
    but on the application's CPU and GIL. The producer computes a CRC32C over every record batch it sends."""
    print("\nKafkaSpanExporter per span, pure CPU, no broker: encode_trace_messages (one OTLP request per")
    print(f"trace) and the producer's record-batch CRC32C over the same bytes ({crc32c_implementation()})")
    print(f"{'spans':<26} {'encode us':>10} {'bytes/msg':>10} {'crc32c us':>10} {'crc MB/s':>9}")
    for label, size in (("3 x 1 KB contexts", 1_000), ("3 x 20 KB contexts", 20_000)):
        spans = capture_spans(exporter, instrumentation, _contexts(size), 512)  # one export batch
        encode_us, crc_us = [], []
        messages = encode_trace_messages(spans)
        for _ in range(repeat * 4):
            started = time.perf_counter()
            messages = encode_trace_messages(spans)
            encode_us.append((time.perf_counter() - started) / len(spans) * 1e6)
        sample = [memoryview(value) for _, value in messages[:16]]  # CRC is per byte: a sample suffices
        for _ in range(repeat):
            started = time.perf_counter()
            for value in sample:
                kafka_record_util.calc_crc32c(value)
            crc_us.append((time.perf_counter() - started) / len(sample) * 1e6)
        size_bytes = sum(len(v) for _, v in messages) // len(messages)
        crc = statistics.median(crc_us)
        print(
            f"{label:<26} {statistics.median(encode_us):10.1f} {size_bytes:10d} {crc:10.1f} "
            f"{size_bytes / crc:9.1f}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000, help="calls per timing (default 20000)")
    parser.add_argument("--repeat", type=int, default=5, help="repetitions, median reported (default 5)")
    parser.add_argument("--memory-calls", type=int, default=10_000, help="calls under tracemalloc")
    args = parser.parse_args(argv)
    # The SDK logs "Queue full, dropping" once per dropped span; the count is what matters here.
    logging.getLogger("opentelemetry.sdk._shared_internal").setLevel(logging.ERROR)

    exporter = DropExporter()
    instrumentation = tracescore.init(service_name="sdk-overhead-bench", exporter=exporter)
    print(f"python {sys.version.split()[0]}, opentelemetry-sdk TracerProvider, BatchSpanProcessor defaults")
    cases = run_timing(args.calls, args.repeat)
    print_timing(cases, args.calls, args.repeat)
    run_components(exporter, instrumentation, args.calls, args.repeat)
    run_memory(exporter, instrumentation, args.memory_calls)
    run_encode(exporter, instrumentation, args.repeat)
    tracescore.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
