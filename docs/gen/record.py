"""The evaluation record's reference, from its pydantic model: the fields, the JSON Schema, and an example
record built by the code that writes records (emit) from a faithful judge's real result."""

from __future__ import annotations

import json
from datetime import UTC, datetime
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


def page() -> str:
    from tracescore.model import SCHEMA_VERSION, EvaluationRecord

    spec = EvaluationRecord.model_json_schema(mode="serialization")
    required = set(spec.get("required", []))
    problems, rows = [], []
    for name, prop in spec["properties"].items():
        description = EvaluationRecord.model_fields[name].description or ""
        if not description:
            problems.append(f"EvaluationRecord.{name} has no description")
        rows.append(
            [
                code(name),
                cell(_type(prop, spec["$defs"])),
                "yes" if name in required else "",
                cell(description),
            ]
        )
    for name, prop in spec["$defs"]["Usage"]["properties"].items():
        rows.append(
            [code(f"usage.{name}"), cell(_type(prop, spec["$defs"])), "", cell(prop.get("description", ""))]
        )
    if problems:
        raise Undocumented(problems)
    example = json.dumps(_example(), indent=2)
    return (
        f"{GENERATED}# Evaluation record\n\n"
        "One JSON object per scored interaction and metric, on the `tracescore.evaluations` topic (keyed "
        "by trace id), written by `tracescore consume` and read by `tracescore alert`, `tracescore tail` "
        f"and anything downstream. Schema version {SCHEMA_VERSION}: fields may be added; renaming or "
        "removing one bumps `schema_version`, and readers skip versions they do not know.\n\n"
        "Delivery is at least once: deduplicate on `trace_id`, `span_id` and `metric`, keeping the highest "
        "`revision`.\n\n"
        f"JSON Schema: [{SCHEMA_PAGE}]({SCHEMA_PAGE}) (from the pydantic model "
        "`tracescore.model.EvaluationRecord`).\n\n"
        + table(["Field", "Type", "Required", "Description"], rows)
        + "\nAn example, the quickstart's hallucinated answer as the offline judge scores it:\n\n"
        f"```json\n{example}\n```\n"
    )
