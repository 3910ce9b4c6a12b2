"""What every real third-party program run for dev and tests needs: a free loopback port, one installer at a
time, a wait until it answers, a clean end, an end with the process that started it (`Guard`; `run_guarded`
for a command waited for), and its log's tail when it does not come up.

Run as a script, this file is a guard's watchdog (`_watch`): it imports nothing but the standard library.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

TYPE_CHECKING = False  # typing's own flag, without importing typing into every watchdog's start
if TYPE_CHECKING:
    from typing import Any

# How long a stop (and a guard, its owner gone) waits for a server to exit on SIGTERM before it kills it.
STOP_S = 20.0


def free_port() -> int:
    """A loopback port free now, for a server started next. Chosen below the kernel's ephemeral range: a port
    from bind(0) is one the kernel also hands to outgoing connections, and with parallel test workers opening
    many, one could take it before the server (a broker's JVM takes seconds) binds it."""
    low = _ephemeral_low()
    for _ in range(200):
        port = random.randrange(_FIRST_PORT, low)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use: another server, another worker's
            return port
    with socket.socket() as sock:  # a crowded range: the kernel's choice is still better than failing
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def closed_port() -> Iterator[int]:
    """A loopback port nothing listens on while the block runs, for a test of a server that is down: held
    bound but never listening, so a connection to it is refused and no other server can take it meanwhile
    (a port only found free, as `free_port`'s, may be bound by another worker's server before the test
    connects, and then something answers)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


_FIRST_PORT = 20_000  # above the well-known and most registered service ports


def _ephemeral_low() -> int:
    with contextlib.suppress(OSError, ValueError, IndexError):
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
        if low > _FIRST_PORT + 1000:
            return low
    return 32_768  # Linux's default start of the range


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on `path`: parallel test sessions share the caches; one installs, the others wait."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def wait_ready(
    process: subprocess.Popen[bytes],
    answers: Callable[[], bool],
    *,
    what: str,
    timeout_s: float,
    log: Callable[[], str],
    error: type[Exception] = RuntimeError,
    interval_s: float = 0.2,
) -> None:
    """Poll `answers()` until it holds; raise `error` with the log's tail if the process exits or time runs
    out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise error(f"{what} exited with {process.returncode}:\n{log()}")
        if answers():
            return
        time.sleep(interval_s)
    raise error(f"{what} not ready after {timeout_s:g}s:\n{log()}")


def end_process(
    process: subprocess.Popen[bytes] | None, timeout_s: float = STOP_S, guard: Guard | None = None
) -> None:
    """SIGTERM, then SIGKILL if it has not exited within `timeout_s`; then `guard` (the process's) is
    disarmed: after the end, so a stop cut short by its owner's death is finished by the guard."""
    if process is not None and process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if guard is not None:
        guard.disarm()


def run_guarded(
    command: Sequence[str],
    *,
    timeout_s: float | None = None,
    check: bool = False,
    capture_output: bool = False,
    grace_s: float = STOP_S,
    remove: Sequence[Path] = (),
    **popen: Any,
) -> subprocess.CompletedProcess[Any]:
    """`subprocess.run(command, timeout=timeout_s, check=check, capture_output=capture_output, **popen)`,
    guarded: should this process die meanwhile, the command ends too (`Guard`) and `remove` goes. Out of time,
    or this process interrupted (a Ctrl-C), the command is ended as `end_process` ends a process (a SIGTERM
    first, where subprocess.run sends a SIGKILL at once), and the exception (subprocess.TimeoutExpired,
    KeyboardInterrupt) raised."""
    if capture_output:
        popen |= {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    process = subprocess.Popen(command, **popen)
    guard = Guard.start(process, grace_s, remove)
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    finally:
        end_process(process, grace_s, guard)
    if check and process.returncode:
        raise subprocess.CalledProcessError(process.returncode, process.args, stdout, stderr)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def log_tail(*paths: Path, lines: int = 40) -> str:
    """The last `lines` lines of the files, read in order (missing ones are skipped)."""
    text = ""
    for path in paths:
        with contextlib.suppress(OSError):
            text += path.read_text(errors="replace")
    return "\n".join(text.splitlines()[-lines:])


class Guard:
    """Ends `process` (a server this process started, such as a broker's JVM) when this process dies without
    ending it, however it dies (SIGKILL, the OOM killer, a pytest-xdist controller killed on a timeout), and
    then removes `remove` (what a close() would have). Without it the server outlives its owner for good: a
    child is not ended with its parent (one in a session of its own not even by a Ctrl-C in the terminal).

    A watchdog process holds the reading end of a pipe whose writing end only this process holds: the kernel
    closes that end when this process dies, whichever thread started the server. (PR_SET_PDEATHSIG in the
    server would fire when the *thread* that started it ends: the run's shared broker is started from a
    socket-serving thread; it also needs preexec_fn, unsafe with threads, and removes nothing.) The watchdog
    knows the server by a pidfd opened here while the server is this process's unreaped child, so it never
    signals another process that took the pid later. Left open: an owner killed in the milliseconds between
    the server's start and its watchdog's. Linux 5.3+ (pidfd); elsewhere `start` returns None: no guard.
    """

    def __init__(self, watchdog: subprocess.Popen[bytes], owner_end: int) -> None:
        self.watchdog = watchdog
        self._owner_end = owner_end

    @classmethod
    def start(
        cls, process: subprocess.Popen[bytes], grace_s: float, remove: Sequence[Path] = ()
    ) -> Guard | None:
        """Watch `process`. If this process dies first, the watchdog ends it as `end_process` would (SIGTERM,
        SIGKILL after `grace_s`), then removes the files and folders in `remove`."""
        if not hasattr(os, "pidfd_open"):
            return None
        pidfd = os.pidfd_open(process.pid)
        watchdog_end, owner_end = os.pipe()  # both not inherited: only the watchdog gets its end (pass_fds)
        try:
            watchdog = subprocess.Popen(
                # -I -S: no site-packages, no environment; this file needs only the standard library.
                [
                    sys.executable,
                    "-I",
                    "-S",
                    __file__,
                    str(watchdog_end),
                    str(pidfd),
                    str(grace_s),
                    *map(str, remove),
                ],
                pass_fds=(watchdog_end, pidfd),
                # Its own session: a Ctrl-C in the terminal does not end it. No stdio of ours: a pytest-xdist
                # worker's stdout is its channel to the controller.
                start_new_session=True,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        except BaseException:
            os.close(owner_end)
            raise
        finally:
            os.close(watchdog_end)
            os.close(pidfd)
        return cls(watchdog, owner_end)

    def disarm(self) -> None:
        """The owner ended the process itself (or it exited): the watchdog leaves, ending and removing
        nothing."""
        with contextlib.suppress(OSError):  # the watchdog already left, as the process exited
            os.write(self._owner_end, _DISARM)
        os.close(self._owner_end)
        self.watchdog.wait()


_DISARM = b"d"  # any byte: only an end of file (the owner died) sets the watchdog off


def _watch(owner_end: int, pidfd: int, grace_s: float, remove: Sequence[str]) -> None:
    """A guard's watchdog (`Guard`): waits for its owner (the pipe: a byte if the owner disarmed it, an end
    of file if the owner died), and meanwhile for the process (its pidfd turns readable when it exits)."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        # It ends when its owner disarms it or dies: a signal to the owner's whole family (an xdist
        # controller passes a SIGTERM on to every child) must not take the guard away while the owner runs.
        signal.signal(signum, signal.SIG_IGN)
    if owner_end not in select.select([owner_end, pidfd], [], [])[0]:
        # The process exited (it crashed, a test killed it): what it left still goes if its owner dies now.
        select.select([owner_end], [], [])
    if os.read(owner_end, 1):
        return
    _send(pidfd, signal.SIGTERM)
    _send(pidfd, signal.SIGCONT)  # a paused (SIGSTOP) process takes the SIGTERM once it runs again
    if not select.select([pidfd], [], [], grace_s)[0]:
        _send(pidfd, signal.SIGKILL)
        select.select([pidfd], [], [], grace_s)
    for path in map(Path, remove):
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def _send(pidfd: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it exited meanwhile
        signal.pidfd_send_signal(pidfd, signum)


if __name__ == "__main__":
    _watch(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4:])
