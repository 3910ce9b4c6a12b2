"""Helpers the tests of several stages share: the one wait, a process paused, a scoring consumer's settings on
topics of one prefix, the LLM judge pointed at the local judge server, and the check that nothing was left
open."""

from __future__ import annotations

import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from tracescore.testing import end_process

# kafka-python, the consumer and the judge (openai) are imported where used: the suite's conftest imports this
# module, and the pytest runs of their own that test how the suite runs (own_suite) need none of them (two
# CPU-seconds in each of their processes).
if TYPE_CHECKING:
    from tracescore.consume import ConsumerSettings
    from tracescore.score.judges import OpenAIJudge

__all__ = [
    "WAIT_S",
    "all_committed",
    "both_stages_read",
    "committed",
    "consumer_settings",
    "end_offsets",
    "end_started_processes",
    "ends_with_its_owner",
    "judge_client",
    "kill_if_running",
    "not_found_errors",
    "nothing_left_open",
    "own_suite",
    "partitions_on_broker",
    "pause",
    "paused",
    "started_process",
    "stopped",
    "wait_until",
]

REPO = Path(__file__).resolve().parents[1]
WAIT_S = 120.0  # generous: the machine is shared and slow; the waits end as soon as the condition holds


class _Process(Protocol):
    """What of a child process the helpers use: a `subprocess.Popen`, or one forked from the worker's zygote
    (tests/_zygote.py)."""

    pid: int

    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def send_signal(self, sig: int) -> None: ...
    def kill(self) -> None: ...


_P = TypeVar("_P", bound=_Process)
_started: list[_Process] = []


def started_process(process: _P) -> _P:
    """`process` (a service the test runs as a child process), ended after the test if still running then:
    a test that failed or was interrupted before it stopped its services leaves none behind (conftest.py)."""
    _started.append(process)
    return process


def end_started_processes(timeout_s: float = 10.0) -> None:
    """End the processes given to `started_process` that still run: SIGTERM, SIGKILL after `timeout_s`."""
    while _started:
        process = _started.pop()
        if process.poll() is None:
            process.send_signal(signal.SIGCONT)  # one stopped at its pause point takes SIGTERM only then
            end_process(process, timeout_s)  # type: ignore[arg-type]  # a Popen or a zygote's child


def wait_until(
    condition: Callable[[], Any], what: str, timeout_s: float = WAIT_S, every_s: float = 0.05
) -> Any:
    """Poll `condition` until it returns something truthy (returned); fail naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(every_s)


def stopped(pid: int) -> bool:
    """Every thread of process `pid` is stopped (SIGSTOP): its state in /proc is T. False once it exited."""
    try:
        stats = [Path(f"/proc/{pid}/task/{t}/stat").read_text() for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:  # exited, or a thread ended between the two reads
        return False
    return bool(stats) and all(stat.rsplit(")", 1)[1].split()[0] == "T" for stat in stats)


def running(pid: int) -> bool:
    """Process `pid` exists and has not exited (a zombie, exited and not yet reaped, has)."""
    try:  # the state is the first field after the command's name, which may hold spaces and parentheses
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def kill_if_running(pid: int, marker: str) -> None:
    """SIGKILL process `pid` if it still runs with `marker` in its command line (not another process that took
    the pid since): a test's grandchild, such as a server its child started and a guard failed to end."""
    with suppress(OSError):  # it exited meanwhile (a zombie's command line is empty)
        if marker in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
            os.kill(pid, signal.SIGKILL)


