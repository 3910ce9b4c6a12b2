"""`tracescore tail`: read evaluation records (or the conversation records of `tracescore conversations`)
from Kafka and print them for a person (or as JSON lines).

It reaches Kafka as `tracescore consume` does (the same settings, flags > TRACESCORE_* variables > the
`[consume]` table of --config > defaults), reads without a consumer group (it never commits, so it cannot
disturb a service), and counts and explains anything on the topic that is not a record it can read.
"""

from __future__ import annotations

import json
import logging
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import click

from tracescore._plural import counted
from tracescore.cli._options import config_option, consumer_settings, settings_options
from tracescore.cli._service import stop_on_signals
from tracescore.consume import ConsumerSettings, JudgeSpend
from tracescore.model import (
    CONVERSATION_KEY,
    ConversationLabel,
    ConversationRecord,
    EvaluationRecord,
    FaithfulnessClaim,
    FaithfulnessDetails,
    MetricStatus,
    UnreadableRecord,
    is_flagged,
    read_conversation_record,
    read_evaluation_record,
    revision_key,
)

__all__ = ["format_conversation", "format_record", "tail"]

_CLAIMS_SHOWN = 3
_TEXT_CHARS = 200
_POLL_MS = 500
# The flagged records `--flagged` showed, remembered so the revision that clears one is shown too; bounded,
# oldest forgotten first (a revision comes within the conversation's quiet time of its record).
_SHOWN_FLAGGED = 100_000


@dataclass
class TailStats:
    shown: int = 0
    filtered: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    # What the model judge cost over the records shown (`--service` for one team's): the records' `usage`.
    spend: JudgeSpend = field(default_factory=JudgeSpend)

    def summary(self) -> str:
        text = f"{counted(self.shown, 'record')} shown"
        if self.filtered:
            text += f", {self.filtered} filtered out"
        if self.skipped:
            reasons = ", ".join(f"{reason}={n}" for reason, n in sorted(self.skipped.items()))
            text += f", {sum(self.skipped.values())} skipped ({reasons})"
        if self.spend.by:
            text += f"; LLM judge over them: {self.spend.describe()}; by service: {self.spend.by_service()}"
        return text


@dataclass(frozen=True)
class Message:
    """What tail needs of a Kafka message: where it is, and its value."""

    where: str
    value: bytes | None


def format_record(record: EvaluationRecord, flagged: bool) -> str:
    """A record as a person reads it: verdict, metric, score, label, service and route, judge; the failed
    claims with the judge's reason and the closest evidence; the trace id to open in a trace viewer."""
    verdict = _verdict(record.status, flagged)
    score = "-" if record.score is None else f"{record.score:.2f}"
    session = f"  session {_clip(record.session_id)}" if record.session_id else ""
    lines = [
        f"{record.timestamp:%Y-%m-%d %H:%M:%S}  {verdict:<7}  {record.metric} {score}  "
        f"{_label(record)}  {record.service_name} {record.route}{session}  "
        f"({_who(record)})"
    ]
    # Read tolerantly: the record may come from an older consumer. The claims worth showing are the ones the
    # label rule counts against an answer.
    failed = [c for c in FaithfulnessDetails.read(record.details).claims if c.unsupported]
    for claim in failed[:_CLAIMS_SHOWN]:
        lines.append(f"    claim {claim.verdict}: {_clip(claim.claim)}")
        if claim.reason:
            lines.append(f"      reason:   {_clip(claim.reason)}")
        if claim.evidence:
            lines.append(f"      evidence: {_clip(claim.evidence)}{_turn_of(claim)}")
    if len(failed) > _CLAIMS_SHOWN:
        lines.append(f"    (+{counted(len(failed) - _CLAIMS_SHOWN, 'more failed claim')})")
    if not failed and record.reason and (flagged or record.status is not MetricStatus.OK):
        lines.append(f"    reason: {_clip(record.reason)}")
    lines += _grounded(record)
    if record.supersedes:
        replaced = record.supersedes.rsplit(":", 1)[-1]
        lines.append(
            f"    replaces revision {replaced} of this answer (the latest revision is the one that counts)"
        )
    lines.append(f"    trace {record.trace_id}  span {record.span_id}")
    return "\n".join(lines)


