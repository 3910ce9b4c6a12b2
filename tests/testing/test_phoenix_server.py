"""The development Phoenix server: it ends with the process that started it, however that process ends."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import httpx2
from _helpers import ends_with_its_owner

from tracescore.testing.phoenix import PhoenixServer

# Starts a Phoenix (its throwaway working directory: the folder its guard removes) and waits to be killed.
_OWNER = """
import json, sys
from tracescore.testing.phoenix import PhoenixServer

server = PhoenixServer().start()
print(json.dumps({"pid": server.process.pid, "folder": str(server.working_dir), "marker": "/bin/phoenix"}),
      flush=True)
sys.stdin.read()
"""


def test_phoenix_ends_with_the_process_that_started_it_however_it_is_killed() -> None:
    """A test run killed on a timeout (SIGKILL: no stop(), no atexit) left its Phoenix, started in a session
    of its own, running for good, its SQLite working directory beside it."""
    ends_with_its_owner(_OWNER, "Phoenix")


def test_a_port_taken_before_phoenix_binds_it_is_chosen_again(phoenix_spawn: Callable[..., Any]) -> None:
    """free_port() releases the port it found: a parallel worker may take it before Phoenix binds it. The
    server then starts on other ports, as KafkaBroker does, not failing every test that shares it. (Forked
    as the suite's servers are; the test above starts `phoenix serve` anew, in its own process.)"""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with PhoenixServer(port=port, spawn=phoenix_spawn) as server:
            assert server.port != port
            assert httpx2.get(f"{server.base_url}/healthz", timeout=5).status_code == 200
            # The folders Phoenix makes at import, made by the forked server in its own working directory
            # (tests/_phoenix_zygote.py), as `phoenix serve` started anew makes them.
            assert server.working_dir is not None
            assert {"inferences", "trace_datasets", "wasm"} <= {p.name for p in server.working_dir.iterdir()}
