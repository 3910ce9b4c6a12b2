"""`tracescore consume --sample-ratio 0` against the bare kafka-python client, same messages, one run.

    python benchmarks/unsampled_floor.py [--traces 20000] [--rounds 5] [--layout both] [--against REV]...
                                         [--profile DIR] [--split]

The floor is what any consumer of these messages pays: a bare `KafkaConsumer` (the consumer's
`max_poll_records`) that polls, decodes each OTLP request (`ExportTraceServiceRequest.ParseFromString`) and
touches every span's attributes (each key and value read once). The consumer is the command itself, run in
process through click with its defaults (grace period, late-span memory, metrics, in-process alert, sampling
policy at rate 0): every trace is decoded, assembled, its interactions recognised and offered to the policy,
none scored. Both count CPU seconds of their process (kafka-python's threads included) from their first
non-empty poll to the last span read (the floor) or the last trace read (the consumer, which releases the last
traces once their grace period is over: those idle polls are counted too).

Messages: `trace_assembly`'s `@tracescore.rag` spans (one span a trace, 3 documents of 1 KB, written by the
real SDK and sent with its producer settings, gzip) in the SDK's two layouts: `per_trace` (one message per
trace, the Collector's `partition_traces_by_id`) and `per_partition` (the SDK's default: one message per
partition per export, ~56 spans a message). Each round runs the floor and the consumer on each layout in
fresh processes, alternating which goes first, each pinned to one core (the broker's JVM keeps the other);
the ratio consumer / floor is taken per round and its median printed. `--against REV` (repeatable):
another revision's consumer too (its `tracescore/` exported with git archive, or a folder holding a tree's
`tracescore/` and `benchmarks/`), in the same rounds on the same messages, so before and after are measured
in one run. `--profile DIR`: the consumers also write a cProfile of their
loop there (slower; the ratios of a profiled run are not figures). `--split`: also the consumer's CPU by
part (its main thread's time in kafka-python's poll, in the take, in the release and reading, the rest; its
other threads; the collector, system time and page faults), each against the floor's CPU in the same round.
"""

from __future__ import annotations

import argparse
import ast
import os
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from kafka.admin import NewTopic

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import trace_assembly  # noqa: E402  (sibling scripts, not a package)
from unsampled_against import export  # noqa: E402

from tracescore.export import KafkaProducerSettings  # noqa: E402
from tracescore.testing.kafka_broker import KafkaBroker  # noqa: E402
from tracescore.testing.kafka_topics import input_producer  # noqa: E402

LAYOUTS = ("per_trace", "per_partition")

# A fresh process: pinned to one core, it reads the topic from the start and prints {"spans": n, "cpu": s}.
FLOOR = """
import os, resource, sys, time, uuid
from kafka import KafkaConsumer
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from tracescore.consume import ConsumerSettings
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {0})
bootstrap, topic, total = sys.argv[1], sys.argv[2], int(sys.argv[3])
consumer = KafkaConsumer(
    topic, bootstrap_servers=bootstrap, group_id=f"floor-{uuid.uuid4().hex[:8]}",
    auto_offset_reset="earliest", enable_auto_commit=False,
    max_poll_records=ConsumerSettings().max_poll_records,
)
spans, touched, first = 0, 0, None
while spans < total:
    for records in consumer.poll(timeout_ms=1000).values():
        if first is None:
            first, used = time.process_time(), resource.getrusage(resource.RUSAGE_SELF)
        for record in records:
            request = ExportTraceServiceRequest()
            request.ParseFromString(record.value)
            for resource_spans in request.resource_spans:
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        spans += 1
                        for kv in span.attributes:
                            touched += len(kv.key) + len(kv.value.string_value)
cpu = time.process_time() - first
now = resource.getrusage(resource.RUSAGE_SELF)
consumer.close()
sys_s, faults = now.ru_stime - used.ru_stime, now.ru_minflt - used.ru_minflt
print(repr({"spans": spans, "cpu": cpu, "sys": sys_s, "faults": faults}))
"""

