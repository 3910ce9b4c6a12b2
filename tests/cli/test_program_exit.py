"""The `tracescore` program ends its process itself, without the interpreter's teardown
(tracescore/cli/_exit.py): what a user sees of the end stays the interpreter's. The last output and the exit
status survive, the exit handlers run (a start-up hook's, as coverage and `opentelemetry-instrument` register
theirs), a thread still running is waited for, a closed pipe ends as it always did, and a profiler still
gets the interpreter's end to write its results.

Each program is run with stdout a pipe and PYTHONUNBUFFERED unset, so what it prints waits in the buffer
until the end flushes it (a user's `tracescore score ... | jq`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tracescore.cli import EXIT_GATE_FAILED

REPO = Path(__file__).resolve().parents[2]
# A start-up hook (sitecustomize, as coverage's and opentelemetry-instrument's): an exit handler that writes
# the last words of stdout, without a newline, and says which end ran it (the interpreter marks the main
# thread stopped before it runs the exit handlers; the program runs them from the main thread); with
# HOOK_THREAD set, a thread that is not a daemon and writes once the main thread is done.
HOOK = """
import atexit, os, sys, threading

def _last_words():
    end = "program" if threading.main_thread().is_alive() else "interpreter"
    sys.stdout.write(f"the exit handler ran ({end}'s end)")

atexit.register(_last_words)

def _after_main():
    while threading.main_thread().is_alive():
        threading.Event().wait(0.01)
    sys.stdout.write("the thread ended. ")

if os.environ.get("HOOK_THREAD"):
    threading.Thread(target=_after_main).start()
"""
RECORD = {
    "id": "b",
    "query": "Where is the Oberoi Group's head office?",
    "contexts": ["The Oberoi Group is a hotel company with its head office in Delhi."],
    "answer": "Mumbai",
}


def console_script() -> list[str]:
    """What the console script pyproject.toml declares runs, as pip's script runs it."""
    target = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]["tracescore"]
    module, function = target.split(":")
    return [sys.executable, "-c", f"from {module} import {function}; {function}()"]


MODULE = [sys.executable, "-m", "tracescore.cli"]
PROGRAMS = {"python -m tracescore.cli": MODULE, "console script": None}
# The group run and ended by the interpreter: the end the program's must look like.
INTERPRETERS_END = [sys.executable, "-c", "from tracescore.cli import main; main()"]


def program(name: str) -> list[str]:
    return PROGRAMS[name] or console_script()


def hooked(tmp_path: Path, **extra: str) -> dict[str, str]:
    (tmp_path / "hook").mkdir(exist_ok=True)
    (tmp_path / "hook" / "sitecustomize.py").write_text(HOOK, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED" and not k.startswith("TRACESCORE_")}
    paths = [str(tmp_path / "hook"), *filter(None, [env.get("PYTHONPATH")])]
    return {**env, "PYTHONPATH": os.pathsep.join(paths), **extra}


@pytest.mark.parametrize("name", PROGRAMS)
def test_the_last_output_the_exit_handlers_and_the_status_outlive_the_end(tmp_path: Path, name: str) -> None:
    """A CI gate's rows on stdout, its failure on stderr and its status: all there, and the exit handler's
    words after them, though the program ended its process itself."""
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(RECORD) + "\n", encoding="utf-8")
    done = subprocess.run(
        [*program(name), "score", str(source), "--judge", "offline", "--no-progress",
         "--fail-under", "faithfulness=0.99"],
        capture_output=True, text=True, timeout=120, check=False, env=hooked(tmp_path),
    )  # fmt: skip
    assert done.returncode == EXIT_GATE_FAILED, done.stderr
    row, last = done.stdout.split("\n")
    assert json.loads(row)["id"] == "b"
    assert last == "the exit handler ran (program's end)", "the program's own end, its handlers run"
    assert done.stderr.splitlines()[-1] == "FAIL faithfulness: mean 0.000 is below 0.99", done.stderr


@pytest.mark.parametrize("name", PROGRAMS)
def test_a_thread_still_running_is_waited_for(tmp_path: Path, name: str) -> None:
    done = subprocess.run(
        [*program(name), "--version"], capture_output=True, text=True, timeout=120, check=False,
        env=hooked(tmp_path, HOOK_THREAD="1"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("the thread ended. the exit handler ran (interpreter's end)"), done.stdout


def test_a_pipe_its_reader_closed_ends_as_the_interpreter_ends_it(tmp_path: Path) -> None:
    """The exit handler's words cannot be flushed: the interpreter says so and exits 120, whichever end."""
    ends = {}
    for name, command in (("program", MODULE), ("interpreter", INTERPRETERS_END)):
        process = subprocess.Popen(
            [*command, "no-such-command"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=hooked(tmp_path),
        )  # fmt: skip
        process.stdout.close()  # type: ignore[union-attr]
        _, stderr = process.communicate(timeout=120)
        ends[name] = (process.returncode, stderr.splitlines()[-2:])
    assert ends["program"] == ends["interpreter"]
    code, last = ends["program"]
    assert code == 120 and last[-1] == "BrokenPipeError: [Errno 32] Broken pipe", ends


def test_a_profiler_gets_the_interpreters_end(tmp_path: Path) -> None:
    """cProfile writes its results once the program has returned: the program leaves the end to the
    interpreter (so do coverage and a debugger, which trace it)."""
    profile = tmp_path / "profile"
    done = subprocess.run(
        [sys.executable, "-m", "cProfile", "-o", str(profile), "-m", "tracescore.cli", "--version"],
        capture_output=True, text=True, timeout=120, check=False, env=hooked(tmp_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("the exit handler ran (interpreter's end)"), done.stdout
    assert profile.stat().st_size > 0
