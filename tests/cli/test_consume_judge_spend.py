"""`tracescore consume` with an LLM judge, as the one who pays for it reads it: the closing summary says what
the judge cost, per service and selection, the same number the records and the provider count, and how
much of the LLM budget's hour and day it spent; an `unselected` skip with a budget says it was paced, a
`budget` skip that the budget refused it. Through the real broker, the real CLI and the local judge server."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _zygote import run
from service_processes import checkout_env

from tests.consume.kafka_helpers import run_instrumented_app
from tracescore.cli._consume import _budget_line, _unselected_line
from tracescore.consume import ConsumerStats
from tracescore.model import read_evaluation_record
from tracescore.sample import load_sampling_config
from tracescore.testing.judge_server import JudgeServer
from tracescore.testing.kafka_topics import read_topic

# Four answers, one of them unfaithful, as an app's decorated function returns them.
APP = """
DOCS = ["Support answers within 4 hours on weekdays."]
REPLIES = ["Support answers within 4 hours on weekdays."] * 3 + ["Support answers within 10 minutes."]
ask = tracescore.rag(route="/support")(lambda query, contexts, text: text)
for n, text in enumerate(REPLIES):
    ask(f"How fast does support answer? #{n}", DOCS, text)
"""

PRICES = {"TRACESCORE_JUDGE_PROMPT_PRICE_PER_1M": "0.15", "TRACESCORE_JUDGE_COMPLETION_PRICE_PER_1M": "0.60"}


def consume(
    bootstrap: str, prefix: str, server: JudgeServer, group: str, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """`tracescore consume` with the LLM judge and prices, every answer to the judge (a baseline of 1, a
    known spend), until the topic is idle; `env` adds the budget."""
    done = run(
        [sys.executable, "-m", "tracescore.cli", "consume", "--bootstrap-servers", bootstrap,
         "--topic", f"{prefix}.spans", "--group-id", group,
         "--evaluations-topic", f"{prefix}.evaluations", "--dlq-topic", f"{prefix}.dlq",
         "--judge", "openai", "--base-url", server.base_url, "--idle-timeout", "3"],
        env={**checkout_env(), **PRICES, "TRACESCORE_SAMPLING__CASCADE__BASELINE_RATE": "1.0", **env},
        timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done


def budget_line(done: subprocess.CompletedProcess[str]) -> str:
    [line] = [line for line in done.stderr.splitlines() if "LLM budget (this process, UTC):" in line]
    return line


@pytest.mark.kafka
def test_the_summary_says_what_the_llm_judge_cost_per_service_as_the_records_and_the_provider_count(
    bootstrap: str, topic_prefix: str
) -> None:
    """A budget owner ran the cascade with prices and a budget: the summary said `to the LLM judge
    baseline=4` and nothing of tokens, dollars or the budget's hour, the question they ran it to answer."""
    run_instrumented_app(bootstrap, f"{topic_prefix}.spans", APP)
    env = {
        "TRACESCORE_SAMPLING__LLM_BUDGET__TOKENS_PER_HOUR": "1000000",
        "TRACESCORE_SAMPLING__LLM_BUDGET__TOKENS_PER_DAY": "5000000",
    }
    with JudgeServer() as server:
        done = consume(bootstrap, topic_prefix, server, topic_prefix, env)
        provider = server.stats
    assert done.returncode == 0, done.stderr
    records = [read_evaluation_record(m.value) for m in read_topic(bootstrap, f"{topic_prefix}.evaluations")]
    llm = [r for r in records if r.annotator_kind == "LLM"]
    assert len(llm) == 4 and {r.selection for r in llm} == {"baseline"}
    calls = sum(r.usage.calls for r in llm)
    prompt = sum(r.usage.prompt_tokens for r in llm)
    completion = sum(r.usage.completion_tokens for r in llm)
    cost = sum(r.usage.cost_usd for r in llm)
    # What the provider bills is what the summary says: nothing failed, so every call is in a record.
    assert (calls, prompt, completion) == (
        provider.chat_requests,
        provider.prompt_tokens,
        provider.completion_tokens,
    )
    [spent] = [line for line in done.stderr.splitlines() if "LLM judge spent:" in line]
    assert f"{calls} calls, {prompt:,} prompt + {completion:,} completion tokens, ${cost:.4f}" in spent, spent
    assert f"by service: test-app {prompt + completion:,} tokens ${cost:.4f} (baseline " in spent, spent
    budget = budget_line(done)
    # The hour and the day spent the same tokens (unless the run crossed midnight or an hour, rarely).
    hour = re.search(r"hour ([\d,]+) of 1,000,000 tokens", budget)
    day = re.search(r"day ([\d,]+) of 5,000,000 tokens", budget)
    assert hour and day, budget
    assert int(hour.group(1).replace(",", "")) <= prompt + completion
    assert "a restart starts these windows again from 0 (llm_budget.state_path keeps them)" in budget


def _stats(**skips: int) -> ConsumerStats:
    stats = ConsumerStats()
    stats.not_admitted.update(skips)
    return stats


