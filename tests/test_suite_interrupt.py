"""The suite stopped with SIGTERM (a cancelled CI job, `timeout`, an editor's stop button) ends as Ctrl-C does
(tests/conftest.py): the teardown runs, and the processes the tests started are gone with pytest. Brokers run
in sessions of their own, so pytest's default death on SIGTERM left them running, and the services a test
started, with them; here stand-ins for both, in a pytest run of its own on the suite's conftest."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _helpers import own_suite, wait_until

SLEEPER = '[sys.executable, "-c", "import time; time.sleep(600)"]'
RUN = textwrap.dedent(
    f"""
    import os, subprocess, sys, time
    from pathlib import Path

    import pytest
    from _helpers import started_process


    @pytest.fixture(scope="session")
    def server():
        # A broker's way: its own session (a Ctrl-C in the terminal does not reach it), ended by the teardown.
        process = subprocess.Popen({SLEEPER}, start_new_session=True)
        yield process
        process.terminate()
        process.wait()


    def test_running(server):
        service = started_process(subprocess.Popen({SLEEPER}, start_new_session=True))
        Path(os.environ["PIDS_FILE"]).write_text(f"{{server.pid}} {{service.pid}}")
        time.sleep(600)
    """
)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has ended: its parent just has not read its status


@pytest.mark.parametrize("workers", ["0", "1"], ids=["in-process", "xdist"])
def test_sigterm_ends_the_run_like_ctrl_c_and_leaves_no_process_behind(tmp_path: Path, workers: str) -> None:
    suite = own_suite(tmp_path, RUN)
    pids_file = tmp_path / "pids"
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", workers, str(suite)],
        cwd=tmp_path,
        env={**os.environ, "PIDS_FILE": str(pids_file)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    pids: list[int] = []
    try:
        wait_until(lambda: pids_file.exists() and pids_file.read_text(), "the test to start its processes")
        pids = [int(pid) for pid in pids_file.read_text().split()]
        run.send_signal(signal.SIGTERM)
        output, _ = run.communicate(timeout=120)
        assert run.returncode == pytest.ExitCode.INTERRUPTED, output
        left = [pid for pid in pids if _alive(pid)]
        assert not left, f"still running after pytest ended: {left}\n{output}"
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