def ends_with_its_owner(
    owner: str,
    what: str,
    timeout_s: float = 60.0,
    check: Callable[[dict[str, Any]], None] = lambda started: None,
) -> None:
    """Run `owner` (Python code) in a child process that starts a server, prints one JSON line (the server's
    "pid", a "marker" in its command line, the "folder" its guard removes if it has one) and waits; `check`
    what it printed; SIGKILL the child (no stop, no atexit), then assert the server, `what`, ends within
    `timeout_s` and its folder goes. The server (the test's grandchild) does not outlive the test even when
    its guard fails."""
    child = subprocess.Popen(
        [sys.executable, "-c", owner], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    started: dict[str, Any] = {}
    try:
        started = json.loads(child.stdout.readline() or "{}")
        assert started, f"the child did not start {what}"
        pid, folder = int(started["pid"]), started.get("folder")
        assert running(pid), f"{what} is not running"
        assert folder is None or Path(folder).exists()
        check(started)
        child.kill()
        child.wait()
        wait_until(lambda: not running(pid), f"{what} to end with its owner", timeout_s=timeout_s)
        if folder is not None:
            wait_until(lambda: not Path(folder).exists(), f"{what}'s folder removed", timeout_s=10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if started:  # the guard failed: the test's server goes anyway
            kill_if_running(int(started["pid"]), started["marker"])
            if started.get("folder"):
                shutil.rmtree(started["folder"], ignore_errors=True)


def pause(pid: int) -> None:
    """SIGSTOP process `pid`, returning once every thread of it has stopped (see `paused`); SIGCONT resumes
    it. For a pause that does not end in the block that starts it."""
    os.kill(pid, signal.SIGSTOP)
    wait_until(lambda: stopped(pid), f"process {pid} stopped", every_s=0.001)


@contextmanager
def paused(pid: int) -> Iterator[None]:
    """Process `pid` (a broker) stopped for the block (SIGSTOP: it answers nothing, its connections stay
    open), and let go on after it (SIGCONT). The block starts once every thread of it has stopped: kill()
    returns before that, each thread stops when it is next scheduled, and on a loaded machine a broker
    answered sends made after the kill() in the meantime."""
    try:
        pause(pid)
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def committed(bootstrap: str, group_id: str, topic: str) -> dict[int, int | None]:
    """The group's committed offset on each partition of `topic` (None: nothing committed)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group_id, enable_auto_commit=False)
    partitions = consumer.partitions_for_topic(topic) or set()
    offsets = {p: consumer.committed(TopicPartition(topic, p)) for p in sorted(partitions)}
    consumer.close(autocommit=False)
    return offsets


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
    ends = {tp.partition: offset for tp, offset in consumer.end_offsets(tps).items()}
    consumer.close()
    return ends


def partitions_on_broker(bootstrap: str, topic: str) -> int | None:
    """How many partitions `topic` has; None when it does not exist. Asked of the admin API: a consumer's
    metadata request for a missing topic could make the broker create it."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        if topic not in admin.list_topics():
            return None
        [described] = admin.describe_topics([topic])
        return len(described["partitions"])
    finally:
        admin.close()


def not_found_errors(log: str) -> list[str]:
    """kafka-python's ERROR lines about a topic missing from its metadata in `log` (the lines logged)."""
    return [line for line in log.splitlines() if "not found in cluster metadata" in line]


def all_committed(bootstrap: str, group_id: str, topic: str) -> bool:
    """Whether the group committed the end of every partition of `topic` that holds messages: all read."""
    done = committed(bootstrap, group_id, topic)
    ends = {p: end for p, end in end_offsets(bootstrap, topic).items() if end}
    return bool(ends) and all(done.get(p) == end for p, end in ends.items())


def both_stages_read(bootstrap: str, group_id: str, evaluations: str, stage: str, keyed: str) -> None:
    """Until both stages of a service (`tracescore alert`: stage routes; `tracescore conversations`: turns)
    committed the end of their input: every record re-keyed onto `keyed`, every re-keyed one applied."""
    wait_until(
        lambda: (
            all_committed(bootstrap, group_id, evaluations)
            and all_committed(bootstrap, f"{group_id}.{stage}", keyed)
        ),
        f"group {group_id} to read everything",
    )


def consumer_settings(bootstrap: str, prefix: str, **overrides: Any) -> ConsumerSettings:
    """A scoring consumer reading `<prefix>.spans` and writing `<prefix>.evaluations` (and its DLQ and
    evaluation spans), in group `<prefix>.group`, stopping 3 s after the topic runs dry."""
    from tracescore.consume import ConsumerSettings

    fields: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "topic": f"{prefix}.spans",
        "group_id": f"{prefix}.group",
        "evaluations_topic": f"{prefix}.evaluations",
        "dlq_topic": f"{prefix}.dlq",
        "evaluation_spans_topic": f"{prefix}.evaluation-spans",
        "idle_timeout_s": 3,
    }
    return ConsumerSettings.model_validate({**fields, **overrides})


def judge_client(base_url: str, **settings: Any) -> OpenAIJudge:
    """The LLM judge (the real `openai` client) against the local judge server at `base_url`."""
    from tracescore.score.judges import OpenAIJudge, OpenAIJudgeSettings

    return OpenAIJudge(
        OpenAIJudgeSettings(base_url=base_url, api_key="unused", model="judge-test", **settings)
    )


@contextmanager
def nothing_left_open() -> Iterator[None]:
    """Fails when a socket, file or transport opened in the block was left unclosed: a ResourceWarning raised
    in it or by the garbage collection that ends it. What earlier tests in this process left as garbage is
    collected first, unrecorded: a worker runs many tests, and their leftovers are not this block's."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        yield
        gc.collect()
    left = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert left == [], left


def own_suite(folder: Path, test_module: str) -> Path:
    """A suite of one test module (`test_module`'s source) in `folder`/tests, on a copy of this suite's
    conftest and what it imports, for a pytest run of its own that tests how the suite runs."""
    suite = folder / "tests"
    suite.mkdir()
    for name in ("conftest.py", "_helpers.py", "_held.py", "_cpu_plugin.py"):
        shutil.copy(Path(__file__).with_name(name), suite / name)
    (suite / "test_own.py").write_text(test_module)
    return suite
