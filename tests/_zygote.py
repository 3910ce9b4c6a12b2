"""Processes of their own without an interpreter's start and imports each (issue 33 item 4): a zygote.

A zygote is one clean interpreter that has run only the import statements of a preload (no state set, no
thread started: it checks), and then forks one real OS process per request. The tests' service processes
(`python -m tracescore.cli consume|alert|conversations ...`) spent ~1.3 CPU-s each on the interpreter's start
and the imports before doing anything; forked from the zygote, a child starts with them done.

A child is what `python -m <module>` / `python -c <code>` / `python <script>` would be, for all a test sees:
its own pid (SIGTERM, SIGINT, SIGKILL, SIGSTOP/SIGCONT act on it alone), its environment exactly the one
asked for (os.environ cleared and set before anything runs), its argv and sys.path[0], its cwd, a session
of its own when asked, stdin/stdout/stderr the files or pipes the test gave (sent to the zygote over a Unix
socket), its code run as `__main__` at the top level (an uncaught exception, sys.exit, atexit handlers and
`tracescore.cli`'s own `end_process` as in a fresh interpreter), `random` reseeded (its at-fork hook).

What the preload's imports read from the environment is recorded while they run (the keys, by module): a
child may differ from its zygote only where that does not matter. Modules in `RERUN` are run again in the
child once its environment is set (the crash and pause points of tracescore._service, read at import); any
other key read at import (or any PYTHON* variable, read by the interpreter's start) that differs makes the
pool start another zygote for that environment. The zygote stays single-threaded (a select loop over its
socket and one pidfd per child), reaps its children and sends each exit status back; the test's side gets a
handle that quacks like the `subprocess.Popen` the helpers used (`ZygoteProcess`).

A zygote may run another interpreter (a third-party program's virtualenv: the tests' Phoenix,
tests/conftest.py) and be given setup code its children run once their environment is set, before their
code: what the preload computed at import from variables each child sets anew (`set_in_child`), done again.

Nothing is hidden: a zygote that cannot start, or dies, fails the test loudly (its log in the error), and
the children it left are killed. It ends with its worker: when the worker's end of the socket closes (the
worker exited, or was killed), the zygote kills the children still running and exits.

Run as a program, this file is the zygote itself (started by `Zygote`, never by hand).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import io
import json
import os
import queue
import select
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

__all__ = ["RERUN", "SERVICE_PRELOAD", "Zygote", "ZygoteProcess", "popen", "run"]

# Modules whose import reads the environment (TRACESCORE_TEST_CRASH_AT / _PAUSE_AT) and that are safe to run
# again in place in a child (constants and functions only: the functions others imported keep the module's
# globals, which the second run rebinds).
RERUN = ("tracescore._service._crash",)

# What a service process imports before and while it runs (its command, its stages, their libraries).
SERVICE_PRELOAD = """
import tracescore.cli
import tracescore.cli._alert
import tracescore.cli._consume
import tracescore.cli._conversations
import tracescore.cli._environment
import tracescore.cli._exit
import tracescore.cli._service
import tracescore.alert
import tracescore.consume
import tracescore.conversations
import tracescore.emit
import tracescore.sample
import tracescore.score
import tracescore.score.judges
import tracescore._kafka
import tracescore._kafka_config
import tracescore._service
import httpx2
import kafka
import openai
"""

_START_S = 180.0  # the preload's imports on a loaded machine
_MESSAGE = 1 << 20
_ENDED = "the zygote ended"


# --- the zygote (this file run as a program) -------------------------------------------------------------


def _preload(source: str) -> dict[str, list[str]]:
    """Run the import statements of `source`; each environment key they read, with the modules reading it."""
    import ast

    reads: dict[str, set[str]] = {}
    environ = type(os.environ)
    originals = {name: getattr(environ, name) for name in ("get", "__getitem__", "__contains__")}

    def reader(name: str) -> Any:
        original = originals[name]

        def read(self: Any, key: Any, *rest: Any) -> Any:
            frame = sys._getframe(1)
            while frame is not None and frame.f_code.co_name != "<module>":
                frame = frame.f_back
            module = frame.f_globals.get("__name__", "?") if frame is not None else "?"
            reads.setdefault(str(key), set()).add(module)
            return original(self, key, *rest)

        return read

    imports = [node for node in ast.parse(source).body if isinstance(node, ast.Import | ast.ImportFrom)]
    for name in originals:
        setattr(environ, name, reader(name))
    try:
        exec(compile(ast.Module(imports, []), "<preload>", "exec"), {})
    finally:
        for name, original in originals.items():
            setattr(environ, name, original)
    if threading.active_count() != 1:
        threads = threading.enumerate()
        raise SystemExit(f"a thread started by the preload's imports: a fork would not copy it: {threads}")
    return {key: sorted(modules) for key, modules in reads.items()}


def _send(sock: socket.socket, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
    socket.send_fds(sock, [json.dumps(message).encode()], list(fds))


def _serve(sock: socket.socket) -> tuple[dict[str, Any], list[int]] | None:
    """The zygote's loop. Returns in a child (its request and the fds it was given), None in the zygote once
    the worker's end closed (its children killed and reaped first)."""
    children: dict[int, int] = {}  # pidfd -> pid
    try:
        while True:
            ready, _, _ = select.select([sock.fileno(), *children], [], [])
            for fd in ready:
                if fd in children:
                    pid = children.pop(fd)
                    os.close(fd)
                    _, status = os.waitpid(pid, 0)
                    _send(sock, {"exited": pid, "returncode": os.waitstatus_to_exitcode(status)})
                    continue
                data, fds, _, _ = socket.recv_fds(sock, _MESSAGE, 3)
                if not data:
                    return None
                request = json.loads(data)
                sys.stdout.flush(), sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    sock.close()
                    for pidfd in children:
                        os.close(pidfd)
                    return request, fds
                for received in fds:
                    os.close(received)
                pidfd = os.pidfd_open(pid)
                children[pidfd] = pid
                _send(sock, {"pid": pid}, [pidfd])
    except OSError:  # the worker's end gone mid-send
        return None
    finally:
        if os.getpid() == zygote_pid:
            for pidfd, pid in children.items():
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                os.close(pidfd)


