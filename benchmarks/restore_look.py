"""What a restore's look for the outputs already written costs (`OutputLog.find`, then `FoundOutputs.add`, as
`tracescore conversations` restores a partition whose meta has no mark for an output topic partition: a look
from the log start), and the looks again before each write while a restore's window is open
(`FoundOutputs.look_again`), against a floor: a bare kafka-python consumer reading the same partitions to the
same ends, touching each message's key and headers.

    python benchmarks/restore_look.py [--records 100000] [--partitions 6] [--unheaded 0.5] [--again 20]
        [--runs 3] [--before DIR]   # git archive <commit> | tar -x -C DIR

Fills two topics of one real broker as the services write them: the conversations topic with conversation
records (keyed by conversation, the output id and digest headers) and the evaluations topic with evaluation
records, `--unheaded` of them as `tracescore consume` writes them (no headers: not an output of the restoring
service) and the rest as grounding revisions (keyed by trace id, with the headers); `--records` in all, half
on each, over `--partitions` partitions each. Then, `--runs` times, alternately: the looks of this tree, the
floor's, and with `--before` the looks of that tree, each arm in a process of its own, each look timed around
itself alone (wall, and the process' CPU, every thread): the first from the log starts, then `--again` looks
from 2 offsets before each partition's end (the floor keeps its consumer for those). Each run says the time of
each look as a multiple of the floor's in that run; the load average is said at the start and the end. The
last line is JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _runs import REPO, report

from tracescore.model import ConversationRecord, EvaluationRecord, MetricStatus, WorstTurn
from tracescore.testing.kafka_broker import KafkaBroker

AGAIN_BACK = 2  # offsets before each end a look again starts from: a few outputs appended since
T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
TURN_REASON = (
    "The answer says refunds are accepted within 60 days, but the retrieved policy says 30 days; "
    "the second claim (free return shipping) is supported by chunk 2."
)


def conversation_output(n: int) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    """The n-th conversation record as `tracescore conversations` writes it: key, value, headers."""
    turns = 3 + n % 5
    trace_ids = [f"{n:024x}{t:08x}" for t in range(turns)]
    span_ids = [f"{n:08x}{t:08x}" for t in range(turns)]
    record = ConversationRecord(
        conversation_id=f"session-{n:08d}", service_name="chat-api", route="/chat", started_at=T0,
        metric="faithfulness", judge="offline", annotator_kind="CODE", selection=None, revision=n % 3,
        supersedes=n % 3 - 1 if n % 3 else None, turns=turns, turns_judged=turns, turns_scored=turns,
        turns_passed=turns - 1, turns_flagged=1, complete=True, score=(turns - 1) / turns, share_lower=0.3,
        share_upper=0.95, confidence=0.95, label="flagged", status=MetricStatus.OK,
        reason=f"{turns - 1} of {turns} scored turns pass faithfulness; worst: {TURN_REASON}",
        worst_turn=WorstTurn(trace_id=trace_ids[-1], span_id=span_ids[-1], score=0.0, label="hallucinated",
                             reason=TURN_REASON),
        trace_ids=trace_ids, span_ids=span_ids, first_turn_at=T0, last_turn_at=T0, timestamp=T0,
    )  # fmt: skip
    key = json.dumps(["chat-api", record.conversation_id]).encode()  # the service's key: (service, id)
    return key, record.model_dump_json().encode(), identity(f"conversation-{n}", n)


def evaluation_output(n: int, headed: bool) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    """The n-th evaluation record: a grounding revision (`headed`, as `tracescore conversations` writes it) or
    one `tracescore consume` wrote (no headers)."""
    record = EvaluationRecord(
        trace_id=f"{n:032x}", span_id=f"{n:016x}", service_name="chat-api", route="/chat",
        metric="faithfulness", score=0.0, label="hallucinated", status=MetricStatus.OK, judge="offline",
        session_id=f"session-{n // 4:08d}", reason=TURN_REASON, revision=1 if headed else 0,
        supersedes=None, timestamp=T0,
    )  # fmt: skip
    return (
        record.trace_id.encode(),
        record.model_dump_json().encode(),
        identity(f"turn-{n}", n) if headed else [],
    )


def identity(name: str, n: int) -> list[tuple[str, bytes]]:
    from tracescore._service._outputs import OUTPUT_DIGEST_HEADER, OUTPUT_ID_HEADER

    return [
        (OUTPUT_ID_HEADER, hashlib.blake2b(name.encode(), digest_size=16).hexdigest().encode()),
        (OUTPUT_DIGEST_HEADER, b"%016x" % n),
    ]


def fill(
    bootstrap: str, topics: dict[str, str], records: int, partitions: int, unheaded: float
) -> dict[str, Any]:
    """Both topics filled: what they hold (messages, bytes of keys and values, the share with headers)."""
    from kafka.admin import NewTopic

    from tracescore.testing.kafka_topics import input_producer

    new = [NewTopic(t, partitions, 1) for t in topics]
    producer = input_producer(bootstrap, new, acks="all", linger_ms=5)  # the services' producers
    held = {"messages": 0, "bytes": 0, "headed": 0}
    half = records // 2
    for n in range(records):
        if n < half:
            topic, (key, value, headers) = topics[0], conversation_output(n)
        else:
            topic = topics[1]
            key, value, headers = evaluation_output(n, (n - half) >= (records - half) * unheaded)
        producer.send(topic, key=key, value=value, headers=headers)
        held["messages"] += 1
        held["bytes"] += len(key) + len(value)
        held["headed"] += bool(headers)
    producer.flush()
    producer.close()
    return held


# -- the looks, each in a process of its own --------------------------------------------------------------
Timed = dict[str, float]


def timed(look: Callable[[], int]) -> Timed:
    """`look()` timed around itself alone: wall and the process' CPU (seconds), and what it found."""
    wall, cpu = time.perf_counter(), time.process_time()
    found = look()
    return {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu, "found": found}


