"""The shared data model: one definition of each type, reachable from the paths code was written against,
and light enough for the SDK's install."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

import tracescore
from tracescore.model import (
    CONVERSATION_KEY,
    OFFLINE_JUDGE,
    SCHEMA_VERSION,
    ConversationRecord,
    ConversationSource,
    EvaluationRecord,
    MetricResult,
    MetricStatus,
    UnreadableRecord,
    Usage,
    annotator_kind,
    read_conversation_record,
    read_evaluation_record,
    read_turn_evidence,
)

# Paths code was written against before the model was these types' one home: (old package, name, home).
MOVED_TO_MODEL = {
    "tracescore.score": ("MetricResult", "MetricStatus", "RagRecord", "Usage", "Verdict", "is_flagged"),
    "tracescore.score.metrics": ("Verdict",),
    "tracescore.extract": ("Interaction", "RagSpan", "Trace", "DecodedSpan", "ContextSource"),
    "tracescore.emit": ("EvaluationRecord", "SCHEMA_VERSION", "AnnotatorKind", "annotator_kind"),
    "tracescore.sample": ("Selection",),
}
OLD_PATHS = [
    *((package, name, "tracescore.model") for package, names in MOVED_TO_MODEL.items() for name in names),
    ("tracescore.alert.testing", "free_port", "tracescore.testing"),
]


@pytest.mark.parametrize(("package", "name", "home"), OLD_PATHS)
def test_an_old_path_still_imports_the_one_object_with_a_deprecation_warning(
    package: str, name: str, home: str
) -> None:
    with pytest.warns(DeprecationWarning, match=rf"{package}\.{name} is deprecated: import it from {home}"):
        old = getattr(importlib.import_module(package), name)
    assert old is getattr(importlib.import_module(home), name)
    assert name not in importlib.import_module(package).__all__, "one public home per name"


def test_a_from_import_of_an_old_path_warns_at_the_importing_line() -> None:
    with pytest.warns(DeprecationWarning) as caught:
        from tracescore.emit import EvaluationRecord as Old  # noqa: F401
    assert caught[0].filename == __file__


def test_an_old_record_without_annotator_kind_reads_it_from_the_judge() -> None:
    row = {
        "trace_id": "a" * 32, "span_id": "b" * 16, "service_name": "rag", "route": "/ask",
        "metric": "faithfulness", "score": 1.0, "label": None, "status": "ok",
        "timestamp": datetime.now(UTC).isoformat(),
    }  # fmt: skip
    assert EvaluationRecord.model_validate({**row, "judge": "offline"}).annotator_kind == "CODE"
    assert EvaluationRecord.model_validate({**row, "judge": "openai:gpt-4o-mini"}).annotator_kind == "LLM"


def test_an_old_record_without_user_id_reads_with_none() -> None:
    """user_id was added without a new schema_version: records written before it still read."""
    old = {
        "schema_version": 1, "trace_id": "a" * 32, "span_id": "b" * 16, "service_name": "rag",
        "route": "/ask", "metric": "faithfulness", "score": 1.0, "label": None, "status": "ok",
        "judge": "offline", "timestamp": datetime.now(UTC).isoformat(), "session_id": "s-1",
    }  # fmt: skip
    record = read_evaluation_record(json.dumps(old).encode())
    assert (record.session_id, record.user_id) == ("s-1", None)
    assert read_evaluation_record(json.dumps({**old, "user_id": "u-7"}).encode()).user_id == "u-7"


def test_a_field_a_newer_tracescore_added_within_the_schema_version_is_ignored() -> None:
    """Fields are additive within a schema_version: an older reader (alert, conversations, tail) reads a
    record a newer consume wrote with a field it does not know, without it (docs/operating/upgrading.md)."""
    row = {
        "schema_version": 1, "trace_id": "a" * 32, "span_id": "b" * 16, "service_name": "rag",
        "route": "/ask", "metric": "faithfulness", "score": 1.0, "label": None, "status": "ok",
        "judge": "offline", "timestamp": datetime.now(UTC).isoformat(),
    }  # fmt: skip
    record = read_evaluation_record(json.dumps({**row, "a_field_of_tomorrow": {"x": 1}}).encode())
    assert record == read_evaluation_record(json.dumps(row).encode())


def test_where_a_records_conversation_came_from_reads_as_one_of_the_models_words() -> None:
    """conversation_source is a ConversationSource, written back in the same words; a word this version does
    not know is an invalid record that names the field, not a string passed on to every reader."""
    row = {
        "schema_version": 1, "trace_id": "a" * 32, "span_id": "b" * 16, "service_name": "rag",
        "route": "/ask", "metric": "faithfulness", "score": 1.0, "label": None, "status": "ok",
        "judge": "offline", "timestamp": datetime.now(UTC).isoformat(), "session_id": "history:0",
        "conversation_source": "history",
    }  # fmt: skip
    record = read_evaluation_record(json.dumps(row).encode())
    assert record.conversation_source is ConversationSource.HISTORY
    assert json.loads(record.to_kafka()[1])["conversation_source"] == "history"
    with pytest.raises(UnreadableRecord, match=r"invalid_record: .*conversation_source"):
        read_evaluation_record(json.dumps({**row, "conversation_source": "guessed"}).encode())


def test_an_unscored_result_has_no_score_and_says_why() -> None:
    failed = MetricResult.error("faithfulness", "timeout", judge="openai:m", usage=Usage(calls=1))
    assert (failed.score, failed.status, failed.reason) == (None, MetricStatus.ERROR, "timeout")
    assert (Usage(calls=1, cost_usd=0.5) + Usage(calls=2)).calls == 3


def test_importing_the_model_loads_no_stage() -> None:
    code = (
        "import sys, tracescore.model; "
        "print(sorted(m for m in sys.modules if m.split('.')[1:2] and m.split('.')[1] in "
        "{'score', 'emit', 'extract', 'sample', 'consume', 'alert'}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("value", "reason", "detail"),
    [
        (b"\xff{", "invalid_record", "not JSON"),
        (b"[1, 2]", "invalid_record", "not a JSON object"),
        (b'{"event": "page_view"}', "invalid_record", "not an evaluation record: missing trace_id, span_id"),
        (b'{"schema_version": 2}', "unknown_schema_version", "an evaluation record of schema_version 2"),
        (b'{"trace_id": "x"}', "invalid_record", "missing span_id"),
    ],
)
def test_a_message_that_is_no_record_says_why(value: bytes, reason: str, detail: str) -> None:
    with pytest.raises(UnreadableRecord) as raised:
        read_evaluation_record(value)
    assert raised.value.reason == reason
    assert raised.value.detail.startswith(detail) or detail in raised.value.detail


def test_a_record_must_say_its_schema_version() -> None:
    record = EvaluationRecord(
        trace_id="a" * 32, span_id="b" * 16, service_name="rag", route="/ask", metric="faithfulness",
        score=1.0, label="faithful", status=MetricStatus.OK, judge="offline", timestamp=datetime.now(UTC),
    )  # fmt: skip
    assert read_evaluation_record(record.model_dump_json().encode()) == record
    unversioned = record.model_dump(mode="json", exclude={"schema_version"})
    with pytest.raises(UnreadableRecord, match="unknown_schema_version: an evaluation record without a sch"):
        read_evaluation_record(json.dumps(unversioned).encode())


@pytest.mark.parametrize("read", [read_evaluation_record, read_conversation_record, read_turn_evidence])
def test_a_record_of_a_newer_tracescore_says_which_record_and_to_upgrade(
    read: Callable[[bytes], object],
) -> None:
    """A conversation record of a future schema version was explained as an evaluation record's version was
    (both formats share SCHEMA_VERSION), in words that asked nothing of the reader: the detail names the
    kind of record read, its version, what this tracescore reads, and to upgrade."""
    kind = {
        read_evaluation_record: "an evaluation record",
        read_conversation_record: "a conversation record",
        read_turn_evidence: "a turn's documents (evidence)",
    }[read]
    with pytest.raises(UnreadableRecord) as newer:
        read(b'{"schema_version": 2, "and": "fields of its own"}')
    assert newer.value.reason == "unknown_schema_version"
    assert newer.value.detail == (
        f"{kind} of schema_version 2, written by a newer tracescore; this one reads up to "
        f"{SCHEMA_VERSION}: upgrade tracescore to read it"
    )
    with pytest.raises(UnreadableRecord) as never:
        read(b'{"schema_version": "1"}')
    assert never.value.detail == (
        f'{kind} of schema_version "1", which no tracescore writes; this one reads up to {SCHEMA_VERSION}'
    )
    with pytest.raises(UnreadableRecord) as broken:
        read(b'{"schema_version": 1, "trace_id": 7}')
    assert broken.value.reason == "invalid_record"
    assert broken.value.detail.startswith(f"not {kind}: missing ")


@pytest.mark.parametrize("read", [read_evaluation_record, read_conversation_record])
@pytest.mark.parametrize("version", ["true", "1.0"])
def test_a_record_whose_version_only_equals_1_is_one_no_tracescore_writes(
    read: Callable[[bytes], object], version: str
) -> None:
    """pydantic read `schema_version: true` or `1.0` as version 1, and the record's fields were looked at as
    if a tracescore had written it. Only the JSON integer 1 is version 1: such a record is skipped as one of
    a version no tracescore writes, whatever its other fields."""
    kind = {
        read_evaluation_record: "an evaluation record",
        read_conversation_record: "a conversation record",
        read_turn_evidence: "a turn's documents (evidence)",
    }[read]
    with pytest.raises(UnreadableRecord) as raised:
        read(b'{"schema_version": %s, "trace_id": 7}' % version.encode())
    assert raised.value.reason == "unknown_schema_version"
    assert raised.value.detail == (
        f"{kind} of schema_version {version}, which no tracescore writes; this one reads up to "
        f"{SCHEMA_VERSION}"
    )


def _compared_with(word: str) -> list[str]:
    """Where tracescore's code compares something with `word` spelled out (`==`, `in`): file:line."""
    package = Path(tracescore.__file__).parent
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if any(isinstance(side, ast.Constant) and side.value == word for side in sides):
                    found.append(f"{path.relative_to(package.parent)}:{node.lineno}")
    return found


def test_the_offline_judge_is_told_apart_in_one_place() -> None:
    """A judge name compared with the literal "offline" was a second spelling of what annotator_kind
    decides (a variant named "offline:<name>" failed it): every stage asks the model (annotator_kind,
    OFFLINE_JUDGE)."""
    assert _compared_with(OFFLINE_JUDGE) == []
    assert annotator_kind(OFFLINE_JUDGE) == annotator_kind("offline:strict") == "CODE"
    assert annotator_kind("openai:gpt-4o-mini") == "LLM"


def test_a_conversation_record_is_told_apart_by_the_field_the_model_names() -> None:
    """`tracescore tail` knew a conversation record by a loose "conversation_id" in the JSON: renaming the
    field would have left it reading every conversation record as an invalid evaluation record, silently.
    The model names the field (CONVERSATION_KEY), which stays a field only a conversation record has, and no
    reader tests a message for it by its spelling."""
    assert ConversationRecord.model_fields[CONVERSATION_KEY].is_required()
    assert CONVERSATION_KEY not in EvaluationRecord.model_fields
    assert _compared_with(CONVERSATION_KEY) == []
