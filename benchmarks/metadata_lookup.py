"""What a service's look for a few named topics costs the client and the broker, on a broker holding many
other topics: the look of every topic (kafka-python's `KafkaConsumer.topics()` then `partitions_for_topic`,
what tracescore's looks did: `KafkaAdminClient.list_topics()` asks the broker the same) against the look of
the named topics alone (`tracescore._kafka.topic_partitions`, what they do now).

    python benchmarks/metadata_lookup.py [--extra 1000,3000] [--looks 60] [--rounds 5] [--named 4]

One real broker of its own, `--named` topics of 6 partitions (a service's inputs and outputs), then extra
topics of one partition each, up to each count of `--extra` in turn. At each count, `--rounds` rounds, the
arms alternating within each: `--looks` looks by the full look, then as many by the named one, each on a
probe client of its own (`probe_consumer`, connected first). Timed around the looks alone: the client's CPU
(the process', every thread: kafka-python decodes the answer on its IO thread), the broker's (its JVM's
utime + stime from /proc), and the wall time. The broker's CPU while idle, measured as long as the looks
took, is said beside it and taken off (`broker_net_ms`). Per look, and the full look as a multiple of the
named one in the same run. The load average is said at the start and the end. The last line is JSON.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

from _runs import report
from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import NewTopic

from tracescore._kafka import probe_consumer, topic_partitions
from tracescore.testing.kafka_broker import KafkaBroker

PARTITIONS = 6
BATCH = 250  # topics created per CreateTopics
_TICKS = os.sysconf("SC_CLK_TCK")


def broker_cpu_s(pid: int) -> float:
    """The broker JVM's CPU so far (user + system, every thread), in seconds."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime: the 14th and 15th fields


def full_look(probe: KafkaConsumer, names: list[str]) -> int:
    """The look every topic's: what the services' looks were."""
    present = set(names) & probe.topics()
    return sum(len(probe.partitions_for_topic(t) or ()) for t in present)


def named_look(probe: KafkaConsumer, names: list[str]) -> int:
    """The look of the named topics alone: what they are now."""
    return sum(len(p) for p in topic_partitions(probe, names).values())


ARMS: dict[str, Callable[[KafkaConsumer, list[str]], int]] = {"full": full_look, "named": named_look}


def create(bootstrap: str, names: list[str], partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        for start in range(0, len(names), BATCH):
            batch = [NewTopic(n, partitions, 1) for n in names[start : start + BATCH]]
            admin.create_topics(batch, timeout_ms=60_000)
            admin.wait_for_topics([t.name for t in batch], timeout_ms=120_000)
    finally:
        admin.close()


def measure(broker: KafkaBroker, names: list[str], looks: int, rounds: int) -> dict[str, Any]:
    """The arms, alternating within each of `rounds`, `looks` each a round: CPU and wall per look."""
    assert broker.process is not None
    pid = broker.process.pid
    totals = {arm: {"client_s": 0.0, "broker_s": 0.0, "wall_s": 0.0, "looks": 0} for arm in ARMS}
    found: dict[str, int] = {}
    probes = {arm: probe_consumer({"bootstrap_servers": broker.bootstrap_servers}) for arm in ARMS}
    try:
        for arm, probe in probes.items():  # connected, its first metadata asked: not counted
            found[arm] = ARMS[arm](probe, names)
        for _ in range(rounds):
            for arm, look in ARMS.items():
                probe = probes[arm]
                wall, cpu, jvm = time.perf_counter(), time.process_time(), broker_cpu_s(pid)
                for _ in range(looks):
                    look(probe, names)
                total = totals[arm]
                total["broker_s"] += broker_cpu_s(pid) - jvm
                total["client_s"] += time.process_time() - cpu
                total["wall_s"] += time.perf_counter() - wall
                total["looks"] += looks
    finally:
        for probe in probes.values():
            probe.close()
    idle_s = sum(t["wall_s"] for t in totals.values()) / len(totals)
    jvm = broker_cpu_s(pid)
    time.sleep(idle_s)
    idle_rate = (broker_cpu_s(pid) - jvm) / idle_s  # the broker's CPU a second while nobody asks
    out: dict[str, Any] = {"found_partitions": found, "broker_idle_cpu_per_s": round(idle_rate, 4)}
    for arm, t in totals.items():
        n = t["looks"]
        out[arm] = {
            "client_ms": round(1000 * t["client_s"] / n, 3),
            "broker_ms": round(1000 * t["broker_s"] / n, 3),
            "broker_net_ms": round(1000 * max(0.0, t["broker_s"] - idle_rate * t["wall_s"]) / n, 3),
            "wall_ms": round(1000 * t["wall_s"] / n, 3),
        }
    for what in ("client_ms", "broker_ms", "broker_net_ms", "wall_ms"):
        named = out["named"][what]
        out[f"full_over_named_{what.removesuffix('_ms')}"] = (
            round(out["full"][what] / named, 1) if named else None
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--extra", default="1000,3000", help="counts of other topics on the broker, in turn")
    parser.add_argument("--looks", type=int, default=60, help="looks per arm and round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--named", type=int, default=4, help="the topics a look names")
    args = parser.parse_args()
    counts = sorted(int(c) for c in args.extra.split(","))
    load = [os.getloadavg()[0]]
    names = [f"service.topic-{i}" for i in range(args.named)]
    results: dict[str, Any] = {}
    with KafkaBroker() as broker:
        create(broker.bootstrap_servers, names, PARTITIONS)
        made = 0
        for count in counts:
            create(broker.bootstrap_servers, [f"other.topic-{i:05d}" for i in range(made, count)], 1)
            made = count
            results[str(count)] = at = measure(broker, names, args.looks, args.rounds)
            print(f"{count} other topics: {at}", flush=True)
    load.append(os.getloadavg()[0])
    result = {"extra_topics": counts, "named": args.named, "looks": args.looks * args.rounds, "load": load}
    result["by_extra_topics"] = results
    said = "; ".join(
        f"{count} other topics: the full look costs {r['full']['client_ms']} ms client CPU and "
        f"{r['full']['broker_net_ms']} ms broker CPU, the named look {r['named']['client_ms']} and "
        f"{r['named']['broker_net_ms']} ms ({r['full_over_named_client']}x, "
        f"{r['full_over_named_broker_net']}x)"
        for count, r in results.items()
    )
    report(said, result)


if __name__ == "__main__":
    main()
