"""Helpers for the fault suite: the consumer as a real process, a judge server whose replies the test holds
back or fails on purpose, event-driven waits, and the accounting that turns topics into counts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from _helpers import WAIT_S, consumer_settings, started_process, wait_until
from _zygote import popen as forked
from kafka import KafkaAdminClient, TopicPartition
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata
from kafka_helpers import REPO
from service_processes import SESSION_TIMEOUT_MS

from tracescore.consume import ConsumerSettings, NotOtlp, decode_message
from tracescore.model import EvaluationRecord, MetricStatus
from tracescore.testing.judge_server import Fault, JudgeServer, default_responder
from tracescore.testing.kafka_topics import read_topic

# An application answering `n` questions faithfully: `run_instrumented_app(..., APP.format(n=...))`.
APP = """
@tracescore.rag(route="/ask")
def answer(query, contexts):
    return "Paris is the capital of France. It lies on the Seine."

for i in range({n}):
    answer(f"Where is the capital of France? ({{i}})", ["Paris, on the Seine, is the capital of France."])
"""


class GatedJudgeServer(JudgeServer):
    """The local judge server, with replies held back until the test lets them through: judge calls stay in
    flight exactly as long as a test needs (no race against a fixed latency)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._gate = threading.Condition()
        self._allowed: int | None = None  # None: open; else replies still allowed through
        self.responder = self._held_reply

    def hold(self, allow: int = 0) -> None:
        """Hold every reply from now on, but let `allow` more through: the calls already held first (woken
        here, not left to their client's timeout and retry, 30 s later)."""
        with self._gate:
            self._allowed = allow
            self._gate.notify_all()

    def open(self) -> None:
        with self._gate:
            self._allowed = None
            self._gate.notify_all()

    def _held_reply(self, body: dict[str, Any]) -> Any:
        with self._gate:
            self._gate.wait_for(lambda: self._allowed is None or self._allowed > 0 or self._closing.is_set())
            if self._allowed is not None and self._allowed > 0:
                self._allowed -= 1
        return default_responder(body)

    def close(self) -> None:
        self._closing.set()
        with self._gate:
            self._gate.notify_all()
        super().close()


