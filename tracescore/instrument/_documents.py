"""Retrieved documents of any common shape, read by duck typing so no framework is imported, and written
onto a span as OpenInference `retrieval.documents.N.document.*` under the content controls.

Plain strings, mappings (`content`/`page_content`/`text`, `id`, `score`, `metadata`), LangChain `Document`
(`page_content`, `metadata`, `id`) and LlamaIndex `NodeWithScore` (`node.text`, `node.node_id`,
`node.metadata`, `score`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry.trace import Span

from tracescore import semconv
from tracescore.instrument._content import ContentPolicy, flat_items, safe_json, safe_str

__all__ = ["Document", "DocumentsMixin", "id_and_score", "read_document", "read_documents"]

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


class DocumentsMixin:
    """Documents as OpenInference `retrieval.documents.N.document.*`, numbered on from earlier ones."""

    span: Span
    policy: ContentPolicy
    _documents_omitted = 0
    _text: Callable[[str, Any, dict[str, Any]], str | None]

    def _put_documents(self, documents: list[Document | str], first_index: int, out: dict[str, Any]) -> int:
        """Write up to max_documents in total; returns how many were written."""
        policy = self.policy
        kept = documents[: max(0, policy.max_documents - first_index)]
        if len(kept) < len(documents):
            self._documents_omitted += len(documents) - len(kept)
        verbatim, max_chars, capture = policy.verbatim, policy.max_chars, policy.capture
        end = first_index + len(kept)
        plain_texts = verbatim and kept and end <= len(_CONTENT_KEYS) and _all_text(kept)
        if plain_texts and max(map(len, kept)) <= max_chars:
            # The common case without a Python step per document: plain texts as they are.
            out.update(zip(_CONTENT_KEYS[first_index:end], kept, strict=True))
            return len(kept)
        for offset, doc in enumerate(kept):
            index = first_index + offset
            if type(doc) is str:  # the common case, kept cheap: most retrievers return plain text
                if verbatim and len(doc) <= max_chars:
                    out[_content_key(index)] = doc
                elif capture:
                    self._text(_content_key(index), doc, out)
                continue
            self._text(_content_key(index), doc.content, out)
            if doc.id is not None:
                out[semconv.document_key(index, "id")] = safe_str(doc.id)
            if doc.score is not None:
                out[semconv.document_key(index, "score")] = doc.score
            if doc.metadata:
                self._text(semconv.document_key(index, "metadata"), safe_json(doc.metadata), out)
        return len(kept)


_CONTENT_KEYS = tuple(semconv.document_key(index, "content") for index in range(256))


def _content_key(index: int) -> str:
    return _CONTENT_KEYS[index] if index < len(_CONTENT_KEYS) else semconv.document_key(index, "content")


_TEXT_ONLY = {str}


def _all_text(items: list[Any] | tuple[Any, ...]) -> bool:
    return set(map(type, items)) == _TEXT_ONLY


def read_documents(items: Any) -> list[Document | str]:
    """Documents from any supported shape; plain strings stay strings (no object per document)."""
    if type(items) is list and _all_text(items):
        return items  # type: ignore[no-any-return]  # read-only from here on: no copy
    documents: list[Document | str] = []
    for item in flat_items(items):
        if type(item) is str:
            documents.append(item)
            continue
        try:
            documents.append(read_document(item))
        except Exception:  # an object whose attributes raise is still one document
            documents.append(Document(safe_str(item)))
    return documents


def id_and_score(doc: Document | str) -> dict[str, Any]:
    if type(doc) is str:
        return {}
    assert isinstance(doc, Document)
    fields: dict[str, Any] = {} if doc.id is None else {"id": safe_str(doc.id)}
    if doc.score is not None:
        fields["score"] = doc.score
    return fields
