"""A LangChain app's traces through the ingest Collector as docs/integrations/_collector.md runs it:

    the real openinference-instrumentation-langchain --OTLP/HTTP--> Collector (collectors/otlp-to-kafka.yaml,
        and docs/examples/collector_backend.yaml beside it) --> spans topic --> tracescore consumer
                                                            --> the backend's own pipeline

OpenInference writes the retrieved documents on several spans of a LangChain trace (the retriever's output,
the formatting step's input and output, the prompt, the model's input messages): ~100 KB of documents make a
trace over 1 MB. The kafka exporter writes one message per trace of a batch, and the shipped config sets
`max_message_bytes: 1000000`; without a byte limit on its batches such a trace was dropped whole by the
Collector ("kafka record exceeds max message size") and the consumer read nothing. The app is the LCEL RAG
chain of docs/integrations/langchain.md in the openinference_langchain recorder's env (built by
tests/extract/fixtures/record.py, reused), exporting with a BatchSpanProcessor as the OTLP exporter does:
its exporter POSTs the OTLP encoder's protobuf to the Collector's /v1/traces (the OTLP/HTTP exporter package
is not in that env).

A team that samples for its backend in the Collector gives Kafka a pipeline of its own, unsampled
(docs/examples/collector_backend.yaml): every span reaches both, and tracescore scores every trace.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import uuid
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import _zygote
import pytest
import yaml
from _helpers import consumer_settings
from kafka.consumer.fetcher import ConsumerRecord
from pages import DOCS, REPO

from tracescore.consume import ConsumerStats, EvaluationConsumer, decode_message
from tracescore.model import EvaluationRecord, ExtractSkip
from tracescore.score.judges import OfflineJudge
from tracescore.score.metrics import Faithfulness
from tracescore.testing import free_port
from tracescore.testing.collector import ingest_env
from tracescore.testing.kafka_broker import KafkaBroker
from tracescore.testing.kafka_topics import read_topic, wait_for_records

FIXTURES = REPO / "tests" / "extract" / "fixtures"
sys.path[:0] = [str(FIXTURES), str(REPO / "tests" / "collectors")]

from collector_helpers import (  # noqa: E402
    COLLECTORS,
    CollectorProcess,
    create_topics,
    file_backend,
    file_exporter_spans,
)
from envs import SOURCES  # noqa: E402
from peers import build_collector  # noqa: E402
from record import ensure_env  # noqa: E402

pytestmark = pytest.mark.kafka

PARTITIONS = 3
LARGE = 20  # documents of ~5 KB each: the trace is over 1 MB of OTLP
APP = """
import json, sys, urllib.request

from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

endpoint, documents, shape = sys.argv[1], int(sys.argv[2]), sys.argv[3]