class FlakyJudgeServer(JudgeServer):
    """Fails a fixed share of chat calls, deterministically by arrival order, cycling through `faults`."""

    def __init__(self, every: tuple[int, ...], period: int, faults: tuple[Fault, ...], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._every, self._period, self._faults = frozenset(every), period, faults
        self._arrivals = 0
        self.served: Counter[Fault] = Counter()

    def _next_fault(self, body: dict[str, Any]) -> Fault | None:
        with self._lock:
            arrival = self._arrivals
            self._arrivals += 1
            if arrival % self._period not in self._every:
                return None
            fault = self._faults[sum(self.served.values()) % len(self._faults)]
            self.served[fault] += 1
            self._state.stats.faults_served += 1
            return fault


class ConsumerProcess:
    """`python -m tracescore.cli consume ...` as a child process, its stderr collected line by line."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None) -> None:
        full_env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "TRACESCORE_JUDGE_API_KEY": "unused",
            **(env or {}),
        }
        self.process = started_process(
            forked(
                [sys.executable, "-m", "tracescore.cli", "consume", *args],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                cwd=REPO,
                env=full_env,
            )
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line.rstrip("\n"))

    def count(self, text: str) -> int:
        return sum(text in line for line in list(self.lines))

    def wait_for_line(self, text: str, times: int = 1) -> None:
        wait_until(
            lambda: self.count(text) >= times or self.process.poll() is not None,
            f"{text!r} in the consumer's log",
        )
        assert self.count(text) >= times, f"exited {self.process.returncode} before {text!r}:\n{self.log}"

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(WAIT_S)

    def terminate(self) -> None:
        self.process.send_signal(signal.SIGTERM)

    def wait(self) -> int:
        code = self.process.wait(WAIT_S)
        self._reader.join(WAIT_S)
        return code

    @property
    def log(self) -> str:
        return "\n".join(self.lines[-40:])


@dataclass
class Topics:
    bootstrap: str
    prefix: str

    @property
    def spans(self) -> str:
        return f"{self.prefix}.spans"

    @property
    def evaluations(self) -> str:
        return f"{self.prefix}.evaluations"

    @property
    def dlq(self) -> str:
        return f"{self.prefix}.dlq"

    @property
    def group(self) -> str:
        return f"{self.prefix}.group"

    def cli_args(self, *extra: str, idle_timeout_s: float = 3, base_url: str | None = None) -> list[str]:
        """The options every fault run shares: topics of its own, short timeouts, the judge server."""
        # --no-cascade: the judge server scores every span, so each fault lands on judge calls in flight.
        judge = ["--judge", "openai", "--no-cascade", "--base-url", base_url, "--model", "judge-test"]
        judge = judge if base_url else []
        return [
            "--bootstrap-servers", self.bootstrap, "--topic", self.spans, "--group-id", self.group,
            "--evaluations-topic", self.evaluations, "--dlq-topic", self.dlq,
            "--evaluation-spans-topic", f"{self.prefix}.evaluation-spans",
            "--idle-timeout", str(idle_timeout_s), "--assembly-grace", "0.2", "--status-interval", "1",
            "--commit-interval", "0.2", "--session-timeout-ms", str(SESSION_TIMEOUT_MS),
            *judge, *extra,
        ]  # fmt: skip

    def settings(self) -> ConsumerSettings:
        """The same for a consumer run in the test's process (the offline or a given judge)."""
        return consumer_settings(self.bootstrap, self.prefix, assembly={"grace_s": 0.2})


class CommittedOffsets:
    """Reads the group's committed offsets without joining the group (no subscribe, no assignment): one
    OffsetFetch for all of them, by kafka-python's admin client."""

    def __init__(self, topics: Topics) -> None:
        self._admin = KafkaAdminClient(bootstrap_servers=topics.bootstrap)
        self._group, self._topic = topics.group, topics.spans

    def any(self) -> bool:
        """Whether the group committed an offset on the spans topic (asked again while the broker says to
        try again: the group's coordinator not loaded yet)."""
        [offsets] = wait_until(self._fetched, f"the committed offsets of group {self._group}")
        return any(tp.topic == self._topic and at.offset >= 0 for tp, at in offsets.items())

    def _fetched(self) -> list[dict[TopicPartition, OffsetAndMetadata]]:
        """[every offset the group committed] (in a list: none is an answer too); [] to ask again."""
        try:
            return [self._admin.list_group_offsets({self._group: None}).get(self._group, {})]
        except KafkaError as exc:
            if not exc.retriable:
                raise
            return []

    def close(self) -> None:
        self._admin.close()


@dataclass
class Outcome:
    """What a run left on the topics: every expected span must have a record (a score or an explained
    error); records are at least once, so duplicates are counted, not failed."""

    expected: int
    lost: int
    records: int
    unique: int
    duplicated: int
    scored: int
    explained_errors: int
    unexplained: int
    dead_letters: int
    extra: dict[str, Any] = field(default_factory=dict)


def rag_spans_on(bootstrap: str, topic: str) -> set[tuple[str, str]]:
    """(trace id, span id) of every decodable span on the input topic: the spans the consumer must score."""
    out = set()
    for message in read_topic(bootstrap, topic, timeout_s=60):
        try:
            out |= {(s.trace_id, s.span_id) for s in decode_message(message.value)}
        except NotOtlp:
            continue
    return out


def outcome(
    topics: Topics, expected: set[tuple[str, str]], metrics: int = 1, others_allowed: bool = False
) -> Outcome:
    """Counts from the evaluations topic and the DLQ. A record of a span not in `expected` is unexplained
    unless `others_allowed` (fuzzed input that happens to hold a scorable span)."""
    records = [
        EvaluationRecord.model_validate_json(m.value)
        for m in read_topic(topics.bootstrap, topics.evaluations, 60)
    ]
    keys = Counter((r.trace_id, r.span_id, r.metric) for r in records)
    latest = {(r.trace_id, r.span_id, r.metric): r for r in records}
    covered = Counter((t, s) for t, s, _ in keys)
    lost = sum(covered[span] < metrics for span in expected)
    errors = [r for r in latest.values() if r.status is MetricStatus.ERROR]
    explained = [r for r in errors if r.reason and r.reason.strip()]
    scored = [r for r in latest.values() if r.status is not MetricStatus.ERROR and r.score is not None]
    unexplained = len(latest) - len(scored) - len(explained)
    if not others_allowed:
        unexplained += sum((r.trace_id, r.span_id) not in expected for r in latest.values())
    return Outcome(
        expected=len(expected) * metrics,
        lost=lost,
        records=len(records),
        unique=len(keys),
        duplicated=len(records) - len(keys),
        scored=len(scored),
        explained_errors=len(explained),
        unexplained=unexplained,
        dead_letters=len(read_topic(topics.bootstrap, topics.dlq, 30)),
    )


def report(fault: str, result: Outcome) -> None:
    """Appends the run's counts to $TRACESCORE_FAULT_COUNTS (JSON lines) when set:
    benchmarks/consumer_faults.py runs this suite and tabulates them for BENCHMARKS.md."""
    path = os.environ.get("TRACESCORE_FAULT_COUNTS")
    if path:
        with Path(path).open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"fault": fault, **asdict(result)}) + "\n")