def format_conversation(record: ConversationRecord, flagged: bool) -> str:
    """A conversation record on one line: verdict, metric, share of passed turns with its interval, label,
    service and conversation id, the turns, judge tier and revision; the worst turn's trace to open."""
    verdict = _verdict(record.status, flagged)
    score = "-" if record.score is None else f"{record.score:.2f}"
    if record.share_lower is not None and record.share_upper is not None:
        score += f" [{record.share_lower:.2f}, {record.share_upper:.2f}]"
    turns = (
        f"{counted(record.turns, 'turn')}: {record.turns_scored} scored, {record.turns_flagged} flagged"
        + ("" if record.complete else f", {record.turns_judged} judged")
    )
    worst = f"  worst trace {record.worst_turn.trace_id}" if record.worst_turn is not None else ""
    return (
        f"{record.timestamp:%Y-%m-%d %H:%M:%S}  {verdict:<7}  conversation {record.metric} {score}  "
        f"{_label(record)}  {record.service_name} {_clip(record.conversation_id)}  "
        f"({turns})  ({_who(record)}){worst}"
    )


def _verdict(status: MetricStatus, flagged: bool) -> str:
    if status is MetricStatus.OK:
        return "FLAGGED" if flagged else "ok"
    return "ERROR" if status is MetricStatus.ERROR else "n/a"


def _label(record: EvaluationRecord | ConversationRecord) -> str:
    """The record's label; a scored record without one (a custom metric's score alone) says so, where its
    status, `ok`, would read as the opposite of a FLAGGED verdict."""
    if record.label:
        return str(record.label)
    return "unlabelled" if record.status is MetricStatus.OK else record.status.value


def _who(record: EvaluationRecord | ConversationRecord) -> str:
    """The judge, its tier and the record's revision."""
    who = [record.judge]
    if record.selection:
        who.append(record.selection)
    if record.revision:
        who.append(f"revision {record.revision}")
    return ", ".join(who)


def _grounded(record: EvaluationRecord) -> list[str]:
    """The claims a revision grounded in an earlier turn of the conversation, with that turn's trace."""
    lines = []
    for claim in FaithfulnessDetails.read(record.details).claims:
        source = claim.evidence_source
        if source is not None and source.trace_id:
            back = _turn_of(claim).strip().strip("()")
            where = f"trace {source.trace_id}" + (f", {back}" if back else "")
            lines.append(f"    grounded in an earlier turn: {_clip(claim.claim)}  ({where})")
    return lines[:_CLAIMS_SHOWN]


def _turn_of(claim: FaithfulnessClaim) -> str:
    """Where the evidence of a claim came from, when an earlier turn of the conversation: ` (1 turn back)`."""
    back = claim.evidence_source.turns_back if claim.evidence_source is not None else 0
    if back < 1:
        return ""
    return f"  ({counted(back, 'turn')} back)"


def _clip(value: object) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= _TEXT_CHARS else text[: _TEXT_CHARS - 1] + "…"


