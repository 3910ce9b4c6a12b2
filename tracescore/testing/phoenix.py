"""A real Arize Phoenix server for dev and tests: `phoenix serve` from PyPI, on free loopback ports.

Phoenix lives in its own virtualenv outside the repo (its dependency tree is large and pins things tracescore
does not), created by pip on first use under ~/.cache/tracescore/peers/phoenix-<version>/. Later starts
reuse it and only launch the server, with a throwaway working directory (SQLite database included) and
telemetry off so it makes no outbound connections. The server ends with the process that started it, however
that process ends (`Guard`): a test run killed on a timeout leaves no Phoenix behind.

    python -m tracescore.testing.phoenix install   # create the virtualenv now (minutes the first time)
    python -m tracescore.testing.phoenix serve     # run one in the foreground, print its URL
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from tracescore.testing._process import STOP_S, Guard, end_process, free_port, locked, log_tail, wait_ready

__all__ = [
    "PHOENIX_OTEL_VERSION",
    "PHOENIX_VERSION",
    "PhoenixServer",
    "PhoenixUnavailable",
    "install_phoenix",
    "install_phoenix_otel",
]

PHOENIX_VERSION = os.environ.get("TRACESCORE_PHOENIX_VERSION", "20.26.1")
PHOENIX_OTEL_VERSION = "0.17.2"  # the one arize-phoenix==PHOENIX_VERSION depends on
CACHE_ROOT = Path(os.environ.get("TRACESCORE_CACHE_DIR", Path.home() / ".cache" / "tracescore"))
# A cold install downloads ~100 wheels (pyarrow, pandas, grpc, ...); a slow mirror needs many minutes.
INSTALL_TIMEOUT_S = 1800.0
_BIND_ATTEMPTS = 3


class PhoenixUnavailable(RuntimeError):
    """Phoenix could not be installed or started; the message carries the command and its output."""


def install_phoenix(
    version: str = PHOENIX_VERSION, cache_root: Path = CACHE_ROOT, timeout_s: float = INSTALL_TIMEOUT_S
) -> Path:
    """The `phoenix` executable of a virtualenv holding arize-phoenix==`version`, created on first use."""
    home = cache_root / "peers" / f"phoenix-{version}"
    return _installed(home, f"arize-phoenix=={version}", home / "bin" / "phoenix", timeout_s)


def install_phoenix_otel(
    version: str = PHOENIX_OTEL_VERSION, cache_root: Path = CACHE_ROOT, timeout_s: float = INSTALL_TIMEOUT_S
) -> Path:
    """The Python of a virtualenv holding arize-phoenix-otel==`version` (`phoenix.otel.register()`, what
    a Phoenix team's app calls) beside the packages of the interpreter running this, tracescore's among them
    (`--system-site-packages`): an app of theirs that also calls `tracescore.init()`."""
    home = cache_root / "peers" / f"phoenix-otel-{version}-{sys.version_info.major}.{sys.version_info.minor}"
    python = home / "bin" / "python"
    return _installed(home, f"arize-phoenix-otel=={version}", python, timeout_s, system_site_packages=True)


def _installed(
    home: Path, requirement: str, executable: Path, timeout_s: float, *, system_site_packages: bool = False
) -> Path:
    marker = home / ".complete"
    home.parent.mkdir(parents=True, exist_ok=True)
    # Parallel test sessions share the cache: one installs, the others wait and then reuse it.
    with locked(home.parent / f"{home.name}.lock"):
        if marker.exists() and executable.exists():
            return executable
        # An unmarked virtualenv is a half-finished install (killed, out of disk): start it afresh.
        venv = [sys.executable, "-m", "venv", "--clear", *(["--system-site-packages"] * system_site_packages)]
        _run([*venv, str(home)], timeout_s, "creating the virtualenv")
        pip = [str(home / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "--no-input"]
        _run([*pip, "install", "--progress-bar", "off", requirement], timeout_s, "pip")
        if not executable.exists():
            raise PhoenixUnavailable(f"{requirement} installed but {executable} is missing")
        marker.write_text(requirement)
    return executable


def _run(command: list[str], timeout_s: float, what: str) -> None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        output = _text(exc.stdout) + _text(exc.stderr)
        raise PhoenixUnavailable(
            f"{what} timed out after {timeout_s:.0f}s: {' '.join(command)}\n{output}"
        ) from exc
    if done.returncode != 0:
        raise PhoenixUnavailable(
            f"{what} failed ({done.returncode}): {' '.join(command)}\n{done.stdout}{done.stderr}"
        )


def _text(output: bytes | str | None) -> str:
    if isinstance(output, bytes):
        return output.decode(errors="replace")
    return output or ""


@dataclass
class PhoenixServer:
    """One `phoenix serve` process. Use as a context manager, or start()/stop().

    `spawn` starts the process: `subprocess.Popen` unless given (a callable taking Popen's arguments and
    returning what quacks like one: the test suite forks Phoenix from an interpreter that already imported it,
    tests/_phoenix_zygote.py). `mcp_server`: Phoenix's MCP server at /mcp, which it builds from its whole REST
    API at every start (~2 of the ~5 CPU-s a start spends past its imports): off unless asked (`serve` asks:
    a developer's Phoenix has what Phoenix has)."""

    working_dir: Path | None = None
    version: str = PHOENIX_VERSION
    port: int = field(default_factory=free_port)
    grpc_port: int = field(default_factory=free_port)
    spawn: Callable[..., Any] | None = field(default=None, repr=False)
    mcp_server: bool = False
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)
    _owns_working_dir: bool = field(default=False, init=False)
    _guard: Guard | None = field(default=None, init=False)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 180.0, install_timeout_s: float = INSTALL_TIMEOUT_S) -> PhoenixServer:
        executable = install_phoenix(self.version, timeout_s=install_timeout_s)
        for attempt in range(_BIND_ATTEMPTS):
            try:
                return self._launch(executable, timeout_s)
            except PhoenixUnavailable as exc:
                # A port chosen free was taken before Phoenix bound it (a parallel test worker): choose again,
                # as KafkaBroker.start does.
                if attempt == _BIND_ATTEMPTS - 1 or "address already in use" not in str(exc):
                    raise
                self.port, self.grpc_port = free_port(), free_port()
        raise AssertionError("unreachable")

    def _launch(self, executable: Path, timeout_s: float) -> PhoenixServer:
        if self.working_dir is None:
            self.working_dir = Path(tempfile.mkdtemp(prefix="tracescore-phoenix-"))
            self._owns_working_dir = True
        self.working_dir.mkdir(parents=True, exist_ok=True)
        log = (self.working_dir / "phoenix.log").open("wb")
        self.process = (self.spawn or subprocess.Popen)(
            [str(executable), "serve"],
            env=self._environment(),
            cwd=self.working_dir,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C in the parent's terminal must not kill it mid-test
        )
        log.close()  # the child holds its own descriptor
        # Ended, and the working directory it was given removed, if this process dies without a stop().
        self._guard = Guard.start(self.process, STOP_S, [self.working_dir] if self._owns_working_dir else [])
        try:
            self._wait_ready(timeout_s)
        except BaseException:
            self.stop()  # __exit__ does not run when __enter__ raises
            raise
        return self

    def stop(self, timeout_s: float = STOP_S) -> None:
        end_process(self.process, timeout_s, self._guard)
        self.process, self._guard = None, None
        if self._owns_working_dir and self.working_dir is not None:
            shutil.rmtree(self.working_dir, ignore_errors=True)
            self.working_dir = None

    def __enter__(self) -> PhoenixServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _environment(self) -> dict[str, str]:
        assert self.working_dir is not None
        # Only what Phoenix needs from ours: a PHOENIX_* variable of the developer's (a Postgres URL, auth
        # on) would otherwise leak into the test server.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PHOENIX_", "OTEL_"))}
        env.update(
            {
                "PHOENIX_WORKING_DIR": str(self.working_dir),
                "PHOENIX_HOST": "127.0.0.1",
                "PHOENIX_PORT": str(self.port),
                "PHOENIX_GRPC_PORT": str(self.grpc_port),
                # No outbound traffic: no analytics pixels, web fonts or sandbox downloads (the second
                # switch also covers them), and no PXI agent that could call out to an LLM or GitHub.
                "PHOENIX_TELEMETRY_ENABLED": "false",
                "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
                "PHOENIX_DISABLE_AGENT_ASSISTANT": "true",
                "PHOENIX_ENABLE_MCP_SERVER": str(self.mcp_server).lower(),
            }
        )
        return env

    def _wait_ready(self, timeout_s: float) -> None:
        import httpx2

        assert self.process is not None
        with httpx2.Client(timeout=2.0) as client:

            def healthy() -> bool:
                with contextlib.suppress(httpx2.TransportError):
                    return client.get(f"{self.base_url}/healthz").status_code == 200
                return False

            wait_ready(
                self.process, healthy, what="phoenix serve", timeout_s=timeout_s, log=self._log_tail,
                error=PhoenixUnavailable, interval_s=0.3,
            )  # fmt: skip

    def _log_tail(self, lines: int = 60) -> str:
        return log_tail(self.working_dir / "phoenix.log", lines=lines) if self.working_dir else ""


@click.group()
def cli() -> None:
    """Install and run a development Arize Phoenix server."""


@cli.command()
def install() -> None:
    """Create (or reuse) the Phoenix virtualenv and print its `phoenix` executable."""
    click.echo(install_phoenix())


@cli.command()
@click.option("--port", type=int, default=6006, show_default=True)
def serve(port: int) -> None:
    """Run Phoenix in the foreground on `port` until Ctrl-C; its data is deleted on exit."""
    with PhoenixServer(port=port, mcp_server=True) as server:
        click.echo(server.base_url)
        with contextlib.suppress(KeyboardInterrupt):
            assert server.process is not None
            server.process.wait()


if __name__ == "__main__":
    sys.exit(cli())
