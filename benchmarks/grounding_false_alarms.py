"""False alarms and misses on the recorded conversations, without and with grounding across turns, in one run
through a real broker: `tracescore consume` (offline judge) scores every recorded trace of the conversational
sources and writes each turn's documents; `tracescore conversations` then runs twice on its records, first
without grounding (`evidence_topic` empty: the verdicts as each trace alone supports them), then with it (its
revisions read back, as every reader of the evaluations topic does).

    python benchmarks/grounding_false_alarms.py [--source NAME ...] [--infer-conversations [auto|true|false]]

`--infer-conversations` is `tracescore consume`'s `infer_conversations`, which infers the conversation of a
turn no app named from the question/answer history its prompt resent: `auto` (its default, and the default
here: per service, once a follow-up resends a turn the consumer read), `true` (`--infer-conversations`
alone: every service from the start) or `false` (never).

The truth is the manifest's (tests/extract/fixtures/<source>/manifest.json, `faithful`: whether the app's
answer was faithful to what it was given, its own turn's retrieval or an earlier one's). Nothing here is
tuned: no threshold or rule was chosen on these traces (the rule is general: a claim its own documents gave
no evidence for, judged again against the same user's earlier turns' documents). The last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from _runs import read_values

from tracescore.consume import ConsumerSettings, EvaluationConsumer, decode_message
from tracescore.conversations import ConversationsConfig, ConversationService
from tracescore.model import ConversationRecord, EvaluationRecord, is_flagged, read_evaluation_record
from tracescore.score import OfflineJudge
from tracescore.score.metrics import Faithfulness
from tracescore.testing.kafka_broker import KafkaBroker
from tracescore.testing.kafka_topics import input_producer

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "extract" / "fixtures"
# Every recorded source whose traces are turns of a conversation (a session id): issue 31's three-turn
# chats in both history forms, the same chats on the producers read since (Spring AI 1.1 and 2.0, Logfire,
# OpenLIT, Strands Agents, Mastra, and Mastra with its memory keeping the history; Genkit, Agno, BeeAI,
# Microsoft Agent Framework, and Agent Framework on the Responses API with the history kept by the service,
# under the app's session.id or under no id; the OpenAI Agents SDK and smolagents; LangSmith's OTel export on
# a LangGraph agent, the Langfuse v3 SDK's decorators; OpenLLMetry under its association properties, Semantic
# Kernel's thread under the app's session.id or under none; a LangChain chat naming no conversation whose
# app resends only its last two turns, trim_messages, and one on LlamaIndex whose ChatMemoryBuffer's token
# limit decides how many), and the conversations recorded before them.
SOURCES = (
    "autogen_conversation", "google_adk", "google_adk_v1", "haystack_conversation", "haystack_otel",
    "mlflow_conversation", "openinference_openai_conversation", "vercel_ai_conversation",
    "spring_ai_conversation", "logfire_conversation", "openlit_conversation", "strands_conversation",
    "mastra_conversation", "spring_ai2_conversation", "mastra_memory",
    "langchain_stream_history", "langfuse", "langfuse_v3", "pydantic_ai", "pydantic_ai_conversation",
    "autogen", "genkit_conversation", "agno_conversation", "beeai_conversation",
    "agent_framework_conversation", "agent_framework_responses", "langchain_js_conversation",
    "langgraph_conversation", "llamaindex_conversation", "openai_agents_conversation",
    "smolagents_conversation", "langsmith_conversation", "langfuse_v3_conversation",
    "openllmetry_conversation", "semantic_kernel_conversation", "langchain_window_conversation",
    "llamaindex_window_conversation",
)  # fmt: skip


@dataclass
class Replay:
    """Chats replayed together: no two of them share a conversation (service and session id)."""

    messages: list[tuple[str, bytes]] = field(default_factory=list)  # (trace id, payload)
    chats: dict[tuple[str, str], str] = field(default_factory=dict)  # conversation -> its chat


def recorded(sources: list[str]) -> tuple[list[Replay], dict[str, tuple[str, bool]]]:
    """The replays, and each trace's (source, faithful). The recordings of one app (Haystack under
    OpenInference and under its own tracer, ADK's schemas) reuse its chats' service and session ids: they go
    to different replays, else two chats would be one conversation. A source recorded before issue 31 (no
    `conversation` entry) is one chat per service."""
    replays: list[Replay] = []
    truth: dict[str, tuple[str, bool]] = {}
    for source in sources:
        folder = FIXTURES / source
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        for file_name, entry in sorted(manifest["scenarios"].items()):
            trace_id = entry["trace_id"]
            truth[trace_id] = (source, bool(entry["faithful"]))
            scenarios[trace_id] = entry["scenario"]
            parts = [(folder / m["file"]).read_bytes() for m in entry.get("messages", [])]
            parts = parts or [(folder / file_name).read_bytes()]
            if "logs" in entry:  # its log records (Semantic Kernel's messages), as the Collector writes them
                parts.append((folder / entry["logs"]["file"]).read_bytes())
            conversation = entry.get("conversation")
            service = decode_message(parts[0])[0].service_name
            chat = f"{source}/{conversation['name']}" if conversation else source
            key = (service, conversation["session_id"] if conversation else "")
            replay = next((r for r in replays if r.chats.get(key, chat) == chat), None)
            if replay is None:
                replays.append(replay := Replay())
            replay.chats[key] = chat
            replay.messages += [(trace_id, part) for part in parts]
    return replays, truth


# Each trace's scenario (the manifest's): where the false alarms left are.
scenarios: dict[str, str] = {}
Counted = tuple[str, str, Counter[str]]  # (source, what, counts)


# Longer than a replay takes to read: a sliding window's turn waits (at most quiet_seconds) for the hops
# before it, each a tail written behind the replay's records and read after them (at 1 s the sixth turn of
# the LangChain window chat was left apart replayed alone, at 5 s in the full replay turns 5 and 6 were).
QUIET_SECONDS = 30.0


def conversations(bootstrap: str, prefix: str, run: str, grounding: bool) -> list[ConversationRecord]:
    config = ConversationsConfig(
        bootstrap_servers=bootstrap, evaluations_topic=f"{prefix}.evaluations",
        conversations_topic=f"{prefix}.{run}.conversations", turns_topic=f"{prefix}.{run}.turns",
        state_topic=f"{prefix}.{run}.state", spans_topic=None, group_id=f"{prefix}.{run}",
        evidence_topic=f"{prefix}.evidence" if grounding else None, quiet_seconds=QUIET_SECONDS,
        tick_seconds=0.2,
    )  # fmt: skip
    written: list[ConversationRecord] = []
    ConversationService(config, on_record=written.append).run(idle_timeout_s=4)
    latest: dict[tuple[str, str, str], ConversationRecord] = {}
    for record in written:
        key = (record.service_name, record.conversation_id, record.judge)
        if key not in latest or latest[key].revision < record.revision:
            latest[key] = record
    return list(latest.values())


def turn_counts(records: dict[str, EvaluationRecord], truth: dict[str, tuple[str, bool]]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for trace_id, record in records.items():
        if record.score is None:
            continue
        faithful, flagged = truth[trace_id][1], is_flagged({"score": record.score, "label": record.label})
        counts["faithful" if faithful else "hallucinated"] += 1
        counts[
            "false_alarms" if faithful and flagged else "misses" if not faithful and not flagged else "right"
        ] += 1
        if faithful != (not flagged):
            counts[f"{'false alarm' if faithful else 'miss'}: {scenarios[trace_id]}"] += 1
    return counts


def conversation_counts(
    records: list[ConversationRecord], truth: dict[str, tuple[str, bool]]
) -> Counter[str]:
    counts: Counter[str] = Counter()
    for record in records:
        if record.judge != "offline" or record.turns_scored == 0:
            continue
        faithful = all(truth[t][1] for t in record.trace_ids if t in truth)
        flagged = record.turns_flagged > 0
        counts["faithful" if faithful else "hallucinated"] += 1
        counts[
            "false_alarms" if faithful and flagged else "misses" if not faithful and not flagged else "right"
        ] += 1
    return counts


def measure(
    bootstrap: str, n: int, replay: Replay, truth: dict[str, tuple[str, bool]], infer: str = "auto"
) -> list[Counted]:
    """One replay: its records and conversation records, as (source, what, counts)."""
    prefix = f"bench-grounding-{n}"
    producer = input_producer(bootstrap, [f"{prefix}.spans"], acks="all")
    for trace_id, payload in replay.messages:
        producer.send(f"{prefix}.spans", key=trace_id.encode(), value=payload)
    producer.flush()
    producer.close()
    settings = ConsumerSettings(
        bootstrap_servers=bootstrap, topic=f"{prefix}.spans", group_id=f"{prefix}.consume",
        evaluations_topic=f"{prefix}.evaluations", dlq_topic=f"{prefix}.dlq",
        evaluation_spans_topic=f"{prefix}.evaluation-spans", conversation_evidence_topic=f"{prefix}.evidence",
        idle_timeout_s=3, infer_conversations=infer if infer == "auto" else infer == "true",
    )  # fmt: skip
    EvaluationConsumer(settings, judge=OfflineJudge(), metrics=[Faithfulness()]).run()
    without = conversations(bootstrap, prefix, "without", grounding=False)
    with_grounding = conversations(bootstrap, prefix, "with", grounding=True)
    first: dict[str, EvaluationRecord] = {}
    latest: dict[str, EvaluationRecord] = {}
    for value in read_values(bootstrap, f"{prefix}.evaluations"):
        record = read_evaluation_record(value)
        if record.revision == 0:
            first[record.trace_id] = record
        if record.trace_id not in latest or latest[record.trace_id].revision < record.revision:
            latest[record.trace_id] = record
    out: list[Counted] = []
    for source in sorted({truth[t][0] for t, _ in replay.messages}):
        mine = {t for t, (s, _) in truth.items() if s == source}
        conversations_of = [
            c for r in (without, with_grounding) for c in r if any(t in mine for t in c.trace_ids)
        ]
        out += [
            (source, "turns_before", turn_counts({t: r for t, r in first.items() if t in mine}, truth)),
            (source, "turns_after", turn_counts({t: r for t, r in latest.items() if t in mine}, truth)),
            (
                source,
                "conversations_before",
                conversation_counts([c for c in conversations_of if c in without], truth),
            ),
            (
                source,
                "conversations_after",
                conversation_counts([c for c in conversations_of if c in with_grounding], truth),
            ),
        ]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", action="append", choices=SOURCES, help="(default: all)")
    parser.add_argument(
        "--infer-conversations",
        nargs="?",
        const="true",
        default="auto",
        choices=("auto", "true", "false"),
        help="consume's infer_conversations (default: auto, the consumer's default; alone: true)",
    )
    args = parser.parse_args(argv)
    by_source: dict[str, dict[str, Counter[str]]] = {}
    replays, truth = recorded(args.source or list(SOURCES))
    with KafkaBroker() as broker:
        for n, replay in enumerate(replays):
            measured = measure(broker.bootstrap_servers, n, replay, truth, args.infer_conversations)
            for source, what, counts in measured:
                by_source.setdefault(source, {}).setdefault(what, Counter()).update(counts)
    total: dict[str, Counter[str]] = {}
    for counts in by_source.values():
        for name, counter in counts.items():
            total.setdefault(name, Counter()).update(counter)
    print(f"infer_conversations {args.infer_conversations}")
    print(f"{'':28}{'faithful':>9}{'halluc.':>9}{'false alarms':>14}{'misses':>8}")
    for name in ("turns_before", "turns_after", "conversations_before", "conversations_after"):
        c = total[name]
        print(f"{name:28}{c['faithful']:>9}{c['hallucinated']:>9}{c['false_alarms']:>14}{c['misses']:>8}")
    for source, counts in by_source.items():
        before, after = counts["turns_before"], counts["turns_after"]
        conv_before, conv_after = counts["conversations_before"], counts["conversations_after"]
        print(
            f"  {source:34} turns: false alarms {before['false_alarms']} -> {after['false_alarms']}, "
            f"misses {before['misses']} -> {after['misses']}; conversations: false alarms "
            f"{conv_before['false_alarms']} -> {conv_after['false_alarms']}, "
            f"misses {conv_before['misses']} -> {conv_after['misses']}"
        )
    left = {k: v for k, v in total["turns_after"].items() if ":" in k}
    print("turns left wrong after grounding, by scenario:", ", ".join(f"{k} x{v}" for k, v in left.items()))
    result = {"total": total, "by_source": by_source}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
