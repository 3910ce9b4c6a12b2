"""The fixtures recorded from the real instrumentation libraries (fixtures/record.py), with what each one
should become: an interaction read by a given convention, or an explained skip."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"

# What a reader of each recording must produce. Decided by what the library records, not by the bytes:
# traceloop's LangChain mode records no retrieval, and GenAI documents given as ids carry no text.
EXPECTED = {
    "openinference_langchain": ("interaction", "openinference"),
    "openinference_langchain_tracescore": ("interaction", "tracescore"),
    "openinference_manual": ("interaction", "openinference"),
    "openllmetry/workflow": ("interaction", "openllmetry"),
    "openllmetry/langchain": ("skip", "no_retrieval"),
    "otel_genai/ids_only": ("skip", "empty_context"),
    "otel_genai": ("interaction", "genai"),
}


@dataclass(frozen=True)
class Recording:
    source: str
    scenario: str
    payload: bytes
    trace_id: str
    question: str
    documents: tuple[str, ...]
    answer: str
    faithful: bool
    expected: tuple[str, str]

    @property
    def id(self) -> str:
        return f"{self.source}/{self.scenario}"


def recordings() -> list[Recording]:
    found = []
    for manifest_path in sorted(FIXTURES.glob("*/manifest.json")):
        manifest = json.loads(manifest_path.read_text())
        for file_name, entry in sorted(manifest["scenarios"].items()):
            source, scenario = manifest["source"], entry["scenario"]
            expected = next(
                outcome
                for key, outcome in EXPECTED.items()
                if key.split("/")[0] == source and scenario.startswith(key.partition("/")[2])
            )
            found.append(
                Recording(
                    source=source,
                    scenario=scenario,
                    payload=(manifest_path.parent / file_name).read_bytes(),
                    trace_id=entry["trace_id"],
                    question=entry["question"],
                    documents=tuple(entry["documents"]),
                    answer=entry["answer"],
                    faithful=entry["faithful"],
                    expected=expected,
                )
            )
    assert len(found) >= 14, f"fixtures missing under {FIXTURES}: run fixtures/record.py"
    return found
