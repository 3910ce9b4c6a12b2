"""A vector database's query as OpenLLMetry's instrumentations of the database clients record it: the app
that queries Chroma, Qdrant, Pinecone, ... with its own client and hands what it got to the model, no
framework between them, its documents never on a retrieval span of a convention.

traceloop's `opentelemetry-instrumentation-chromadb` writes a `chroma.query` span (`db.system` `chroma`) with
one `db.query.result` span event per result: `db.query.result.id`, `.distance`, `.metadata` and `.document`,
the text (left out when the query's `include` leaves out `documents`). Its pinecone and milvus ones write the
same events with ids, scores and metadata, no text; its qdrant one (`qdrant.query_points`, `qdrant.search`,
...) only the collection and `db.vector.query.top_k`, no result at all. The texts are the documents of the
LLM call that followed the query (`ran_before`): in a workflow, the workflow's; beside a lone model call
under the app's own span (a web request's), the call that started after it. A query that recorded no text
adds no document and says why (`no_text`): read alone, the interaction is skipped with that explanation.
"""

from __future__ import annotations

from collections.abc import Sequence

from tracescore import semconv
from tracescore.extract._convention import Reading
from tracescore.extract._tools import ran_between
from tracescore.model import ContextSourceKind, DecodedSpan

__all__ = ["VectorDB"]


class VectorDB:
    """The keys of OpenLLMetry's and OpenLIT's vector database instrumentations, and their readers."""

    SYSTEM = "db.system"  # the vendor: `chroma`, `Qdrant`, `pinecone`
    RESULT_EVENT = "db.query.result"
    RESULT_DOCUMENT = "db.query.result.document"
    TOP_K = "db.vector.query.top_k"
    # The instrumentations whose query spans say only how many results were asked for (Qdrant's): another
    # producer's `db.vector.query.top_k` (Spring AI's vector store) is its own adapter's.
    SCOPE = "opentelemetry.instrumentation."
    CHROMA = "chroma"
    # OpenLIT's: a `vectordb` operation, the vendor in `db.system.name`, how many rows came back.
    OPENLIT_OPERATION = "vectordb"
    SYSTEM_NAME = "db.system.name"
    RETURNED_ROWS = "db.response.returned_rows"
    LABEL_THEM = "put the texts the app hands the model under a label in the prompt (Context:)"
    TRACELOOP_FIX = f"record them with @task(name='retrieve') around the app's search, or {LABEL_THEM}"
    OPENLIT_FIX = f"{LABEL_THEM}, or record the retrieval with tracescore's @tracescore.rag"

    @classmethod
    def is_query(cls, span: DecodedSpan) -> bool:
        """A query whose results were recorded as events, or one of traceloop's or OpenLIT's that asked for
        the top k (and recorded none)."""
        if any(event.name == cls.RESULT_EVENT for event in span.events):
            return True
        attrs = span.attributes
        if cls.TOP_K not in attrs:
            return False
        if attrs.get(semconv.GEN_AI_OPERATION_NAME) == cls.OPENLIT_OPERATION:
            return True
        return cls.SYSTEM in attrs and span.scope_name.startswith(cls.SCOPE)

    @classmethod
    def documents(cls, span: DecodedSpan) -> list[str]:
        """The results' texts, in the order the database ranked them."""
        texts = []
        for event in span.events:
            text = event.attributes.get(cls.RESULT_DOCUMENT) if event.name == cls.RESULT_EVENT else None
            if isinstance(text, str) and text.strip():
                texts.append(text)
        return texts

    @classmethod
    def read(cls, reading: Reading, span: DecodedSpan) -> None:
        """One query's texts into the reading's documents."""
        reading.contexts.add(span, ContextSourceKind.RETRIEVER, cls.documents(span))

    @classmethod
    def no_documents_note(cls, reading: Reading) -> str | None:
        """Why the queries the interaction read gave no document (said only when nothing else gave any)."""
        silent = [cls.no_text(span) for span, _ in reading.retrievals if cls.is_query(span)]
        return "; ".join(silent) or None

    @classmethod
    def no_text(cls, span: DecodedSpan) -> str:
        """Why a query added no document: what its instrumentation recorded, and the setting that records
        the text where there is one."""
        attrs = span.attributes
        if attrs.get(semconv.GEN_AI_OPERATION_NAME) == cls.OPENLIT_OPERATION:
            vendor, rows = attrs.get(cls.SYSTEM_NAME) or "vector database", attrs.get(cls.RETURNED_ROWS)
            returned = f"that it returned {rows} rows ({cls.RETURNED_ROWS}) and " if rows is not None else ""
            return (
                f"the {vendor} query {span.name!r} recorded {returned}none of their texts (OpenLIT's vector "
                f"database instrumentations write none, and no setting makes them): {cls.OPENLIT_FIX}"
            )
        vendor = attrs.get(cls.SYSTEM) or "vector database"
        results = sum(event.name == cls.RESULT_EVENT for event in span.events)
        if not results:
            return (
                f"the {vendor} query {span.name!r} recorded none of its results, only {cls.TOP_K} (its "
                f"OpenLLMetry instrumentation writes none, and no setting makes it): {cls.TRACELOOP_FIX}"
            )
        if vendor == cls.CHROMA:
            fix = "the query's include= left out 'documents', which records them"
        else:
            fix = f"its OpenLLMetry instrumentation writes none, and no setting makes it: {cls.TRACELOOP_FIX}"
        return (
            f"the {vendor} query {span.name!r} recorded {results} result(s) as {cls.RESULT_EVENT} events "
            f"with no {cls.RESULT_DOCUMENT} (ids and metadata only): {fix}"
        )

    @classmethod
    def ran_before(cls, spans: Sequence[DecodedSpan], since: int, call: DecodedSpan) -> list[DecodedSpan]:
        """The queries among `spans` that started after `since` and before the model `call`: the ones whose
        results it was given."""
        return ran_between((s for s in spans if cls.is_query(s)), since, call)
