"""What 100,000 open conversations cost one `tracescore conversations` instance: memory, and the work of its
ticks while they go quiet, against the tracker of an earlier tree in the same run.

    python benchmarks/conversations_memory.py [--conversations 100000] [--turns 3] [--ticks 20]
        [--partitions 6] [--before DIR]   # git archive <commit> | tar -x -C DIR

Feeds `--conversations` conversations of `--turns` turns (one unfaithful turn each, so a reason is kept) into
the service's `ConversationTracker`, then measures with tracemalloc the memory they hold. Then `--ticks` ticks
in which 1/`--ticks` of them go quiet (their records written, their states saved as the service does) and
50 get a new turn, each tick asking what the service asks (quiet ones, ones to save, ones to forget, the cap,
the commit offsets, whether any is open), timed as a share of the default tick interval (1 s). With
`--before`, the `ConversationTracker` of that tree is fed and ticked the same way, tick for tick alternately,
and the ratio of the two times given. Last, a rebalance: each of the `--partitions` partitions revoked in
turn (`forget_partitions`, timed) and its conversations restored (not timed), the mean revoke as a share of
the tick interval, and against the earlier tree's. The last line is JSON.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import sys
import time
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _runs import report

from tracescore.conversations import ConversationsConfig, ConversationTracker
from tracescore.model import EvaluationRecord, MetricStatus

CHANGES_PER_TICK = 50
PARTITIONS = 6  # the default of --partitions


def tracker_of(tree: Path | None) -> Callable[[ConversationsConfig], Any]:
    """The `ConversationTracker` of `tree` (an export of an earlier commit; the rest of tracescore is this
    one's), or this tree's."""
    if tree is None:
        return ConversationTracker
    index_name = "tracescore.conversations._index"
    ours = sys.modules.get(index_name)
    try:  # its tracker with its own indexes (imported by their full name while it loads)
        sys.modules[index_name] = _module("index_before", tree / "tracescore" / "conversations" / "_index.py")
        module = _module("tracker_before", tree / "tracescore" / "conversations" / "_tracker.py")
    finally:
        if ours is not None:
            sys.modules[index_name] = ours
    return module.ConversationTracker  # type: ignore[no-any-return]


def _module(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def revokes(tracker: Any, partitions: int) -> float:
    """Each partition revoked in turn (timed, seconds in all) and its conversations restored (not timed)."""
    spent = 0.0
    for partition in range(partitions):
        theirs = [c for c in tracker.held() if c.partition == partition]
        started = time.perf_counter()
        tracker.forget_partitions({partition})
        spent += time.perf_counter() - started
        tracker.restore(theirs)
    return spent


def fed(
    make: Callable[[ConversationsConfig], Any], config: ConversationsConfig, args: Any, now_ms: int
) -> Any:
    """A tracker holding `--conversations` open conversations; `held` (bytes, tracemalloc) set on it."""
    first = EvaluationRecord(
        trace_id="0" * 32, span_id="0" * 16, service_name="chat-api", route="/chat", metric="faithfulness",
        score=1.0, label="faithful", status=MetricStatus.OK, judge="offline", session_id="c",
        timestamp=datetime.now(UTC),
    )  # fmt: skip
    unfaithful = first.model_copy(
        update={"score": 0.0, "label": "hallucinated", "reason": "the refund window is 30 days, not 60"}
    )
    tracker = make(config)
    tracemalloc.start()
    offset = 0
    for c in range(args.conversations):
        for t in range(args.turns):
            shape = unfaithful if t == 1 else first
            record = shape.model_copy(update={"session_id": f"c-{c}", "trace_id": f"{c:024x}{t:08x}"})
            tracker.apply(record, c % args.partitions, offset, now_ms + offset)
            offset += 1
    tracker.held_bytes, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return tracker


def tick(tracker: Any, stream_ms: int, changes: list[tuple[int, int]], offsets: dict[int, int]) -> float:
    partitions = len(offsets)
    """One tick's questions, timed (seconds); then what the service does with the answers (not timed)."""
    turn = EvaluationRecord(
        trace_id="f" * 32, span_id="0" * 16, service_name="chat-api", route="/chat", metric="faithfulness",
        score=1.0, label="faithful", status=MetricStatus.OK, judge="offline", session_id="c",
        timestamp=datetime.now(UTC),
    )  # fmt: skip
    for c, n in changes:
        record = turn.model_copy(update={"session_id": f"c-{c}", "trace_id": f"{c:024x}{n:08x}"})
        tracker.apply(record, c % partitions, offsets[c % partitions], stream_ms)
        offsets[c % partitions] += 1

    def now_of(partition: int) -> int:
        return stream_ms

    started = time.perf_counter()
    quiet = tracker.quiet(now_of)
    saved = tracker.to_checkpoint(now_of)
    forgotten = tracker.to_forget(now_of)
    tracker.over_capacity()
    tracker.commit_offsets(dict(offsets))
    tracker.any_open() if hasattr(tracker, "any_open") else tracker.open()
    seconds = time.perf_counter() - started
    for conversation in quiet:
        conversation.written([])  # as after its records are written: no longer open
    for conversation in [*saved, *quiet]:
        conversation.dirty_from = None  # as after its state is saved
    for conversation in forgotten:
        tracker.forget(conversation)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=100_000)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--ticks", type=int, default=300)
    parser.add_argument("--partitions", type=int, default=PARTITIONS, help="of the turns topic")
    parser.add_argument("--before", type=Path, default=None, help="an earlier tree, its tracker ticked too")
    args = parser.parse_args(argv)
    partitions = args.partitions
    config = ConversationsConfig(max_conversations=args.conversations)
    tick_s = ConversationsConfig.model_fields["tick_seconds"].default
    quiet_ms = int(config.quiet_seconds * 1000)
    now_ms = int(time.time() * 1000)
    trackers = {"now": fed(ConversationTracker, config, args, now_ms)}
    if args.before is not None:
        trackers["before"] = fed(tracker_of(args.before), config, args, now_ms)
    spent = dict.fromkeys(trackers, 0.0)
    offsets = {name: dict.fromkeys(range(partitions), args.conversations * args.turns) for name in trackers}
    span_ms = args.conversations * args.turns  # arrivals a millisecond apart
    step_ms = max(1, round(span_ms / quiet_ms * tick_s * 1000))  # arrivals spread over quiet_seconds
    rng = random.Random(1)
    for n in range(1, args.ticks + 1):
        stream_ms = now_ms + quiet_ms + step_ms * n
        changes = [(rng.randrange(args.conversations), n) for _ in range(CHANGES_PER_TICK)]
        for name, tracker in trackers.items():
            spent[name] += tick(tracker, stream_ms, changes, offsets[name])
    revoked = {name: revokes(tracker, partitions) for name, tracker in trackers.items()}
    held = trackers["now"].held_bytes
    result: dict[str, Any] = {
        "conversations": args.conversations,
        "turns": args.turns,
        "ticks": args.ticks,
        "held_mb": round(held / 2**20, 1),
        "bytes_per_conversation": round(held / args.conversations),
        "tick_share_of_interval": round(spent["now"] / args.ticks / tick_s, 4),
        "partitions": partitions,
        "revoke_share_of_interval": round(revoked["now"] / partitions / tick_s, 5),
    }
    line = (
        f"{args.conversations} open conversations of {args.turns} turns: {result['held_mb']} MB "
        f"({result['bytes_per_conversation']} bytes each); a tick's questions while they go quiet take "
        f"{result['tick_share_of_interval']:.2%} of the {tick_s:g} s tick interval; revoking 1 of "
        f"{partitions} partitions {result['revoke_share_of_interval']:.3%}"
    )
    if "before" in trackers:
        before = trackers["before"].held_bytes
        result["before_bytes_per_conversation"] = round(before / args.conversations)
        result["before_tick_share_of_interval"] = round(spent["before"] / args.ticks / tick_s, 4)
        result["before_over_now"] = round(spent["before"] / spent["now"], 1)
        result["before_revoke_share_of_interval"] = round(revoked["before"] / partitions / tick_s, 5)
        result["revoke_before_over_now"] = round(revoked["before"] / revoked["now"], 1)
        line += (
            f"; the earlier tree's {result['before_tick_share_of_interval']:.2%} "
            f"({result['before_over_now']}x as long; {result['before_bytes_per_conversation']} bytes each), "
            f"its revoke {result['before_revoke_share_of_interval']:.3%} "
            f"({result['revoke_before_over_now']}x as long)"
        )
    report(line, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
