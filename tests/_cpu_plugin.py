"""Where the suite's CPU goes, test by test (issue 33 item 4): an opt-in measurement, off unless
`TRACESCORE_TEST_CPU=<folder>` is set (tests/conftest.py loads this file; it does nothing without it).

For each test (its setup, call and teardown) every pytest process (each xdist worker, or the one process)
records:

- `wall`: seconds of the clock;
- `self`: the worker's own CPU (user + sys, `getrusage(RUSAGE_SELF)`);
- `children`: the CPU of the processes that ended during the test (every process descended from the
  worker, by /proc's parent links), wherever they were reaped: by the worker (`getrusage(RUSAGE_CHILDREN)`,
  which includes their own reaped children) or by a process of the tree that outlives the test (its
  cutime + cstime in /proc/<pid>/stat: the zygote's forked services, tests/_zygote.py, a shell's commands),
  less what an earlier test was already charged for them while they ran;
- `held`: the CPU during the test of processes that outlived the test that started them (Phoenix, a
  module's services, the session broker of a run without xdist): charged to their own line
  (`held_processes`, with the test that started them and their command), not to the tests, so one broker
  start is not one test's cost.

It also records the worker's start-up (`startup`: the interpreter, pytest and plugins, up to configure) and
its collection (`collection`). The xdist controller runs no test, but the run's shared broker is its child
(tests/conftest.py): at its session's end it records the processes it still runs (the broker's JVM) and
the CPU of those it started and ended during the run (the broker's storage format) as held lines of its own.
One JSON per process into the folder (`<worker id>.json`, written at its end); `python tests/_cpu_plugin.py
<folder>` ranks them: by folder, by module, by test, and the held processes. Only the run itself writes: the
folder reaches its workers in `workerinput`, and the variable is taken out of the environment, so a pytest
run a test starts (tests/test_suite_interrupt.py) is that test's CPU, not a run of its own writing over the
workers' files. The /proc scans are taken outside the `self` readings, so the measurement's own cost is not a
test's. Known gap: a process that leaves the tree (a double fork re-parented to init) is not seen after it
leaves.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ENV = "TRACESCORE_TEST_CPU"
_TICK = os.sysconf("SC_CLK_TCK")


def _cpu(usage: resource.struct_rusage) -> float:
    return usage.ru_utime + usage.ru_stime


@dataclass(frozen=True)
class _Proc:
    ppid: int
    start: int  # start time in ticks: with the pid, one process (pids are reused)
    cpu: float
    reaped: float  # the CPU of its children it waited for (and theirs): cutime + cstime


def _processes() -> dict[int, _Proc]:
    procs = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        # After the command: state ppid ... utime(12) stime(13) cutime(14) cstime(15) ... starttime(20),
        # counted from 1 at pid.
        ticks = [int(fields[n]) for n in (11, 12, 13, 14)]
        procs[int(name)] = _Proc(
            int(fields[1]), int(fields[19]), (ticks[0] + ticks[1]) / _TICK, (ticks[2] + ticks[3]) / _TICK
        )
    return procs


def _descendants(root: int, procs: dict[int, _Proc] | None = None) -> dict[tuple[int, int], _Proc]:
    procs = _processes() if procs is None else procs
    children = defaultdict(list)
    for pid, proc in procs.items():
        children[proc.ppid].append(pid)
    found, todo = {}, list(children[root])
    while todo:
        pid = todo.pop()
        found[(pid, procs[pid].start)] = procs[pid]
        todo.extend(children[pid])
    return found


def _command(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    words = [word.decode(errors="replace") for word in argv if word]
    # A JVM's command is pages of flags and classpath: its main class says what it is.
    main = next((word for word in words if word.startswith(("kafka.", "org.", "io."))), None)
    if main:
        return f"java {main}"
    return " ".join(words)[:160]


@dataclass
class _Recorder:
    folder: Path
    worker: str = field(default_factory=lambda: os.environ.get("PYTEST_XDIST_WORKER", "main"))
    tests: list[dict[str, object]] = field(default_factory=list)
    # CPU already counted, by process: its own (as held) and its reaped children's (as a test's children).
    charged: dict[tuple[int, int], float] = field(default_factory=dict)
    charged_reaped: dict[tuple[int, int], float] = field(default_factory=dict)
    held: dict[tuple[int, int], dict[str, object]] = field(default_factory=dict)
    startup: float = 0.0
    collection: float = 0.0
    # The controller's: its reaped children's CPU at configure, and its workers (not its own processes).
    reaped_at_start: float = 0.0
    workers: set[int] = field(default_factory=set)

    def test(self, nodeid: str) -> Iterator[None]:
        before = _descendants(os.getpid())
        self_0, children_0 = (
            _cpu(resource.getrusage(resource.RUSAGE_SELF)),
            resource.getrusage(resource.RUSAGE_CHILDREN),
        )
        wall_0 = time.perf_counter()
        yield
        wall = time.perf_counter() - wall_0
        self_1 = _cpu(resource.getrusage(resource.RUSAGE_SELF))
        reaped = _cpu(resource.getrusage(resource.RUSAGE_CHILDREN)) - _cpu(children_0)
        procs = _processes()
        after = _descendants(os.getpid(), procs)
        held = 0.0
        # Ended during the test: all its CPU (and its reaped children's) went into its reaper's reaped total,
        # the worker's RUSAGE_CHILDREN or a running process's cutime (below); an earlier test was charged
        # part of it while it ran. (One that left the tree still running is not counted off: it reaped
        # into nothing of ours.)
        for key in before.keys() - after.keys():
            if key[0] not in procs or procs[key[0]].start != key[1]:
                reaped -= self.charged.pop(key, 0.0) + self.charged_reaped.pop(key, 0.0)
            if key in self.held:
                self.held[key]["ended_in"] = nodeid
        # Running at the end: it outlives the test, so its own CPU is its own line's, not the test's; what it
        # reaped meanwhile (the zygote's forked services) ended in the test.
        for key, proc in after.items():
            held += proc.cpu - self.charged.get(key, 0.0)
            self.charged[key] = proc.cpu
            reaped += proc.reaped - self.charged_reaped.get(key, 0.0)
            self.charged_reaped[key] = proc.reaped
            if key not in self.held:
                started_in = "?" if key in before else nodeid
                self.held[key] = {"pid": key[0], "command": _command(key[0]), "started_in": started_in}
            self.held[key]["cpu"] = proc.cpu
        children = max(reaped, 0.0)
        self.tests.append(
            {
                "nodeid": nodeid,
                "wall": round(wall, 4),
                "self": round(self_1 - self_0, 4),
                "children": round(children, 4),
                "held": round(held, 4),
            }
        )

    def controller_held(self) -> None:
        """The controller's own processes, read before its workers end and are reaped: those it still runs
        (the shared broker; not the workers and theirs) and the CPU of those it ran and reaped meanwhile (the
        broker's storage format)."""
        procs = _descendants(os.getpid())
        parents = {pid: proc.ppid for (pid, _), proc in procs.items()}

        def a_workers(pid: int) -> bool:
            while pid in parents:
                if pid in self.workers:
                    return True
                pid = parents[pid]
            return False

        for key, proc in procs.items():
            if not a_workers(key[0]):
                self.held[key] = self._line(key[0], proc.cpu)
        reaped = _cpu(resource.getrusage(resource.RUSAGE_CHILDREN)) - self.reaped_at_start
        self.held[(0, 0)] = {
            **self._line(0, round(reaped, 3)),
            "command": "its processes ended during the run",
        }

    @staticmethod
    def _line(pid: int, cpu: float) -> dict[str, object]:
        return {"pid": pid, "command": _command(pid), "started_in": "the xdist controller", "cpu": cpu}

    def write(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        report = {
            "worker": self.worker,
            "pid": os.getpid(),
            "startup": round(self.startup, 3),
            "collection": round(self.collection, 3),
            "self_total": round(_cpu(resource.getrusage(resource.RUSAGE_SELF)), 3),
            "children_total": round(_cpu(resource.getrusage(resource.RUSAGE_CHILDREN)), 3),
            "tests": self.tests,
            "held_processes": list(self.held.values()),
        }
        (self.folder / f"{self.worker}.json").write_text(json.dumps(report, indent=1))


_RECORDER = pytest.StashKey[_Recorder]()
_INPUT = "tracescore_test_cpu"  # the workerinput key: the folder


def pytest_configure(config: pytest.Config) -> None:
    worker_input = getattr(config, "workerinput", None)
    folder = worker_input.get(_INPUT) if worker_input is not None else os.environ.pop(ENV, None)
    if folder:
        recorder = _Recorder(Path(folder))
        if worker_input is None and getattr(config.option, "numprocesses", None):
            recorder.worker = "controller"  # runs no test; its reaped children are the workers, counted apart
        recorder.startup = _cpu(resource.getrusage(resource.RUSAGE_SELF))
        recorder.reaped_at_start = _cpu(resource.getrusage(resource.RUSAGE_CHILDREN))
        config.stash[_RECORDER] = recorder


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: object) -> None:
    """xdist's controller, setting up a worker: the folder it writes into."""
    recorder = node.config.stash.get(_RECORDER, None)  # type: ignore[attr-defined]
    if recorder is not None:
        node.workerinput[_INPUT] = str(recorder.folder)  # type: ignore[attr-defined]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodeready(node: object) -> None:
    """xdist's controller, a worker ready: its children so far are its workers (each ready before any test is
    handed out, so before any asks for the shared broker)."""
    recorder = node.config.stash.get(_RECORDER, None)  # type: ignore[attr-defined]
    if recorder is not None:
        recorder.workers.update(pid for pid, proc in _processes().items() if proc.ppid == os.getpid())


@pytest.hookimpl(tryfirst=True)  # before xdist's (it ends the workers)
def pytest_sessionfinish(session: pytest.Session) -> None:
    recorder = session.config.stash.get(_RECORDER, None)
    if recorder is not None and recorder.worker == "controller":
        recorder.controller_held()


def pytest_collection_finish(session: pytest.Session) -> None:
    recorder = session.config.stash.get(_RECORDER, None)
    if recorder is not None:
        recorder.collection = _cpu(resource.getrusage(resource.RUSAGE_SELF)) - recorder.startup


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    recorder = item.config.stash.get(_RECORDER, None)
    if recorder is None:
        return (yield)
    measure = recorder.test(item.nodeid)
    next(measure)
    try:
        return (yield)
    finally:
        next(measure, None)


def pytest_unconfigure(config: pytest.Config) -> None:
    recorder = config.stash.get(_RECORDER, None)
    if recorder is not None:
        recorder.write()


# --- the ranking: python tests/_cpu_plugin.py <folder> [top] ---------------------------------------------


def _header(title: str, columns: str) -> None:
    count = columns.count("|")
    print(f"\n{title}\n| {columns} |\n|---|{'---:|' * count}")


def _rank(folder: Path, top: int) -> None:
    reports = [json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))]
    tests = [test for report in reports for test in report["tests"]]
    for test in tests:
        test["cpu"] = test["self"] + test["children"]
    by_folder: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0])
    by_module: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0])
    for test in tests:
        module = test["nodeid"].split("::", 1)[0]
        parts = module.split("/")
        for key, table in (
            (module, by_module),
            ("/".join(parts[:2]) if len(parts) > 2 else parts[0], by_folder),
        ):
            row = table[key]
            row[0] += test["cpu"]
            row[1] += test["held"]
            row[2] += test["wall"]
            row[3] += 1

    def table(title: str, rows: dict[str, list[float]], limit: int) -> None:
        _header(title, "where | tests | CPU-s (self + children) | held CPU-s | wall s")
        for key, (cpu, held, wall, count) in sorted(rows.items(), key=lambda kv: -kv[1][0])[:limit]:
            print(f"| {key} | {count} | {cpu:.1f} | {held:.1f} | {wall:.1f} |")

    total_tests = sum(test["cpu"] for test in tests)
    startup = sum(report["startup"] for report in reports)
    collection = sum(report["collection"] for report in reports)
    held = [proc for report in reports for proc in report["held_processes"]]
    held_total = sum(proc["cpu"] for proc in held)
    totals = sum(
        report["self_total"]
        + (
            report["children_total"]
            if report["worker"] != "controller"
            else sum(proc["cpu"] for proc in report["held_processes"])
        )
        for report in reports
    )
    print(
        f"processes: {len(reports)}, tests: {len(tests)}; CPU-s: tests {total_tests:.1f}, held processes"
        f" {held_total:.1f}, start-up {startup:.1f}, collection {collection:.1f}; the processes' own"
        f" totals (self + reaped children) {totals:.1f}"
    )
    table("By folder", by_folder, 100)
    table(f"By module (top {top})", by_module, top)
    _header(f"By test (top {top})", "test | CPU-s | self | children | held | wall s")
    for test in sorted(tests, key=lambda test: -test["cpu"])[:top]:
        print(
            f"| {test['nodeid']} | {test['cpu']:.1f} | {test['self']:.1f} | {test['children']:.1f} |"
            f" {test['held']:.1f} | {test['wall']:.1f} |"
        )
    _header("Held processes (outlived the test that started them)", "command | CPU-s | started in")
    for proc in sorted(held, key=lambda proc: -proc["cpu"]):
        print(f"| {proc['command'][:80]} | {proc['cpu']:.1f} | {proc['started_in']} |")


if __name__ == "__main__":
    _rank(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 30)