def _messages(
    settings: ConsumerSettings, follow: bool, last: int | None, stopping: Callable[[], bool]
) -> Iterator[Message]:
    """The topic's messages from its beginning (or `last` before each partition's end) to the end it had at
    the start; with `follow`, then every new one until `stopping()`."""
    from kafka import KafkaConsumer, TopicPartition

    from tracescore._kafka import connect

    topic = settings.evaluations_topic
    consumer = connect(
        settings.connection(),
        # Records retention deletes under the read are skipped, not everything after them (the default reset
        # jumps to the end).
        lambda config: KafkaConsumer(
            **config, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest"
        ),
    )
    try:
        partitions = consumer.partitions_for_topic(topic)
        while not partitions and follow and not stopping():
            partitions = consumer.partitions_for_topic(topic)  # not created yet: consume creates it
            consumer.poll(timeout_ms=_POLL_MS)  # a bounded wait that keeps the client's metadata fresh
        if not partitions:
            if not stopping():
                click.echo(
                    f"topic {topic} does not exist at {settings.bootstrap_servers}: nothing was scored yet "
                    "(tracescore consume creates it; --follow waits for it)",
                    err=True,
                )
            return
        assigned = [TopicPartition(topic, p) for p in sorted(partitions)]
        consumer.assign(assigned)
        ends = consumer.end_offsets(assigned)
        if last is None:
            consumer.seek_to_beginning(*assigned)
        else:
            starts = consumer.beginning_offsets(assigned)
            for tp in assigned:
                consumer.seek(tp, max(starts[tp], ends[tp] - last))
        while not stopping():
            if not follow and all(consumer.position(tp) >= ends[tp] for tp in assigned):
                return
            batch = [m for messages in consumer.poll(timeout_ms=_POLL_MS).values() for m in messages]
            # Records of one trace share a partition; across partitions, time order reads best.
            for m in sorted(batch, key=lambda m: m.timestamp):
                yield Message(f"{m.topic}[{m.partition}] offset {m.offset}", m.value)
    finally:
        # kafka-python 3 may log a metadata refresh it cancels on close as an error: nothing to act on.
        client_log = logging.getLogger("kafka")
        level = client_log.level
        client_log.setLevel(logging.CRITICAL)
        try:
            consumer.close(autocommit=False)
        finally:
            client_log.setLevel(level)


@click.command(short_help="Print the evaluation (or conversation) records on a topic.")
@config_option
@settings_options(
    ConsumerSettings, only=("bootstrap_servers", "evaluations_topic", "connect_timeout_s", "kafka")
)
@click.option("-f", "--follow", is_flag=True, help="Keep printing new records until Ctrl-C.")
@click.option("--route", "route_glob", default=None, help="Only records whose route matches this glob.")
@click.option("--service", "service_glob", default=None, help="Only records whose service matches this glob.")
@click.option(
    "--flagged",
    is_flag=True,
    help="Only flagged answers (labelled hallucinated, or an unlabelled score below 0.5) and failed "
    "evaluations, and the later revisions that clear a flagged answer shown.",
)
@click.option(
    "--failed",
    is_flag=True,
    help="Only failed evaluations (status error: the judge failed after its retries), each with its reason: "
    "what a judge-health page's first step shows.",
)
@click.option("--json", "as_json", is_flag=True, help="One evaluation record per line, as JSON.")
@click.option(
    "-n",
    "--last",
    type=click.IntRange(min=0),
    default=None,
    help="Start this many records before the end of each partition [default: from the beginning].",
)
def tail(
    config_file: Path | None,
    follow: bool,
    route_glob: str | None,
    service_glob: str | None,
    flagged: bool,
    failed: bool,
    as_json: bool,
    last: int | None,
    **flags: Any,
) -> None:
    """Print the evaluation records on the evaluations topic: score, label, route, the claims that failed
    and the trace id to open in your trace viewer.

    The conversation records of `tracescore conversations` print one line each (--evaluations-topic
    tracescore.conversations): the share of passed turns with its interval, label, service, conversation
    id, turns, judge tier, revision and the worst turn's trace id; a record is known by its fields, so one
    topic may hold both kinds.

    Reads the topic from its beginning to its current end and stops; --follow keeps going. Messages that
    are not records this version reads are counted and explained on stderr, never fatal.
    """
    from tracescore._kafka import BrokerUnreachable

    settings = consumer_settings(flags, config_file)
    stats = TailStats()
    stop = _Stop()
    try:
        with stop_on_signals(stop.request):
            kept = _Filter(flagged, route_glob, service_glob, failed)
            for message in _messages(settings, follow, last, stop.requested):
                _show(message, stats, kept, as_json)
    except BrokerUnreachable as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(stats.summary(), err=True)