class OTLPHTTP(SpanExporter):
    def export(self, spans):
        request = urllib.request.Request(
            endpoint + "/v1/traces", data=encode_spans(spans).SerializeToString(),
            headers={"Content-Type": "application/x-protobuf"}, method="POST",
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 200, response.status
        return SpanExportResult.SUCCESS


provider = TracerProvider(resource=Resource.create({"service.name": "support-bot-large"}))
provider.add_span_processor(BatchSpanProcessor(OTLPHTTP()))
LangChainInstrumentor().instrument(tracer_provider=provider)

texts = ["Refunds are accepted within 30 days of purchase with the receipt."] + [
    f"Store note {i}: " + "The shop on Main Street opens at nine and closes at five on weekdays. " * 70
    for i in range(documents - 1)
]
store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
store.add_documents([Document(page_content=text) for text in texts])
retriever = store.as_retriever(search_kwargs={"k": documents})
prompt = ChatPromptTemplate.from_messages(
    [("system", "Answer from this context only:\\n{context}"), ("human", "{question}")]
)
bare_prompt = ChatPromptTemplate.from_messages(
    [("system", "Answer from these:\\n{context}"), ("human", "{question}")]
)
# LangChain hub's rlm/rag-prompt, which LangChain's RAG tutorial pulls: the documents inline after "Context:".
rag_prompt = ChatPromptTemplate.from_messages([("human", (
    "You are an assistant for question-answering tasks. Use the following pieces of retrieved context to "
    "answer the question. If you don't know the answer, just say that you don't know. Use three sentences "
    "maximum and keep the answer concise.\\nQuestion: {question} \\nContext: {context} \\nAnswer:"
))])


class Roots(SpanProcessor):
    # The trace id of each run: its root span's.
    def __init__(self):
        self.trace_ids = []

    def on_end(self, span):
        if span.parent is None:
            self.trace_ids.append(format(span.context.trace_id, "032x"))


roots = Roots()
provider.add_span_processor(roots)
runs = {}
for answer, faithful in [
    ("Refunds are accepted within 30 days of purchase.", True),
    ("Refunds are accepted within 90 days of purchase.", False),
]:
    question = "How long do I have to return an item?"
    model = FakeListChatModel(responses=[answer])
    if shape in ("retriever", "unlabelled"):
        chain = (
            {"context": retriever | RunnableLambda(lambda docs: "\\n\\n".join(d.page_content for d in docs)),
             "question": RunnablePassthrough()}
            | (prompt if shape == "retriever" else bare_prompt) | model | StrOutputParser()
        )
        assert chain.invoke(question) == answer
    else:  # the tutorial's graph: a search that is no Runnable (no retriever span), then the prompt
        found = store.similarity_search(question, k=documents)
        context = "\\n\\n".join(d.page_content for d in found)
        chain = rag_prompt | model | StrOutputParser()
        assert chain.invoke({"question": question, "context": context}) == answer
    runs[roots.trace_ids[-1]] = faithful
provider.force_flush()
print(json.dumps(runs))
"""


@pytest.fixture(scope="module")
def otelcol() -> Path:
    return build_collector()


def _app_env(app_settings: dict[str, str] | None = None) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(FIXTURES / "scenarios"), **(app_settings or {})}


@pytest.fixture(scope="module")
def langchain_apps() -> Iterator[_zygote.Zygote]:
    """The LangChain app's runs forked from one interpreter of its env that ran APP's imports
    (tests/_zygote.py): ~1.8 CPU-s of imports a run, seven runs in the module. The settings the tests vary
    (OPENINFERENCE_HIDE_*) are read when the instrumentor is built, in the run, not at import."""
    app_env = SOURCES["openinference_langchain"]
    ensure_env(app_env, rebuild=False)
    zygote = _zygote.Zygote(APP, _app_env(), python=str(app_env.python))
    yield zygote
    zygote.close()


INGEST = COLLECTORS / "otlp-to-kafka.yaml"
MAX_MESSAGE_BYTES = yaml.safe_load(INGEST.read_text())["exporters"]["kafka"]["producer"]["max_message_bytes"]


@dataclass
class Run:
    prefix: str
    runs: dict[str, bool]  # trace id: whether its answer was faithful
    messages: list[ConsumerRecord]
    collector_log: str


def _through_the_collector(
    otelcol: Path,
    bootstrap: str,
    tmp: Path,
    documents: int,
    configs: list[Path],
    env: dict[str, str],
    shape: str = "retriever",
    app_settings: dict[str, str] | None = None,
    app: tuple[str, str] = ("openinference_langchain", APP),
    forked_from: _zygote.Zygote | None = None,
) -> Run:
    """The app's two runs (a faithful and an unfaithful answer, `documents` retrieved by a retriever, or
    searched and put into the prompt: `shape`) sent to the Collector with `configs`, and what it wrote to the
    spans topic once stopped (it drains its queues on SIGTERM). `app_settings`: the app's environment; `app`:
    another app (its recorder env's source, its program), run with the scenarios' modules on its path;
    `forked_from`: a zygote of the app's interpreter to fork its process from (`langchain_apps`)."""
    source, program = app
    app_env = SOURCES[source]
    ensure_env(app_env, rebuild=False)
    prefix = f"l{uuid.uuid4().hex[:10]}"
    topic = f"{prefix}.spans"
    create_topics(bootstrap, [topic], PARTITIONS)
    collector_env, http_port = ingest_env(bootstrap, topic)
    command = [str(app_env.python), "-c", textwrap.dedent(program), f"http://127.0.0.1:{http_port}"]
    command += [str(documents), shape]
    with CollectorProcess(otelcol, configs, collector_env | env, tmp / "otelcol.log") as collector:
        if forked_from is not None:
            assert forked_from.python == command[0] and not forked_from.differs(_app_env(app_settings))
            app = _zygote.run(command, env=_app_env(app_settings), timeout=120, zygote=forked_from)
        else:
            app = subprocess.run(
                command, capture_output=True, text=True, timeout=120, env=_app_env(app_settings), check=False
            )
        assert app.returncode == 0, app.stderr
        wait_for_records(bootstrap, topic, 2, timeout_s=20)
    return Run(prefix, json.loads(app.stdout.splitlines()[-1]), read_topic(bootstrap, topic), collector.log())


def _consume(bootstrap: str, run: Run) -> tuple[list[EvaluationRecord], ConsumerStats]:
    seen: list[EvaluationRecord] = []
    stats = EvaluationConsumer(
        consumer_settings(bootstrap, run.prefix),
        judge=OfflineJudge(),
        metrics=[Faithfulness()],
        on_evaluation=seen.append,
    ).run()
    return seen, stats


def _assert_scored(bootstrap: str, run: Run, sources: list[str]) -> None:
    """Every run scored from the documents of `sources` (their kinds, in order)."""
    seen, stats = _consume(bootstrap, run)
    # The route is the chain span's name, as docs/integrations/langchain.md says.
    scored = {
        r.trace_id: (r.convention, r.route, r.label, [c["kind"] for c in r.details["context_sources"]])
        for r in seen
    }
    assert scored == {
        trace_id: ("openinference", "RunnableSequence", "faithful" if faithful else "hallucinated", sources)
        for trace_id, faithful in run.runs.items()
    }, [(r.trace_id, r.label, r.reason) for r in seen]
    assert dict(stats.skipped) == {} and stats.dead_letters == 0


def test_a_trace_over_kafka_s_message_limit_is_written_in_parts_and_scored(
    otelcol: Path, kafka_broker: KafkaBroker, tmp_path: Path, langchain_apps: _zygote.Zygote
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    run = _through_the_collector(
        otelcol, bootstrap, tmp_path, LARGE, [INGEST], {}, forked_from=langchain_apps
    )
    assert "exceeds max message size" not in run.collector_log, run.collector_log[-3000:]

    by_trace: dict[str, list[int]] = defaultdict(list)
    partitions: dict[str, set[int]] = defaultdict(set)
    for message in run.messages:
        assert len(message.value) <= MAX_MESSAGE_BYTES
        assert {span.trace_id for span in decode_message(message.value)} == {message.key.decode()}
        by_trace[message.key.decode()].append(len(message.value))
        partitions[message.key.decode()].add(message.partition)
    assert set(by_trace) == set(run.runs), by_trace
    # Each trace is larger than a message may be: written in parts, all on its partition.
    assert all(sum(sizes) > MAX_MESSAGE_BYTES and len(sizes) > 1 for sizes in by_trace.values()), by_trace
    assert all(len(held) == 1 for held in partitions.values()), partitions
    _assert_scored(bootstrap, run, ["retriever"] * LARGE)


def test_a_pipeline_of_the_backend_s_own_leaves_kafka_every_span(
    otelcol: Path, kafka_broker: KafkaBroker, tmp_path: Path, langchain_apps: _zygote.Zygote
) -> None:
    """docs/examples/collector_backend.yaml after the ingest config, its backend a file (a third --config,
    merged over it, swaps the OTLP exporter for a file exporter in that pipeline)."""
    swap, exported = file_backend(tmp_path, "traces/backend")
    bootstrap = kafka_broker.bootstrap_servers
    configs = [INGEST, DOCS / "examples" / "collector_backend.yaml", swap]
    run = _through_the_collector(
        otelcol,
        bootstrap,
        tmp_path,
        3,
        configs,
        {"OTLP_BACKEND_ENDPOINT": f"http://127.0.0.1:{free_port()}"},
        forked_from=langchain_apps,
    )
    in_kafka = {span.span_id for message in run.messages for span in decode_message(message.value)}
    in_backend = {span["spanId"] for span in file_exporter_spans(exported)}
    assert in_kafka and in_kafka == in_backend
    _assert_scored(bootstrap, run, ["retriever"] * 3)


def test_documents_a_search_put_inline_after_context_in_the_prompt_are_read(
    otelcol: Path, kafka_broker: KafkaBroker, tmp_path: Path, langchain_apps: _zygote.Zygote
) -> None:
    """LangChain's RAG tutorial: a vector store search outside any Runnable (no RETRIEVER span), its documents
    pasted into LangChain hub's rlm/rag-prompt after "Context: " on the label's line. Read as one document of
    the prompt (docs/integrations/index.md#documents-in-the-prompt); it was skipped as empty_context."""
    bootstrap = kafka_broker.bootstrap_servers
    run = _through_the_collector(
        otelcol, bootstrap, tmp_path, 3, [INGEST], {}, shape="prompt", forked_from=langchain_apps
    )
    _assert_scored(bootstrap, run, ["prompt"])


@pytest.mark.parametrize(
    ("setting", "shape"),
    [("OPENINFERENCE_HIDE_OUTPUTS", "retriever"), ("OPENINFERENCE_HIDE_RETRIEVAL_DOCUMENTS", "unlabelled")],
)
def test_content_the_instrumentation_hides_is_skipped_naming_the_setting(
    otelcol: Path,
    kafka_broker: KafkaBroker,
    tmp_path: Path,
    langchain_apps: _zygote.Zygote,
    caplog: pytest.LogCaptureFixture,
    setting: str,
    shape: str,
) -> None:
    """OPENINFERENCE_HIDE_OUTPUTS masks `output.value` and the documents' content as `__REDACTED__` and leaves
    the LLM calls' output messages out; OPENINFERENCE_HIDE_RETRIEVAL_DOCUMENTS masks the documents, which
    this app's prompt holds under no label: nothing to judge. The mask was judged as the answer (found
    faithful whatever the model said), or as the documents (every answer flagged)."""
    bootstrap = kafka_broker.bootstrap_servers
    run = _through_the_collector(
        otelcol,
        bootstrap,
        tmp_path,
        3,
        [INGEST],
        {},
        shape=shape,
        app_settings={setting: "true"},
        forked_from=langchain_apps,
    )
    seen, stats = _consume(bootstrap, run)
    assert seen == []
    assert dict(stats.skipped) == {ExtractSkip.CONTENT_NOT_CAPTURED: 2}
    [said] = [r.getMessage() for r in caplog.records if "not scored (content_not_captured)" in r.getMessage()]
    assert "OpenInference's __REDACTED__ mask" in said and f"({setting}=true" in said, said


def test_documents_the_instrumentation_hides_are_never_judged_as_text(
    otelcol: Path, kafka_broker: KafkaBroker, tmp_path: Path, langchain_apps: _zygote.Zygote
) -> None:
    """OPENINFERENCE_HIDE_RETRIEVAL_DOCUMENTS masks the retriever's documents: the faithful answer was
    flagged, judged against `__REDACTED__`. The documents the app also put into its prompt, under a label, are
    read."""
    bootstrap = kafka_broker.bootstrap_servers
    hide = {"OPENINFERENCE_HIDE_RETRIEVAL_DOCUMENTS": "true"}
    run = _through_the_collector(
        otelcol, bootstrap, tmp_path, 3, [INGEST], {}, app_settings=hide, forked_from=langchain_apps
    )
    _assert_scored(bootstrap, run, ["instructions"])


def test_a_question_the_instrumentation_hides_is_judged_without_it(
    otelcol: Path, kafka_broker: KafkaBroker, tmp_path: Path, langchain_apps: _zygote.Zygote
) -> None:
    """OPENINFERENCE_HIDE_INPUTS masks `input.value` and leaves the model's input messages out: faithfulness
    is judged without the question, the record saying so (the mask was read as the question)."""
    bootstrap = kafka_broker.bootstrap_servers
    hide = {"OPENINFERENCE_HIDE_INPUTS": "true"}
    run = _through_the_collector(
        otelcol, bootstrap, tmp_path, 3, [INGEST], {}, app_settings=hide, forked_from=langchain_apps
    )
    seen, _ = _consume(bootstrap, run)
    assert {r.trace_id: r.label for r in seen} == {
        trace_id: "faithful" if faithful else "hallucinated" for trace_id, faithful in run.runs.items()
    }
    assert {(r.details["question_recorded"], r.details["question_missing"]) for r in seen} == {
        (False, "the question is a mask (__REDACTED__): judged without it")
    }


LLAMAINDEX_APP = """
import json, sys, urllib.request

from _openai_server import MODEL, FakeOpenAI
from llama_index.core import Document, Settings, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.llms.openai import OpenAI
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult


class OTLPHTTP(SpanExporter):
    def export(self, spans):
        request = urllib.request.Request(
            sys.argv[1] + "/v1/traces", data=encode_spans(spans).SerializeToString(),
            headers={"Content-Type": "application/x-protobuf"}, method="POST",
        )
        urllib.request.urlopen(request, timeout=30).close()
        return SpanExportResult.SUCCESS


provider = TracerProvider(resource=Resource.create({"service.name": "support-bot-llamaindex"}))
provider.add_span_processor(BatchSpanProcessor(OTLPHTTP()))
LlamaIndexInstrumentor().instrument(tracer_provider=provider)
with FakeOpenAI() as server:
    Settings.llm = OpenAI(model=MODEL, api_base=server.base_url, api_key="sk-fake", max_retries=0)
    Settings.embed_model = MockEmbedding(embed_dim=8)
    # Indexed at start, as many apps do: LlamaIndex traces the ingestion too.
    index = VectorStoreIndex.from_documents(
        [Document(text="Refunds are accepted within 30 days of purchase with the receipt."),
         Document(text="The Aurora X2 weighs 1.2 kg.")]
    )
    server.script("Refunds are accepted within 30 days of purchase.")
    index.as_query_engine(similarity_top_k=int(sys.argv[2])).query("How long do I have to return an item?")
provider.force_flush()
print(json.dumps({}))
"""


def test_a_llamaindex_app_s_indexing_at_start_is_no_interaction(
    otelcol: Path, kafka_broker: KafkaBroker, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """LlamaIndex traces its ingestion (`VectorStoreIndex.from_documents`: a `SentenceSplitter.__call__` CHAIN
    over the documents, returning nodes): it was skipped as `missing_answer`, a warning at every start naming
    a span that never had an answer to give. It is counted with the traces that hold no interaction."""
    bootstrap = kafka_broker.bootstrap_servers
    app = ("llamaindex", LLAMAINDEX_APP)
    run = _through_the_collector(otelcol, bootstrap, tmp_path, 2, [INGEST], {}, app=app)
    seen, stats = _consume(bootstrap, run)
    assert [(r.route, r.label) for r in seen] == [("RetrieverQueryEngine.query", "faithful")]
    assert set(stats.skipped) == {ExtractSkip.NOT_RAG}, stats.skipped
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert not [message for message in warned if "SentenceSplitter" in message], warned