def test_unselected_answers_with_the_budget_not_spent_are_said_to_be_paced() -> None:
    """The walk: 55 answers counted `budget=55` after 11,400 of 20,000 tokens, a backlog read at full speed;
    the docs and the alert called it a spent budget, and a budget owner raised a budget that was not short.
    What the pace held back is `unselected` now, said paced; `budget` is what the budget refused."""
    sampling = load_sampling_config(None, llm_budget={"tokens_per_hour": 20_000, "tokens_per_day": 100_000})
    line = _budget_line(sampling, {"hour": 11_404, "day": 11_404}, _stats(unselected=55))
    assert line is not None
    assert line.startswith("hour 11,404 of 20,000 tokens (57%), day 11,404 of 100,000 tokens (11%)"), line
    assert "; unselected=55 were paced, not refused: the budget had room" in line, line
    assert "; budget=" not in line and "were refused" not in line, line

    spent = _budget_line(sampling, {"hour": 19_900, "day": 19_900}, _stats(unselected=3, budget=55))
    assert spent is not None and "; budget=55 were refused: the budget is spent" in spent, spent
    assert "unselected=3 were paced" in spent, spent
    held = _budget_line(sampling, {"hour": 15_000, "day": 15_000}, _stats(budget=2))
    assert held is not None and "budget=2 were refused: the budget had no room when they came" in held, held
    assert "paced" not in held and "is spent" not in held, held

    kept = load_sampling_config(None, llm_budget={"tokens_per_hour": 20_000, "state_path": "/var/b.json"})
    saved = _budget_line(kept, {"hour": 100, "day": 100}, _stats())
    assert saved == "hour 100 of 20,000 tokens (0%); saved to /var/b.json: a restart goes on from them", saved

    unbounded = load_sampling_config(None)
    assert _budget_line(unbounded, {"hour": 5, "day": 5}, _stats(unselected=189)) is None


@pytest.mark.kafka
def test_with_no_budget_set_the_closing_summary_counts_unselected_never_budget(
    bootstrap: str, topic_prefix: str
) -> None:
    """The walk: no llm_budget, and the summary said `not admitted budget=189`. The unfaithful answer, outside
    the share the cascade sends (here none), is `unselected`, and the summary says no budget held it back."""
    run_instrumented_app(bootstrap, f"{topic_prefix}.spans", APP)
    env = {
        "TRACESCORE_SAMPLING__CASCADE__BASELINE_RATE": "0.0",
        "TRACESCORE_SAMPLING__CASCADE__SHARE": "0.0",
        "TRACESCORE_SAMPLING__CASCADE__LIFT__ENABLED": "false",
    }
    with JudgeServer() as server:
        done = consume(bootstrap, topic_prefix, server, topic_prefix, env)
        assert server.stats.chat_requests == 0
    assert "  sampling: not admitted unselected=1; to the LLM judge none" in done.stderr, done.stderr
    assert "budget=" not in done.stderr and "LLM budget" not in done.stderr, done.stderr
    [said] = [line for line in done.stderr.splitlines() if line.startswith("  cascade: unselected=1 ")]
    assert said.endswith("no llm_budget is set, so no budget held them back"), said


def test_with_no_budget_set_the_summary_says_no_budget_held_the_unselected_back() -> None:
    unbounded = load_sampling_config(None)
    line = _unselected_line(unbounded, _stats(unselected=189))
    assert line is not None and line.startswith(
        "unselected=189 were above the cascade's floor but outside"
    ), line
    assert line.endswith("no llm_budget is set, so no budget held them back"), line
    assert _unselected_line(unbounded, _stats()) is None
    budgeted = load_sampling_config(None, llm_budget={"tokens_per_day": 100_000})
    assert _unselected_line(budgeted, _stats(unselected=189)) is None, "the LLM budget line says it then"


@pytest.mark.kafka
def test_a_restart_with_a_new_budget_goes_on_from_what_the_hour_spent(
    bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    """ "Can I change the budget without losing state?": a restart with a new tokens_per_hour started the
    hour at 0, so each restart could spend another hour's and day's budget. With llm_budget.state_path the
    second run counts the first run's tokens against its new, larger hour."""
    run_instrumented_app(bootstrap, f"{topic_prefix}.spans", APP)
    state = tmp_path / "budget.json"
    budget = {"TRACESCORE_SAMPLING__LLM_BUDGET__STATE_PATH": str(state)}
    started = time.time() // 3600
    with JudgeServer() as server:
        first = consume(
            bootstrap, topic_prefix, server, f"{topic_prefix}.1",
            {**budget, "TRACESCORE_SAMPLING__LLM_BUDGET__TOKENS_PER_HOUR": "1000000"},
        )  # fmt: skip
        spent_first = server.stats.prompt_tokens + server.stats.completion_tokens
        second = consume(  # another group: the same answers again, the same spend again
            bootstrap, topic_prefix, server, f"{topic_prefix}.2",
            {**budget, "TRACESCORE_SAMPLING__LLM_BUDGET__TOKENS_PER_HOUR": "2000000"},
        )  # fmt: skip
        spent_both = server.stats.prompt_tokens + server.stats.completion_tokens
    assert f"saved to {state}: a restart goes on from them" in budget_line(first)
    hour = re.search(r"hour ([\d,]+) of 2,000,000 tokens", budget_line(second))
    assert hour, budget_line(second)
    if time.time() // 3600 != started:
        pytest.skip("the runs straddled the end of a UTC hour: the second one's hour started at 0")
    assert int(hour.group(1).replace(",", "")) == spent_both, budget_line(second)
    assert f"the LLM budget goes on from {state}: {spent_first} tokens spent this UTC hour" in second.stderr
