"""The development Phoenix server: it ends with the process that started it, however that process ends."""

from __future__ import annotations

from _helpers import ends_with_its_owner

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
