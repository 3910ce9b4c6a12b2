"""What every real third-party program run for dev and tests needs: a free loopback port, one installer at a
time, a wait until it answers, a clean end, and its log's tail when it does not come up."""

from __future__ import annotations

import contextlib
import fcntl
import random
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["closed_port", "end_process", "free_port", "locked", "log_tail", "wait_ready"]


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


def end_process(process: subprocess.Popen[bytes] | None, timeout_s: float = 20.0) -> None:
    """SIGTERM, then SIGKILL if it has not exited within `timeout_s`."""
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def log_tail(*paths: Path, lines: int = 40) -> str:
    """The last `lines` lines of the files, read in order (missing ones are skipped)."""
    text = ""
    for path in paths:
        with contextlib.suppress(OSError):
            text += path.read_text(errors="replace")
    return "\n".join(text.splitlines()[-lines:])
