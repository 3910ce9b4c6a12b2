"""The evaluation record's reference, from its pydantic model: the fields, the JSON Schema, and an example
record built by the code that writes records (emit) from a faithful judge's real result."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from gen import GENERATED, Undocumented, cell, code, table

SCHEMA_PAGE = "evaluation-record.schema.json"


def schema() -> str:
    from tracescore.model import EvaluationRecord

    return json.dumps(EvaluationRecord.model_json_schema(mode="serialization"), indent=2) + "\n"


def _example() -> dict[str, Any]:
    """The quickstart's hallucinated answer, scored by the offline judge and written as emit writes it."""
    from tracescore.emit import evaluation_record
    from tracescore.model import DecodedSpan, Interaction, RagRecord
    from tracescore.score import evaluate

    span = DecodedSpan(
        trace_id="4bf92f3577b34da6a3ce929d0e0e4736", span_id="00f067aa0ba902b7", name="answer",
        service_name="quickstart", scope_name="tracescore", attributes={}, end_time_unix_nano=0,
    )  # fmt: skip
    record = RagRecord(
        id=f"{span.trace_id}:{span.span_id}",
        query="How much does the Aurora X2 weigh?",
        contexts=("The Aurora X2 battery lasts 14 hours on a single charge.", "The Aurora X2 weighs 1.2 kg."),
        answer="The Aurora X2 weighs 3 kg.",
    )
    [result] = evaluate(record, ["faithfulness"])
    interaction = Interaction(span=span, record=record, route="/ask")
    written = evaluation_record(
        interaction, result, "b7ad6b7169203331", now=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    )
    return json.loads(written.model_dump_json())


def _type(spec: dict[str, Any], defs: dict[str, Any]) -> str:
    if "anyOf" in spec:
        return " | ".join(_type(option, defs) for option in spec["anyOf"])
    if "$ref" in spec:
        name = spec["$ref"].rsplit("/", 1)[-1]
        return _type(defs[name], defs) if "enum" in defs.get(name, {}) else name
    if "enum" in spec or "const" in spec:
        return " | ".join(json.dumps(v) for v in spec.get("enum", [spec.get("const")]))
    kind = spec.get("type", "any")
    return f"{kind} ({spec['format']})" if "format" in spec else str(kind)


def _fields(model: Any, nested: tuple[str, ...] = ()) -> list[list[str]]:
    """One row per field of `model` (a pydantic model), and of the nested models named in `nested`
    (`usage.calls`); Undocumented for a field without a description."""
    spec = model.model_json_schema(mode="serialization")
    required = set(spec.get("required", []))
    problems, rows = [], []
    for name, prop in spec["properties"].items():
        description = model.model_fields[name].description or ""
        if not description:
            problems.append(f"{model.__name__}.{name} has no description")
        rows.append(
            [
                code(name),
                cell(_type(prop, spec["$defs"])),
                "yes" if name in required else "",
                cell(description),
            ]
        )
    for field, definition in nested:
        for name, prop in spec["$defs"][definition]["properties"].items():
            if not prop.get("description"):
                problems.append(f"{definition}.{name} has no description")
            rows.append(
                [
                    code(f"{field}.{name}"),
                    cell(_type(prop, spec["$defs"])),
                    "",
                    cell(prop.get("description", "")),
                ]
            )
    if problems:
        raise Undocumented(problems)
    return rows


