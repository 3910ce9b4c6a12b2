"""Processes of their own without an interpreter's start and imports each (issue 33 item 4): one interpreter
runs the import statements of `preload` (nothing else: no state set, no thread), then forks one process per
job. Each child runs its job's code at the top level, as `python -c` would: as `__main__`, with its own
environment, exit code, atexit handlers and interpreter shutdown, its stdout and stderr in files. The
imports each job shares are done once; what a job does after them is its own process's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

# The child leaves the loop and runs its code at the top level, so an uncaught exception, sys.exit and the
# interpreter's shutdown behave as in `python -c`. The parent prints each job's exit code.
_RUNNER = """
import ast, json, os, sys, threading
preload, jobs = json.loads(sys.stdin.read())
imports = [node for node in ast.parse(preload).body if isinstance(node, (ast.Import, ast.ImportFrom))]
exec(compile(ast.Module(imports, []), "<preload>", "exec"), {})
assert threading.active_count() == 1, "a thread started by the preload's imports: a fork would not copy it"
source, children = None, {}
sys.stdout.flush(), sys.stderr.flush()
for name, (code, env, out, err) in jobs.items():
    pid = os.fork()
    if pid == 0:
        os.environ.update(env)
        for fd, path in ((1, out), (2, err)):
            opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(opened, fd)
            os.close(opened)
        source = code
        break
    children[pid] = name
if source is None:
    codes = {children[pid]: os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in list(children)}
    print(json.dumps(codes))
    sys.exit(0)
del imports, jobs, children
exec(compile(source, "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
"""


def run_forked(
    preload: str,
    jobs: dict[str, tuple[str, dict[str, str]]],
    folder: Path,
    env: dict[str, str] | None = None,
    timeout_s: float = 120,
) -> dict[str, subprocess.CompletedProcess[str]]:
    """Job name -> its process's outcome (exit code, stdout, stderr). `jobs`: name -> (code, environment
    over `env`). The jobs run at once; all of them are killed on the timeout."""
    files = {name: (folder / f"{name}.out", folder / f"{name}.err") for name in jobs}
    listed = {
        name: [code, extra, str(files[name][0]), str(files[name][1])] for name, (code, extra) in jobs.items()
    }
    runner = subprocess.Popen(
        [sys.executable, "-c", _RUNNER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # the jobs' processes in its group, killed with it on a timeout
    )
    try:
        stdout, stderr = runner.communicate(json.dumps([preload, listed]), timeout=timeout_s)
        assert runner.returncode == 0, f"the runner failed:\n{stderr}"
        codes = json.loads(stdout.strip().splitlines()[-1])
        return {
            name: subprocess.CompletedProcess(
                [name], codes[name], out.read_text(encoding="utf-8"), err.read_text(encoding="utf-8")
            )
            for name, (out, err) in files.items()
        }
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait()
