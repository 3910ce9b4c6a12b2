"""The shipped Prometheus rules, checked and unit-tested by the real promtool."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    promtool = shutil.which("promtool")
    assert promtool, "promtool is not installed: run `make promtool` (Debian package prometheus)"
    return subprocess.run(
        [promtool, *args], capture_output=True, text=True, cwd=RULES, timeout=60, check=False
    )


def test_rules_are_valid() -> None:
    done = _promtool("check", "rules", "tracescore-rules.yaml")
    assert done.returncode == 0, done.stdout + done.stderr


def test_faithfulness_alert_fires_per_route_across_group_members_and_spares_quiet_routes() -> None:
    done = _promtool("test", "rules", "tracescore-rules.test.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout
