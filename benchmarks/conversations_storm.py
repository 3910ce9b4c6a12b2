"""Conversations written early, twice or never by `tracescore conversations` in a rebalance storm.

    python benchmarks/conversations_storm.py [--conversations 300] [--every 3] [--quiet-seconds 1]
                                             [--protocol cooperative|eager] [--runs 2] [--code DIR]

Starts a real Kafka broker and one `tracescore conversations` process, then puts `--conversations`
three-turn conversations on the evaluations topic as a scoring consumer running alongside writes them (one
starting every 0.1 s, a turn a second, keyed by trace id over the topic's partitions), while a second and a
third process join the group and leave it (SIGTERM) `--every` seconds after both groups are stable with
them. Once the feed is over and the storm has stopped, waits until every conversation has a record (at most
two minutes) and stops the first process. Counts what the conversations topic holds:
conversations with a record, records beyond one per conversation (`repeated`: a record written early and
revised, or the same one twice), records of fewer than three turns (`early`), and, from the processes'
closing summaries, how many partitions' state was read back (`partitions_read`; `unsaid`: members stopped
before they were up, which print none). The last line is JSON. `--protocol` sets `rebalance_protocol` (a
tree without it rebalances eagerly); `--code` runs the service of another tree, e.g.
`git archive <commit> tracescore | tar -x -C /tmp/before`.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from _runs import ConversationsProcess, add_run_options, on_one_broker, read_values
from conversations_crash import TURNS, feed
from kafka import KafkaAdminClient
from kafka.errors import KafkaError

from tracescore.model import read_conversation_record


class Member:
    """One `tracescore conversations` process of the group, stopped with SIGTERM."""

    def __init__(self, command: list[str], env: dict[str, str], code: Path) -> None:
        self.process = subprocess.Popen(
            command, env=env, cwd=code, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )

    def stop(self) -> str:
        """What it printed (its closing summary among its logs)."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.communicate(timeout=120)[1]


def in_groups(
    admin: KafkaAdminClient, groups: list[str], members: int, running: list[Member], timeout_s: float = 120
) -> None:
    """Until each of `groups` is stable with exactly `members` members."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for member in running:
            if member.process.poll() is not None:
                raise RuntimeError(f"a member exited: {member.process.communicate()[1][-2000:]}")
        try:
            described = admin.describe_groups(groups)
        except KafkaError:  # the group's coordinator not known yet
            described = {}
        stable = [g for g in described.values() if g.get("group_state") == "Stable"]
        if len(stable) == len(groups) and all(len(g.get("members", [])) == members for g in stable):
            return
        time.sleep(0.2)
    raise TimeoutError(f"{groups} never had {members} members")


def partitions_read(summary: str) -> int | None:
    found = re.findall(r"state: .*partitions_read=(\d+)", summary)
    return int(found[-1]) if found else None


def run(bootstrap: str, args: argparse.Namespace) -> dict[str, Any]:
    prefix = f"storm{uuid.uuid4().hex[:8]}"
    service = ConversationsProcess(
        bootstrap, prefix, args.code, str(args.quiet_seconds),
        {"TRACESCORE_CONVERSATIONS_REBALANCE_PROTOCOL": args.protocol},
    )  # fmt: skip
    evaluations, conversations = service.evaluations, service.conversations
    command, env = service.command, service.env
    steady = Member(command, env, args.code)
    feeding = threading.Thread(target=feed, args=(bootstrap, evaluations, args.conversations, True))
    feeding.start()
    summaries, joins = [], 0
    groups = [f"{prefix}.conversations", f"{prefix}.conversations.turns"]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    while feeding.is_alive():
        joining = [Member(command, env, args.code) for _ in range(2)]
        joins += 2
        in_groups(admin, groups, 3, [steady, *joining])  # both up (one stopped before that says nothing)
        time.sleep(args.every)  # the storm's rhythm, not a wait for a result
        summaries.extend(member.stop() for member in joining)
        in_groups(admin, groups, 1, [steady])  # both gone
    admin.close()
    feeding.join()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        values = read_values(bootstrap, conversations)
        if len({read_conversation_record(v).conversation_id for v in values}) >= args.conversations:
            break
        time.sleep(1.0)
    summaries.append(steady.stop())
    records = [read_conversation_record(v) for v in read_values(bootstrap, conversations)]
    per_conversation = Counter(r.conversation_id for r in records)
    read = [partitions_read(s) for s in summaries]
    return {
        "conversations": args.conversations,
        "joins": joins,
        "with_a_record": len(per_conversation),
        "lost": args.conversations - len(per_conversation),
        "records": len(records),
        "repeated": sum(n - 1 for n in per_conversation.values()),
        "early": sum(r.turns < TURNS for r in records),
        # None: a tree without the count; a member stopped before it started says nothing (`unsaid`).
        "partitions_read": None if set(read) == {None} else sum(r for r in read if r is not None),
        "unsaid": read.count(None),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=300)
    parser.add_argument("--every", type=float, default=3.0, help="seconds between joins and leaves")
    parser.add_argument("--quiet-seconds", type=float, default=1.0)
    parser.add_argument("--protocol", choices=("cooperative", "eager"), default="cooperative")
    add_run_options(parser, runs=2)
    args = parser.parse_args(argv)
    results = on_one_broker(args.runs, lambda bootstrap: run(bootstrap, args))
    print(json.dumps({"protocol": args.protocol, "code": str(args.code), "runs": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
