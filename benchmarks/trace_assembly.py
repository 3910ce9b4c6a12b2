"""Decode + assemble + recognise on the unsampled path, through a real Kafka broker, on one core.

    python benchmarks/trace_assembly.py [--traces 20000] [--spans-per-trace 5] [--shape both]
                                        [--layout both] [--rejoin-traces N]

Two shapes:

- `openinference`: CHAIN -> RETRIEVER, EMBEDDING, PROMPT, LLM (5 spans, ~2 KB of attributes each trace), one
  OTLP protobuf message per trace keyed by trace id, as the Collector (`partition_traces_by_id`) writes them;
- `tracescore`: one `@tracescore.rag` span per trace with 3 documents of 1 KB, written by the real SDK
  (tracescore.init + the decorator; the span carries tracescore, OpenInference and GenAI attributes), in
  exports of 500 spans laid out as the SDK's Kafka exporter writes them: `per_partition` (the default: one
  message per partition per export, up to 256 KiB) and `per_trace` (the Collector's layout).

Each is produced to a real Apache Kafka 4 broker. Then, with this process pinned to one core (the broker's
JVM runs on the other), it times, as spans per wall second and per CPU second of this process:

1. in process, no Kafka: decode_message + TraceAssembler + extract (+ revise) over the same message bytes;
2. `EvaluationConsumer` reading the topic from the start with a policy that admits nothing (every trace is
   assembled and its interactions recognised, none is scored), grace period 0 so the figure is CPU, not the
   grace wait; spans/s from its first polled batch to the last trace read;
3. a bare kafka-python KafkaConsumer polling the same topic, records unused: kafka-python's own share.

Also: memory per buffered trace (tracemalloc, 10,000 five-span traces held in the assembler).

    python benchmarks/trace_assembly.py --split-backlog [--traces 40000] [--trees /work/main .]
                                        [--sink-latency-ms 5] [--burn]

`--split-backlog`: the assembly's grace under a backlog. Traces of three spans, each split over two messages
(its root and answer, then its retriever's documents ~100 messages later, 0.5 s later in record time: within
the 2 s grace), written an hour before they are read: a consumer restarting after an hour down. Each tree
given (its code on PYTHONPATH, in a process of its own, one after the other, on the same topic with a group
of its own) reads it with every trace scored (the offline judge, slower than the reading: the consumer
pauses its partitions while the judges catch up, as with an LLM judge) and written by a sink on the
consumer's thread (`--sink-latency-ms` a record, 5 ms: a loop that spends seconds on one batch, as a
CPU-starved one does), pinned to one core (with `--burn`, shared with a busy process). Printed
per tree: traces read (more than written: a trace read before its documents came, and again), late spans
that rebuilt a trace, readings skipped, records written, and the wall time. The backlog must outlast what a
consumer reads in its first grace period (~10,000 traces a second here), else every tree reads it all
before it releases a trace, and nothing is split.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import subprocess
import sys
import time
import tracemalloc
import uuid
from collections.abc import Sequence

from kafka import KafkaConsumer
from kafka.admin import NewTopic
from kafka.consumer.fetcher import ConsumerRecord
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore
from tracescore.consume import (
    AssemblySettings,
    ConsumerSettings,
    EvaluationConsumer,
    TraceAssembler,
    decode_message,
)
from tracescore.consume._pipeline import Admitted
from tracescore.emit import EVIDENCE_CHARS, turn_evidence
from tracescore.export import KafkaProducerSettings, encode_partition_messages, encode_trace_messages
from tracescore.extract import extract
from tracescore.model import EvaluationRecord, Trace
from tracescore.sample import CascadePolicy, SamplingConfig
from tracescore.score.judges import OfflineJudge
from tracescore.score.metrics import Faithfulness
from tracescore.testing.kafka_broker import KafkaBroker
from tracescore.testing.kafka_topics import input_producer

KIND = "openinference.span.kind"
PARTITIONS = (0, 1, 2)
DOC = "The Aurora X2 battery lasts 14 hours on a single charge and recharges in 90 minutes. " * 4


Message = tuple[int | None, bytes | None, bytes]  # (partition, or None: the key's; key; OTLP bytes)


def build_messages(traces: int, spans_per_trace: int) -> list[Message]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: "bench-shop"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("openinference.instrumentation.langchain")
    kinds = ["RETRIEVER", "EMBEDDING", "PROMPT", "LLM", "TOOL"]
    messages = []
    for i in range(traces):
        exporter.clear()
        question = f"How long does the Aurora X2 battery last? ({i})"
        with tracer.start_as_current_span("RunnableSequence") as chain:
            chain.set_attributes({KIND: "CHAIN", "input.value": question, "output.value": "14 hours."})
            for k in range(spans_per_trace - 1):
                kind = kinds[k % len(kinds)]
                with tracer.start_as_current_span(kind.title()) as child:
                    child.set_attribute(KIND, kind)
                    if kind == "RETRIEVER":
                        child.set_attribute("input.value", question)
                        child.set_attribute("retrieval.documents.0.document.content", DOC)
                        child.set_attribute("retrieval.documents.1.document.content", DOC[::-1])
                    elif kind == "LLM":
                        child.set_attribute("llm.output_messages.0.message.content", "14 hours.")
        spans = exporter.get_finished_spans()
        key = format(spans[0].context.trace_id, "032x").encode()
        messages.append((None, key, encode_spans(spans).SerializeToString()))
    return messages


def document_pool(size: int = 2_000, seed: int = 17) -> list[str]:
    """1 KB documents of made-up words drawn with Zipf frequencies: gzip shrinks them ~2.6x alone and ~3.6x
    in a 256 KiB message, as it does real retrieved text (a repeated sentence would shrink 25x and flatter
    the compressed path)."""
    rng = random.Random(seed)
    syllables = (
        "ba ce di fo gu ha je ki lo mu na pe qui ro su ta ve wi xo yu za an er in on ur st th ch sh".split()
    )
    vocabulary = sorted({"".join(rng.choices(syllables, k=rng.randint(1, 4))) for _ in range(4_000)})
    rng.shuffle(vocabulary)
    weights = list(itertools.accumulate(1 / rank for rank in range(1, len(vocabulary) + 1)))
    return [
        (f"Document {d}: " + " ".join(rng.choices(vocabulary, cum_weights=weights, k=300)))[:1024]
        for d in range(size)
    ]


@tracescore.rag(route="/qa")
def answer(query: str, contexts: list[str], reply: str) -> str:
    return reply


def build_tracescore_messages(traces: int, layout: str) -> list[Message]:
    """One `@tracescore.rag` span per trace, 3 documents of 1 KB, through the real SDK, in exports of 500
    spans laid out as the SDK's Kafka exporter writes them: `per_partition` (its default) or `per_trace`."""
    exporter = InMemorySpanExporter()
    instrumentation = tracescore.init(service_name="bench-rag-app", exporter=exporter)
    pool = document_pool()
    rng = random.Random(29)
    max_bytes = KafkaProducerSettings().span_message_max_bytes()
    messages: list[Message] = []
    exported = 0
    for i in range(traces):
        answer(f"How long does the Aurora X2 battery last? ({i})", rng.sample(pool, 3), "14 hours.")
        if i % 500 == 499 or i == traces - 1:
            instrumentation.force_flush()
            spans = exporter.get_finished_spans()
            exported += len(spans)
            if layout == "per_trace":
                messages += [(None, key, value) for key, value in encode_trace_messages(spans)]
            else:
                messages += [
                    (partition, key, value)
                    for partition, key, value, _ in encode_partition_messages(spans, PARTITIONS, max_bytes)
                ]
            exporter.clear()
    tracescore.shutdown()
    if exported != traces:
        raise RuntimeError(f"the SDK exported {exported} of {traces} spans")
    return messages