CONSUMER = """
import cProfile, gc, os, resource, sys, time
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {0})
sys.path.insert(0, sys.argv[5])
import trace_assembly
import tracescore.consume
from tracescore.cli import consume

bootstrap, topic, total, profile = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
# Its own thread's CPU, not wall time: under load, or while kafka-python's IO thread holds the GIL, a wall
# clock charges the wait to whatever call the main thread was in.
profiler = cProfile.Profile(time.thread_time) if profile else None
timed = {}
# The main thread's CPU by part, from the first message taken (--split): thread_time around each part.
parts = dict.fromkeys(("poll", "take", "ready", "gc"), 0.0)
at = {}

def collected(phase, info):  # the collector's passes, wherever they fall
    if phase == "start":
        at["gc"] = time.thread_time()
    elif "first" in at:
        parts["gc"] += time.thread_time() - at["gc"]

gc.callbacks.append(collected)

class Timed(trace_assembly.TimedConsumer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        ready = self._pipeline.ready

        def timed_ready():
            started = at["ready"] = time.thread_time()
            out = ready()
            if at.pop("ready", None) is not None:  # else counted when the run was done, within this call
                parts["ready"] += time.thread_time() - started
            return out

        self._pipeline.ready = timed_ready

    def _poll(self, consumer):
        started = time.thread_time()
        polled = super()._poll(consumer)
        if "first" in at:
            parts["poll"] += time.thread_time() - started
        return polled

    def _take(self, batch):
        if batch and self.first_at is None:
            at.update(first=time.thread_time(), used=resource.getrusage(resource.RUSAGE_SELF))
            if profiler is not None:
                profiler.enable()
        started = time.thread_time()
        super()._take(batch)
        parts["take"] += time.thread_time() - started
        if batch:
            at["last_take"] = time.process_time()

    def _timed_extract_and_admit(self, traces):
        admitted = super()._timed_extract_and_admit(traces)
        if self.done_at is not None and not timed:
            now = resource.getrusage(resource.RUSAGE_SELF)
            if "ready" in at:  # done within this ready(): its time so far
                parts["ready"] += time.thread_time() - at.pop("ready")
            timed.update(
                spans=self.stats.spans, cpu=self.done_cpu - self.first_cpu,
                main=time.thread_time() - at["first"], tail=self.done_cpu - at["last_take"],
                sys=now.ru_stime - at["used"].ru_stime, faults=now.ru_minflt - at["used"].ru_minflt, **parts,
            )
            if profiler is not None:
                profiler.disable()
        return admitted

tracescore.consume.EvaluationConsumer = lambda *a, **k: Timed(*a, target_traces=total, **k)
consume.main(
    ["--bootstrap-servers", bootstrap, "--topic", topic, "--group-id", f"consume-{os.getpid()}",
     "--evaluations-topic", f"{topic}.evaluations", "--dlq-topic", f"{topic}.dlq", "--idle-timeout", "60",
     "--sample-ratio", "0"],
    standalone_mode=False,
)
if profiler is not None:
    profiler.dump_stats(profile)
print(repr(timed))
"""


def produce(bootstrap: str, messages: list[trace_assembly.Message]) -> str:
    topic = f"unsampled-{uuid.uuid4().hex[:8]}"
    config = KafkaProducerSettings().producer_config()  # as the SDK's exporter sends them, gzip included
    producer = input_producer(bootstrap, [NewTopic(topic, len(trace_assembly.PARTITIONS), 1)], **config)
    for partition, key, value in messages:
        producer.send(topic, key=key, value=value, partition=partition)
    producer.flush()
    producer.close()
    return topic


