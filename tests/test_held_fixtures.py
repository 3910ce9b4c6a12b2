"""A held fixture (tests/_held.py: Phoenix, the Prometheus stack) starts at its first test, serves the tests
after it that ask for it, and stops after the last of them, before the next test runs, not at the session's
end; asked for again later, it starts again; the last one stops before the session fixtures it uses. Here in
a pytest run of its own on the suite's conftest, on an xdist worker as `make test` runs it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _helpers import own_suite

# Each line of EVENTS: what happened, in order. The session fixture stands for the session's broker.
RUN = textwrap.dedent(
    """
    import os

    import pytest
    from _held import held


    def said(event):
        with open(os.environ["EVENTS"], "a") as events:
            events.write(event + "\\n")


    @pytest.fixture(scope="session")
    def broker():
        said("broker up")
        yield "broker"
        said("broker down")


    @pytest.fixture
    def server(request, broker):
        def start(stack):
            said("server up")
            stack.callback(said, "server down")
            return f"server on {broker}"

        return held(request, start)


    def test_1(server):
        said("test_1")


    def test_2(server):
        said("test_2")


    def test_3(broker):
        said("test_3")


    def test_4(server):
        said("test_4")
    """
)


def test_a_held_fixture_stops_after_its_last_test_and_before_the_session_fixtures(tmp_path: Path) -> None:
    suite = own_suite(tmp_path, RUN)
    events = tmp_path / "events"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "1", str(suite)],
        cwd=tmp_path, env={**os.environ, "EVENTS": str(events)},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == pytest.ExitCode.OK, done.stdout + done.stderr
    assert events.read_text().splitlines() == [
        "broker up",
        "server up",
        "test_1",
        "test_2",
        "server down",  # after its last test of the run, before the next one
        "test_3",
        "server up",  # asked for again: started again
        "test_4",
        "server down",  # the last test's: before the session fixture it uses
        "broker down",
    ]


def test_a_held_fixture_asked_for_at_run_time_fails_the_test_saying_to_name_it(tmp_path: Path) -> None:
    """The grouping reads a test's fixtures at collection: a held fixture asked for with
    request.getfixturevalue would start on whichever worker runs the test, and idle there to its end."""
    test = (
        RUN.split("def test_1")[0] + "\n\ndef test_dynamic(request):\n    request.getfixturevalue('server')\n"
    )
    suite = own_suite(tmp_path, test)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", str(suite)],
        cwd=tmp_path, env={**os.environ, "EVENTS": str(tmp_path / "events")},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, done.stdout + done.stderr
    assert "server asked for with request.getfixturevalue: name it among the test's arguments" in done.stdout
    assert "server up" not in (tmp_path / "events").read_text()
