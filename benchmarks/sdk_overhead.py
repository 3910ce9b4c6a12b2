"""What `@tracescore.rag` costs the application's call against the same span written by hand with the
OpenTelemetry API (same name, same attributes, same values), measured in the same repetitions.

    python benchmarks/sdk_overhead.py [--calls 5000] [--repeat 7]

Two configurations, each in its own process (the global TracerProvider is set once per process):
  drop        tracescore.init(exporter=...) with an exporter that drops spans: export runs on the export
              thread as in production, so what is timed is the call itself;
  kafka-down  tracescore.init(bootstrap_servers=<a port nobody listens on>): the real Kafka exporter with the
              broker down, its queue full, every span counted as dropped.
Cases: a short answer with 10 documents of 2 KB passed to `@rag`; the same documents returned by a
`@retriever` inside `@rag` (two spans, rolled up) against two hand-written spans. The target is <= 1.10x.

Clock: the process's CPU time (`time.process_time`: the application's thread and the export thread), what
the SDK costs the application; wall time is reported beside it. The two sides alternate in blocks of 100
calls; a repetition's ratio is the median of its blocks' ratios (decorated block / the hand-written block
next to it), so a block hit by a garbage collection of the whole heap or by another process on a shared
machine does not decide the figure (summing the blocks instead moved single repetitions by +-20%).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import operator
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

QUERY = "Which magazine was started first, Arthur's Magazine or First for Women?"
ANSWER = "Arthur's Magazine was started first (1844); First for Women dates from 1989."
_BASE = "Arthur's Magazine (1844-1846) was an American literary periodical published in Philadelphia. "
DOCUMENTS = [(f"[{n}] " + _BASE * 30)[:2048] for n in range(10)]


def _run_one(mode: str, calls: int, repeat: int) -> dict[str, Any]:
    # Imported here: the parent process only starts the children.
    from opentelemetry import trace
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    import tracescore
    from tracescore import semconv
    from tracescore.testing import closed_port

    class DropExporter(SpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    if mode == "drop":
        instrumentation = tracescore.init("bench", exporter=DropExporter())
    else:
        port = contextlib.ExitStack().enter_context(closed_port())  # held until this child process ends
        instrumentation = tracescore.init("bench", bootstrap_servers=f"127.0.0.1:{port}")

    tracer = trace.get_tracer(semconv.SDK_SCOPE)  # the same scope, so hand-written spans are exported alike
    user = '[{"role": "user", "parts": [{"type": "text", "content": %s}]}]'
    assistant = '[{"role": "assistant", "parts": [{"type": "text", "content": %s}], "finish_reason": "stop"}]'

    def body(query: str, contexts: list[str]) -> str:
        return ANSWER

    def by_hand(query: str, contexts: list[str]) -> str:
        with tracer.start_as_current_span("body") as span:
            attributes = {
                semconv.OPENINFERENCE_SPAN_KIND: "CHAIN",
                semconv.GEN_AI_OPERATION_NAME: "invoke_workflow",
                semconv.INPUT_VALUE: query,
                semconv.INPUT_MIME_TYPE: "text/plain",
                semconv.GEN_AI_INPUT_MESSAGES: user % json.dumps(query),
            }
            for index, text in enumerate(contexts):
                attributes[semconv.document_key(index, "content")] = text
            span.set_attributes(attributes)
            result = body(query, contexts)
            span.set_attributes(
                {
                    semconv.OUTPUT_VALUE: result,
                    semconv.OUTPUT_MIME_TYPE: "text/plain",
                    semconv.GEN_AI_OUTPUT_MESSAGES: assistant % json.dumps(result),
                }
            )
            return result

    def search(query: str) -> list[str]:
        return DOCUMENTS

    def search_by_hand(query: str) -> list[str]:
        with tracer.start_as_current_span("search") as span:
            span.set_attributes(
                {
                    semconv.OPENINFERENCE_SPAN_KIND: "RETRIEVER",
                    semconv.GEN_AI_OPERATION_NAME: "retrieval",
                    semconv.INPUT_VALUE: query,
                    semconv.GEN_AI_RETRIEVAL_QUERY_TEXT: query,
                    semconv.INPUT_MIME_TYPE: "text/plain",
                }
            )
            documents = search(query)
            attributes = {semconv.document_key(i, "content"): text for i, text in enumerate(documents)}
            attributes[semconv.GEN_AI_RETRIEVAL_DOCUMENTS] = json.dumps([{} for _ in documents])
            span.set_attributes(attributes)
            return documents

    def pipeline_by_hand(query: str) -> str:
        with tracer.start_as_current_span("pipeline") as span:
            span.set_attributes(
                {
                    semconv.OPENINFERENCE_SPAN_KIND: "CHAIN",
                    semconv.GEN_AI_OPERATION_NAME: "invoke_workflow",
                    semconv.INPUT_VALUE: query,
                    semconv.INPUT_MIME_TYPE: "text/plain",
                    semconv.GEN_AI_INPUT_MESSAGES: user % json.dumps(query),
                }
            )
            documents = search_by_hand(query)
            span.set_attributes({semconv.document_key(i, "content"): t for i, t in enumerate(documents)})
            result = ANSWER
            span.set_attributes(
                {
                    semconv.OUTPUT_VALUE: result,
                    semconv.OUTPUT_MIME_TYPE: "text/plain",
                    semconv.GEN_AI_OUTPUT_MESSAGES: assistant % json.dumps(result),
                }
            )
            return result

    decorated_body = tracescore.rag(name="body")(body)
    decorated_search = tracescore.retriever(name="search")(search)

    @tracescore.rag(name="pipeline")
    def decorated_pipeline(query: str) -> str:
        decorated_search(query)
        return ANSWER

    cases: list[tuple[str, Callable[[], Any], Callable[[], Any]]] = [
        (
            "@rag, 10 x 2 KB documents",
            lambda: decorated_body(QUERY, DOCUMENTS),
            lambda: by_hand(QUERY, DOCUMENTS),
        ),
        ("@retriever in @rag, 10 x 2 KB", lambda: decorated_pipeline(QUERY), lambda: pipeline_by_hand(QUERY)),
    ]
    results: dict[str, Any] = {"mode": mode, "cases": []}
    for label, decorated, hand in cases:
        ratios, wall_ratios, decorated_us, hand_us = [], [], [], []
        for _ in range(repeat):
            # Interleaved in small blocks so drift on a shared machine hits both sides alike.
            cpu: dict[str, list[float]] = {"decorated": [], "hand": []}
            wall: dict[str, list[float]] = {"decorated": [], "hand": []}
            for _ in range(calls // 100):
                for name, fn in (("decorated", decorated), ("hand", hand)):
                    start_cpu, start_wall = time.process_time(), time.perf_counter()
                    for _ in range(100):
                        fn()
                    cpu[name].append(time.process_time() - start_cpu)
                    wall[name].append(time.perf_counter() - start_wall)
            decorated_us.append(sum(cpu["decorated"]) / calls * 1e6)
            hand_us.append(sum(cpu["hand"]) / calls * 1e6)
            ratios.append(statistics.median(map(operator.truediv, cpu["decorated"], cpu["hand"])))
            wall_ratios.append(statistics.median(map(operator.truediv, wall["decorated"], wall["hand"])))
        results["cases"].append(
            {
                "case": label,
                "decorated_us": statistics.median(decorated_us),
                "hand_us": statistics.median(hand_us),
                "ratio": statistics.median(ratios),
                "ratio_range": [min(ratios), max(ratios)],
                "wall_ratio": statistics.median(wall_ratios),
            }
        )
    started = time.perf_counter()
    tracescore.shutdown(timeout_s=2)
    results["shutdown_s"] = time.perf_counter() - started
    results["stats"] = instrumentation.stats()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--mode", choices=["drop", "kafka-down"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mode:
        print(json.dumps(_run_one(args.mode, args.calls, args.repeat)))
        return
    print(
        f"python {sys.version.split()[0]}; {args.calls} calls x {args.repeat} repetitions, median per call, "
        "CPU time (wall-time ratio last)"
    )
    print(
        f"{'exporter':<12}{'case':<34}{'tracescore us':>14}{'by hand us':>12}{'ratio':>8}   ratio range"
        "   wall ratio"
    )
    for mode in ("drop", "kafka-down"):
        done = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--mode", mode, "--calls", str(args.calls),
             "--repeat", str(args.repeat)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        result = json.loads(done.stdout.strip().splitlines()[-1])
        for case in result["cases"]:
            low, high = case["ratio_range"]
            print(
                f"{mode:<12}{case['case']:<34}{case['decorated_us']:>14.1f}{case['hand_us']:>12.1f}"
                f"{case['ratio']:>7.2f}x   {low:.2f}-{high:.2f}{case['wall_ratio']:>12.2f}x"
            )
        dropped = sum(result["stats"]["dropped"].values())
        print(f"{mode:<12}shutdown {result['shutdown_s']:.2f} s (bound 2 s); dropped and counted: {dropped}")


if __name__ == "__main__":
    main()