def in_process(messages: Sequence[Message], assembly: AssemblySettings) -> tuple[float, float]:
    """Spans per wall second and per CPU second of decode + assemble + extract (and, for a conversation
    turn, the documents the consumer writes for `tracescore conversations`), without Kafka."""
    assembler = TraceAssembler(assembly)
    spans = 0
    started, cpu = time.perf_counter(), time.process_time()
    for offset, (_, _, value) in enumerate(messages):
        decoded = decode_message(value)
        spans += len(decoded)
        released = assembler.add(decoded, 0, offset, len(value)) + assembler.ready()
        for trace in released:
            found = extract(trace)
            revisions, _ = assembler.revise(trace, found.interactions, found.skips)  # as the consumer does
            for revision in revisions:  # a conversation turn's documents, written scored or not
                evidence = turn_evidence(revision.interaction, EVIDENCE_CHARS, revision.revision)
                if evidence is not None:  # only with a conversation id: the rest cost this test
                    evidence.model_dump_json().encode()
    return spans / (time.perf_counter() - started), spans / (time.process_time() - cpu)


class TimedConsumer(EvaluationConsumer):
    def __init__(self, *args: object, target_traces: int, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.target_traces = target_traces
        self.first_at: float | None = None
        self.done_at: float | None = None
        self.first_cpu = self.done_cpu = 0.0
        self._extract_and_admit = self._pipeline.extract_and_admit
        self._pipeline.extract_and_admit = self._timed_extract_and_admit  # type: ignore[method-assign]

    def _take(self, batch: Sequence[ConsumerRecord]) -> None:
        if batch and self.first_at is None:
            self.first_at, self.first_cpu = time.perf_counter(), time.process_time()
        super()._take(batch)

    def _timed_extract_and_admit(self, traces: list[Trace]) -> list[Admitted]:
        admitted = self._extract_and_admit(traces)
        if self.done_at is None and self.stats.traces >= self.target_traces:
            self.done_at, self.done_cpu = time.perf_counter(), time.process_time()
            self.stop()
        return admitted


def through_kafka(
    bootstrap: str, topic: str, traces: int, assembly: AssemblySettings
) -> tuple[float, float, TimedConsumer]:
    settings = ConsumerSettings(
        bootstrap_servers=bootstrap,
        topic=topic,
        group_id=f"bench-{uuid.uuid4().hex[:8]}",
        evaluations_topic=f"{topic}.evaluations",
        dlq_topic=f"{topic}.dlq",
        max_poll_records=2000,
        idle_timeout_s=30,
        assembly=assembly,
    )
    consumer = TimedConsumer(
        settings,
        judge=OfflineJudge(),
        metrics=[Faithfulness()],
        policy=CascadePolicy(SamplingConfig(default_rate=0.0)),
        target_traces=traces,
    )
    consumer.run()
    if consumer.first_at is None or consumer.done_at is None:
        raise RuntimeError(f"read {consumer.stats.traces} of {traces} traces")
    spans = consumer.stats.spans
    wall, cpu = consumer.done_at - consumer.first_at, consumer.done_cpu - consumer.first_cpu
    return spans / wall, spans / cpu, consumer


def raw_poll(bootstrap: str, topic: str, messages: int) -> float:
    """CPU µs per message of kafka-python alone: a bare KafkaConsumer polling the topic, nothing done with
    the records (the floor under the consumer's own work; its IO thread included)."""
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"raw-{uuid.uuid4().hex[:8]}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_poll_records=2000,
    )
    read, first = 0, None
    while read < messages:
        got = sum(len(batch) for batch in consumer.poll(timeout_ms=1000).values())
        if got and first is None:
            first = time.process_time()
        read += got
    cpu = time.process_time() - (first or 0.0)
    consumer.close()
    return cpu / read * 1e6


