"""Processes of their own without an interpreter's start and imports each, for a batch of short programs:
each job's code runs in a child forked from a zygote that ran only the import statements of `preload`
(tests/_zygote.py: the mechanism, and what a child shares with a fresh `python -c`)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from _zygote import Zygote, ZygoteProcess


def run_forked(
    preload: str,
    jobs: dict[str, tuple[str, dict[str, str]]],
    folder: Path,
    env: dict[str, str] | None = None,
    timeout_s: float = 120,
) -> dict[str, subprocess.CompletedProcess[str]]:
    """Job name -> its process's outcome (exit code, stdout, stderr). `jobs`: name -> (code, environment
    over `env`). The jobs run at once (a job whose environment the preload's imports would see differently
    gets a zygote of its own); all of them are killed on the timeout."""
    base = dict(os.environ if env is None else env)
    zygotes: list[Zygote] = []
    started: dict[str, ZygoteProcess] = {}
    try:
        for name, (code, extra) in jobs.items():
            job_env = {**base, **extra}
            zygote = next((z for z in zygotes if not z.differs(job_env)), None)
            if zygote is None:
                zygote = Zygote(preload, job_env)
                zygotes.append(zygote)
            out, err = folder / f"{name}.out", folder / f"{name}.err"
            with open(os.devnull, "rb") as stdin, out.open("wb") as stdout, err.open("wb") as stderr:
                fds = (stdin.fileno(), stdout.fileno(), stderr.fileno())
                pid, end = zygote.spawn("code", code, [], env=job_env, fds=fds)
            started[name] = ZygoteProcess(["-c", name], pid, end, (None, None, None))
        deadline = time.monotonic() + timeout_s
        codes = {name: process.wait(max(deadline - time.monotonic(), 0)) for name, process in started.items()}
    finally:
        for process in started.values():
            process.kill()
        for zygote in zygotes:
            zygote.close()
    return {
        name: subprocess.CompletedProcess(
            [name],
            codes[name],
            (folder / f"{name}.out").read_text(encoding="utf-8"),
            (folder / f"{name}.err").read_text(encoding="utf-8"),
        )
        for name in jobs
    }
