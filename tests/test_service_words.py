"""The reasons `tracescore alert` and `tracescore conversations` skip a message for are the enums' members
(`ServiceSkip`, shared; `ConversationSkip`, conversations' own): every place that counts one names a member,
the closing summaries print the same words as before, and the troubleshooting page explains each."""

from __future__ import annotations

import ast
import logging
import re
from collections import Counter
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import tracescore
from tracescore._service import StateCount
from tracescore.consume import AssemblyCount
from tracescore.conversations import SKIP_REASONS, ConversationSkip, GroundingCount
from tracescore.emit import ConversationMetrics
from tracescore.model import NotRejudgedReason, ServiceSkip, UnreadableRecord, read_evaluation_record

PACKAGE = Path(tracescore.__file__).parent
REPO = PACKAGE.parent
# Where the services count a skip: the packages of both services, their base, and the model's readers.
COUNTING = ("alert", "conversations", "_service", "model")
# Calls whose first argument is a skip reason, and counters keyed by one.
REASON_CALLS = {"_skip", "skip", "UnreadableState", "UnreadableRecord"}
REASON_COUNTERS = {"skipped"}
# The conversations tracker counts the turns its service skips (`counts`, read by the service's logic); the
# other `counts` (grounding's, the state restore's) are not skip reasons: `NAMED_COUNTERS` below.
TRACKER_COUNTS = ("self.counts", "self.tracker.counts")
ENUMS: dict[str, type[StrEnum]] = {"ServiceSkip": ServiceSkip, "ConversationSkip": ConversationSkip}
# What else may stand for a reason: one passed on (`unreadable.reason`, a `reason` parameter).
PASSED_ON = {"reason"}


def _sources() -> Iterator[Path]:
    for package in COUNTING:
        yield from sorted((PACKAGE / package).glob("*.py"))


def _named(node: ast.expr) -> str | None:
    """What `node` names as a reason: `Enum.MEMBER` (or its `.value`), or a reason passed on; None else."""
    if isinstance(node, ast.Attribute) and node.attr == "value":
        node = node.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ENUMS:
        return getattr(ENUMS[node.value.id], node.attr).value
    if isinstance(node, ast.Attribute) and node.attr in PASSED_ON:
        return "passed on"
    if isinstance(node, ast.Name) and node.id in PASSED_ON:
        return "passed on"
    return None


def _counter(node: ast.expr, tracker: bool) -> bool:
    """Whether `node` is a counter of skips by reason."""
    if not isinstance(node, ast.Attribute):
        return False
    return node.attr in REASON_COUNTERS or (tracker and ast.unparse(node) in TRACKER_COUNTS)


def _reason_uses(tree: ast.AST, tracker: bool) -> Iterator[tuple[int, ast.expr]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            metrics = isinstance(func, ast.Attribute) and name == "skipped"  # a metrics counter's label
            if name in REASON_CALLS or metrics:
                yield node.lineno, node.args[0]
        if isinstance(node, ast.Subscript) and _counter(node.value, tracker):
            yield node.lineno, node.slice
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "pop"
            and _counter(node.func.value, tracker)
        ):
            yield node.lineno, node.args[0]


def test_every_reason_a_service_counts_is_a_member_of_the_enums() -> None:
    """A reason spelled as a string in one place and again in another drifts apart (a counter, its log
    line, its docs row): each is counted as a member, or passed on from one (`UnreadableRecord.reason`)."""
    loose, named = [], set()
    for source in _sources():
        tracker = source.parent.name == "conversations" and source.name in {"_tracker.py", "_logic.py"}
        for line, reason in _reason_uses(ast.parse(source.read_text(encoding="utf-8")), tracker):
            where = f"{source.relative_to(REPO)}:{line}"
            said = _named(reason)
            if said is None:
                loose.append(f"{where}: {ast.unparse(reason)}")
            named.add(said)
    assert not loose, "reasons not named by ServiceSkip / ConversationSkip:\n" + "\n".join(loose)
    counted = {reason.value for enum in ENUMS.values() for reason in enum}
    assert named - {"passed on"} == counted, "a member no service counts"


@pytest.mark.parametrize(
    ("value", "reason"),
    [(b"not json", "invalid_record"), (b'{"schema_version": 99}', "unknown_schema_version")],
)
def test_an_unreadable_record_says_the_reason_users_read(value: bytes, reason: str) -> None:
    with pytest.raises(UnreadableRecord) as raised:
        read_evaluation_record(value)
    assert raised.value.reason is ServiceSkip(reason)
    assert str(raised.value).startswith(f"{reason}: ")


def test_the_summary_and_the_log_print_each_reason_as_its_word() -> None:
    """The services count by member: the words printed in the closing summary and the log lines (which
    log readers match) are the values, as when they were strings."""
    counts: Counter[str] = Counter({ServiceSkip.OVERSIZED_RECORD: 2, ConversationSkip.NO_CONVERSATION: 1})
    counts["oversized_record"] += 1  # a member and its word are one key
    assert [f"{name}={n}" for name, n in sorted(counts.items())] == [
        "no_conversation=1",
        "oversized_record=3",
    ]
    said = logging.LogRecord(
        "tracescore.alert", logging.WARNING, "", 0, "skipped (%s)", (ServiceSkip.INVALID_STATE,), None
    )
    assert said.getMessage() == "skipped (invalid_state)"


