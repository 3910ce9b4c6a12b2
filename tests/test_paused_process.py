"""`paused` (tests/_helpers.py), which the tests that pause a broker rely on: from the start of its block the
process answers nothing. kill(SIGSTOP) returns before every thread of the process has stopped, and on a loaded
machine a thread not stopped yet answered: a paused broker acknowledged the batch `tracescore alert` was to
re-key into it, and the stop had nothing to say (tests/alert/test_alert_stop_kafka.py, at six workers)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
from _helpers import WAIT_S, paused

# A process shaped like the broker's JVM: its first thread waits for the others, one of which answers.
ECHO = """
import socket, threading
server = socket.create_server(("127.0.0.1", 0))
print(server.getsockname()[1], flush=True)
def answer():
    peer, _ = server.accept()
    while data := peer.recv(1):
        peer.sendall(data)
thread = threading.Thread(target=answer)
thread.start()
thread.join()
"""
TIMES = 10  # without the wait for every thread, most of these were answered at a load of ~20 on two cores


def test_a_paused_process_answers_nothing_until_it_goes_on() -> None:
    echo = subprocess.Popen([sys.executable, "-c", ECHO], stdout=subprocess.PIPE, text=True)
    try:
        assert echo.stdout is not None
        with socket.create_connection(("127.0.0.1", int(echo.stdout.readline())), timeout=WAIT_S) as peer:
            for _ in range(TIMES):
                with paused(echo.pid):
                    peer.sendall(b"x")
                    peer.settimeout(0.1)
                    with pytest.raises(TimeoutError):
                        peer.recv(1)
                peer.settimeout(WAIT_S)
                assert peer.recv(1) == b"x", "answered once it went on"
    finally:
        echo.kill()
        echo.wait()
        if echo.stdout is not None:
            echo.stdout.close()
