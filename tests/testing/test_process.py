"""Ports for the servers tests start (brokers, judges, Phoenix), several test workers at once, and the guard
that ends a server with the process that started it."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from _helpers import kill_if_running, wait_until

from tracescore.testing import closed_port, free_port, run_guarded
from tracescore.testing.kafka_broker import _pid_alive


def test_free_ports_are_below_the_range_the_kernel_gives_outgoing_connections() -> None:
    """Outgoing connections (many, with parallel workers) take ports from the ephemeral range: a port chosen
    there could be taken between the choice and a slow server's bind."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = {free_port() for _ in range(50)}
    assert all(1024 < port < low for port in ports), sorted(ports)
    assert len(ports) > 40, "chosen at random, so parallel workers rarely pick the same one"
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))  # free when returned


def test_a_closed_port_refuses_connections_and_no_server_can_take_it_while_held() -> None:
    """For a test of a server that is down: a port found free and let go (bind to 0, close) could be bound
    by another worker's server before the test connects, and the 'down' server would answer."""
    with closed_port() as port:
        with socket.socket() as server, pytest.raises(OSError):
            server.bind(("127.0.0.1", port))  # another worker's server cannot take it
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5)


REPO = Path(__file__).resolve().parents[2]

# A server that ends on SIGTERM as a broker's JVM does (a handler: it shuts down), writing that it did.
_SERVER = """
import signal, sys, time
from pathlib import Path

def end(*_):
    Path(sys.argv[1]).write_text("SIGTERM")
    sys.exit(0)

signal.signal(signal.SIGTERM, end)
print("ready", flush=True)
time.sleep(600)
"""

# Its owner: starts it guarded (what the guard removes: a folder), pauses it, kills it or disarms the guard as
# asked, reports, and runs until killed.
_OWNER = """
import json, os, signal, subprocess, sys, tempfile, time
from pathlib import Path
from tracescore.testing._process import Guard

ended, action = sys.argv[1], sys.argv[2]
folder = Path(tempfile.mkdtemp(prefix="tracescore-guarded-"))
server = subprocess.Popen([sys.executable, "-c", sys.argv[3], ended], stdout=subprocess.PIPE,
                          start_new_session=True)
assert server.stdout.readline() == b"ready\\n"
if action == "kill":  # ended before its guard starts, not reaped (as yet): its guard sees it gone at once
    server.kill()
    os.waitid(os.P_PID, server.pid, os.WEXITED | os.WNOWAIT)
guard = Guard.start(server, grace_s=120, remove=[folder])
if action == "pause":
    os.kill(server.pid, signal.SIGSTOP)
elif action == "disarm":
    guard.disarm()
elif action == "kill":
    # Reported once the watchdog has seen the server gone: it exited, or it waits (in a select) for us.
    deadline = time.monotonic() + 60
    wchan = Path(f"/proc/{guard.watchdog.pid}/wchan")
    while guard.watchdog.poll() is None and not any(w in wchan.read_text() for w in ("poll", "select")):
        assert time.monotonic() < deadline, "the watchdog neither exited nor waited"
        time.sleep(0.01)
print(json.dumps({"pid": server.pid, "folder": str(folder)}), flush=True)
sys.stdin.read()
"""


def _owner_killed(ended: Path, action: str) -> tuple[int, Path]:
    """Kill an owner (`_OWNER`) whose server is guarded, once it has reported: the server's pid and the
    folder its guard would remove."""
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNER, str(ended), action, _SERVER],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert owner.stdout is not None
    try:
        started = json.loads(owner.stdout.readline() or "{}")
    finally:
        owner.kill()
        owner.wait()
    assert started, "the owner did not start its server"
    return int(started["pid"]), Path(started["folder"])


def _end_server(pid: int, ended: Path, folder: Path) -> None:
    """The test's own server (its child's child), ended if the guard did not end it."""
    kill_if_running(pid, str(ended))
    shutil.rmtree(folder, ignore_errors=True)


def test_a_guard_ends_a_paused_process_with_a_sigterm_when_its_owner_is_killed(tmp_path: Path) -> None:
    """A test killed while its broker is paused (SIGSTOP): the broker takes the SIGTERM (a clean shutdown)
    once it runs again, long before the grace for a SIGKILL ends; then what close() deletes goes."""
    ended = tmp_path / "ended"
    pid, folder = _owner_killed(ended, "pause")
    try:
        wait_until(lambda: not _pid_alive(pid), "the server to end with its owner", timeout_s=60)
        assert ended.read_text() == "SIGTERM"
        wait_until(lambda: not folder.exists(), "the guard to remove its folder", timeout_s=10)
    finally:
        _end_server(pid, ended, folder)


def test_a_disarmed_guard_ends_and_removes_nothing(tmp_path: Path) -> None:
    """A broker's stop() disarms its guard: a restart needs its data, and a stopped owner's death is no
    reason to end anything."""
    ended = tmp_path / "ended"
    pid, folder = _owner_killed(ended, "disarm")
    try:
        assert _pid_alive(pid), "a disarmed guard ended the server"
        assert folder.exists(), "a disarmed guard removed the folder"
        assert not ended.exists()
    finally:
        _end_server(pid, ended, folder)


def test_a_guard_removes_what_its_process_left_when_the_owner_dies_after_the_process(tmp_path: Path) -> None:
    """A test killed its broker (SIGKILL), then was killed itself before it closed the broker: the broker's
    data directory goes as close() would have deleted it."""
    ended = tmp_path / "ended"
    pid, folder = _owner_killed(ended, "kill")
    try:
        wait_until(lambda: not folder.exists(), "the guard to remove its folder", timeout_s=10)
    finally:
        _end_server(pid, ended, folder)


def test_a_command_run_guarded_is_run_as_subprocess_run_runs_it() -> None:
    """Its output captured, its exit status returned, a CalledProcessError when checked."""
    command = [sys.executable, "-c", "import sys; print('out'); sys.exit(3)"]
    done = run_guarded(command, capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "")
    with pytest.raises(subprocess.CalledProcessError) as raised:
        run_guarded(command, check=True, stdout=subprocess.DEVNULL)
    assert raised.value.returncode == 3


def test_a_command_run_guarded_out_of_time_is_ended_with_a_sigterm_first(tmp_path: Path) -> None:
    """subprocess.run kills a command out of time at once (SIGKILL): a scenario program recording, or a
    server, is given its SIGTERM first, as `end_process` gives it. (Ended with its owner, however the owner
    ends: tests/extract/test_recording_processes.py, through the recorder's runs.)"""
    ended = tmp_path / "ended"
    with pytest.raises(subprocess.TimeoutExpired):
        run_guarded([sys.executable, "-c", _SERVER, str(ended)], timeout_s=3, stdout=subprocess.DEVNULL)
    assert ended.read_text() == "SIGTERM"