def run(script: str, *args: str, tree: Path | None = None) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)} if tree is not None else None  # that tree's tracescore
    child = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
        env=env,
    )
    if child.returncode:
        raise RuntimeError(f"child failed ({child.returncode}):\n{child.stderr[-3000:]}")
    result: dict[str, float] = ast.literal_eval(child.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--layout", choices=[*LAYOUTS, "both"], default="both")
    parser.add_argument(
        "--against",
        action="append",
        default=[],
        help="also the consumer of this revision (or tree), in the same rounds; repeatable",
    )
    parser.add_argument("--profile", type=Path, default=None, help="write the consumer's cProfiles here")
    parser.add_argument("--split", action="store_true", help="also the consumer's CPU by part (see SPLIT)")
    args = parser.parse_args()
    layouts = LAYOUTS if args.layout == "both" else (args.layout,)
    print(f"building {args.traces} @tracescore.rag traces through the SDK ...", flush=True)
    built = {layout: trace_assembly.build_tracescore_messages(args.traces, layout) for layout in layouts}
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        trees = {"this": REPO}
        for number, against in enumerate(args.against):
            given = Path(against)  # a folder holding another tree's tracescore/ and benchmarks/, or a rev
            other = given if given.is_dir() else export(against, Path(folder) / f"other{number}")
            trees[given.name if given.is_dir() else against] = other
        sides = ("floor", *trees)
        results = {layout: {side: [] for side in sides} for layout in layouts}
        details: dict[str, dict[str, list[dict[str, float]]]] = {
            layout: {side: [] for side in sides} for layout in layouts
        }
        with KafkaBroker(heap="1g") as broker:
            topics = {layout: produce(broker.bootstrap_servers, built[layout]) for layout in layouts}
            spans = {layout: args.traces for layout in layouts}  # one span a trace
            for number in range(args.rounds):
                for layout in layouts:
                    common = (broker.bootstrap_servers, topics[layout], str(spans[layout]))
                    shift = number % len(sides)  # who goes first rotates
                    for side in sides[shift:] + sides[:shift]:
                        if side == "floor":
                            got = run(FLOOR, *common)
                        else:
                            name = f"{layout}-{side}-{number}.prof"
                            profile = str(args.profile / name) if args.profile else ""
                            tree = trees[side]
                            got = run(CONSUMER, *common, profile, str(tree / "benchmarks"), tree=tree)
                        if got["spans"] < spans[layout]:
                            raise RuntimeError(f"{side} read {got['spans']} of {spans[layout]} spans")
                        results[layout][side].append(got["spans"] / got["cpu"])
                        details[layout][side].append(got)
                print(
                    f"round {number + 1}: "
                    + ", ".join(
                        f"{layout} {side} {results[layout][side][-1] / results[layout]['floor'][-1]:.2f}"
                        for layout in layouts
                        for side in trees
                    ),
                    flush=True,
                )
    print(f"\nspans per CPU second, median of {args.rounds} rounds (floor and consumers in turn)")
    header = ("layout", "msgs", "spans/msg", "consumer", "floor", "consumer")
    print("{:14s} {:>6s} {:>9s} {:>12s} {:>8s} {:>8s}  /floor".format(*header))
    for layout in layouts:
        floor, messages = results[layout]["floor"], len(built[layout])
        for side in trees:
            ours = results[layout][side]
            ratios = [c / f for c, f in zip(ours, floor, strict=True)]
            print(
                f"{layout:14s} {messages:6d} {spans[layout] / messages:9.1f} {side[:12]:>12s} "
                f"{statistics.median(floor):8,.0f} {statistics.median(ours):8,.0f}  "
                f"{statistics.median(ratios):.2f} ({min(ratios):.2f}..{max(ratios):.2f})"
            )
    if args.split:
        print_split(details, list(trees))


# The consumer's CPU by part, each as a share of the floor's CPU in the same round (a ratio, as robust to the
# machine's load as the main figure): what the consumer spends where the floor spends 1.
SPLIT = (
    ("kafka-python's poll (main thread)", lambda c: c["poll"]),
    ("take: decode, assembly", lambda c: c["take"]),
    ("ready: release, reading", lambda c: c["ready"]),
    ("the loop's other steps", lambda c: c["main"] - c["poll"] - c["take"] - c["ready"]),
    ("other threads", lambda c: c["cpu"] - c["main"]),
    ("all (consumer CPU / floor CPU)", lambda c: c["cpu"]),
    ("  of which the collector", lambda c: c["gc"]),
    ("  of which system time", lambda c: c["sys"]),
    ("  of which after the last message", lambda c: c["tail"]),
)


def print_split(details: dict[str, dict[str, list[dict[str, float]]]], sides: list[str]) -> None:
    for layout, by_side in details.items():
        floors = by_side["floor"]
        rounds = len(floors)
        print(f"\n{layout}: the consumer's CPU by part / the floor's CPU, median (min..max), {rounds} rounds")
        for side in sides:
            print(f"  {side}")
            for name, part in SPLIT:
                shares = [part(c) / f["cpu"] for c, f in zip(by_side[side], floors, strict=True)]
                low, high = min(shares), max(shares)
                print(f"    {name:38s} {statistics.median(shares):.2f} ({low:.2f}..{high:.2f})")
            faults = [c["faults"] / c["spans"] for c in by_side[side]]
            print(f"    {'page faults a span':38s} {statistics.median(faults):.2f}")
        shares = [f["sys"] / f["cpu"] for f in floors]
        faults = [f["faults"] / f["spans"] for f in floors]
        share, fault = statistics.median(shares), statistics.median(faults)
        print(f"  floor: system time {share:.2f} of its CPU, {fault:.2f} page faults a span")


if __name__ == "__main__":
    main()
