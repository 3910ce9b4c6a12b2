"""What 100,000 open conversations cost one `tracescore conversations` instance: memory, and one tick's pass
over them as a share of the tick interval.

    python benchmarks/conversations_memory.py [--conversations 100000] [--turns 3]

Feeds `--conversations` conversations of `--turns` turns (one unfaithful turn each, so a reason is kept) into
the service's `ConversationTracker`, then measures with tracemalloc the memory they hold, and times the
passes a tick makes over them (quiet ones, ones to save, ones to forget, the cap, the commit offsets) against
the default tick interval (1 s). With `max_conversations` below `--conversations`, the cap's evictions are
counted too. The last line is JSON.
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from datetime import UTC, datetime

from _runs import report

from tracescore.conversations import ConversationsConfig, ConversationTracker
from tracescore.model import EvaluationRecord, MetricStatus

PARTITIONS = 6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=100_000)
    parser.add_argument("--turns", type=int, default=3)
    args = parser.parse_args(argv)
    config = ConversationsConfig(max_conversations=args.conversations)
    tick_s = ConversationsConfig.model_fields["tick_seconds"].default
    first = EvaluationRecord(
        trace_id="0" * 32, span_id="0" * 16, service_name="chat-api", route="/chat", metric="faithfulness",
        score=1.0, label="faithful", status=MetricStatus.OK, judge="offline", session_id="c",
        timestamp=datetime.now(UTC),
    )  # fmt: skip
    unfaithful = first.model_copy(
        update={"score": 0.0, "label": "hallucinated", "reason": "the refund window is 30 days, not 60"}
    )
    tracker = ConversationTracker(config)
    now_ms = int(time.time() * 1000)
    tracemalloc.start()
    offset = 0
    for c in range(args.conversations):
        for t in range(args.turns):
            shape = unfaithful if t == 1 else first
            record = shape.model_copy(update={"session_id": f"c-{c}", "trace_id": f"{c:024x}{t:08x}"})
            tracker.apply(record, c % PARTITIONS, offset, now_ms + offset)
            offset += 1
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    def now_of(partition: int) -> int:
        return now_ms  # nothing quiet yet: the passes see every conversation, none is written

    started = time.perf_counter()
    tracker.quiet(now_of)
    tracker.to_checkpoint(now_of)
    tracker.to_forget(now_of)
    tracker.over_capacity()
    tracker.commit_offsets({p: offset for p in range(PARTITIONS)})
    tick = time.perf_counter() - started
    result = {
        "conversations": args.conversations,
        "turns": args.turns,
        "held_mb": round(held / 2**20, 1),
        "bytes_per_conversation": round(held / args.conversations),
        "tick_pass_share_of_interval": round(tick / tick_s, 3),
    }
    report(
        f"{args.conversations} open conversations of {args.turns} turns: {result['held_mb']} MB "
        f"({result['bytes_per_conversation']} bytes each); one tick's passes over them take "
        f"{result['tick_pass_share_of_interval']:.1%} of the {tick_s:g} s tick interval",
        result,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
