"""Which kafka-python consumer settings (and gc tuning) make the unsampled path cheaper through Kafka.

    python benchmarks/kafka_consumer_levers.py [--traces 20000] [--rounds 3] [--layout per_partition]

The `tracescore` shape of benchmarks/trace_assembly.py (one `@tracescore.rag` span per trace, 3 documents of
1 KB, written by the real SDK) is produced once to a real Kafka 4 broker. Then `EvaluationConsumer` (sampler
keeping nothing, grace 0, max_poll_records 2000 as there, this process pinned to one core) reads the
topic from the start once per variant, each a new group: the service as built (its defaults), with one
setting changed (a consumer setting, a kafka-python client setting, or gc.freeze() before the run).
Variants run in a rotated order in every round, and each is compared with the baseline of its own round
(the machine is shared and noisy: only ratios within a round mean something); the table gives the median
ratio over rounds and each round's.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kafka import KafkaConsumer
from kafka.admin import NewTopic
from trace_assembly import PARTITIONS, build_tracescore_messages, through_kafka

from tracescore.consume import AssemblySettings, _clients
from tracescore.testing.kafka_broker import KafkaBroker
from tracescore.testing.kafka_topics import input_producer

# name -> (kafka-python KafkaConsumer overrides, TRACESCORE_* environment, gc.freeze after startup)
VARIANTS: dict[str, tuple[dict[str, Any], dict[str, str], bool]] = {
    "baseline (as built)": ({}, {}, False),
    "gc_gen0_threshold=0 (Python's 700)": ({}, {"TRACESCORE_GC_GEN0_THRESHOLD": "0"}, False),
    "gc_gen0_threshold=10000": ({}, {"TRACESCORE_GC_GEN0_THRESHOLD": "10000"}, False),
    "+ gc.freeze": ({}, {}, True),
    "check_crcs=False": ({"check_crcs": False}, {}, False),
    "max_partition_fetch_bytes=8MB": ({"max_partition_fetch_bytes": 8 * 1024 * 1024}, {}, False),
    "fetch_min_bytes=256KB": ({"fetch_min_bytes": 256 * 1024}, {}, False),
    "receive_buffer_bytes=4MB": ({"receive_buffer_bytes": 4 * 1024 * 1024}, {}, False),
    "max_poll_records=500": ({"max_poll_records": 500}, {}, False),
    "metrics_enabled=False": ({"metrics_enabled": False}, {}, False),
}


@contextmanager
def client_overrides(overrides: dict[str, Any]) -> Iterator[None]:
    """The service's own consumer construction (consume._clients), with `overrides` on top."""
    original = _clients.KafkaConsumer

    def build(*args: Any, **kwargs: Any) -> KafkaConsumer:
        return original(*args, **{**kwargs, **overrides})

    _clients.KafkaConsumer = build  # type: ignore[assignment,misc]
    try:
        yield
    finally:
        _clients.KafkaConsumer = original  # type: ignore[misc]


@contextmanager
def isolated(environment: dict[str, str], freeze: bool) -> Iterator[None]:
    """`environment` set and the collector frozen for one run; Python's gc thresholds back afterwards (the
    consumer sets generation 0's for the process when it connects)."""
    threshold = gc.get_threshold()
    saved = {name: os.environ.get(name) for name in environment}
    os.environ.update(environment)
    gc.collect()
    if freeze:
        gc.freeze()  # what exists at startup is never scanned again
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=None, help="variant names to run (baseline always)")
    parser.add_argument(
        "--layout", choices=("per_partition", "per_trace"), default="per_partition", help="the SDK's layout"
    )
    args = parser.parse_args()
    variants = {
        name: v
        for name, v in VARIANTS.items()
        if args.only is None or name in args.only or "baseline" in name
    }
    print(f"building {args.traces} @tracescore.rag traces through the SDK ...", flush=True)
    messages = build_tracescore_messages(args.traces, args.layout)
    assembly = AssemblySettings(grace_s=0)
    rates: dict[str, list[float]] = {name: [] for name in variants}
    ratios: dict[str, list[float]] = {name: [] for name in variants}
    with KafkaBroker(heap="1g") as broker:
        topic = f"levers-{uuid.uuid4().hex[:8]}"
        producer = input_producer(
            broker.bootstrap_servers, [NewTopic(topic, len(PARTITIONS), 1)], linger_ms=20, acks="all"
        )
        for partition, key, value in messages:
            producer.send(topic, key=key, value=value, partition=partition)
        producer.flush()
        producer.close()
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {0})  # one core for this process; the broker's JVM keeps the other
        names = list(variants)
        for round_ in range(args.rounds):
            order = names[round_ % len(names) :] + names[: round_ % len(names)]
            this_round: dict[str, float] = {}
            for name in order:
                overrides, environment, freeze = variants[name]
                with client_overrides(overrides), isolated(environment, freeze):
                    _, cpu_rate, _ = through_kafka(broker.bootstrap_servers, topic, args.traces, assembly)
                this_round[name] = cpu_rate
                rates[name].append(cpu_rate)
                print(f"  round {round_ + 1}: {name:32s} {cpu_rate:10,.0f} spans/CPU-s", flush=True)
            for name in names:
                ratios[name].append(this_round[name] / this_round[names[0]])
    size = sum(len(v) for _, _, v in messages) / len(messages)
    print(f"\n{args.traces} traces x 1 span ({args.layout}), {size:.0f} B per message")
    print(f"{'variant':32s} {'median spans/CPU-s':>19s} {'ratio to baseline (per round)':>40s}")
    for name in names:
        per_round = ", ".join(f"{r:.2f}" for r in ratios[name])
        print(
            f"{name:32s} {statistics.median(rates[name]):19,.0f} "
            f"{statistics.median(ratios[name]):8.2f}x  ({per_round})"
        )


if __name__ == "__main__":
    main()