def _become(request: dict[str, Any], fds: list[int], setup: str) -> None:
    """In the child: the process `request` asks for, up to running its code (`setup` run first)."""
    os.environ.clear()
    os.environ.update(request["env"])
    for module in RERUN:
        if module in sys.modules:
            importlib.reload(sys.modules[module])
    os.chdir(request["cwd"])
    if request["new_session"]:
        os.setsid()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in set(fds) - {0, 1, 2}:
        os.close(fd)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # the zygote ignored both: a fresh interpreter's
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    kind, target, args = request["kind"], request["target"], request["args"]
    # The entry `python -m` / `<script>` / `-c` puts first (the zygote took its own script's folder out).
    if kind == "module":
        sys.path.insert(0, os.getcwd())
    elif kind == "path":
        sys.path.insert(0, str(Path(target).resolve().parent))
    else:
        sys.path.insert(0, "")
    sys.argv = [{"module": "-m", "code": "-c"}.get(kind, target), *args]
    if setup:
        exec(compile(setup, "<zygote setup>", "exec"), {})


def _run(request: dict[str, Any]) -> None:
    """The child's code as `__main__` (called from the program's top level: no loop's frame around it)."""
    import runpy

    kind, target = request["kind"], request["target"]
    if kind == "module":
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    elif kind == "path":
        runpy.run_path(target, run_name="__main__")
    else:
        main = types.ModuleType("__main__")
        sys.modules["__main__"] = main
        exec(compile(target, "<string>", "exec"), main.__dict__)


# --- the test's side -----------------------------------------------------------------------------------


