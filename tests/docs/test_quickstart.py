"""The quickstart, step by step, as a newcomer runs it: the app, `tracescore consume`, `tracescore tail`, and
the Phoenix step against a real Phoenix; each step's output compared with what docs/quickstart.md shows.

Topics and group are the test's own (through the same TRACESCORE_* variables the page's commands read),
renamed back to the defaults before comparing; timestamps and ids are normalised."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest
from pages import DOCS, RECORD, REPO, blocks, normalised, outputs, record_output

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


# kafka-python 3.0's own race, not ours: KafkaConsumer.close() closes its connections from the calling thread
# while the consumer's network thread may be between "socket readable" and recv(); that thread then finds the
# socket gone and logs this record (with its traceback) although nothing was lost. The commands drop it
# (tests/cli/test_client_logs.py); the app's SDK does not touch the app's logging, so its close may still
# print it. Only this exact record is taken out; any other traceback, the library's included, fails the step.
_CLIENT_CLOSE_RACE = re.compile(
    r"^\S+ \S+ ERROR kafka\.net\.transport: <KafkaTCPTransport [^\n]*>: "
    r"Error receiving network data closing socket\n"
    r"Traceback \(most recent call last\):\n(?:  .*\n)+"
    r"AttributeError: 'NoneType' object has no attribute 'recv'\n",
    re.M,
)
# kafka-python's own warnings (a slow step of its network loop, a retried request) come and go with load:
# taken out of every step's output; one of ours or any error still reaches the comparison.
_CLIENT_WARNING = re.compile(r"^\S+ \S+ WARNING kafka\.[\w.]+: [^\n]*\n", re.M)


class Quickstart:
    def __init__(self, bootstrap: str, prefix: str) -> None:
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACESCORE_", "PHOENIX_"))}
        self.env |= {
            "TRACESCORE_BOOTSTRAP_SERVERS": bootstrap,
            "TRACESCORE_TOPIC": f"{prefix}.spans",
            "TRACESCORE_EVALUATIONS_TOPIC": f"{prefix}.evaluations",
            "TRACESCORE_DLQ_TOPIC": f"{prefix}.dlq",
            # Every topic the commands create is the test's own: the worker's broker is shared, and one an
            # earlier test made under its default name would be missing from "created topics".
            "TRACESCORE_CONVERSATION_EVIDENCE_TOPIC": f"{prefix}.evidence",
            "TRACESCORE_GROUP_ID": prefix,
        }
        self.renames = {
            f"{prefix}.spans": "otlp_spans",
            f"{prefix}.evaluations": "tracescore.evaluations",
            f"{prefix}.dlq": "tracescore.dlq",
            f"{prefix}.evidence": "tracescore.conversations.evidence",
        }
        self.shown = outputs(PAGE)

    def run(self, command: list[str], **env: str) -> str:
        """stdout, then stderr (where the commands print logs and summaries), topics renamed back."""
        done = subprocess.run(
            command, cwd=REPO, env=self.env | env, capture_output=True, text=True, timeout=300, check=False
        )
        assert done.returncode == 0, f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr}"
        stderr = _CLIENT_WARNING.sub("", _CLIENT_CLOSE_RACE.sub("", done.stderr))
        assert "Traceback" not in stderr, stderr
        text = done.stdout + stderr
        for old, new in self.renames.items():
            text = text.replace(old, new)
        return text

    def check(self, name: str, actual: str) -> None:
        """The page's block `name` is exactly this step's output, ids and times aside; records from
        different partitions may come in either order."""
        if RECORD:
            record_output(PAGE, name, actual)
            return
        assert _records(self.shown[name]) == _records(actual), f"{PAGE.name}, output {name}"

    def check_service(self, name: str, actual: str) -> None:
        """A service's output: its summary exactly; the page's log lines all there (kafka-python's own
        warnings, which come and go with timing, are not shown)."""
        ours = [line for line in actual.splitlines() if " INFO tracescore" in line or not _is_log(line)]
        # An empty assignment while the group rebalances (a member of the previous step still leaving)
        # comes and goes with timing: never shown.
        ours = [line for line in ours if not line.endswith("assigned partitions: []")]
        if RECORD:
            record_output(PAGE, name, "\n".join(ours) + "\n")
            return
        shown = self.shown[name].splitlines()
        summary = [_counts(line) for line in ours if not _is_log(line)]
        documented = [_counts(line) for line in shown if not _is_log(line)]
        assert documented == summary, f"{PAGE.name}, output {name}"
        logged = {_message(line) for line in ours if _is_log(line)}
        for line in filter(_is_log, shown):
            assert _message(line) in logged, f"{PAGE.name}, output {name}: not logged: {line}"


def _is_log(line: str) -> bool:
    return line[:4].isdigit() and any(f" {level} " in line for level in ("INFO", "WARNING", "ERROR"))


def _records(output: str) -> list[str]:
    """The output's records (a line from the left margin and the indented lines under it), normalised and
    sorted."""
    records: list[str] = []
    for line in normalised(output).splitlines():
        if line.startswith(" ") and records:
            records[-1] += "\n" + line
        else:
            records.append(line)
    return sorted(records)


def _counts(line: str) -> str:
    """A summary line without the message counts, which depend on how the SDK's exports and the evaluation
    spans read back happened to fall into Kafka messages; every other count must match."""
    return re.sub(r"\b(messages|evaluation_span_messages)=\d+", r"\1=<n>", line)


def _message(line: str) -> str:
    return normalised(line.split(" ", 2)[2])


def tracescore(*args: str) -> list[str]:
    return [sys.executable, "-m", "tracescore.cli", *args]


def test_the_page_shows_the_commands_this_test_runs() -> None:
    shell = "\n".join(block.body for block in blocks(PAGE) if block.lang == "sh")
    for command in COMMANDS:
        assert command in shell, f"{PAGE.name} does not show `{command}`"


def test_the_quickstart_from_a_broker_to_phoenix(
    bootstrap: str, topic_prefix: str, phoenix_server: PhoenixServer
) -> None:
    quickstart = Quickstart(bootstrap, topic_prefix)
    quickstart.check("app", quickstart.run([sys.executable, "examples/quickstart/app.py"]))
    quickstart.check_service("consume", quickstart.run(tracescore("consume", "--idle-timeout", "10")))
    quickstart.check("tail", quickstart.run(tracescore("tail")))
    quickstart.check("tail-json", quickstart.run(tracescore("tail", "--flagged", "--json")))
    # Step 5: the same group goes on with the two new traces, now also in Phoenix.
    url = phoenix_server.base_url
    quickstart.run([sys.executable, "examples/quickstart/with_phoenix.py"], PHOENIX_ENDPOINT=url)
    scored = quickstart.run(tracescore("consume", "--idle-timeout", "10", "--phoenix-endpoint", url))
    quickstart.check_service("consume-phoenix", scored)
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