def memory_per_trace(messages: Sequence[Message], held: int = 10_000) -> float:
    decoded = [decode_message(value) for _, _, value in messages[:held]]
    assembler = TraceAssembler(AssemblySettings(grace_s=3600, max_wait_s=3600))
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for offset, spans in enumerate(decoded):
        assembler.add(spans, 0, offset, 2000)
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    # The decoded spans are the trace's content; the rest is the buffer's own bookkeeping.
    return (after - before) / len(decoded)


def decoded_size_per_trace(messages: Sequence[Message], sample: int = 2_000) -> float:
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = [decode_message(value) for _, _, value in messages[:sample]]
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del kept
    return (after - before) / sample


def run_shape(
    broker: KafkaBroker,
    shape: str,
    messages: list[Message],
    assembly: AssemblySettings,
    *,
    sdk_producer: bool,
) -> None:
    decoded = [decode_message(value) for _, _, value in messages]
    spans = sum(len(d) for d in decoded)
    traces = len({span.trace_id for d in decoded for span in d})
    del decoded
    mean_bytes = sum(len(value) for _, _, value in messages) / len(messages)
    topic = f"assembly-{shape.replace(' ', '-')}-{uuid.uuid4().hex[:8]}"
    # as the SDK's exporter sends them (its producer settings, gzip included), or as a Collector's kafka
    # exporter with default settings: uncompressed
    config = KafkaProducerSettings().producer_config() if sdk_producer else {"linger_ms": 20, "acks": "all"}
    producer = input_producer(broker.bootstrap_servers, [NewTopic(topic, len(PARTITIONS), 1)], **config)
    for partition, key, value in messages:
        producer.send(topic, key=key, value=value, partition=partition)
    producer.flush()
    producer.close()
    alone, alone_cpu = in_process(messages, assembly)
    kafka_rate, kafka_cpu, consumer = through_kafka(broker.bootstrap_servers, topic, traces, assembly)
    stats = consumer.stats
    print(
        f"\n{shape}: {traces} traces, {spans / traces:.0f} spans each, in {len(messages)} messages "
        f"of {mean_bytes:,.0f} B"
    )
    print(
        f"decode+assemble+extract, in process      : {alone:10,.0f} spans/s  {alone_cpu:10,.0f} spans/CPU-s"
    )
    print(
        f"through Kafka (EvaluationConsumer, 1 core): {kafka_rate:10,.0f} spans/s  {kafka_cpu:10,.0f} "
        f"spans/CPU-s  ({kafka_cpu / alone_cpu:.2f}x)"
    )
    print(f"  traces read {stats.traces}, interactions {stats.interactions}, sampled out {stats.sampled_out}")
    per_span = (1 / kafka_cpu - 1 / alone_cpu) * 1e6
    floor = raw_poll(broker.bootstrap_servers, topic, len(messages)) * len(messages) / spans
    print(f"  Kafka path's own CPU per span: {per_span:.0f} us (kafka-python alone: {floor:.0f} us)")


