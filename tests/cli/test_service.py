"""A service run in process (click's CliRunner, an application embedding a command) stops on SIGINT/SIGTERM
while it runs, and hands the process's signals back when it returns, an exception included: a test suite
that ran a command stays interruptible with Ctrl-C, and an embedding application keeps its own handlers."""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from tracescore.cli import main
from tracescore.cli._service import STOP_SIGNALS, stop_on_signals
from tracescore.testing import free_port

# A bound on waiting for a service to start, not a timing assertion.
_START_BOUND_S = 120


class Handler:
    """The process's own handler (a test runner's, an application's): counts what reaches it."""

    def __init__(self) -> None:
        self.received: list[int] = []

    def __call__(self, signum: int, frame: Any) -> None:
        self.received.append(signum)


@pytest.fixture
def own_handler() -> Iterator[Handler]:
    """Our handler on SIGINT and SIGTERM for the test (a recording one: a handler the code under test
    forgets must not interrupt the test run); pytest's back afterwards."""
    handler = Handler()
    found = {signum: signal.signal(signum, handler) for signum in STOP_SIGNALS}
    try:
        yield handler
    finally:
        for signum, previous in found.items():
            signal.signal(signum, previous)


def _raise(signum: int) -> None:
    os.kill(os.getpid(), signum)
    time.sleep(0)  # a call: Python runs pending handlers here at the latest


def _clean_env() -> dict[str, str | None]:
    return {name: None for name in os.environ if name.startswith("TRACESCORE_")}


def test_signals_stop_the_block_and_reach_the_handlers_found_after_it(own_handler: Handler) -> None:
    stops: list[str] = []
    with stop_on_signals(lambda: stops.append("stop")):
        _raise(signal.SIGINT)
        _raise(signal.SIGTERM)
    assert stops == ["stop", "stop"] and own_handler.received == [], "the service's, not the process's"
    _raise(signal.SIGINT)
    assert own_handler.received == [signal.SIGINT]
    assert all(signal.getsignal(signum) is own_handler for signum in STOP_SIGNALS)


def test_the_handlers_found_are_back_after_an_exception(own_handler: Handler) -> None:
    with pytest.raises(RuntimeError), stop_on_signals(lambda: None):
        raise RuntimeError("the service failed")
    assert all(signal.getsignal(signum) is own_handler for signum in STOP_SIGNALS)


def test_outside_the_main_thread_nothing_is_installed(own_handler: Handler) -> None:
    seen: list[object] = []

    def run() -> None:
        with stop_on_signals(lambda: None):
            seen.append(signal.getsignal(signal.SIGINT))

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    assert seen == [own_handler]


@pytest.mark.parametrize("command", ["consume", "alert", "conversations", "tail"])
def test_a_command_that_fails_on_kafka_hands_back_the_signals(
    own_handler: Handler, command: str, closed_port: int
) -> None:
    address = f"127.0.0.1:{closed_port}"  # nothing listens there
    result = CliRunner(env=_clean_env()).invoke(
        main, [command, "--bootstrap-servers", address, "--connect-timeout", "1"]
    )
    assert result.exit_code == 1, result.output
    assert "no Kafka broker reachable" in result.output
    assert all(signal.getsignal(signum) is own_handler for signum in STOP_SIGNALS)


@pytest.mark.parametrize(
    ("args", "env", "exit_code"),
    [
        ((), {}, 1),  # the run fails on Kafka
        # A start-up that fails after the filter was added (tests/test_first_join.py failed after it, on the
        # same worker: its second "No partition metadata" warning held back as a repeat of its first).
        (("--phoenix-endpoint", "http://127.0.0.1:6006"), {"TRACESCORE_PHOENIX_TIMEOUT_S": "-1"}, 2),
    ],
    ids=["kafka", "start-up"],
)
def test_consume_run_in_process_leaves_the_log_handlers_as_it_found_them(
    closed_port: int, args: tuple[str, ...], env: dict[str, str], exit_code: int
) -> None:
    """`tracescore consume` holds back repeated client warnings with a filter on the log handlers. It left
    that filter on the handlers of the program that ran it in process: a test suite's log capture then held
    back any warning of the same template for 30 s, in whichever test ran next."""
    handlers = logging.getLogger().handlers
    before = [list(handler.filters) for handler in handlers]
    address = f"127.0.0.1:{closed_port}"  # nothing listens there
    result = CliRunner(env={**_clean_env(), **env}).invoke(
        main, ["consume", "--bootstrap-servers", address, "--connect-timeout", "1", *args]
    )
    assert result.exit_code == exit_code, result.output
    assert [list(handler.filters) for handler in handlers] == before


