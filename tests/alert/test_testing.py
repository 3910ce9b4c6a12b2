"""The real Prometheus and Alertmanager for tests and the demo: each ends with the process that started it,
however that process ends."""

from __future__ import annotations

import pytest
from _helpers import ends_with_its_owner

# Starts the program (its temporary directory: the folder its guard removes, in its command line) and waits to
# be killed.
_OWNER = """
import json, sys
from tracescore.alert.testing import AlertmanagerProcess, PrometheusProcess

program = {program}.start()
print(json.dumps({{"pid": program.process.pid, "folder": str(program.dir), "marker": str(program.dir)}}),
      flush=True)
sys.stdin.read()
"""


@pytest.mark.parametrize(
    "program",
    ['AlertmanagerProcess("http://127.0.0.1:9/unused")', 'PrometheusProcess("global: {}\\n")'],
    ids=["alertmanager", "prometheus"],
)
def test_a_program_ends_with_the_process_that_started_it_however_it_is_killed(program: str) -> None:
    """A test killed on a timeout (SIGKILL: no stop(), no atexit) left its Prometheus or Alertmanager running
    for good, orphaned, its data directory beside it."""
    ends_with_its_owner(_OWNER.format(program=program), program.split("(")[0])