def build_split_messages(traces: int, gap: int = 50) -> list[Message]:
    """Traces CHAIN -> RETRIEVER, LLM, each in two messages keyed by its trace id: its CHAIN and LLM, then its
    RETRIEVER `gap` traces later (2 * gap messages)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: "bench-shop"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("openinference.instrumentation.langchain")
    first: list[Message] = []
    later: list[Message] = []
    for i in range(traces):
        exporter.clear()
        question = f"How long does the Aurora X2 battery last? ({i})"
        with tracer.start_as_current_span("RunnableSequence") as chain:
            chain.set_attributes({KIND: "CHAIN", "input.value": question, "output.value": "14 hours."})
            with tracer.start_as_current_span("Retriever") as retriever:
                retriever.set_attributes(
                    {
                        KIND: "RETRIEVER",
                        "input.value": question,
                        "retrieval.documents.0.document.content": DOC,
                    }
                )
            with tracer.start_as_current_span("ChatModel") as llm:
                llm.set_attributes({KIND: "LLM", "llm.output_messages.0.message.content": "14 hours."})
        spans = exporter.get_finished_spans()
        key = format(spans[0].context.trace_id, "032x").encode()
        documents = [s for s in spans if s.name == "Retriever"]
        rest = [s for s in spans if s.name != "Retriever"]
        first.append((None, key, encode_spans(rest).SerializeToString()))
        later.append((None, key, encode_spans(documents).SerializeToString()))
    out: list[Message] = []
    for i in range(traces + gap):
        if i < traces:
            out.append(first[i])
        if i >= gap:
            out.append(later[i - gap])
    return out


def split_backlog(traces: int, trees: Sequence[str], latency_ms: float, burn: bool) -> None:
    messages = build_split_messages(traces)
    with KafkaBroker(heap="1g") as broker:
        topic = f"backlog-{uuid.uuid4().hex[:8]}"
        producer = input_producer(broker.bootstrap_servers, [NewTopic(topic, len(PARTITIONS), 1)], acks="all")
        written = time.time() * 1000 - 3_600_000  # an hour ago, 5 ms apart: 10 s of traffic
        for index, (_, key, value) in enumerate(messages):
            producer.send(topic, key=key, value=value, timestamp_ms=int(written + 5 * index))
        producer.flush()
        producer.close()
        print(f"{traces} traces in {len(messages)} messages on {len(PARTITIONS)} partitions, written 1 h ago")
        for tree in trees:
            # A busy process on the consumer's core: only if asked, on a machine others share.
            burner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if burn else None
            try:
                if burner is not None:
                    os.sched_setaffinity(burner.pid, {0})
                env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
                worker = [
                    sys.executable,
                    __file__,
                    "--split-worker",
                    broker.bootstrap_servers,
                    topic,
                    str(latency_ms),
                ]
                out = subprocess.run(worker, env=env, check=True, capture_output=True, text=True).stdout
            finally:
                if burner is not None:
                    burner.kill()
                    burner.wait()
            figures = json.loads(out.strip().splitlines()[-1])
            print(f"{tree}: " + ", ".join(f"{name} {value}" for name, value in figures.items()))


def split_worker(bootstrap: str, topic: str, latency_ms: str) -> None:
    """One tree's reading of the backlog (run with that tree on PYTHONPATH): its figures as a JSON line."""
    os.sched_setaffinity(0, {0})
    settings = ConsumerSettings(
        bootstrap_servers=bootstrap,
        topic=topic,
        group_id=f"backlog-{uuid.uuid4().hex[:8]}",
        evaluations_topic=f"{topic}.evaluations",
        evaluation_spans_topic=f"{topic}.evaluation-spans",
        dlq_topic=f"{topic}.dlq",
        idle_timeout_s=5,
    )
    records: list[str] = []
    latency_s = float(latency_ms) / 1000

    def write(record: EvaluationRecord) -> None:  # a sink writing each record in a call of its own
        time.sleep(latency_s)
        records.append(record.trace_id)

    consumer = EvaluationConsumer(
        settings,
        judge=OfflineJudge(),
        metrics=[Faithfulness()],
        on_evaluation=lambda r: records.append(r.trace_id),
    )
    started = time.perf_counter()
    stats = consumer.run()
    wall = time.perf_counter() - started - settings.idle_timeout_s  # the idle wait at the end left out
    figures = {
        "traces read": stats.traces,
        "late spans rejoined": stats.assembly["late_spans_rejoined"],
        "rescored": stats.assembly["rescored"],
        "readings skipped": sum(stats.skipped.values()),
        "records": len(records),
        "traces scored": len(set(records)),
        "pauses": stats.pauses,
        "wall s": round(wall, 1),
    }
    print(json.dumps(figures))


