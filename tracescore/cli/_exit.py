"""How the `tracescore` program ends its process: once everything it owes is done, without the interpreter's
teardown.

After a command has returned (its clients closed, its files written), what the interpreter still does at exit
is: wait for the threads that are not daemons, run the exit handlers (`atexit`: the logs' handlers closed, an
OpenTelemetry provider's last export, a Kafka producer's close, coverage's data written), flush stdout and
stderr, and then free every object and tear every module down. The last part is a sixth of a service
process's CPU and nothing outside the process sees it, so the program does the rest itself and ends there.

Whatever makes the teardown matter leaves the exit to the interpreter, as before: a tracer or a profiler
watching the process (coverage, cProfile, a debugger: they write their results when the interpreter ends),
`-i` / PYTHONINSPECT (the prompt after the run), warnings asked for (`-W`, PYTHONWARNINGS, `-X dev`: a
ResourceWarning is raised at teardown), a thread still running that is not a daemon, a status that is not a
number (printed by the interpreter), and a flush that fails (a reader that closed the pipe: the interpreter
says so and exits 120, as it always did).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn

__all__ = ["end_process"]


def end_process(status: object) -> NoReturn:
    """End the process with SystemExit's `status` once the threads, the exit handlers and the flush are done
    (or leave it to the interpreter: see the module's docstring). Call it from the process's own main only:
    it does not return."""
    if not isinstance(status, int | None) or _observed() or _threads_running():
        sys.exit(status)
    code = 0 if status is None else int(status)
    if not 0 <= code <= 255:  # the interpreter's own way with such a status
        sys.exit(status)
    atexit._run_exitfuncs()  # the handlers run once: the interpreter's exit would find none left
    if not _flushed():
        sys.exit(status)
    os._exit(code)


def _observed() -> bool:
    """A tracer, a profiler, an interactive prompt or warnings that the interpreter's teardown serves."""
    monitoring = getattr(sys, "monitoring", None)  # Python 3.12+: coverage's and cProfile's way there
    tools = monitoring is not None and any(monitoring.get_tool(tool) for tool in range(6))
    return bool(
        sys.gettrace()
        or sys.getprofile()
        or tools
        or sys.flags.inspect
        or os.environ.get("PYTHONINSPECT")
        or sys.flags.dev_mode
        or sys.warnoptions
    )


def _threads_running() -> bool:
    """A thread that is not a daemon: the interpreter waits for it (and runs what stops an executor's)."""
    main = threading.main_thread()
    return any(thread is not main and not thread.daemon for thread in threading.enumerate())


def _flushed() -> bool:
    """stdout and stderr written out, the ones a program put in their place too; False if one could not be."""
    for stream in {id(s): s for s in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)}.values():
        if stream is None or getattr(stream, "closed", False):
            continue
        try:
            stream.flush()
        except (OSError, ValueError):
            return False
    return True