@pytest.mark.parametrize(
    "args, env, exit_code",
    [
        ((), {}, 1),  # the broker unreachable: the run ends with an error
        (("--phoenix-endpoint", "http://127.0.0.1:6006"), {"TRACESCORE_PHOENIX_TIMEOUT_S": "-1"}, 2),
    ],
    ids=["kafka", "start-up"],
)
def test_consume_run_in_process_leaves_its_metrics_port_free(
    closed_port: int, args: tuple[str, ...], env: dict[str, str], exit_code: int
) -> None:
    """The Prometheus endpoint of a run in process stopped listening when the run ended; a usage error found
    after it started left it bound too: the next run on that port failed with "address already in use"."""
    port = free_port()
    address = f"127.0.0.1:{closed_port}"  # nothing listens there
    command = ["consume", "--bootstrap-servers", address, "--connect-timeout", "1", *args]
    for _ in range(2):
        result = CliRunner(env={**_clean_env(), **env}).invoke(
            main, [*command, "--prometheus-host", "127.0.0.1", "--prometheus-port", str(port)]
        )
        assert result.exit_code == exit_code, result.output
        assert "cannot serve metrics" not in result.output
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", port))


def _service_args(command: str, bootstrap: str, prefix: str) -> list[str]:
    common = ["--bootstrap-servers", bootstrap, "--evaluations-topic", f"{prefix}.evaluations"]
    if command == "consume":
        return [*common, "--topic", f"{prefix}.spans", "--group-id", prefix, "--dlq-topic", f"{prefix}.dlq"]
    if command == "alert":
        return [*common, "--group-id", prefix]
    return [*common, "--conversations-topic", f"{prefix}.conversations", "--group-id", prefix]


def _service_env(command: str, prefix: str) -> dict[str, str | None]:
    """The services' internal topics, the test's own."""
    names = {
        "alert": ("ALERT", ("routes", "state", "conversations")),
        "conversations": ("CONVERSATIONS", ("turns", "state", "spans", "evidence")),
    }
    env = _clean_env()
    if command in names:
        upper, topics = names[command]
        env |= {f"TRACESCORE_{upper}_{t.upper()}_TOPIC": f"{prefix}.{command}.{t}" for t in topics}
    if command == "consume":
        env["TRACESCORE_CONVERSATION_EVIDENCE_TOPIC"] = f"{prefix}.evidence"
    return env


@pytest.mark.kafka
@pytest.mark.parametrize("command", ["consume", "alert", "conversations"])
def test_a_service_run_in_process_hands_back_the_signals_it_found(
    own_handler: Handler, bootstrap: str, topic_prefix: str, command: str
) -> None:
    args = [command, *_service_args(command, bootstrap, topic_prefix), "--idle-timeout", "1"]
    result = CliRunner(env=_service_env(command, topic_prefix)).invoke(main, args)
    assert result.exit_code == 0, result.output
    assert all(signal.getsignal(signum) is own_handler for signum in STOP_SIGNALS)
    _raise(signal.SIGINT)
    assert own_handler.received == [signal.SIGINT], "Ctrl-C reaches the process again"


@pytest.mark.kafka
@pytest.mark.parametrize("signum", STOP_SIGNALS)
def test_a_signal_stops_the_service_run_in_process_then_reaches_the_process(
    own_handler: Handler, bootstrap: str, topic_prefix: str, signum: int
) -> None:
    def signal_once_running() -> None:
        # The service's handler in place is the sign it is running: then the signal is its to handle.
        deadline = time.monotonic() + _START_BOUND_S
        while signal.getsignal(signum) is own_handler and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signum)

    sender = threading.Thread(target=signal_once_running, daemon=True)
    sender.start()
    args = ["consume", *_service_args("consume", bootstrap, topic_prefix)]  # no idle timeout: until stopped
    result = CliRunner(env=_service_env("consume", topic_prefix)).invoke(main, args)
    sender.join(timeout=_START_BOUND_S)
    assert result.exit_code == 0, result.output
    assert "messages=0" in result.output, "stopped cleanly, with its summary"
    assert own_handler.received == [], "the service's signal, not the process's"
    _raise(signum)
    assert own_handler.received == [signum]
