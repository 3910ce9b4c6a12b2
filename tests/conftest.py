"""Shared fixtures and how the suite runs in parallel (docs/contributing/index.md, Development, says it for
people).

`make test` runs pytest with xdist workers (`-n 8 --dist loadgroup`): each worker is its own pytest session,
so a session fixture is started once per worker that needs it.

- `kafka_broker` / `bootstrap`: the run's real Apache Kafka 4.x broker, shared by every test of every
  worker at once: one JVM for the run, not one idling on each worker. The xdist controller (the process
  that runs no test) starts it when a worker first asks for it and stops it at the run's end, Ctrl-C or
  SIGTERM included (`_ControllerBroker`); without xdist the session starts its own. Tests keep apart by
  topic and group names (`topic_prefix`), never by a broker of their own, and never look at what is
  broker-wide (every topic, every group): the other workers' tests are on it too.
- `own_broker`: a broker for one test alone. Ask for it when the test stops, restarts, kills or pauses the
  broker, or changes its configuration: the shared one is only an address (`SharedKafkaBroker`), whose
  process no test can reach.
- `closed_port`: a loopback port nothing listens on (a server that is down) for the whole test: held, so
  no other worker's server takes it meanwhile (a port found free and let go may be taken).
- `phoenix_server`: a real Arize Phoenix. Expensive to start, so every test that uses it runs on one worker
  (the grouping below), which starts it once; held while those tests run and stopped after the last
  (tests/_held.py), not left idling to the run's end. A test asking for it dynamically
  (`request.getfixturevalue`) is not seen by the grouping and would start another on its worker: name it.
- `phoenix_spawn`: for a test that stops, restarts or freezes a Phoenix, which starts its own with
  `PhoenixServer(spawn=phoenix_spawn)`: forked from a zygote that imported Phoenix once
  (tests/_phoenix_zygote.py: ~4 CPU-s a server against ~13 for `phoenix serve` started anew). Those tests run
  on one worker (not the shared Phoenix's: each group takes minutes), which starts the zygote once, held as
  Phoenix is.

The grouping (`xdist_group`, set here so no test file has to know): tests that share a module- or
class-scoped fixture run on one worker, so the fixture starts once; tests using a fixture in
`ONE_WORKER_FIXTURES` run on one worker. Every other test is scheduled on its own, to whichever worker is
free. Those groups and the `LONG_FIRST` tests (longest first) are handed out first, then the tests that use a
broker, then the rest (`_order`). (xdist hands out the multi-test groups, largest first, before the single
tests, which go in this order.)
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import shutil
import signal
import socket
import tempfile
import threading
import uuid
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from _held import held, release_unused
from _helpers import end_started_processes

from tracescore import testing
from tracescore.testing.kafka_broker import KafkaBroker, KafkaUnavailable
from tracescore.testing.phoenix import PhoenixServer

pytest_plugins = ("_cpu_plugin",)  # per-test CPU, when TRACESCORE_TEST_CPU is set: tests/_cpu_plugin.py

# Fixtures that take seconds to start and are used by a handful of tests: their tests share one worker
# rather than each worker starting its own, and come one after another there, so a fixture held while they
# run (tests/_held.py) starts once.
ONE_WORKER_FIXTURES = ("phoenix_server", "phoenix_spawn", "prometheus_stack")
# A test whose fixtures start or use a broker (directly or through another fixture).
BROKER_FIXTURES = frozenset({"kafka_broker", "own_broker"})
# Scheduled first, right after those groups, the longest first: the tests that take half a minute or more on a
# loaded two-core machine (a pip install into a new venv, the demo, members joining and leaving a group,
# brokers stopped and restarted, SASL brokers, stop budgets run out). xdist hands the single tests out in
# this order, so none of them starts late and leaves one worker running it alone at the end. Node-id
# prefixes, from `make test`'s --durations (an entry missing here costs time, never a result).
LONG_FIRST = (
    "tests/consume/test_rebalance_kafka.py::test_two_then_three_members_joining_and_leaving",
    "tests/consume/test_faults.py::test_sigterm_with_the_broker_gone",
    "tests/consume/test_sasl_kafka.py",
    "tests/consume/test_rebalance_kafka.py::test_a_rebalance_storm",
    "tests/packaging/",
    "tests/testing/test_phoenix_server.py",
    "tests/conversations/test_conversations_service_kafka.py::test_members_joining_and_leaving_in_turn",
    "tests/alert/test_drop_benchmark.py",
    "tests/consume/test_faults.py",
    "tests/conversations/test_conversations_stop_kafka.py",
    "tests/consume/test_stop_kafka.py",
    "tests/conversations/test_logic.py::test_100000_open_conversations",
    "tests/docs/test_reference.py",
    "tests/testing/test_kafka_broker.py",
    "tests/examples/",
    "tests/alert/test_alert_stop_kafka.py",
    "tests/alert/test_alert_service_kafka.py::test_members_joining_and_leaving_in_turn",
    "tests/consume/test_rebalance_kafka.py::test_records_sent_during_a_revoke",
    "tests/consume/test_faults_fuzz.py",
)


def pytest_configure(config: pytest.Config) -> None:
    """SIGTERM (a cancelled CI job, `timeout`, an editor's stop button) ends the run as Ctrl-C does: the
    teardown stops the brokers, servers and services the tests started. Those run in sessions of their own
    (a Ctrl-C in the terminal must not kill a broker mid-test), so pytest's default death on SIGTERM left
    them running. An xdist controller, which runs no test, passes the signal on to its workers."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return  # someone else's handler (an embedding runner): theirs to decide

    def interrupt(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends pytest at once
        if config.pluginmanager.has_plugin("dsession"):
            # The workers, not the shared broker: the workers' teardown still talks to it; it stops after
            # them (pytest_unconfigure).
            shared = config.stash.get(_SHARED, None)
            for pid in set(_children()) - {shared.pid if shared else None}:
                os.kill(pid, signal.SIGTERM)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def _children() -> list[int]:
    """This process's child processes (Linux's /proc)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # exited meanwhile
        if parent == os.getpid():
            pids.append(int(stat.parent.name))
    return pids


@pytest.fixture(autouse=True)
def _no_service_process_left() -> Iterator[None]:
    """A service process a test started and did not stop (it failed, or was interrupted) is ended with the
    test, never left reading and writing into the next tests or past the run (tests/_helpers.py)."""
    yield
    end_started_processes()


# The run's shared broker has every Kafka test of eight workers on it at once, with their topics until each
# test ends (`_drop_topics`): more heap than a test's own broker (512m), so it is not collecting garbage all
# the time; still a ceiling, not what it takes.
SHARED_BROKER_HEAP = "1g"


@dataclass
class SharedKafkaBroker(KafkaBroker):
    """The run's shared broker as its tests get it: the address of a broker another process runs (the xdist
    controller, or the session's fixture), which no test may stop, restart or pause: the other workers' tests
    are on it. Its `process` is None; a test that needs the process asks for `own_broker`."""

    def start(self, timeout_s: float = 60.0) -> KafkaBroker:
        raise self._not_yours()

    def stop(self, timeout_s: float = 20.0) -> None:
        raise self._not_yours()

    def close(self) -> None:
        raise self._not_yours()

    def _not_yours(self) -> AssertionError:
        return AssertionError(
            "the run's shared broker is every test's: a test that stops it asks for own_broker"
        )


def _shared(broker: KafkaBroker) -> SharedKafkaBroker:
    return SharedKafkaBroker(
        port=broker.port, controller_port=broker.controller_port, cluster_id=broker.cluster_id
    )


class _ControllerBroker:
    """The xdist controller's side of the shared broker: a Unix socket the workers ask on (its path is handed
    to them in `workerinput`). The first ask starts the broker, so a run whose tests need none starts none;
    every ask is answered with its address, or with why it could not start (each of its tests fails saying
    so). A worker that asks while it starts waits for it."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="tracescore-shared-broker-"))
        self.path = str(self.folder / "ask")
        self.broker: KafkaBroker | None = None
        self._answer: bytes | None = None
        self._closed = False
        self._lock = threading.Lock()  # held by a start under way: close() waits for it, then stops it
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._socket.bind(self.path)
        self._socket.listen()
        self._thread = threading.Thread(target=self._serve, name="shared-kafka-broker", daemon=True)
        self._thread.start()

    @property
    def pid(self) -> int | None:
        process = self.broker.process if self.broker else None
        return process.pid if process else None

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return  # closed: the run is over
            with connection, self._lock:
                if self._answer is None and not self._closed:
                    self._answer = self._start()
                connection.sendall(self._answer or b'{"error": "the run is ending"}')

    def _start(self) -> bytes:
        self.broker = KafkaBroker(heap=SHARED_BROKER_HEAP)
        try:
            self.broker.start()
        except Exception as exc:  # every test that asks fails with it, as the broker's own start would
            return json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode()
        shared = _shared(self.broker)
        return json.dumps({"port": shared.port, "controller_port": shared.controller_port,
                           "cluster_id": shared.cluster_id}).encode()  # fmt: skip

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._socket.shutdown(socket.SHUT_RDWR)  # wakes the accept() (Linux)
        self._socket.close()
        with self._lock:
            if self.broker is not None:
                self.broker.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def _asked(path: str) -> SharedKafkaBroker:
    """A worker's shared broker, asked of the controller (`_ControllerBroker`), which starts it at the first
    ask."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as ask:
        ask.connect(path)
        answer = b"".join(iter(lambda: ask.recv(4096), b""))
    if not answer:
        raise KafkaUnavailable("the xdist controller closed without answering for the shared broker")
    shared = json.loads(answer)
    if "error" in shared:
        raise KafkaUnavailable(f"the run's shared broker did not start: {shared['error']}")
    return SharedKafkaBroker(**shared)


_SHARED = pytest.StashKey[_ControllerBroker]()
_SHARED_INPUT = "tracescore_shared_kafka_broker"  # the workerinput key: the socket's path


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: object) -> None:
    """xdist's controller, setting up a worker: where it asks for the shared broker."""
    config: pytest.Config = node.config  # type: ignore[attr-defined]
    if _SHARED not in config.stash:
        config.stash[_SHARED] = _ControllerBroker()
    node.workerinput[_SHARED_INPUT] = config.stash[_SHARED].path  # type: ignore[attr-defined]


def pytest_unconfigure(config: pytest.Config) -> None:
    """A worker's end: its `_drop_topics` client closed. The controller's end (the workers are down): the
    shared broker stops."""
    while _ADMINS:
        _ADMINS.popitem()[1].close()
    shared = config.stash.get(_SHARED, None)
    if shared is not None:
        shared.close()


@pytest.fixture(scope="session")
def kafka_broker(request: pytest.FixtureRequest) -> Iterator[KafkaBroker]:
    # No skip on failure: a test that needs Kafka and cannot get it must fail loudly (KafkaUnavailable).
    path = getattr(request.config, "workerinput", {}).get(_SHARED_INPUT)
    if path is not None:
        yield _asked(path)
        return
    with KafkaBroker(heap=SHARED_BROKER_HEAP) as broker:
        yield _shared(broker)


@pytest.fixture
def bootstrap(kafka_broker: KafkaBroker) -> str:
    return kafka_broker.bootstrap_servers


@pytest.fixture
def topic_prefix(request: pytest.FixtureRequest) -> Iterator[str]:
    """Per-test topic names, so tests sharing the broker never read each other's messages. On the run's shared
    broker they are deleted after the test (`_drop_topics`)."""
    shared = request.getfixturevalue("kafka_broker") if "kafka_broker" in request.fixturenames else None
    prefix = f"t{uuid.uuid4().hex[:10]}"
    yield prefix
    if shared is not None:
        end_started_processes()  # nothing of the test's still reads or writes them
        _drop_topics(shared.bootstrap_servers, prefix)


_ADMINS: dict[str, Any] = {}  # bootstrap address -> this worker's admin client for `_drop_topics`


def _drop_topics(bootstrap: str, prefix: str) -> None:
    """The topics named with a test's prefix deleted from the run's shared broker once the test is over.

    Every test's topics otherwise stay on it to the run's end (thousands of partitions), and every look at the
    whole cluster's metadata grows with them: the services' looks for an input not created yet (each second),
    for their state and output topics' partitions, their start's topic check, all answered with every topic
    of the cluster. 39 Kafka tests beside 1,000 leftover topics took ~2.5x the CPU they take beside none
    (suite26's figures in BENCHMARKS.md). A clean-up, not a check: a broker that does not answer leaves
    them there."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    try:
        admin = _ADMINS.get(bootstrap)
        if admin is None:
            admin = _ADMINS[bootstrap] = KafkaAdminClient(
                bootstrap_servers=bootstrap, request_timeout_ms=10000
            )
        names = [name for name in admin.list_topics() if name.startswith(prefix)]
        if names:
            admin.delete_topics(names)
    except KafkaError:
        pass


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port nothing listens on for the whole test (a server that is down), which no other
    worker's server can take meanwhile (`tracescore.testing.closed_port`)."""
    with testing.closed_port() as port:
        yield port


@pytest.fixture
def own_broker() -> Iterator[KafkaBroker]:
    """A broker of this test's own, for tests that stop, restart, kill or pause it (the shared one must stay
    up and answering for the other tests of every worker)."""
    with KafkaBroker() as broker:
        yield broker


@pytest.fixture
def phoenix_spawn(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """`PhoenixServer`'s `spawn` for this worker's Phoenix servers (tests/_phoenix_zygote.py)."""
    from _phoenix_zygote import phoenix_spawn  # imported here: the suites of own_suite copy no such module

    return held(request, phoenix_spawn)


@pytest.fixture
def phoenix_server(request: pytest.FixtureRequest) -> PhoenixServer:
    # No skip on failure: a test that needs Phoenix and cannot get it must fail loudly (PhoenixUnavailable).
    return held(request, lambda stack: stack.enter_context(PhoenixServer()))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    """A held fixture (tests/_held.py) stops after the last of its tests, once that test's own fixtures are
    down."""
    try:
        return (yield)
    finally:
        release_unused(item, nextitem)


def _worker_group(item: pytest.Item) -> str | None:
    """The xdist group `item` must share a worker with, if any (see the module's docstring)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    for name in ONE_WORKER_FIXTURES:
        if name in info.name2fixturedefs:
            return name
    if any(defs[-1].scope in ("module", "class") for defs in info.name2fixturedefs.values()):
        return item.nodeid.split("::", 1)[0]
    return None


def _order(item: pytest.Item, group: str | None) -> tuple[int, int]:
    """When `item` is handed out: the one-worker groups and the long ones (0, longest first), then the tests
    that talk to a broker (1: they wait seconds to a minute on groups, timeouts and services), then the rest
    (2: most take milliseconds). The run ends on short tests spread over every worker, not on one worker
    still running a Kafka test that came last in file order while the others idle."""
    long = next((rank for rank, prefix in enumerate(LONG_FIRST) if item.nodeid.startswith(prefix)), None)
    if long is not None:
        return 0, long
    if group in ONE_WORKER_FIXTURES:
        return 0, len(LONG_FIRST)
    uses_broker = BROKER_FIXTURES.intersection(getattr(item, "fixturenames", ()))
    if uses_broker or "kafka" in item.nodeid.split("::", 1)[0]:
        return 1, 0
    return 2, 0


@pytest.hookimpl(tryfirst=True)  # before xdist reads the marks (its hook appends the group to the node id)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    groups: dict[pytest.Item, str | None] = {}
    for item in items:
        groups[item] = group = _worker_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=lambda item: _order(item, groups[item]))  # stable: each part keeps its order


_GROUPS_LOST = pytest.StashKey[bool]()


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """On an xdist worker with `--dist loadgroup`, the groups must have reached the node ids (how xdist tells
    the scheduler). A pytest or xdist release that loses them would run the suite anyway, only slower,
    starting Phoenix and module fixtures on every worker (pytest-dev/pytest-xdist#1386): the grouped tests
    fail instead (below), saying why."""
    session.config.stash[_GROUPS_LOST] = bool(getattr(session.config.option, "loadgroup", False)) and any(
        item.get_closest_marker("xdist_group") and "@" not in item.nodeid for item in session.items
    )
    # What exists when the collection ends (the imported modules, the test items and their parameters: over
    # 140,000 objects on a worker) lives to the session's end: out of the cyclic collector's reach, so its
    # every full pass does not walk it again: 0.91x the CPU of tests/extract, tests/alert and the 100,000
    # conversations (BENCHMARKS.md, suite21). A raised generation-0 threshold on top was within the noise,
    # and would move when finalizers run.
    gc.collect()
    gc.freeze()


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.config.stash.get(_GROUPS_LOST, False) and item.get_closest_marker("xdist_group"):
        pytest.fail(
            "xdist did not apply the worker groups: this pytest-xdist does not work with this pytest; install"
            " the versions pyproject.toml's dev extra names",
            pytrace=False,
        )
