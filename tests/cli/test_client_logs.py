"""What the commands let through of kafka-python's own logs."""

from __future__ import annotations

import logging
import time

import pytest
from click.testing import CliRunner
from kafka.net.selector import NetworkSelector
from kafka.net.transport import KafkaTCPTransport

from tracescore.cli import main


def _read_from(transport: KafkaTCPTransport) -> None:
    """kafka-python's network thread reading a transport whose socket is gone: it logs the error itself."""
    transport._sock_recv()


def test_the_close_race_traceback_is_not_shown_after_a_command_ran(caplog: pytest.LogCaptureFixture) -> None:
    """kafka-python 3.0 closes a client's sockets under its network thread: a read in between logs an ERROR
    with a traceback after every run that went well (`tracescore consume --idle-timeout 10` in the
    quickstart). For a transport closed on purpose it is not shown; for one still open it still is."""
    assert CliRunner().invoke(main, ["report", "--help"]).exit_code == 0
    closed, still_open = KafkaTCPTransport(None, None), KafkaTCPTransport(None, None)
    closed.close()
    with caplog.at_level(logging.ERROR, logger="kafka.net.transport"):
        _read_from(closed)
        assert not caplog.records
        _read_from(still_open)
    (shown,) = caplog.records
    assert "Error receiving network data" in shown.getMessage() and shown.exc_info is not None


async def _blocking_step() -> None:
    time.sleep(0.05)  # a task step kafka-python's network thread finds slow: it does not yield


def test_the_network_threads_slow_step_warning_is_not_shown_its_other_warnings_are(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """kafka-python 3 warns "Task ... ran for 0.227s (>0.100s threshold). It is blocking the event loop"
    whenever its thread was not scheduled in time: in `tracescore alert`'s log under load, it alarmed an SRE
    and says nothing of tracescore's health. Not shown; the selector's other warnings are."""
    assert CliRunner().invoke(main, ["report", "--help"]).exit_code == 0
    selector = NetworkSelector(slow_task_threshold_secs=0.001)
    try:
        with caplog.at_level(logging.WARNING, logger="kafka.net.selector"):
            selector.run(_blocking_step)
            assert not caplog.records, [r.getMessage() for r in caplog.records]
            logging.getLogger("kafka.net.selector").warning(
                "During exception %s, caught additional error", "x"
            )
    finally:
        selector.close()
    (shown,) = caplog.records
    assert shown.getMessage().startswith("During exception x")
