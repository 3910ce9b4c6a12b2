"""Agent-run signals: what an agent did in one run, read from the record's `run` (`tracescore.model.Run`)
with no judge call, each a metric with a score in 0..1, a label and a reason.

- `tool_errors`: tool calls that failed, and whether the answer went on as if they had not.
- `ungrounded_answer`: an answer with claims, but no retrieval and no usable tool result in the run.
- `unused_tool_results`: tool results the answer used none of.
- `repeated_tool_calls`: the same tool called again with the same arguments after it had answered.
- `run_budget`: steps, tool calls and tokens of the run, against a budget.

Every one is `not_applicable` on a record without a run (no tool or LLM call was recorded). A run keeps at
most `MAX_RUN_TOOL_CALLS` tool calls; the signals look at those, and say so when there were more.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from tracescore._plural import counted
from tracescore.model import MAX_RUN_TOOL_CALLS, MetricResult, RagRecord, Run, RunToolCall
from tracescore.score._segment import split_sentences
from tracescore.score.judges._offline import answer_claims
from tracescore.score.judges._offline_text import keys
from tracescore.score.judges._protocol import Judge
from tracescore.score.metrics._analysis import AnalysisInput
from tracescore.score.metrics._custom import NO_RUN

__all__ = [
    "RUN_SIGNALS",
    "RepeatedToolCalls",
    "RunBudget",
    "ToolErrors",
    "UngroundedAnswer",
    "UnusedToolResults",
]

# An answer that tells the user something went wrong (or that it cannot answer) did not go on as if
# the tool had worked.
_ACKNOWLEDGES = re.compile(
    r"\b(?:error|errors|fail(?:ed|s|ure)?|unable|could ?n[o']t|can ?n[o']?t|not (?:available|reachable|"
    r"able)|unavailable|sorry|unfortunately|try again|went wrong|problem|timed? ?out)\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"\w+")
_CLIP = 160


def _run_of(name: str, record: RagRecord, judge: Judge, *, needs_tools: bool = False) -> Run | MetricResult:
    """The record's run, or why metric `name` does not apply: no run, or no tool call (`needs_tools`)."""
    if record.run is None:
        return MetricResult.not_applicable(name, NO_RUN, judge=judge.name)
    if needs_tools and not record.run.tool_calls_total:
        return MetricResult.not_applicable(name, "the run called no tool", judge=judge.name)
    return record.run


def _result(
    name: str, judge: Judge, run: Run, score: float, label: str, reason: str, **details: Any
) -> MetricResult:
    """An OK result; a run with more tool calls than its view keeps says the signal saw only those."""
    result = MetricResult(
        metric=name,
        score=score,
        label=label,
        reason=reason,
        judge=judge.name,
        details={"tool_calls": run.tool_calls_total, "omitted_tool_calls": run.omitted_tool_calls, **details},
    )
    if run.omitted_tool_calls:
        result.warnings.append(
            f"the run made {run.tool_calls_total} tool calls; the first {MAX_RUN_TOOL_CALLS} were examined"
        )
    return result


def _call(call: RunToolCall, **extra: Any) -> dict[str, Any]:
    return {"name": call.name, "arguments": _clip(call.arguments), "span_id": call.span_id, **extra}


def _clip(text: str | None) -> str | None:
    return text if text is None or len(text) <= _CLIP else text[: _CLIP - 1] + "…"


def _usable(run: Run) -> list[RunToolCall]:
    """The calls that worked and returned something."""
    return [c for c in run.tool_calls if c.ok and c.result and c.result.strip()]


def _words(text: str) -> list[str]:
    return _WORD.findall(text.casefold())


def _claims(record: RagRecord) -> list[str]:
    """The answer's sentences that state something beyond the question (refusals and greetings do not):
    the offline judge's claims, without a model."""
    analysed = answer_claims(
        AnalysisInput(question=record.query, answer_sentences=split_sentences(record.answer))
    )
    asked = keys(record.query or "")
    return [claim for group in analysed["sentences"] for claim in group["claims"] if keys(claim) - asked]