def _page(path: Path) -> str:
    """A docs page as built: its snippets (`--8<-- "path"`, from the repository root) included."""
    text = path.read_text(encoding="utf-8")
    return re.sub(r'^--8<-- "([^"]+)"$', lambda m: _page(REPO / m.group(1)), text, flags=re.MULTILINE)


def test_the_troubleshooting_page_explains_every_reason() -> None:
    page = _page(REPO / "docs" / "operating" / "troubleshooting.md")
    rows = set(re.findall(r"^\| `([a-z_]+)` \|", page, flags=re.MULTILINE))
    missing = [f"{enum.__name__}.{r.name}" for enum in ENUMS.values() for r in enum if r.value not in rows]
    assert not missing, f"no row on docs/operating/troubleshooting.md for {missing}"


def test_the_troubleshooting_page_names_every_service_that_counts_a_reason() -> None:
    """Both services run the base that reads their state topics and re-keys their input: its reasons are
    counted by `tracescore conversations` as much as by `tracescore alert` (the table says so, from the
    code)."""
    page = _page(REPO / "docs" / "operating" / "troubleshooting.md")
    rows = {m[1]: m[2] for m in re.finditer(r"^\| `([a-z_]+)` \| ([^|]*) \|", page, flags=re.MULTILINE)}
    base = [ServiceSkip.OVERSIZED_RECORD, ServiceSkip.INVALID_STATE, ServiceSkip.FUTURE_STATE_VERSION]
    base.append(ServiceSkip.OLD_STATE_VERSION)
    assert {r: rows[r] for r in base} == dict.fromkeys(base, "`tracescore alert`, `tracescore conversations`")
    assert rows[ServiceSkip.INVALID_RECORD].endswith("`tracescore tail`")
    assert rows[ConversationSkip.NO_CONVERSATION] == "`tracescore conversations`"


def test_the_conversations_metric_describes_every_reason_it_counts_by() -> None:
    reader = InMemoryMetricReader()
    ConversationMetrics(MeterProvider(metric_readers=[reader]).get_meter("test"), SKIP_REASONS).skipped(
        "evicted"
    )
    [description] = [
        metric.description
        for rm in reader.get_metrics_data().resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
        if metric.name == "tracescore.conversations.skipped"
    ]
    named = set(re.findall(r"[a-z]+(?:_[a-z]+)*", description.split("(", 1)[1]))
    assert named == {r.value for enum in ENUMS.values() for r in enum}, description


# Counters keyed by a count's name, not a skip reason: (source, the counter, the enum naming its keys).
# The words are what users read in the closing summaries (`state: ...`, `grounding across turns: ...`,
# consume's `assembly: ...`).
NAMED_COUNTERS: tuple[tuple[str, str, type[StrEnum]], ...] = (
    ("conversations/_grounder.py", "self.stats.counts", GroundingCount),
    ("conversations/_grounding.py", "self.stats.counts", GroundingCount),
    ("conversations/_chains.py", "self.counts", GroundingCount),
    ("_service/_keyed.py", "self.counts", StateCount),
    ("alert/_service.py", "self.stats.state", StateCount),
    ("conversations/_service.py", "self.stats.state", StateCount),
    # The trace assembler's counts (`counts`, a local name for them) and the pipeline's, in one counter.
    ("consume/_assemble.py", "self.counts", AssemblyCount),
    ("consume/_assemble.py", "counts", AssemblyCount),
    ("consume/_revise.py", "counts", AssemblyCount),
    ("consume/_pipeline.py", "self.stats.assembly", AssemblyCount),
    ("consume/_pipeline.py", "stats.assembly", AssemblyCount),
)


def _members(node: ast.expr, enum: type[StrEnum]) -> list[ast.expr]:
    """The parts of a counter's key not named by `enum` (`Enum.MEMBER`, either side of `a if c else b`, or
    one of the enum's own methods, `Enum.method(...)`)."""
    if isinstance(node, ast.IfExp):
        return _members(node.body, enum) + _members(node.orelse, enum)
    if isinstance(node, ast.Call):
        node = node.func
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == enum.__name__
    ):
        return []
    return [node]


def test_every_count_a_stage_keys_by_name_is_a_member_of_its_enum() -> None:
    """The grounding's, the state's and trace assembly's counts are keyed by members (`GroundingCount`,
    `StateCount`, `AssemblyCount`), not by words spelled again at each counter, in the stats and in the
    docs."""
    loose = []
    for source, counter, enum in NAMED_COUNTERS:
        tree = ast.parse((PACKAGE / source).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            keys: list[ast.expr | None] = []
            if isinstance(node, ast.Subscript) and ast.unparse(node.value) == counter:
                keys = [node.slice]
            # A counter started as a dict literal (`{"restored": 0, ...}`) spells its keys too.
            if isinstance(node, ast.AnnAssign | ast.Assign) and isinstance(node.value, ast.Dict):
                target = node.target if isinstance(node, ast.AnnAssign) else node.targets[0]
                keys = list(node.value.keys) if ast.unparse(target) == counter else []
            for key in filter(None, keys):
                loose += [f"{source}:{node.lineno}: {ast.unparse(part)}" for part in _members(key, enum)]
    assert not loose, "counts not named by their enum (NAMED_COUNTERS):\n" + "\n".join(loose)


def test_each_reason_a_turn_is_not_judged_again_is_counted_by_its_word() -> None:
    assert [GroundingCount.not_rejudged(why) for why in NotRejudgedReason] == [
        "not_rejudged_not_captured",
        "not_rejudged_no_judge",
    ]
