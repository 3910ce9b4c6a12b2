"""The suite stopped with SIGTERM (a cancelled CI job, `timeout`, an editor's stop button) ends as Ctrl-C does
(tests/conftest.py): the teardown runs, and the processes the tests started are gone with pytest. Brokers run
in sessions of their own, so pytest's default death on SIGTERM left them running, and the services a test
started, with them; here stand-ins for both, in a pytest run of its own on the suite's conftest."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from _helpers import own_suite, wait_until

SLEEPER = '[sys.executable, "-c", "import time; time.sleep(600)"]'
RUN = textwrap.dedent(
    f"""
    import os, subprocess, sys, time
    from pathlib import Path

    import pytest
    from _helpers import started_process


    @pytest.fixture(scope="session")
    def server():
        # A broker's way: its own session (a Ctrl-C in the terminal does not reach it), ended by the teardown.
        process = subprocess.Popen({SLEEPER}, start_new_session=True)
        yield process
        process.terminate()
        process.wait()


    def test_running(server):
        service = started_process(subprocess.Popen({SLEEPER}, start_new_session=True))
        Path(os.environ["PIDS_FILE"]).write_text(f"{{server.pid}} {{service.pid}}")
        time.sleep(600)
    """
)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has ended: its parent just has not read its status


@contextmanager
def _run(tmp_path: Path, test_module: str, workers: str) -> Iterator[tuple[subprocess.Popen[str], list[int]]]:
    """A pytest run of `test_module` on the suite's conftest, with `PIDS_FILE` in its environment, and the
    pids the test adds to the list: the run and those are killed at the end if they are still running. Its
    output goes to a file beside the suite: a pipe read only at the end fills up, and the run stops on it."""
    suite = own_suite(tmp_path, test_module)
    # The async plugins serve no test here (anyio's alone imports trio: a quarter CPU-second a process).
    unused = ["-p", "no:cacheprovider", "-p", "no:asyncio", "-p", "no:anyio"]
    with _output(suite).open("w") as output:
        run = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", *unused, "-n", workers, str(suite)],
            cwd=tmp_path,
            env={**os.environ, "PIDS_FILE": str(tmp_path / "pids")},
            stdout=output,
            stderr=subprocess.STDOUT,
            text=True,
        )
    pids: list[int] = []
    try:
        yield run, pids
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _output(suite: Path) -> Path:
    return suite.with_name("output")


def _sigterm(run: subprocess.Popen[str], pids: list[int]) -> None:
    """SIGTERM ends the run as Ctrl-C does, and none of `pids` is left running."""
    run.send_signal(signal.SIGTERM)
    run.wait(timeout=120)
    output = _output(Path(run.args[-1])).read_text()
    assert run.returncode == pytest.ExitCode.INTERRUPTED, output
    left = [pid for pid in pids if _alive(pid)]
    assert not left, f"still running after pytest ended: {left}\n{output}"


@pytest.mark.parametrize("workers", ["0", "1"], ids=["in-process", "xdist"])
def test_sigterm_ends_the_run_like_ctrl_c_and_leaves_no_process_behind(tmp_path: Path, workers: str) -> None:
    pids_file = tmp_path / "pids"
    with _run(tmp_path, RUN, workers) as (run, pids):
        wait_until(lambda: pids_file.exists() and pids_file.read_text(), "the test to start its processes")
        pids.extend(int(pid) for pid in pids_file.read_text().split())
        _sigterm(run, pids)


SHARED = textwrap.dedent(
    """
    import os, time
    from pathlib import Path

    import pytest


    @pytest.mark.parametrize("n", [1, 2])
    def test_on_the_broker(bootstrap, n):
        Path(os.environ["PIDS_FILE"]).with_suffix(f".{n}").write_text(f"{os.getpid()} {bootstrap}")
        time.sleep(600)
    """
)


def _brokers_under(pid: int) -> dict[int, int]:
    """The Kafka brokers descended from process `pid`: broker's pid -> its parent's."""
    parents, brokers = {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            if b"kafka.Kafka" in (stat.parent / "cmdline").read_bytes().split(b"\0"):
                brokers[int(stat.parent.name)] = parents[int(stat.parent.name)]
        except (OSError, IndexError, ValueError):
            continue  # exited meanwhile
    below = {}
    for broker, parent in brokers.items():
        up = broker
        while up in parents and up != pid:
            up = parents[up]
        if up == pid:
            below[broker] = parent
    return below


def test_the_workers_share_one_broker_the_controller_stops_at_sigterm(tmp_path: Path) -> None:
    """Every xdist worker's tests get the run's one broker, started by the controller (not one JVM a worker,
    each idling to the run's end), which stops it when the run ends, here by SIGTERM."""
    seen = [(tmp_path / "pids").with_suffix(f".{n}") for n in (1, 2)]
    with _run(tmp_path, SHARED, "2") as (run, pids):
        wait_until(lambda: all(file.exists() and file.read_text() for file in seen), "both tests to start")
        (worker_1, address_1), (worker_2, address_2) = (file.read_text().split() for file in seen)
        assert worker_1 != worker_2, "the two tests ran on one worker"
        assert address_1 == address_2, "each worker got a broker of its own"
        brokers = _brokers_under(run.pid)
        assert list(brokers.values()) == [run.pid], f"not one broker, the controller's: {brokers}"
        pids.extend(brokers)
        _sigterm(run, pids)
