"""Running a page's commands as a user runs them and comparing their outputs with the page's: topics and
group are the test's own, renamed back to the defaults before comparing; timestamps and ids are normalised
(`pages.normalised`)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from pages import RECORD, REPO, blocks, normalised, outputs, record_output

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


class PageRun:
    """A page's commands run as a user runs them, on the test's own topics and group (through the same
    TRACESCORE_* variables the commands read), each output renamed back to the defaults and compared with
    the page's `<!-- output: NAME -->` block (or written into it with TRACESCORE_DOCS_RECORD=1)."""

    def __init__(
        self, page: Path, bootstrap: str, prefix: str, env: dict[str, str] | None = None,
        renames: dict[str, str] | None = None,
    ) -> None:  # fmt: skip
        self.page = page
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
        } | (env or {})
        self.renames = (renames or {}) | {
            f"{prefix}.spans": "otlp_spans",
            f"{prefix}.evaluations": "tracescore.evaluations",
            f"{prefix}.dlq": "tracescore.dlq",
            f"{prefix}.evidence": "tracescore.conversations.evidence",
        }
        self.shown = outputs(page)

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
            record_output(self.page, name, actual)
            return
        assert _records(self.shown[name]) == _records(actual), f"{self.page.name}, output {name}"

    def check_service(self, name: str, actual: str) -> None:
        """A service's output: its summary exactly; the page's log lines all there (kafka-python's own
        warnings, which come and go with timing, are not shown)."""
        ours = [line for line in actual.splitlines() if " INFO tracescore" in line or not _is_log(line)]
        # An empty assignment while the group rebalances (a member of the previous step still leaving)
        # comes and goes with timing: never shown.
        ours = [line for line in ours if not line.endswith("assigned partitions: []")]
        if RECORD:
            record_output(self.page, name, "\n".join(ours) + "\n")
            return
        shown = self.shown[name].splitlines()
        summary = [_counts(line) for line in ours if not _is_log(line)]
        documented = [_counts(line) for line in shown if not _is_log(line)]
        assert documented == summary, f"{self.page.name}, output {name}"
        logged = {_message(line) for line in ours if _is_log(line)}
        for line in filter(_is_log, shown):
            assert _message(line) in logged, f"{self.page.name}, output {name}: not logged: {line}"


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
    """A `tracescore` command, run by this interpreter."""
    return [sys.executable, "-m", "tracescore.cli", *args]


def commands_not_shown(page: Path, commands: tuple[str, ...]) -> list[str]:
    """The commands a test runs that the page's shell blocks do not show as a user would type them."""
    shell = "\n".join(block.body for block in blocks(page) if block.lang == "sh")
    return [command for command in commands if command not in shell]