def page() -> str:
    from tracescore.model import SCHEMA_VERSION, EvaluationRecord

    rows = _fields(EvaluationRecord, (("usage", "Usage"),))
    example = json.dumps(_example(), indent=2)
    return (
        f"{GENERATED}# Evaluation record\n\n"
        "One JSON object per scored interaction and metric, on the `tracescore.evaluations` topic (keyed "
        "by trace id), written by `tracescore consume` and read by `tracescore alert`, `tracescore tail` "
        f"and anything downstream. Schema version {SCHEMA_VERSION}: fields may be added; renaming or "
        "removing one bumps `schema_version`, and readers skip versions they do not know.\n\n"
        "Delivery is at least once: deduplicate on `trace_id`, `span_id`, `metric` and `judge`, keeping the "
        "highest `revision` (under the cascade one interaction has a record of each judge; an aggregate "
        "never mixes them).\n\n"
        f"JSON Schema: [{SCHEMA_PAGE}]({SCHEMA_PAGE}) (from the pydantic model "
        "`tracescore.model.EvaluationRecord`).\n\n"
        + table(["Field", "Type", "Required", "Description"], rows)
        + "\nAn example, the quickstart's hallucinated answer as the offline judge scores it:\n\n"
        f"```json\n{example}\n```\n"
    )


def _conversation_example() -> dict[str, Any]:
    """Two turns of a conversation, scored by the offline judge and written as emit writes them, gathered
    by the code `tracescore conversations` runs: the second answer is unfaithful."""
    from tracescore.conversations import Conversation
    from tracescore.emit import evaluation_record
    from tracescore.model import DecodedSpan, Interaction, RagRecord
    from tracescore.score import evaluate

    docs = ("The Aurora X2 battery lasts 14 hours on a single charge.", "The Aurora X2 weighs 1.2 kg.")
    turns = [
        ("How long does the Aurora X2 battery last?", "The Aurora X2 battery lasts 14 hours."),
        ("And how much does it weigh?", "The Aurora X2 weighs 3 kg."),
    ]
    started = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    conversation = Conversation(
        service="support-chat", conversation_id="session-s2", route="/chat",
        started_ms=int(started.timestamp() * 1000), partition=0, last_arrival_ms=0,
    )  # fmt: skip
    for n, (question, answer) in enumerate(turns):
        span = DecodedSpan(
            trace_id=f"4bf92f3577b34da6a3ce929d0e0e47{n:02x}", span_id=f"00f067aa0ba902{n:02x}", name="chat",
            service_name="support-chat", scope_name="tracescore", attributes={}, end_time_unix_nano=0,
            start_time_unix_nano=int(started.timestamp() * 1e9) + n * 20_000_000_000,
        )  # fmt: skip
        record = RagRecord(query=question, contexts=docs, answer=answer)
        [result] = evaluate(record, ["faithfulness"])
        interaction = Interaction(span=span, record=record, route="/chat", session_id="session-s2")
        written = evaluation_record(interaction, result, None, now=started + timedelta(seconds=20 * n + 1))
        conversation.apply(written, offset=n, arrival_ms=conversation.started_ms + n, max_turns=200)
    [(_, out, _)] = conversation.due(0.95, started + timedelta(minutes=16))
    return json.loads(out.model_dump_json())


def conversation_page() -> str:
    from tracescore.model import SCHEMA_VERSION, ConversationRecord

    rows = _fields(ConversationRecord, (("worst_turn", "WorstTurn"),))
    example = json.dumps(_conversation_example(), indent=2)
    return (
        f"{GENERATED}# Conversation record\n\n"
        "One JSON object per conversation, metric and judge tier, on the `tracescore.conversations` topic "
        "(keyed by service and conversation id), written by `tracescore conversations` when a conversation "
        "goes quiet and read by `tracescore alert` (conversation rules) and anything downstream. Schema "
        f"version {SCHEMA_VERSION}: fields may be added; renaming or removing one bumps `schema_version`.\n\n"
        "Delivery is at least once, and a turn that arrives after the record was written revises it: keep, "
        "per `service_name`, `conversation_id`, `started_at`, `metric`, `judge` and `selection`, the highest "
        "`revision`.\n\n"
        "From the pydantic model `tracescore.model.ConversationRecord`.\n\n"
        + table(["Field", "Type", "Required", "Description"], rows)
        + "\nAn example: two turns scored by the offline judge, the second answer unfaithful:\n\n"
        f"```json\n{example}\n```\n"
    )
