"""CLI: python -m examples.rag_app [--bootstrap HOST:PORT] [--requests N] [--phase P] [--expected-out FILE].

The broker and topic default to TRACESCORE_BOOTSTRAP_SERVERS and TRACESCORE_TOPIC, as for tracescore's
commands."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

if __package__:
    from . import app
    from .pipeline import Result, expectation_key
    from .questions import PHASES, schedule
else:  # `python examples/rag_app ...`: import the package by its directory name instead.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from rag_app import app
    from rag_app.pipeline import Result, expectation_key
    from rag_app.questions import PHASES, schedule

import tracescore


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m examples.rag_app", description=__doc__)
    # The same variables as every tracescore command, so the app runs beside them with no flag.
    bootstrap = os.environ.get("TRACESCORE_BOOTSTRAP_SERVERS")
    p.add_argument(
        "--bootstrap",
        default=bootstrap,
        required=bootstrap is None,
        metavar="HOST:PORT",
        help="Kafka bootstrap server (default: $TRACESCORE_BOOTSTRAP_SERVERS)",
    )
    p.add_argument(
        "--topic",
        default=os.environ.get("TRACESCORE_TOPIC", "otlp_spans"),
        help="Kafka topic for spans (default: $TRACESCORE_TOPIC, else otlp_spans)",
    )
    p.add_argument(
        "--requests", type=int, default=36, metavar="N", help="requests to send, cycling the questions"
    )
    p.add_argument(
        "--phase",
        choices=PHASES,
        default="mixed",
        help="mixed: some answers unfaithful; healthy: none; drift: all /billing ones (default: %(default)s)",
    )
    p.add_argument("--expected-out", type=Path, metavar="FILE", help="write the expected verdicts as JSON")
    return p.parse_args(argv)


def _expected(results: list[Result]) -> dict[str, dict[str, object]]:
    return {
        expectation_key(r.query, r.answer): {
            "route": r.route,
            "altered": r.altered,
            "alteration": r.alteration,
        }
        for r in results
    }


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    app.start(args.bootstrap, args.topic)
    results: list[Result] = []
    try:
        for q in schedule(args.requests, args.phase):
            r = app.ask(q)
            results.append(r)
            flag = f"ALTERED({r.alteration})" if r.altered else "faithful"
            print(f"{r.route:<9} {flag:<18} {r.query[:60]:<60} -> {r.answer[:60]}", flush=True)
    finally:
        # Flush buffered spans even if a request failed. A script that exits right after its requests waits
        # for delivery longer than a server's default 5 s: on a new broker, creating the topic takes seconds.
        tracescore.shutdown(timeout_s=60)
    if args.expected_out:
        args.expected_out.parent.mkdir(parents=True, exist_ok=True)
        args.expected_out.write_text(json.dumps(_expected(results), indent=2) + "\n", encoding="utf-8")
    altered = sum(r.altered for r in results)
    print(f"sent {len(results)} requests, {altered} deliberately unfaithful", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
