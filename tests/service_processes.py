"""`tracescore alert` and `tracescore conversations` as real processes for the crash tests: started with a
named crash point armed (the process kills itself with SIGKILL at that exact step, the service base's
test-only hook), or clean, until their idle timeout. Event-driven: a test waits for the process's exit (or,
with a pause point armed, for the process to stop itself there).

`checkout_env`: the environment of any test's child forked from the worker's zygote (tests/_zygote.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from _helpers import started_process, stopped
from _zygote import popen as forked

from tracescore._service import CRASH_ENV, PAUSE_ENV

REPO = Path(__file__).resolve().parents[1]
# A restart waits this long for the killed member's partitions (the test broker allows it; Kafka's default
# minimum is 6 s). Heartbeats every second: a loaded machine does not expire a live member.
SESSION_TIMEOUT_MS = 3_000
# A clean run stops once everything is read, nothing is left to write and no record came for this long.
IDLE_TIMEOUT_S = "1"


def checkout_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """`env` (the worker's by default) with this checkout first on the path, as `python -m tracescore.cli`
    run from it finds it: the zygote's imports and its children's are this checkout's, not the installed
    copy's, and one zygote per worker serves every such child (its PYTHONPATH is the same)."""
    return {**(os.environ if env is None else env), "PYTHONPATH": str(REPO)}


class ServiceProcess:
    def __init__(
        self,
        command: str,
        args: list[str],
        env: dict[str, str],
        crash_at: str | None = None,
        pause_at: str | None = None,
    ) -> None:
        self._log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (closed in wait)
        full_env = checkout_env({**os.environ, **env})
        for hook, point in ((CRASH_ENV, crash_at), (PAUSE_ENV, pause_at)):
            full_env.pop(hook, None)
            if point is not None:
                full_env[hook] = point
        self.process = started_process(
            forked(
                [sys.executable, "-m", "tracescore.cli", command, *args],
                env=full_env,
                cwd=REPO,
                stdout=self._log,
                stderr=subprocess.STDOUT,
            )
        )
        self.log = ""

    def said(self, text: str) -> bool:
        """`text` is in what the running process wrote so far."""
        self._log.flush()
        with open(self._log.fileno(), closefd=False) as log:  # the same open file
            log.seek(0)
            return text in log.read()

    def paused(self) -> bool:
        """Stopped at its pause point (`pause_at`), every thread of it: the client threads too, which run on
        for a moment after the thread that reached the point stopped."""
        return stopped(self.process.pid)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def wait(self, timeout_s: float = 240) -> int:
        try:
            code = self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self._log.seek(0)
        self.log = self._log.read()
        self._log.close()
        return code
