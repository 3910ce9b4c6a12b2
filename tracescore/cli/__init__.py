"""The `tracescore` command: the group, its logging, and the one message a bare install (the SDK only) gets.

Every command lives in this package, one module each, and what they share beside them:

- `_consume.py`: `tracescore consume`, the scoring service
- `_alert.py`: `tracescore alert`, the alerting service
- `_conversations.py`: `tracescore conversations`, one record per conversation
- `_tail.py`: `tracescore tail`, the evaluation records printed for a person
- `_score.py`: `tracescore score` (batch scoring of a file, a CI gate) and `tracescore report`
- `_options.py`: every shared option, declared once (options of settings generated from their fields)
- `_service.py`: running a service: SIGINT/SIGTERM stop it (the handlers found are put back after),
  Kafka's errors as one line, the metrics it reports
- `_exit.py`: how the program (`run`, not a command run in process) ends its process
"""

from __future__ import annotations

import logging
import sys
from typing import NoReturn

from tracescore import __version__
from tracescore._extras import install_line
from tracescore._lazy import LazyMapping, lazy_exports

# `pip install tracescore` is the SDK only; the command is the scoring service and needs its extra.
_NEEDS_CONSUMER_EXTRA = "the tracescore command needs the consumer extra ({} is not installed): " + (
    install_line("consumer")
)

try:
    import click
except ModuleNotFoundError as missing:
    raise SystemExit(_NEEDS_CONSUMER_EXTRA.format(missing.name)) from None

# Each command's module (and the stage it runs) is imported when the command is looked up: `tracescore alert`
# loads alert's stage, not consume's; `--help` lists them all.
_COMMANDS = {
    "alert": "tracescore.cli._alert",
    "consume": "tracescore.cli._consume",
    "conversations": "tracescore.cli._conversations",
    "report": "tracescore.cli._score",
    "score": "tracescore.cli._score",
    "tail": "tracescore.cli._tail",
}

# The group, and its commands for a program that embeds them in a click group of its own.
__all__ = ["alert", "consume", "conversations", "main", "report", "score", "tail"]
__getattr__, __dir__ = lazy_exports(
    __name__,
    {**_COMMANDS, "EXIT_GATE_FAILED": "tracescore.cli._score"},
    __all__,  # the CI gate's exit status
)


class _Commands(click.Group):
    """The group whose commands are imported on first lookup; an import that fails for a library of the
    consumer extra says which extra to install, as the group's own import does."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        try:
            return super().get_command(ctx, cmd_name)
        except ModuleNotFoundError as missing:
            raise click.ClickException(_NEEDS_CONSUMER_EXTRA.format(missing.name)) from None


@click.group(cls=_Commands, commands=LazyMapping(_COMMANDS))
@click.version_option(__version__, prog_name="tracescore")
@click.option("-v", "--verbose", is_flag=True, help="Debug logging.")
def main(verbose: bool) -> None:
    """Catch hallucinations in production RAG.

    In production, your application's spans reach Kafka (the tracescore SDK or any OpenTelemetry exporter):
    `consume` scores them, `tail` prints the scores, `alert` and `conversations` read them. Offline, `score`
    scores a file of records and gates a CI run on it.
    """
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # kafka-python is chatty at INFO (every connection); its warnings and errors still show.
    logging.getLogger("kafka").setLevel(logging.DEBUG if verbose else logging.WARNING)
    # The HTTP client logs every judge call at INFO: a line per call in consume's log, and score's progress
    # bar scrolled away.
    logging.getLogger("httpx2").setLevel(logging.DEBUG if verbose else logging.WARNING)
    from tracescore._kafka import quiet_kafka_client_noise

    quiet_kafka_client_noise()  # e.g. a traceback after a good run, from kafka-python's close


def run() -> NoReturn:
    """The `tracescore` program: its console script and `python -m tracescore.cli`. The group runs as the
    process's own main, then the process ends once the exit handlers ran and the output is flushed, without
    the interpreter's teardown (`_exit.py`). A program running a command in process calls `main` instead."""
    from tracescore.cli._exit import end_process

    try:
        main()
    except SystemExit as done:
        end_process(done.code)
    end_process(0)  # not reached: click's standalone `main` always exits
