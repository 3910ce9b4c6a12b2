"""The zygote the service processes of the tests are forked from (tests/_zygote.py): a child is the process
the test asked for (environment, argv, cwd, exit code, output, signals, crash hook), and the zygote ends
with its worker, leaving nothing behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _helpers import pause, stopped, wait_until
from _zygote import Zygote, popen, run

from tracescore._service import CRASH_ENV

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
SHOW = "import json, os, sys; print(json.dumps([dict(os.environ), sys.argv, os.getcwd(), os.getsid(0)]))"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_child_has_the_environment_argv_cwd_and_exit_code_asked_for(tmp_path: Path) -> None:
    env = {**{k: v for k, v in ENV.items() if k != "HOME"}, "ZYGOTE_TEST": "yes"}
    child = popen(
        [sys.executable, "-c", SHOW + "; sys.exit(7)", "one", "two"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert child.wait(60) == 7
    assert child.stdout is not None
    seen_env, argv, cwd, session = json.loads(child.stdout.read())
    child.stdout.close()
    assert seen_env == env  # exactly: HOME, which the worker has, is gone
    assert argv == ["-c", "one", "two"]
    assert cwd == str(tmp_path)
    assert session == child.pid  # a session of its own


def test_a_child_has_nothing_of_its_zygotes_environment(tmp_path: Path) -> None:
    zygote = Zygote("import json", {**ENV, "ZYGOTE_ONLY": "x"})
    try:
        with (tmp_path / "out").open("wb") as out:
            _, end = zygote.spawn("code", SHOW, [], env=ENV, fds=(0, out.fileno(), 2))
        assert end.done.wait(60) and end.returncode == 0
    finally:
        zygote.close()
    assert json.loads((tmp_path / "out").read_text())[0] == ENV


def test_a_module_runs_as_main_with_its_argv_and_the_program_exit(tmp_path: Path) -> None:
    child = popen(
        [sys.executable, "-m", "tracescore.cli", "consume", "--no-such-option"],
        env=ENV,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.wait(60) == 2  # click's usage error, through tracescore.cli's run
    assert child.stderr is not None
    said = child.stderr.read()
    child.stderr.close()
    assert "No such option '--no-such-option'" in said and "Usage: python -m tracescore.cli consume" in said


def test_run_and_communicate_give_what_subprocess_gives() -> None:
    """`run` as `subprocess.run(capture_output=True, text=True)`: the exit code and both outputs in full
    (more than a pipe holds, written at once: read while the child runs), newlines translated; text or bytes
    from `communicate` as the pipes were opened."""
    code = "import sys; sys.stdout.write('o\\r\\n' * 100_000); sys.stderr.write('é' * 100_000); sys.exit(3)"
    done = run([sys.executable, "-c", code], env=ENV, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (3, "o\n" * 100_000, "é" * 100_000)
    child = popen([sys.executable, "-c", code], env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert child.communicate(60) == (None, "é".encode() * 100_000) and child.returncode == 3


def test_run_kills_the_child_on_its_timeout(tmp_path: Path) -> None:
    pid = tmp_path / "pid"
    code = "import os, sys, time\nopen(sys.argv[1], 'w').write(str(os.getpid()))\ntime.sleep(600)"
    with pytest.raises(subprocess.TimeoutExpired):
        run([sys.executable, "-c", code, str(pid)], env=ENV, timeout=5)
    assert not _alive(int(pid.read_text())), "killed and reaped when run returned"


def test_signals_act_on_the_child() -> None:
    code = "import time\nprint('up', flush=True)\nwhile True: time.sleep(0.05)"
    for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
        child = popen([sys.executable, "-c", code], env=ENV, stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None and child.stdout.readline() == "up\n"
        child.stdout.close()
        assert child.poll() is None
        with pytest.raises(subprocess.TimeoutExpired):
            child.wait(0.01)
        child.send_signal(sig)
        # SIGINT: KeyboardInterrupt in the child, which then dies of SIGINT, as a fresh interpreter does
        # (the zygote itself ignores it)
        assert child.wait(60) == -sig


def test_a_child_stops_and_continues() -> None:
    child = popen([sys.executable, "-c", "import time; time.sleep(600)"], env=ENV)
    try:
        pause(child.pid)
        assert stopped(child.pid) and child.poll() is None
        child.send_signal(signal.SIGCONT)
        wait_until(lambda: not stopped(child.pid), "the child going on")
    finally:
        child.kill()
    assert child.wait(60) == -signal.SIGKILL


def test_a_crash_point_armed_in_the_childs_environment_fires_in_it() -> None:
    # The zygote imported tracescore._service with no crash point armed: the child's own environment counts.
    code = "from tracescore._service import crash_point\ncrash_point('committed')\nprint('not crashed')"
    armed = popen([sys.executable, "-c", code], env={**ENV, CRASH_ENV: "committed"})
    assert armed.wait(60) == -signal.SIGKILL
    clean = popen([sys.executable, "-c", code], env=ENV, stdout=subprocess.PIPE, text=True)
    assert clean.wait(60) == 0
    assert clean.stdout is not None and clean.stdout.read() == "not crashed\n"
    clean.stdout.close()


def test_children_are_seeded_apart() -> None:
    code = "import random; print(random.random())"
    values = set()
    for _ in range(2):
        child = popen([sys.executable, "-c", code], env=ENV, stdout=subprocess.PIPE, text=True)
        assert child.wait(60) == 0 and child.stdout is not None
        values.add(child.stdout.read())
        child.stdout.close()
    assert len(values) == 2


def test_a_child_that_the_imports_would_see_differently_gets_another_zygote() -> None:
    zygote = Zygote("import tracescore.cli", ENV)
    try:
        assert "LANG" in zygote.read_at_import  # click's gettext, at import
        assert zygote.differs({**ENV, "LANG": "xx_XX.UTF-8"}) == ["LANG"]
        assert zygote.differs({**ENV, CRASH_ENV: "committed"}) == []  # run again in the child
        with pytest.raises(ValueError, match="LANG"):
            zygote.spawn("code", "pass", [], env={**ENV, "LANG": "xx_XX.UTF-8"}, fds=(0, 1, 2))
    finally:
        zygote.close()


def test_a_childs_setup_redoes_what_the_preload_read_of_the_variables_it_sets_anew(tmp_path: Path) -> None:
    """A module that keeps a variable read at import (as Phoenix's config keeps its working directory):
    the setup computes it again in the child, so that variable may differ from the zygote's, no other."""
    (tmp_path / "kept.py").write_text("import os\nFOLDER = os.environ['KEPT_FOLDER']\n")
    env = {**ENV, "PYTHONPATH": f"{tmp_path}:{REPO}", "KEPT_FOLDER": "the zygote's"}
    setup = "import os, kept; kept.FOLDER = os.environ['KEPT_FOLDER']"
    zygote = Zygote("import kept", env, setup=setup, set_in_child=["KEPT_FOLDER"])
    try:
        assert zygote.differs({**env, "KEPT_FOLDER": "the child's"}) == []
        assert zygote.differs({**env, "PYTHONPATH": str(REPO)}) == ["PYTHONPATH"]
        with (tmp_path / "out").open("wb") as out:
            child_env = {**env, "KEPT_FOLDER": "the child's"}
            _, end = zygote.spawn(
                "code", "import kept; print(kept.FOLDER)", [], env=child_env, fds=(0, out.fileno(), 2)
            )
        assert end.done.wait(60) and end.returncode == 0
    finally:
        zygote.close()
    assert (tmp_path / "out").read_text() == "the child's\n"


def test_the_zygote_ends_with_its_worker_and_its_children_with_it(tmp_path: Path) -> None:
    """A worker killed outright (SIGKILL: no teardown, no atexit): its zygote sees its socket close, kills
    the child it had running and exits."""
    pids = tmp_path / "pids"
    worker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; sys.path.insert(0, sys.argv[1]); import _zygote\n"
            "child = _zygote.popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
            "Path(sys.argv[2]).write_text(f'{_zygote._pool[0]._process.pid} {child.pid}')\n"
            "time.sleep(600)",
            str(Path(__file__).parent),
            str(pids),
        ],
        env=ENV,
    )
    try:
        wait_until(lambda: pids.exists() and pids.read_text(), "the worker's child started")
        zygote_pid, child_pid = (int(pid) for pid in pids.read_text().split())
        assert _alive(zygote_pid) and _alive(child_pid)
        worker.kill()
        worker.wait()
        wait_until(lambda: not _alive(zygote_pid) and not _alive(child_pid), "the zygote and its child gone")
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()


def test_a_dead_zygote_fails_the_wait_loudly_and_leaves_nothing() -> None:
    zygote = Zygote("import json", ENV)
    try:
        pid, end = zygote.spawn("code", "import time; time.sleep(600)", [], env=ENV, fds=(0, 1, 2))
        os.kill(zygote._process.pid, signal.SIGKILL)
        assert end.done.wait(60)
        assert "the zygote ended" in end.error
        deadline = time.monotonic() + 60
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid)
        with pytest.raises(RuntimeError, match="the zygote ended"):
            zygote.spawn("code", "pass", [], env=ENV, fds=(0, 1, 2))
    finally:
        zygote.close()