def looks_ours(bootstrap: str, topics: list[str], again: int, back: int) -> dict[str, Timed]:
    """The shipped look from the log starts (`OutputLog.since` without marks, `find`, `FoundOutputs.add`),
    then `again` looks from `back` offsets before each partition's end (`FoundOutputs.look_again`, as before
    each write while a restore's window is open); the ids each found."""
    from kafka import KafkaProducer

    from tracescore._kafka import probe_consumer
    from tracescore._kafka_config import KafkaConnection
    from tracescore._service._found import FoundOutputs
    from tracescore._service._outputs import OutputLog

    connection = KafkaConnection(bootstrap_servers=bootstrap)
    producer = KafkaProducer(bootstrap_servers=bootstrap)  # the service's, made long before a restore
    log = OutputLog(connection, producer, topics)
    starts, ends = offsets(probe_consumer(connection.client_config()), topics)
    since = log.since({}, starts)
    found = FoundOutputs()
    first = timed(lambda: len(found.add({0: since}, log.find(since), 0) or found.ids()))
    near = {t: {p: max(starts[t][p], end - back) for p, end in at.items()} for t, at in ends.items()}
    found.forget([0])
    found.add({0: near}, {}, 0)
    looks = timed(lambda: sum(len(found.look_again(log.find, near)) for _ in range(again)))
    log.close()
    producer.close()
    return {"first": first, "again": looks}


def looks_floor(bootstrap: str, topics: list[str], again: int, back: int) -> dict[str, Timed]:
    """The same reads by a bare consumer (made in the first, kept for the others), touching each message's
    key and headers; the messages with an output id each read."""
    from kafka import KafkaConsumer, TopicPartition

    from tracescore._service._outputs import OUTPUT_ID_HEADER

    def read(consumer: KafkaConsumer, start: dict[str, dict[int, int]]) -> int:
        tps = [TopicPartition(t, p) for t, at in start.items() for p in at]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, start[tp.topic][tp.partition])
        ends = consumer.end_offsets(tps)
        left = {tp for tp in tps if consumer.position(tp) < ends[tp]}
        headed = 0
        while left:
            for tp, messages in consumer.poll(timeout_ms=500).items():
                for message in messages:
                    headed += message.key is not None and any(
                        k == OUTPUT_ID_HEADER for k, _ in message.headers
                    )
                if consumer.position(tp) >= ends[tp]:
                    left.discard(tp)
        return headed

    starts, ends = offsets(KafkaConsumer(bootstrap_servers=bootstrap), topics)
    near = {t: {p: max(starts[t][p], end - back) for p, end in at.items()} for t, at in ends.items()}
    kept: list[KafkaConsumer] = []

    def first() -> int:
        kept.append(KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False))
        return read(kept[0], starts)

    out = {"first": timed(first), "again": timed(lambda: sum(read(kept[0], near) for _ in range(again)))}
    kept[0].close()
    return out


