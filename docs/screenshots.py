"""Make the pictures in docs/images/ from a real run (docs/contributing/docs.md, "Pictures").

    make browser && python docs/screenshots.py

1. phoenix-trace.png: a real Kafka broker and a real Phoenix; the quickstart's app with its spans also sent
   to Phoenix (examples/quickstart/with_phoenix.py); `tracescore consume --phoenix-endpoint`; then Phoenix's
   page of the trace whose answer was flagged, with tracescore's annotation on the scored span.
2. report.png: the example RAG app's answers to its 36 questions (some deliberately unfaithful), scored by
   `tracescore score --report`; the HTML report as a browser shows it.

Screenshots are taken by Debian's Chromium, headless, with a fresh profile and no background traffic.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2

REPO = Path(__file__).resolve().parents[1]
IMAGES = REPO / "docs" / "images"
QUICKSTART = REPO / "examples" / "quickstart"
WINDOW = "1440,900"


def chromium_screenshot(url: str, png: Path, window: str = WINDOW, wait_ms: int = 15_000) -> None:
    binary = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(binary).exists():
        raise SystemExit("chromium not found: run `make browser` to install it")
    with tempfile.TemporaryDirectory(prefix="tracescore-chromium-") as profile:
        command = [
            binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
            f"--user-data-dir={profile}", f"--window-size={window}", f"--virtual-time-budget={wait_ms}",
            f"--screenshot={png}", url,
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    if done.returncode != 0 or not png.exists():
        raise SystemExit(f"chromium failed ({done.returncode}):\n{done.stderr[-2000:]}")
    print(f"wrote {png.relative_to(REPO)}")


def _run(command: list[str], env: dict[str, str], cwd: Path = REPO) -> str:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done.stdout


def _tracescore(*args: str) -> list[str]:
    return [sys.executable, "-m", "tracescore.cli", *args]


def _wait_for(fetch: Any, what: str, timeout_s: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (value := fetch()):
        if time.monotonic() > deadline:
            raise SystemExit(f"{what} not visible after {timeout_s:.0f}s")
        time.sleep(0.5)
    return value


def phoenix_trace(png: Path) -> None:
    from tracescore.testing.kafka_broker import KafkaBroker
    from tracescore.testing.phoenix import PhoenixServer

    with KafkaBroker() as broker, PhoenixServer() as phoenix:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACESCORE_", "PHOENIX_"))}
        env |= {
            "TRACESCORE_BOOTSTRAP_SERVERS": broker.bootstrap_servers,
            "PHOENIX_ENDPOINT": phoenix.base_url,
        }
        _run([sys.executable, "with_phoenix.py"], env, cwd=QUICKSTART)
        _run(_tracescore("consume", "--idle-timeout", "5", "--phoenix-endpoint", phoenix.base_url), env)
        records = [
            json.loads(line) for line in _run(_tracescore("tail", "--json", "--flagged"), env).splitlines()
        ]
        [flagged] = records
        with httpx2.Client(base_url=phoenix.base_url, timeout=10.0) as api:

            def annotated() -> bool:
                params = {"span_ids": flagged["span_id"]}
                response = api.get("/v1/projects/default/span_annotations", params=params)
                return response.status_code == 200 and bool(response.json()["data"])

            _wait_for(annotated, "the annotation in Phoenix")
            projects = api.get("/v1/projects").json()["data"]
            [project] = [p for p in projects if p["name"] == "default"]
        url = f"{phoenix.base_url}/projects/{project['id']}/traces/{flagged['trace_id']}"
        chromium_screenshot(url, png)


def report(png: Path) -> None:
    sys.path.insert(0, str(REPO))
    from examples.rag_app.pipeline import run
    from examples.rag_app.questions import QUESTIONS
    from examples.rag_app.retriever import Retriever

    retriever = Retriever()
    with tempfile.TemporaryDirectory(prefix="tracescore-report-") as folder:
        records = Path(folder) / "records.jsonl"
        with records.open("w", encoding="utf-8") as out:
            for n, question in enumerate(QUESTIONS):
                result = run(question, retriever)
                label = "hallucinated" if result.altered else "faithful"
                row = {"id": f"q{n:02d}", "query": result.query, "contexts": result.contexts}
                out.write(json.dumps({**row, "answer": result.answer, "label": label}) + "\n")
        html = Path(folder) / "report.html"
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRACESCORE_")}
        _run(_tracescore("score", str(records), "--out", str(Path(folder) / "scores.jsonl"),
                         "--report", str(html), "--no-progress"), env)  # fmt: skip
        chromium_screenshot(html.as_uri(), png, window="1280,2600", wait_ms=3_000)


def main() -> int:
    IMAGES.mkdir(parents=True, exist_ok=True)
    report(IMAGES / "report.png")
    phoenix_trace(IMAGES / "phoenix-trace.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