def main() -> None:
    if sys.argv[1:2] == ["--split-worker"]:
        split_worker(*sys.argv[2:5])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=20_000)
    parser.add_argument("--spans-per-trace", type=int, default=5)
    parser.add_argument("--shape", choices=["openinference", "tracescore", "both"], default="both")
    parser.add_argument(
        "--layout",
        choices=["per_partition", "per_trace", "both"],
        default="both",
        help="the tracescore shape's Kafka layout: the SDK's default (per_partition) and/or the Collector's "
        "partition_traces_by_id (per_trace); the openinference shape is always per trace",
    )
    parser.add_argument(
        "--rejoin-traces", type=int, default=None, help="assembly rejoin_traces (default: the default)"
    )
    parser.add_argument("--split-backlog", action="store_true", help="the grace under a backlog (see above)")
    parser.add_argument("--trees", nargs="+", default=["."], help="--split-backlog: the trees to compare")
    parser.add_argument(
        "--sink-latency-ms", type=float, default=5, help="--split-backlog: the sink's time per record (ms)"
    )
    parser.add_argument(
        "--burn", action="store_true", help="--split-backlog: a busy process shares the consumer's core"
    )
    args = parser.parse_args()
    if args.split_backlog:
        split_backlog(args.traces, args.trees, args.sink_latency_ms, args.burn)
        return
    rejoin = {} if args.rejoin_traces is None else {"rejoin_traces": args.rejoin_traces}
    assembly = AssemblySettings(grace_s=0, **rejoin)

    shapes: dict[str, list[Message]] = {}
    if args.shape in ("openinference", "both"):
        print(f"building {args.traces} OpenInference traces of {args.spans_per_trace} spans ...", flush=True)
        shapes["openinference"] = build_messages(args.traces, args.spans_per_trace)
    if args.shape in ("tracescore", "both"):
        print(f"building {args.traces} @tracescore.rag traces through the SDK ...", flush=True)
        for layout in ("per_partition", "per_trace") if args.layout == "both" else (args.layout,):
            shapes[f"tracescore {layout}"] = build_tracescore_messages(args.traces, layout)
    with KafkaBroker(heap="1g") as broker:
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {0})  # one core for this process; the broker's JVM keeps the other
        for shape, messages in shapes.items():
            run_shape(broker, shape, messages, assembly, sdk_producer=shape.startswith("tracescore"))
    if "openinference" in shapes:
        per_trace = memory_per_trace(shapes["openinference"])
        content = decoded_size_per_trace(shapes["openinference"])
        print(f"\nmemory per buffered OpenInference trace: {per_trace / 1024:.1f} KiB of buffer bookkeeping")
        print(f"  + the decoded spans themselves: {content / 1024:.1f} KiB per trace")


if __name__ == "__main__":
    main()