class _Exit:
    """One child's end, as the zygote reports it (or the zygote's own end, which fails the wait)."""

    def __init__(self, pidfd: int) -> None:
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.pidfd: int | None = pidfd  # signals go through it: never to a pid reused after the reaping
        self.returncode: int | None = None
        self.error = ""

    def end(self, returncode: int | None, error: str = "") -> None:
        with self.lock:
            if self.pidfd is not None:
                if error:  # the zygote is gone: nothing of it may run on
                    with contextlib.suppress(ProcessLookupError):
                        signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
                os.close(self.pidfd)
                self.pidfd = None
            self.returncode, self.error = returncode, error
            self.done.set()

    def signal(self, signum: int) -> None:
        with self.lock:
            if self.pidfd is not None:
                with contextlib.suppress(ProcessLookupError):  # exited, its status on its way
                    signal.pidfd_send_signal(self.pidfd, signum)


class ZygoteProcess:
    """A child forked by a zygote, with what the tests use of `subprocess.Popen`."""

    def __init__(self, args: list[str], pid: int, exit: _Exit, streams: tuple[IO[Any] | None, ...]) -> None:
        self.args, self.pid, self._exit = args, pid, exit
        self.stdin, self.stdout, self.stderr = streams
        self._read: dict[IO[Any], list[bytes]] = {}  # what `communicate` read of each pipe so far

    @property
    def returncode(self) -> int | None:
        return self.poll()

    def _checked(self) -> int:
        if self._exit.error:
            raise RuntimeError(f"process {self.pid} ({self.args}): {self._exit.error}")
        assert self._exit.returncode is not None
        return self._exit.returncode

    def poll(self) -> int | None:
        return self._checked() if self._exit.done.is_set() else None

    def wait(self, timeout: float | None = None) -> int:
        if not self._exit.done.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self._checked()

    def send_signal(self, sig: int) -> None:
        self._exit.signal(sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[Any, Any]:
        """`Popen.communicate` without input, as on POSIX: stdout and stderr (those that are pipes) read to
        their end and closed, then the exit waited for. On TimeoutExpired what was read is kept for a next
        call."""
        deadline = None if timeout is None else time.monotonic() + timeout
        read = self._read
        streams = [s for s in (self.stdout, self.stderr) if s is not None]
        with selectors.DefaultSelector() as selector:
            for stream in streams:
                read.setdefault(stream, [])
                if not stream.closed:
                    selector.register(stream, selectors.EVENT_READ)
            while selector.get_map():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(self.args, timeout or 0)
                for key, _ in selector.select(left):
                    data = os.read(key.fd, 32768)
                    if data:
                        read[key.fileobj].append(data)
                    else:
                        selector.unregister(key.fileobj)
                        key.fileobj.close()
        self.wait(None if deadline is None else max(deadline - time.monotonic(), 0))
        return tuple(  # type: ignore[return-value]
            None if stream is None else _output(stream, b"".join(read[stream]))
            for stream in (self.stdout, self.stderr)
        )


def _output(stream: IO[Any], data: bytes) -> str | bytes:
    """What Popen's communicate returns of a pipe's bytes: text mode decodes them, universal newlines."""
    if not isinstance(stream, io.TextIOBase):
        return data
    return data.decode(stream.encoding, stream.errors or "strict").replace("\r\n", "\n").replace("\r", "\n")


class Zygote:
    """A zygote of interpreter `python`, started with `env` (its interpreter's start and the preload's imports
    see it), having run the import statements of `preload`. Its children run `setup` before their code, which
    makes the variables `set_in_child` free to differ from the zygote's."""

    def __init__(
        self,
        preload: str,
        env: Mapping[str, str],
        *,
        python: str = sys.executable,
        setup: str = "",
        set_in_child: Sequence[str] = (),
    ) -> None:
        self.env = dict(env)
        self.python = python
        self.set_in_child = frozenset(set_in_child)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close)
        self._process = subprocess.Popen(
            [python, __file__, str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        theirs.close()
        self._sock = ours
        self._exits: dict[int, _Exit] = {}
        self._replies: queue.Queue[tuple[int, _Exit] | None] = queue.Queue()
        self._spawning = threading.Lock()
        self._ended = ""
        try:
            _send(ours, {"preload": preload, "setup": setup})
            ours.settimeout(_START_S)
            data, _, _, _ = socket.recv_fds(ours, _MESSAGE, 0)
            ours.settimeout(None)
        except OSError as error:
            data = b""
            self._ended = str(error)
        if not data:
            self.close()
            raise RuntimeError(f"the zygote did not start ({self._ended or 'it exited'}):\n{self.log}")
        self.read_at_import: dict[str, list[str]] = json.loads(data)["reads"]
        self._reader = threading.Thread(target=self._read, name="zygote-reader", daemon=True)
        self._reader.start()

    @property
    def log(self) -> str:
        if self._log.closed:
            return ""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-5000:]

    def differs(self, env: Mapping[str, str]) -> list[str]:
        """The variables a child with `env` would see differently from what its zygote's start and imports saw
        (not those read only by modules run again in the child)."""
        keys = {k for k, modules in self.read_at_import.items() if not set(modules) <= set(RERUN)}
        keys -= self.set_in_child
        keys |= {k for k in {*env, *self.env} if k.startswith("PYTHON")}
        return sorted(k for k in keys if env.get(k) != self.env.get(k))

    def _read(self) -> None:
        """The zygote's messages: each spawn's pid (and pidfd), each child's exit status, its end (EOF)."""
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(self._sock, _MESSAGE, 1)
            except OSError as error:
                data, fds = b"", []
                self._ended = self._ended or str(error)
            if not data:
                break
            message = json.loads(data)
            if "pid" in message:
                exit = self._exits[message["pid"]] = _Exit(fds[0])
                self._replies.put((message["pid"], exit))
            else:
                self._exits.pop(message["exited"]).end(message["returncode"])
        self._process.wait()
        ended = self._ended or f"{_ENDED} (exit status {self._process.returncode}):\n{self.log}"
        self._ended = ended
        self._replies.put(None)
        for exit in list(self._exits.values()):
            exit.end(None, ended)
        self._exits.clear()

    def spawn(
        self,
        kind: str,
        target: str,
        args: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str | os.PathLike[str] | None = None,
        fds: tuple[int, int, int],
        new_session: bool = False,
    ) -> tuple[int, _Exit]:
        """Fork a child running `target` (a module, code or a script's path: `kind`) with `args` and `fds` as
        its stdin, stdout, stderr: its pid and its end."""
        differ = self.differs(env)
        if differ:
            raise ValueError(f"a child's environment differs from its zygote's in what it reads: {differ}")
        request = {
            "kind": kind,
            "target": target,
            "args": list(args),
            "env": dict(env),
            "cwd": str(cwd or os.getcwd()),
            "new_session": new_session,
        }
        with self._spawning:
            if self._ended:
                raise RuntimeError(self._ended)
            _send(self._sock, request, fds)
            reply = self._replies.get()
        if reply is None:
            raise RuntimeError(self._ended)
        return reply

    def close(self) -> None:
        """End the zygote (and the children it still has) and wait for it."""
        self._ended = self._ended or _ENDED
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes the reader; the zygote reads its end
        self._sock.close()
        try:
            self._process.wait(60)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._log.close()


# --- the worker's zygotes, and `popen` ----------------------------------------------------------------------

_pool: list[Zygote] = []
_pool_lock = threading.Lock()
_PREFIX_KINDS = {"-m": "module", "-c": "code"}


def _zygote_for(env: Mapping[str, str]) -> Zygote:
    """This worker's zygote of the service preload that can fork a child with `env` (started on first need:
    one per environment that the imports see differently, in practice one)."""
    with _pool_lock:
        for zygote in _pool:
            if not zygote.differs(env):
                return zygote
        zygote = Zygote(SERVICE_PRELOAD, env)
        if not _pool:
            atexit.register(_close_pool)
        _pool.append(zygote)
        return zygote


def _close_pool() -> None:
    while _pool:
        _pool.pop().close()


def _fd(stream: Any, default: int, opened: list[int]) -> int:
    if stream is None:
        return default
    if stream == subprocess.DEVNULL:
        fd = os.open(os.devnull, os.O_RDWR)
        opened.append(fd)
        return fd
    return stream if isinstance(stream, int) else stream.fileno()


def popen(
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    stdin: Any = None,
    stdout: Any = None,
    stderr: Any = None,
    text: bool = False,
    start_new_session: bool = False,
    zygote: Zygote | None = None,
) -> ZygoteProcess:
    """`subprocess.Popen(args, ...)` for `[sys.executable, "-m" | "-c" | <script>, ...]`, forked from this
    worker's zygote of the service preload (or from `zygote`, `args[0]` its interpreter). stdin/stdout/stderr:
    None (the worker's), DEVNULL, PIPE, STDOUT (stderr only), a file or an fd."""
    if args[0] != (zygote.python if zygote else sys.executable):
        raise ValueError(f"not this interpreter: {args}")
    if args[1] in _PREFIX_KINDS:
        kind, target, rest = _PREFIX_KINDS[args[1]], args[2], list(args[3:])
    else:
        kind, target, rest = "path", str(args[1]), list(args[2:])
    full_env = dict(os.environ if env is None else env)
    opened: list[int] = []  # closed here once the zygote has its copies
    ends: list[IO[Any] | None] = [None, None, None]
    fds: list[int] = []
    for index, (stream, default) in enumerate(((stdin, 0), (stdout, 1), (stderr, 2))):
        if stream == subprocess.PIPE:
            read, write = os.pipe()
            ours, theirs = (write, read) if index == 0 else (read, write)
            mode = ("w" if index == 0 else "r") + ("" if text else "b")
            ends[index] = open(ours, mode)  # noqa: SIM115 (the caller's, as Popen's)
            opened.append(theirs)
            fds.append(theirs)
        elif stream == subprocess.STDOUT:
            fds.append(fds[1])
        else:
            fds.append(_fd(stream, default, opened))
    try:
        pid, exit = (zygote or _zygote_for(full_env)).spawn(
            kind,
            target,
            rest,
            env=full_env,
            cwd=cwd,
            fds=(fds[0], fds[1], fds[2]),
            new_session=start_new_session,
        )
    except BaseException:
        for end in ends:
            if end is not None:
                end.close()
        raise
    finally:
        for fd in opened:
            os.close(fd)
    return ZygoteProcess([str(a) for a in args], pid, exit, (ends[0], ends[1], ends[2]))


def run(
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
    zygote: Zygote | None = None,
) -> subprocess.CompletedProcess[str]:
    """`subprocess.run(args, capture_output=True, text=True, check=False, ...)` (see `popen`): on the
    timeout the child is killed and waited for, and TimeoutExpired raised."""
    process = popen(
        args, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, zygote=zygote
    )
    try:
        out, err = process.communicate(timeout)
    except BaseException:
        process.kill()
        process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
        raise
    return subprocess.CompletedProcess(process.args, process.wait(), out, err)


if __name__ == "__main__":
    del sys.path[0]  # this file's folder: not the children's
    zygote_pid = os.getpid()
    # A Ctrl-C reaches the children (a fresh interpreter's handlers); the zygote ends with its worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _channel = socket.socket(fileno=int(sys.argv[1]))
    _first = json.loads(socket.recv_fds(_channel, _MESSAGE, 0)[0])
    _reads = _preload(_first["preload"])
    _send(_channel, {"reads": _reads})
    _job = _serve(_channel)
    if _job is None:
        sys.exit(0)
    _become(*_job, _first["setup"])
    _request = _job[0]
    del _channel, _first, _reads, _job
    _run(_request)
