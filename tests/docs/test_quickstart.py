"""The quickstart, step by step, as a newcomer runs it: the app, `tracescore consume`, `tracescore tail`, and
the Phoenix step against a real Phoenix; each step's output compared with what docs/quickstart.md shows.

Topics and group are the test's own (through the same TRACESCORE_* variables the page's commands read),
renamed back to the defaults before comparing; timestamps and ids are normalised (`steps.PageRun`)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest
from pages import DOCS, REPO
from steps import PageRun, commands_not_shown, tracescore

from tracescore.testing.phoenix import PhoenixServer

pytestmark = pytest.mark.kafka

PAGE = DOCS / "quickstart.md"
APP_DIR = REPO / "examples" / "quickstart"
COMMANDS = (
    "python examples/quickstart/app.py",
    "tracescore consume --idle-timeout 10",
    "tracescore tail",
    "tracescore tail --flagged --json",
    "python examples/quickstart/with_phoenix.py",
    "tracescore consume --idle-timeout 10 --phoenix-endpoint http://127.0.0.1:6006",
)


def test_the_page_shows_the_commands_this_test_runs() -> None:
    assert commands_not_shown(PAGE, COMMANDS) == [], f"{PAGE.name} does not show them"


DOCUMENTED_PHOENIX = "http://127.0.0.1:6006"  # where the page starts Phoenix


def test_the_quickstart_from_a_broker_to_phoenix(
    bootstrap: str, topic_prefix: str, phoenix_server: PhoenixServer
) -> None:
    quickstart = PageRun(PAGE, bootstrap, topic_prefix)
    quickstart.check("app", quickstart.run([sys.executable, "examples/quickstart/app.py"]))
    quickstart.check_service("consume", quickstart.run(tracescore("consume", "--idle-timeout", "10")))
    quickstart.check("tail", quickstart.run(tracescore("tail")))
    quickstart.check("tail-json", quickstart.run(tracescore("tail", "--flagged", "--json")))
    # Step 5: the same group goes on with the two new traces, now also in Phoenix.
    url = phoenix_server.base_url
    quickstart.run([sys.executable, "examples/quickstart/with_phoenix.py"], PHOENIX_ENDPOINT=url)
    scored = quickstart.run(tracescore("consume", "--idle-timeout", "10", "--phoenix-endpoint", url))
    # Its start line names the endpoint: the test's Phoenix, where the page's reader has theirs.
    quickstart.check_service("consume-phoenix", scored.replace(url, DOCUMENTED_PHOENIX))
    records = [json.loads(line) for line in quickstart.run(tracescore("tail", "--json")).splitlines()[:-1]]
    assert len(records) == 4
    [flagged, _] = [r for r in records if r["label"] == "hallucinated"][::-1]  # the newest first
    annotation = _annotation(url, flagged["span_id"])
    assert annotation["name"] == "faithfulness" and annotation["annotator_kind"] == "CODE"
    assert annotation["result"]["label"] == "hallucinated" and annotation["result"]["score"] == 0.0
    assert "The Aurora X2 weighs 3 kg." in annotation["result"]["explanation"]


def _annotation(base_url: str, span_id: str, timeout_s: float = 60.0) -> dict[str, Any]:
    """The span's tracescore annotation, once Phoenix has inserted it (it does so asynchronously)."""
    deadline = time.monotonic() + timeout_s
    with httpx2.Client(base_url=base_url, timeout=10.0) as api:
        while True:
            response = api.get("/v1/projects/default/span_annotations", params={"span_ids": span_id})
            if response.status_code == 200 and (data := response.json()["data"]):
                return data[0]
            assert time.monotonic() < deadline, f"no annotation on span {span_id} in Phoenix"
            time.sleep(0.5)


def test_the_page_includes_the_apps_this_test_runs() -> None:
    text = PAGE.read_text(encoding="utf-8")
    for app in ("examples/quickstart/app.py:app", "examples/quickstart/with_phoenix.py:phoenix"):
        assert f'--8<-- "{app}"' in text
    assert Path(APP_DIR / "app.py").is_file() and Path(APP_DIR / "with_phoenix.py").is_file()
