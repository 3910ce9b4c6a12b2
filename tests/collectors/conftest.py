"""Session fixture `otelcol`: the Collector binary built by deploy/collector/build.sh (fails, never skips)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from collector_helpers import BUILD_SCRIPT, BUILD_TIMEOUT_S, REPO


@pytest.fixture(scope="session")
def otelcol() -> Path:
    """The Collector binary. A build that fails is a test failure, never a skip."""
    try:
        done = subprocess.run(
            ["bash", str(BUILD_SCRIPT)],
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
            cwd=REPO,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.fail(f"{BUILD_SCRIPT} did not finish: {exc}", pytrace=False)
    lines = done.stdout.strip().splitlines()
    binary = Path(lines[-1]) if lines else None
    if done.returncode != 0 or binary is None or not os.access(binary, os.X_OK):
        tail = "\n".join(done.stderr.splitlines()[-40:])
        pytest.fail(
            f"{BUILD_SCRIPT} failed (exit {done.returncode}); stdout={done.stdout!r}\n{tail}", pytrace=False
        )
    return binary
