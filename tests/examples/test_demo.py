"""`make demo` (examples/demo.py) tells the story and ends by itself: the drift on /billing fires both alerts
on the webhook (below the threshold, and below the route's own normal), the recovery resolves both, and the
HTML report is written; the services it runs end with it however it ends."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from _helpers import ends_with_its_owner

from tracescore.testing.kafka_broker import KafkaBroker

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.kafka

# Starts a service as the demo does (its folder: the one the guard removes; its topic: the marker) and waits.
_OWNER = """
import json, sys, tempfile
from pathlib import Path
from examples.demo import start_service

folder = Path(tempfile.mkdtemp(prefix="tracescore-demo-"))
service = start_service(["consume", "--bootstrap-servers", {bootstrap!r}, "--topic", {topic!r}], folder)
print(json.dumps({{"pid": service.process.pid, "folder": str(folder), "marker": {topic!r}}}), flush=True)
sys.stdin.read()
"""


def test_demo_fires_then_resolves_and_writes_the_report() -> None:
    report = REPO / "out" / "demo-report.html"
    report.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "examples/demo.py"], cwd=REPO, env=env, capture_output=True, text=True, timeout=1200
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    fired = out.index("webhook <- [FIRING:warning] faithfulness of northwind-assistant /billing dropped")
    resolved = out.index(
        "webhook <- [RESOLVED:warning] faithfulness of northwind-assistant /billing recovered"
    )
    assert fired < resolved
    below = out.index("webhook <- [FIRING:warning] faithfulness of northwind-assistant /billing fell")
    normal_again = out.index(
        "webhook <- [RESOLVED:warning] faithfulness of northwind-assistant /billing back to its normal"
    )
    assert below < normal_again and "below its normal" in out[below : out.index("\n", below)]
    assert "(signature verified)" in out and "INVALID" not in out
    assert "/support" not in out[out.index("== alerts received") :]
    assert "144 evaluations" in out
    # Each service's closing summary as it prints it, its counts first, one line each.
    assert "tracescore consume stopped:\n  messages=" in out
    assert "tracescore alert stopped:\n  records=" in out
    # The label rule: the altered answers that keep one true sentence (score 0.5) are hallucinated too.
    assert "deliberately unfaithful answers caught: 12/12; faithful answers flagged: 0/132" in out
    assert report.is_file() and "/billing" in report.read_text()


def test_a_demo_service_ends_with_the_demo_however_the_demo_is_killed(kafka_broker: KafkaBroker) -> None:
    """A demo killed with SIGKILL (or its terminal closed) left its `tracescore consume` and `tracescore
    alert` running for good, and its folder (their logs, the alert rules) behind. One service stands for
    both; the app's runs go through `run_guarded` (tests/extract/test_recording_processes.py)."""
    topic = f"demo-guarded-{uuid.uuid4().hex[:8]}"
    ends_with_its_owner(_OWNER.format(bootstrap=kafka_broker.bootstrap_servers, topic=topic), "the service")
