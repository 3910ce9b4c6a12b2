"""What grounding across turns costs one `tracescore conversations` instance: the memory its held turns take
per character counted against `max_evidence_chars`, and the offline judge's time to judge a flagged
follow-up again against its earlier turns, as a ratio to scoring that turn in the first place (both in
this run).

    python benchmarks/grounding_cost.py [--conversations 20000] [--documents 3] [--chars 500]

Each conversation: three turns of `--documents` documents of `--chars` characters, the third flagged with
one claim its own documents do not support (the price only turn 1 retrieved). The last line is JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import tracemalloc
from collections import Counter
from datetime import UTC, datetime, timedelta

from _runs import report

from tracescore.conversations import ConversationsConfig
from tracescore.conversations._grounder import Grounder
from tracescore.conversations._grounding import GroundingStats
from tracescore.emit import evaluation_record, turn_evidence
from tracescore.model import DecodedSpan, Interaction, RagRecord
from tracescore.score import OfflineJudge, evaluate
from tracescore.score.metrics import Faithfulness, evaluate_record

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
FILLER = "Plans are billed monthly and can be cancelled at any time from the account page. "


def turn(conversation: int, n: int, documents: int, chars: int) -> Interaction:
    facts = {
        1: "Aurora Basic costs 9 euros a month.",
        2: "Basic includes email support.",
        3: "The weekend add-on costs the same as the Basic plan.",
    }
    texts = tuple((facts[n] + " " + FILLER * (chars // len(FILLER) + 1))[:chars] for _ in range(documents))
    answers = {1: "Basic costs 9 euros.", 2: "Email support.", 3: "The weekend add-on costs 9 euros a month."}
    started = T0 + timedelta(seconds=10 * conversation + n)
    span = DecodedSpan(
        f"{conversation:028x}{n:04x}", f"{n:016x}", "turn", "chat", "app", {},
        int(started.timestamp() * 1e9) + 1, start_time_unix_nano=int(started.timestamp() * 1e9),
    )  # fmt: skip
    record = RagRecord(query="And the weekend add-on?", contexts=texts, answer=answers[n])
    return Interaction(span=span, record=record, route="/chat", session_id=f"c-{conversation}", user_id="u")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=20_000)
    parser.add_argument("--documents", type=int, default=3)
    parser.add_argument("--chars", type=int, default=500)
    args = parser.parse_args(argv)
    config = ConversationsConfig(max_evidence_chars=10**12)
    grounder = Grounder(config, GroundingStats(), llm_judge=None, recorded=lambda key: [])
    flagged = [turn(0, 3, args.documents, args.chars)]
    [result] = evaluate(flagged[0].record, ["faithfulness"])
    assert result.label == "hallucinated", "the follow-up alone: not supported"
    shape = evaluation_record(flagged[0], result, None)
    tracemalloc.start()
    offset = 0
    for c in range(args.conversations):
        for n in (1, 2, 3):
            interaction = turn(c, n, args.documents, args.chars)
            evidence = turn_evidence(interaction, 16_000)
            assert evidence is not None
            grounder.store.evidence(evidence, c % 6, offset, 0)
            offset += 1
        third = shape.model_copy(update={"trace_id": f"{c:028x}{3:04x}", "session_id": f"c-{c}"})
        grounder.store.record(third, c % 6, offset, 0)
        offset += 1
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    chars = grounder.store.chars

    # Judging again (the offline judge, in the service's loop) against scoring the turn first (consume).
    sample = min(200, args.conversations)
    records = [turn(c, 3, args.documents, args.chars).record for c in range(sample)]

    async def first_scoring() -> None:  # as consume scores them: on one loop, together
        judge, metrics = OfflineJudge(), [Faithfulness()]
        await asyncio.gather(*(evaluate_record(record, metrics, judge) for record in records))

    started = time.process_time()
    asyncio.run(first_scoring())
    first_s = (time.process_time() - started) / sample
    again_s = []
    counts: Counter[str] = Counter()
    for number, held_conversation in enumerate(grounder.store.held()):
        held_conversation.recheck = number < sample  # the first `sample` flagged follow-ups
    started = time.process_time()
    while any(h.recheck for h in grounder.store.held()):  # a tick takes a bounded number of conversations
        grounder.tick(T0, lambda partition: 1)  # read up: past every turn's arrival (0), none forgotten
    again_s.append((time.process_time() - started) / sample)
    counts.update(grounder.stats.counts)
    grounder.close()
    result_json = {
        "conversations": args.conversations,
        "turn_chars": args.documents * args.chars,
        "held_mb": round(held / 2**20, 1),
        "bytes_per_counted_char": round(held / chars, 2),
        "counted_chars_per_conversation": round(chars / args.conversations),
        "grounded": counts["grounded"],
        "rejudge_over_first_scoring": round(statistics.mean(again_s) / first_s, 2),
    }
    r = result_json
    report(
        f"{args.conversations} conversations of 3 turns ({r['turn_chars']} characters of documents a turn): "
        f"{r['held_mb']} MB held, {r['bytes_per_counted_char']} bytes per character counted against "
        f"max_evidence_chars; judging a flagged follow-up again costs {r['rejudge_over_first_scoring']}x "
        f"scoring it first ({counts['grounded']} of {sample} grounded)",
        result_json,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
