"""A stand-in member of a consumer group, in a process of its own: what a test needs when the group must hold
another service's member (its client id) while the service under test runs in the test's process.

A stand-in on a thread of the test's process shared that process with the service under test: on a loaded
machine its polls and heartbeats waited on the service's work, the coordinator expired it, and the service
found no other member. Here it polls on its own, from the join until it is stopped, and says once on
stdout when it holds its assignment (`ASSIGNED`). It never commits.

`GroupMember` runs it from a test (a context manager: started, waited for, stopped); run as a program it is
the member itself: `python tests/group_member.py BOOTSTRAP GROUP TOPIC CLIENT_ID`.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType

from _helpers import WAIT_S, started_process
from _zygote import ZygoteProcess
from _zygote import popen as forked
from kafka import KafkaConsumer

from tracescore._kafka import RebalanceListener, group_member
from tracescore._service._awaited import GuardedJoins
from tracescore.testing import end_process

__all__ = ["ASSIGNED", "GroupMember"]

REPO = Path(__file__).resolve().parents[1]
ASSIGNED = "assigned"  # the line's first word once the member holds partitions
_POLL_MS = 100
# Its session outlasts a loaded machine's late heartbeats (the coordinator expires a member after it).
_SESSION_TIMEOUT_MS = 15_000
_KNOWN_WITHIN_S = WAIT_S  # the topic's partitions in its metadata before it subscribes


class GroupMember:
    """The stand-in member of `group` reading `topic`, as client `client_id`, in a child process: `with`
    returns once it holds its assignment (AssertionError, with what it logged, when it does not within
    `timeout_s`); the exit stops it, and it leaves the group."""

    def __init__(
        self, bootstrap: str, group: str, topic: str, client_id: str, timeout_s: float = WAIT_S
    ) -> None:
        self._args = [bootstrap, group, topic, client_id]
        self._timeout_s = timeout_s
        self._log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (closed in __exit__)
        self._process: ZygoteProcess | None = None
        self._said = threading.Event()
        self.assigned = ""

    def __enter__(self) -> GroupMember:
        self._process = started_process(
            forked(
                [sys.executable, __file__, *self._args],
                env={**os.environ, "PYTHONPATH": str(REPO)},
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=self._log,
                text=True,
            )
        )
        threading.Thread(target=self._read, args=(self._process,), daemon=True).start()
        if not self._said.wait(self._timeout_s):
            self._stop()
            raise AssertionError(
                f"the stand-in member holds nothing after {self._timeout_s:.0f}s:\n{self.log}"
            )
        return self

    def _read(self, process: ZygoteProcess) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith(ASSIGNED):
                self.assigned = line.strip()
                self._said.set()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stop()

    def _stop(self) -> None:
        end_process(self._process, 30.0)  # SIGTERM: it leaves the group and exits

    @property
    def log(self) -> str:
        """What the member logged (kafka-python's group lines: its joins, assignments, heartbeat failures)."""
        self._log.flush()
        self._log.seek(0)
        return self._log.read()[-5000:]


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    for name in ("bootstrap", "group", "topic", "client_id"):
        parser.add_argument(name)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("kafka.coordinator").setLevel(logging.INFO)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    member = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        enable_auto_commit=False,
        client_id=args.client_id,
        **group_member(_SESSION_TIMEOUT_MS, "cooperative"),
    )
    # Subscribed once its metadata holds the topic's partitions, as the services subscribe: a member that
    # joins on metadata without them is assigned none and never rebalances again (kafka-python 3.0.12).
    deadline = time.monotonic() + _KNOWN_WITHIN_S
    while not member.partitions_for_topic(args.topic):
        if time.monotonic() > deadline or stopped.is_set():
            sys.exit(f"{args.topic}'s partitions not known within {_KNOWN_WITHIN_S:.0f}s")
        time.sleep(0.1)
    # The services' guards (tracescore._service._awaited) against kafka-python 3.0.12 leaving a join undone.
    # Its metadata made fresh after subscribing: with the joins answered before the update that subscribe asks
    # for (a loaded machine), it led generation 1 from metadata without the topic and rejoined once the update
    # came; leading generation 2, assigning cleared its need to rejoin, so a SyncGroup not answered within
    # that 100 ms poll was waited for by no later poll, its heartbeats stayed off and the group expired it
    # (the late-member test's DID NOT RAISE). And each poll waits for a join under way, however started.
    joins = GuardedJoins(member, stopped.is_set)
    log = logging.getLogger("tracescore")
    joins.subscribe([args.topic], RebalanceListener(log, assigned=lambda _: None, revoked=lambda _: None))
    said = False
    while not stopped.is_set():
        joins.before_poll()
        member.poll(timeout_ms=_POLL_MS)
        if not said and member.assignment():
            held = ",".join(sorted(f"{tp.topic}[{tp.partition}]" for tp in member.assignment()))
            print(f"{ASSIGNED} {held}", flush=True)
            said = True
    member.close(autocommit=False)


if __name__ == "__main__":
    main(sys.argv[1:])
