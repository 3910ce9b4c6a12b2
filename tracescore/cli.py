"""The `tracescore` command: `consume` (the scoring service), `alert` (the alerting service), `conversations`
(one record per conversation), `tail` (print the evaluation records), `score` (batch scoring of a file, a CI
gate) and `report` (the HTML report of a scored file).

Each command lives in its own module (`consume/_cli.py`, `_cli_alert.py`, `_cli_conversations.py`,
`_cli_tail.py`, `_cli_score.py`); this one is the group, its logging, and the one message a bare
`pip install tracescore` (the SDK only) gets.
"""

from __future__ import annotations

import logging
import sys

from tracescore import __version__

# `pip install tracescore` is the SDK only; the command is the scoring service and needs its extra.
_NEEDS_CONSUMER_EXTRA = "the tracescore command needs the consumer extra ({} is not installed): " + (
    "pip install 'tracescore[consumer]'"
)

try:
    import click

    from tracescore._cli_alert import alert
    from tracescore._cli_conversations import conversations
    from tracescore._cli_score import EXIT_GATE_FAILED as EXIT_GATE_FAILED  # still importable from here
    from tracescore._cli_score import report, score
except ModuleNotFoundError as missing:
    raise SystemExit(_NEEDS_CONSUMER_EXTRA.format(missing.name)) from None

__all__ = ["main"]


@click.group()
@click.version_option(__version__, prog_name="tracescore")
@click.option("-v", "--verbose", is_flag=True, help="Debug logging.")
def main(verbose: bool) -> None:
    """Catch hallucinations in production RAG."""
    try:
        import tracescore.consume
        import tracescore.emit
        import tracescore.score  # noqa: F401
    except ModuleNotFoundError as missing:
        raise click.ClickException(_NEEDS_CONSUMER_EXTRA.format(missing.name)) from None
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # kafka-python is chatty at INFO (every connection); its warnings and errors still show.
    logging.getLogger("kafka").setLevel(logging.DEBUG if verbose else logging.WARNING)


main.add_command(alert)
main.add_command(conversations)
main.add_command(score)
main.add_command(report)


def _add_service_commands() -> None:
    try:
        from tracescore._cli_tail import tail
        from tracescore.consume._cli import consume
    except ModuleNotFoundError as missing:
        raise SystemExit(_NEEDS_CONSUMER_EXTRA.format(missing.name)) from None
    main.add_command(consume)
    main.add_command(tail)


_add_service_commands()

if __name__ == "__main__":
    main()
