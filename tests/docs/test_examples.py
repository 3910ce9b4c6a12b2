"""The programs the pages include run, and print what the pages show: every docs/examples/*.py (its .out
next to it is the page's output block), the CI gate's commands, and the example configuration files
loaded by the code that reads them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pages import DOCS, RECORD, REPO

EXAMPLES = DOCS / "examples"
# Programs that need a broker run in test_examples_kafka.py.
NEEDS_KAFKA = {"chat.py", "export_all_spans.py"}


def _compare(expected: Path, actual: str) -> None:
    if RECORD:
        expected.write_text(actual, encoding="utf-8")
        return
    assert actual == expected.read_text(encoding="utf-8"), f"{expected.relative_to(REPO)} is stale"


def _run(command: list[str], cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACESCORE_", "OTEL_"))}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.parametrize(
    "program", sorted(p for p in EXAMPLES.glob("*.py") if p.name not in NEEDS_KAFKA), ids=lambda p: p.name
)
def test_an_example_runs_and_prints_what_its_page_shows(program: Path) -> None:
    done = _run([sys.executable, str(program)])
    assert done.returncode == 0, f"{program.relative_to(REPO)} failed:\n{done.stderr}"
    expected = program.with_suffix(".out")
    if expected.exists():
        _compare(expected, done.stdout)


@pytest.mark.parametrize(
    ("output", "source", "flags"),
    [
        ("gate_fail_under.out", "golden.jsonl", ["--fail-under", "faithfulness=0.8"]),
        ("gate_max_flagged.out", "golden.jsonl", ["--metrics", "faithfulness", "--max-flagged", "0"]),
        ("gate_unscored.out", "golden_renamed.jsonl", ["--fail-under", "faithfulness=0.8"]),
        (
            "gate_repeated_id.out",
            "golden_repeated.jsonl",
            ["--metrics", "faithfulness", "--max-flagged", "1"],
        ),
        (
            "gate_no_contexts.out",
            "golden_passages.jsonl",
            ["--metrics", "faithfulness", "--fail-under", "faithfulness=0.8"],
        ),
    ],
)
def test_the_ci_gate_fails_as_the_page_shows(
    output: str, source: str, flags: list[str], tmp_path: Path
) -> None:
    command = [
        sys.executable,
        "-m",
        "tracescore.cli",
        "score",
        source,
        "--out",
        str(tmp_path / "s.jsonl"),
    ]
    # As the page writes it (no --no-progress): a CI log, not a terminal, gets no progress bar.
    done = _run([*command, *flags], cwd=EXAMPLES)
    assert done.returncode == 1, done.stderr
    _compare(EXAMPLES / output, done.stdout + done.stderr)


def test_the_example_configurations_load() -> None:
    """(docs/examples/sampling.toml is tests/sample/test_config.py's.)"""
    from tracescore.alert import AlertConfig, default_rule, load_alert_config, make_sink, start_line
    from tracescore.score import make_metrics

    alert = load_alert_config(EXAMPLES / "alert.yaml")
    assert alert.rule_for("shop", "/billing/refunds", "faithfulness") is not None
    assert [sink.type for sink in alert.sinks] == ["log", "webhook", "slack", "alertmanager"]
    drops = load_alert_config(EXAMPLES / "alert_drop.yaml")
    summaries = drops.rule_for("news", "/summarize", "faithfulness")
    assert summaries is not None and summaries.warning is None and summaries.drop is not None
    assert summaries.drop.critical_drop == 0.10
    short = drops.rule_for("news", "/ask", "faithfulness")
    assert short is not None and short.warning == 0.7 and short.drop is not None
    assert not short.require_calibration  # the absolute level the page points to
    others = drops.rule_for("news", "/search", "faithfulness")
    assert others is not None and others.warning == 0.7 and others.drop is not None
    assert others.require_calibration and others.drop == default_rule().drop  # as without a config
    tried = load_alert_config(EXAMPLES / "alert_try.yaml")
    billing = tried.rule_for("northwind-assistant", "/billing", "faithfulness")
    assert billing is not None and billing.warning is None and billing.drop is not None
    assert billing.drop.min_normal_samples == 100
    assert tried.rule_for("northwind-assistant", "/support", "faithfulness") is None
    assert [sink.type for sink in tried.sinks] == ["log"]
    # The alerting page shows the line the service starts with for it.
    page = (DOCS / "alerting" / "index.md").read_text(encoding="utf-8")
    said = start_line(tried, [make_sink(sink) for sink in tried.sinks])
    assert f"INFO tracescore.alert: {said}\n" in page
    # And the one it starts with without a config (the default rule), which `alert --help` shows too.
    default = AlertConfig()
    said = start_line(default, [make_sink(sink) for sink in default.sinks])
    assert f"INFO tracescore.alert: {said}\n" in page
    [politeness] = make_metrics(["politeness"], EXAMPLES / "metrics.toml")
    assert politeness.name == "politeness"