class ToolErrors:
    """Failed tool calls (span status ERROR, an error recorded, a result that reports one) and what the
    answer made of them: 1.0 `no_failures` or `recovered` (the same tool answered on a later call), 0.5
    `acknowledged` (the answer says something went wrong or that it cannot answer), 0.0 `ignored` (the
    answer went on as if the calls had worked)."""

    name = "tool_errors"
    uses_judge = False  # read from the run: the same under any judge

    async def score(self, record: RagRecord, judge: Judge) -> MetricResult:
        run = _run_of(self.name, record, judge, needs_tools=True)
        if isinstance(run, MetricResult):
            return run
        if not run.failed_tool_calls:
            reason = f"none of {run.tool_calls_total} tool calls failed"
            return _result(self.name, judge, run, 1.0, "no_failures", reason, failed_tool_calls=0)
        calls = run.tool_calls
        failed = [(i, c) for i, c in enumerate(calls) if not c.ok]
        recovered = bool(failed) and all(
            any(later.ok and later.name == c.name for later in calls[i + 1 :]) for i, c in failed
        )
        names = ", ".join(sorted({c.name for _, c in failed}))
        what = f"{run.failed_tool_calls} of {run.tool_calls_total} tool calls failed ({names})"
        if recovered:
            score, label, reason = 1.0, "recovered", f"{what}; each tool answered on a later call"
        elif _ACKNOWLEDGES.search(record.answer):
            score, label, reason = 0.5, "acknowledged", f"{what}; the answer says so"
        else:
            score, label, reason = 0.0, "ignored", f"{what}; the answer goes on as if they had worked"
        listed = [_call(c, error=c.error) for _, c in failed]
        return _result(
            self.name,
            judge,
            run,
            score,
            label,
            reason,
            failed_tool_calls=run.failed_tool_calls,
            failed=listed,
        )


class UngroundedAnswer:
    """An answer that states something while the run retrieved nothing and no tool gave it a usable
    result: 0.0 `ungrounded`. 1.0 `grounded` when the run retrieved or a tool answered; 1.0 `earlier_turns`
    when the run itself looked nothing up but earlier turns' tool results were kept in its input (a
    follow-up: faithfulness judges it against them). Not applicable to an answer without claims."""

    name = "ungrounded_answer"
    uses_judge = False  # read from the run: the same under any judge

    async def score(self, record: RagRecord, judge: Judge) -> MetricResult:
        run = _run_of(self.name, record, judge)
        if isinstance(run, MetricResult):
            return run
        claims = _claims(record)
        if not claims:
            return MetricResult.not_applicable(
                self.name, "the answer makes no claim beyond the question", judge=judge.name
            )
        answered = _usable(run)
        facts = {"claims": len(claims), "retrievals": run.retrievals, "tool_results": len(answered)}
        if run.retrievals or answered:
            found = f"{counted(run.retrievals, 'retrieval')} and {counted(len(answered), 'tool result')}"
            return _result(
                self.name, judge, run, 1.0, "grounded", f"the run looked its answer up: {found}", **facts
            )
        if run.earlier_turn_documents:
            return _result(
                self.name,
                judge,
                run,
                1.0,
                "earlier_turns",
                "the run looked nothing up; the answer rests on "
                f"{counted(run.earlier_turn_documents, 'earlier turn tool result')} kept in the conversation",
                **facts,
            )
        why = (
            counted(run.failed_tool_calls, "failed tool call") if run.failed_tool_calls else "no tool result"
        )
        return _result(
            self.name,
            judge,
            run,
            0.0,
            "ungrounded",
            f"the answer makes {counted(len(claims), 'claim')}, but the run retrieved nothing and had {why}",
            **facts,
        )


class UnusedToolResults:
    """The share of the run's usable tool results that the answer used: a result is used when the answer
    shares with it a content word the question does not have (a name, a number, a fact's word). 1.0
    `all_used`; below, `unused`, with the calls the answer ignored (wasted, or evidence passed over)."""

    name = "unused_tool_results"
    uses_judge = False  # read from the run: the same under any judge

    async def score(self, record: RagRecord, judge: Judge) -> MetricResult:
        run = _run_of(self.name, record, judge, needs_tools=True)
        if isinstance(run, MetricResult):
            return run
        # A result that is the answer itself (a final-answer tool) is not something the answer could use.
        answer = _words(record.answer)
        results = [c for c in _usable(run) if _words(c.result or "") != answer]
        if not results:
            return MetricResult.not_applicable(
                self.name, "no tool returned a usable result", judge=judge.name
            )
        said = keys(record.answer) - keys(record.query or "")
        unused = [c for c in results if not said & keys(c.result or "")]
        score = 1 - len(unused) / len(results)
        if not unused:
            return _result(
                self.name,
                judge,
                run,
                1.0,
                "all_used",
                f"the answer uses all {counted(len(results), 'tool result')}",
                results=len(results),
                unused=[],
            )
        names = ", ".join(sorted({c.name for c in unused}))
        return _result(
            self.name,
            judge,
            run,
            score,
            "unused",
            f"the answer uses none of {len(unused)} of {counted(len(results), 'tool result')} ({names})",
            results=len(results),
            unused=[_call(c) for c in unused],
        )