def offsets(consumer: Any, topics: list[str]) -> tuple[dict[str, dict[int, int]], dict[str, dict[int, int]]]:
    """Where each partition of `topics` starts and ends now (`consumer` closed)."""
    from kafka import TopicPartition

    tps = [TopicPartition(t, p) for t in topics for p in sorted(consumer.partitions_for_topic(t) or ())]
    starts, ends = consumer.beginning_offsets(tps), consumer.end_offsets(tps)
    consumer.close()

    def by_topic(at: dict[Any, int]) -> dict[str, dict[int, int]]:
        return {t: {tp.partition: o for tp, o in at.items() if tp.topic == t} for t in topics}

    return by_topic(starts), by_topic(ends)


def in_process(which: str, tree: Path, bootstrap: str, topics: list[str], again: int) -> dict[str, Timed]:
    """One arm's looks in a process of its own, running the tracescore of `tree`."""
    arm = "floor" if which == "floor" else "ours"
    here = Path(__file__).resolve()
    command = [
        sys.executable,
        str(here),
        "--look",
        arm,
        "--again",
        str(again),
        "--bootstrap",
        bootstrap,
        *topics,
    ]
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{here.parent}"}
    done = subprocess.run(command, env=env, cwd=tree, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=6, help="of each topic")
    parser.add_argument("--unheaded", type=float, default=0.5, help="evaluations without headers (share)")
    parser.add_argument("--again", type=int, default=20, help="looks again, each from 2 before the ends")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", type=Path, default=None, help="an earlier tree, its looks timed too")
    parser.add_argument("--look", choices=["ours", "floor"], help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("topics", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.look:
        arm = looks_ours if args.look == "ours" else looks_floor
        print(json.dumps(arm(args.bootstrap, args.topics, args.again, AGAIN_BACK)))
        return 0
    arms = {"ours": REPO, "floor": REPO, **({"before": args.before.resolve()} if args.before else {})}
    load = [os.getloadavg()[0]]
    runs: list[dict[str, Any]] = []
    with KafkaBroker() as broker:
        topics = ["look.conversations", "look.evaluations"]
        held = fill(broker.bootstrap_servers, topics, args.records, args.partitions, args.unheaded)
        print(f"filled: {held}", flush=True)
        for _ in range(args.runs):
            run: dict[str, Any] = {
                w: in_process(w, tree, broker.bootstrap_servers, topics, args.again)
                for w, tree in arms.items()
            }
            for which in [w for w in arms if w != "floor"]:
                for look in ("first", "again"):
                    for clock in ("cpu", "wall"):
                        key = f"{clock}_s"
                        run[f"{which}/floor {look} {clock}"] = run[which][look][key] / run["floor"][look][key]
            first = run["ours"]["first"]
            run["ours first messages per s"] = {
                c: held["messages"] / first[f"{c}_s"] for c in ("cpu", "wall")
            }
            print(json.dumps(run), flush=True)
            runs.append(run)
    load.append(os.getloadavg()[0])
    ratios = {k: [round(r[k], 2) for r in runs] for k in runs[0] if "/" in k}
    report(
        f"{held['messages']} messages ({held['bytes'] / 1e6:.1f} MB of keys and values, {held['headed']} "
        f"with an output id); time of the look as a multiple of the floor's, per run: {ratios}; load average "
        f"{load[0]:.2f} then {load[1]:.2f}",
        {
            "held": held,
            "runs": runs,
            "ratios": ratios,
            "load": load,
            "args": vars(args) | {"before": str(args.before)},
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
