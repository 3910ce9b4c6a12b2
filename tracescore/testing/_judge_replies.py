"""What the local judge server answers when nothing is scripted: plausible judge replies, deterministic
embeddings, and the token estimate (~4 characters per token, ceil(chars / 4), over the message contents;
good enough for relative comparisons, not a real tokenizer)."""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

__all__ = [
    "default_responder",
    "estimate_tokens",
    "fenced_data",
    "hashed_embedding",
    "messages_text",
    "task_of",
]

_FENCE = re.compile(r"<<<DATA\n(.*?)\nDATA>>>", re.DOTALL)
_TASK_MARKER = re.compile(r"^Task: (\S+)", re.MULTILINE)


def estimate_tokens(text: str) -> int:
    """~4 characters per token, the usual rule of thumb for English BPE vocabularies."""
    return math.ceil(len(text) / 4)


def messages_text(body: dict[str, Any]) -> str:
    """Every message content of a chat request, joined by newlines: what the token estimate counts."""
    parts: list[str] = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(p.get("text", "") for p in content if isinstance(p, dict))
    return "\n".join(parts)


# -- default responder ---------------------------------------------------------------------------------
def task_of(body: dict[str, Any]) -> str | None:
    """The judge task a request is about: the json_schema name, else the 'Task: x' line of the prompt."""
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        name = (fmt.get("json_schema") or {}).get("name")
        if name:
            return str(name)
    match = _TASK_MARKER.search(messages_text(body))
    return match.group(1) if match else None


def fenced_data(body: dict[str, Any]) -> dict[str, Any]:
    """The JSON between the data fences of the last user message that has them ({} when none)."""
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            match = _FENCE.search(message["content"])
            if match:
                data = json.loads(match.group(1))
                return data if isinstance(data, dict) else {}
    return {}


def default_responder(body: dict[str, Any]) -> dict[str, Any]:
    task = task_of(body) or ""
    data = fenced_data(body)
    if task.endswith("analysis"):
        sentences = data.get("answer_sentences", [])
        return {
            "sentences": [{"sentence_index": i, "claims": [s]} for i, s in enumerate(sentences)],
            "questions": [data.get("question") or ""] * int(data.get("questions_to_generate", 0)),
            "noncommittal": False,
            "relevance": 5,
            "relevance_reason": "Answers the question.",
        }
    if task.endswith("verdicts"):
        supported = {"verdict": "FULLY_SUPPORTED", "reason": "Stated in the context.", "evidence": ""}
        return {"verdicts": [{"claim_index": i, **supported} for i, _ in enumerate(data.get("claims", []))]}
    if task.endswith("assessment"):  # an agent's run: the tools fit, the answer covers the question
        return {
            "tool_selection": {"reason": "The tools called fit the question.", "verdict": "fitting"},
            "goal_completion": {"reason": "The answer gives what was asked.", "verdict": "complete"},
        }
    if task.endswith("relevance"):
        relevant = {"rating": 2, "reason": "On the question."}
        return {"ratings": [{"chunk_index": i, **relevant} for i, _ in enumerate(data.get("chunks", []))]}
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") if isinstance(fmt, dict) else None
    example = _instance_of(schema) if isinstance(schema, dict) else {}
    return example if isinstance(example, dict) else {}


def _instance_of(schema: dict[str, Any]) -> Any:
    """The smallest value of a (ref-free) JSON schema: required properties only, empty arrays."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        return {k: _instance_of(props[k]) for k in schema.get("required", []) if k in props}
    return {"array": [], "string": "", "integer": 0, "number": 0, "boolean": False}.get(str(kind))


# -- embeddings ----------------------------------------------------------------------------------------
def hashed_embedding(text: str, dim: int) -> list[float]:
    """Deterministic bag-of-words vector: each lower-cased word adds ±1 at a hashed index; L2-normalised."""
    vector = [0.0] * dim
    for word in re.findall(r"\w+", text.lower()):
        digest = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
        vector[digest % dim] += 1.0 if (digest >> 63) & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vector))
    return [v / norm for v in vector] if norm else vector