def _same_call(call: RunToolCall) -> tuple[str, str]:
    """The tool and its arguments, compared as JSON when they are (key order and spacing do not count)."""
    text = call.arguments or ""
    try:
        text = json.dumps(json.loads(text), sort_keys=True)
    except ValueError:
        text = " ".join(text.split())
    return call.name, text


class RepeatedToolCalls:
    """Calls of a tool with the same arguments it had already answered: 1.0 `no_repeats`; else the share
    of calls that were not repeats, labelled `repeated`, with each repeated call and how often. A call that
    retries one that failed is not a repeat."""

    name = "repeated_tool_calls"
    uses_judge = False  # read from the run: the same under any judge

    async def score(self, record: RagRecord, judge: Judge) -> MetricResult:
        run = _run_of(self.name, record, judge, needs_tools=True)
        if isinstance(run, MetricResult):
            return run
        answered: set[tuple[str, str]] = set()
        repeats: Counter[tuple[str, str]] = Counter()
        for call in run.tool_calls:
            key = _same_call(call)
            if key in answered:
                repeats[key] += 1
            elif call.ok:
                answered.add(key)
        total = len(run.tool_calls)
        if not repeats:
            return _result(
                self.name,
                judge,
                run,
                1.0,
                "no_repeats",
                f"no tool was asked the same twice in {counted(total, 'call')}",
                repeats=[],
            )
        count = sum(repeats.values())
        listed = [
            {"name": n, "arguments": _clip(a), "repeated": times} for (n, a), times in repeats.most_common()
        ]
        return _result(
            self.name,
            judge,
            run,
            1 - count / total,
            "repeated",
            f"{count} of {total} tool calls repeated an earlier call with the same arguments "
            f"({', '.join(sorted({n for n, _ in repeats}))})",
            repeats=listed,
        )


class RunBudget:
    """Steps (LLM calls), tool calls and tokens of the run against a budget: the score is the budget used
    up by the most overspent of steps and tool calls, min(1, budget / used), labelled `within_budget` or
    `over_budget`; the counts (and tokens, when recorded) are in details. The defaults are a starting point,
    not tuned: `max_steps=10` (the OpenAI Agents SDK's default turn limit), `max_tool_calls=25` (LangGraph's
    default recursion limit)."""

    name = "run_budget"
    uses_judge = False  # read from the run: the same under any judge

    def __init__(self, *, max_steps: int = 10, max_tool_calls: int = 25) -> None:
        if max_steps < 1 or max_tool_calls < 1:
            raise ValueError(
                f"budgets must be at least 1, got {max_steps} steps, {max_tool_calls} tool calls"
            )
        self.max_steps = max_steps
        self.max_tool_calls = max_tool_calls

    async def score(self, record: RagRecord, judge: Judge) -> MetricResult:
        run = _run_of(self.name, record, judge)
        if isinstance(run, MetricResult):
            return run
        score = min(
            1.0, self.max_steps / max(run.steps, 1), self.max_tool_calls / max(run.tool_calls_total, 1)
        )
        tokens = (
            f", {run.prompt_tokens or 0} prompt + {run.completion_tokens or 0} completion tokens"
            if run.prompt_tokens is not None or run.completion_tokens is not None
            else ""
        )
        counts = f"{counted(run.steps, 'step')}, {counted(run.tool_calls_total, 'tool call')}{tokens}"
        over = score < 1.0
        return _result(
            self.name,
            judge,
            run,
            score,
            "over_budget" if over else "within_budget",
            f"{counts}; budget {counted(self.max_steps, 'step')}, "
            f"{counted(self.max_tool_calls, 'tool call')}",
            steps=run.steps,
            failed_tool_calls=run.failed_tool_calls,
            prompt_tokens=run.prompt_tokens,
            completion_tokens=run.completion_tokens,
            max_steps=self.max_steps,
            max_tool_calls=self.max_tool_calls,
        )


# The signals by name, as the registry offers them.
RUN_SIGNALS = {
    metric.name: metric
    for metric in (ToolErrors, UngroundedAnswer, UnusedToolResults, RepeatedToolCalls, RunBudget)
}
