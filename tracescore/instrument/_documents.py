"""Retrieved documents of any common shape, read by duck typing so no framework is imported.

Plain strings, mappings (`content`/`page_content`/`text`, `id`, `score`, `metadata`), LangChain `Document`
(`page_content`, `metadata`, `id`) and LlamaIndex `NodeWithScore` (`node.text`, `node.node_id`,
`node.metadata`, `score`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Document", "read_document"]

_TEXT_FIELDS = ("page_content", "content", "text")
_ID_FIELDS = ("id", "doc_id", "node_id", "id_")


@dataclass(frozen=True, slots=True)
class Document:
    content: Any  # made text by the content policy, which never raises
    id: Any = None
    score: float | None = None
    metadata: Any = None


def read_document(item: Any) -> Document:
    if isinstance(item, str):
        return Document(item)
    if isinstance(item, Document):
        return item
    if isinstance(item, Mapping):
        return Document(
            content=next((item[k] for k in _TEXT_FIELDS if k in item), item),
            id=next((item[k] for k in _ID_FIELDS if item.get(k) is not None), None),
            score=_score(item.get("score")),
            metadata=item.get("metadata"),
        )
    node = getattr(item, "node", None)
    if node is not None and hasattr(item, "score"):  # LlamaIndex NodeWithScore
        inner = read_document(node)
        return Document(inner.content, inner.id, _score(item.score), inner.metadata)
    content = next((t for t in (getattr(item, a, None) for a in _TEXT_FIELDS) if isinstance(t, str)), None)
    if content is None:
        get_content = getattr(item, "get_content", None)
        content = get_content() if callable(get_content) else item
    return Document(
        content=content,
        id=next((v for v in (getattr(item, a, None) for a in _ID_FIELDS) if v is not None), None),
        score=_score(getattr(item, "score", None)),
        metadata=getattr(item, "metadata", None),
    )


def _score(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