@dataclass
class _Filter:
    """What `--flagged`, `--failed`, `--route` and `--service` keep. With `--flagged`, a revision that clears
    a flagged answer shown before is kept too: else the answer would read as flagged, where its latest
    revision, the one that counts, is not."""

    flagged: bool
    route_glob: str | None
    service_glob: str | None
    failed: bool = False
    shown_flagged: OrderedDict[tuple[str, str, str, str], None] = field(default_factory=OrderedDict)

    def keeps(self, record: EvaluationRecord | ConversationRecord, bad: bool) -> bool:
        if (self.route_glob is not None and not fnmatchcase(record.route, self.route_glob)) or (
            self.service_glob is not None and not fnmatchcase(record.service_name, self.service_glob)
        ):
            return False
        if self.failed and record.status is not MetricStatus.ERROR:
            return False
        if not self.flagged or isinstance(record, ConversationRecord):
            return bad or not self.flagged
        if bad:
            self._remember(record)
            return True
        return record.supersedes is not None and self._key(record, record.supersedes) in self.shown_flagged

    def _remember(self, record: EvaluationRecord) -> None:
        self.shown_flagged[
            self._key(record, revision_key(record.trace_id, record.span_id, record.revision))
        ] = None
        if len(self.shown_flagged) > _SHOWN_FLAGGED:
            self.shown_flagged.popitem(last=False)

    @staticmethod
    def _key(record: EvaluationRecord, revision: str) -> tuple[str, str, str, str]:
        return (revision, record.metric, record.judge, record.selection or "")


def _show(message: Message, stats: TailStats, kept: _Filter, as_json: bool) -> None:
    """Print one message's record if it passes the filters; count it either way."""
    try:
        record = _read(message.value)
    except UnreadableRecord as unreadable:
        stats.skipped[unreadable.reason] += 1
        if stats.skipped[unreadable.reason] == 1:  # explained once per reason; the summary counts the rest
            click.echo(
                f"skipped {message.where}: {unreadable.reason}: {unreadable.detail} "
                "(further ones are only counted)",
                err=True,
            )
        return
    if isinstance(record, ConversationRecord):
        flags_it = record.label is ConversationLabel.FLAGGED
    else:
        flags_it = is_flagged({"score": record.score, "label": record.label})
    bad = record.status is MetricStatus.ERROR or flags_it
    if not kept.keeps(record, bad):
        stats.filtered += 1
        return
    stats.shown += 1
    if isinstance(record, EvaluationRecord):
        stats.spend.add(record)
    if as_json:
        click.echo(record.model_dump_json())
    elif isinstance(record, ConversationRecord):
        click.echo(format_conversation(record, bad))
    else:
        click.echo(format_record(record, bad))


def _read(value: bytes | None) -> EvaluationRecord | ConversationRecord:
    """The record in a message, known by its fields: an object with the conversation record's own field
    (`CONVERSATION_KEY`) that is no evaluation record is read as a conversation record, so its own problems
    are the ones explained (a newer tracescore's conversation record is said to be one)."""
    try:
        return read_evaluation_record(value)
    except UnreadableRecord:
        if not _names_a_conversation(value):
            raise
    return read_conversation_record(value)


def _names_a_conversation(value: bytes | None) -> bool:
    try:
        data = json.loads(value or b"")
    except ValueError:
        return False
    return isinstance(data, dict) and CONVERSATION_KEY in data


class _Stop:
    """SIGINT/SIGTERM end a --follow cleanly (the summary still prints): set by the signal handler, read by
    the loop; a plain attribute, so the handler takes no lock."""

    def __init__(self) -> None:
        self._requested = False

    def request(self) -> None:
        self._requested = True

    def requested(self) -> bool:
        return self._requested
