"""What the model judges cost, per service and selection, for `tracescore consume`'s status line and closing
summary: the first question of whoever pays for the LLM judge ("how much, and for which team?"), which the
records answered only when summed by hand and the metrics not at all."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from tracescore.model import EvaluationRecord, Usage

__all__ = ["JudgeSpend", "describe_budget"]

# The selection of a model judge's record that no sampling policy chose (`--no-cascade`: it scores all).
ALL = "all"


@dataclass
class JudgeSpend:
    """Model-judge usage of the records written, by (service, selection); the offline judge costs nothing
    and is left out. A failed call counts (its record's calls), with the tokens the provider reported."""

    by: dict[tuple[str, str], Usage] = field(default_factory=dict)

    def add(self, record: EvaluationRecord) -> None:
        if not record.usage.calls:
            return
        key = (record.service_name, record.selection or ALL)
        self.by[key] = self.by.get(key, Usage()) + record.usage

    @property
    def total(self) -> Usage:
        return sum(self.by.values(), Usage())

    def describe(self) -> str:
        """`23 calls, 9,978 prompt + 1,426 completion tokens, $0.0024` (no price set: `cost unknown`)."""
        return _usage(self.total, priced=self.priced)

    def by_service(self) -> str:
        """Per service, its tokens and cost and how its tokens split by selection, the costliest first:
        `billing 7,000 tokens $0.0014 (cascade 5,000, baseline 2,000); search ...`."""
        services: dict[str, dict[str, Usage]] = {}
        for (service, selection), usage in self.by.items():
            services.setdefault(service, {})[selection] = usage
        totals = {service: sum(selections.values(), Usage()) for service, selections in services.items()}
        parts = []
        for service, usage in sorted(totals.items(), key=lambda kv: -_tokens(kv[1])):
            cost = f" ${usage.cost_usd:.4f}" if self.priced else ""
            ranked = sorted(services[service].items(), key=lambda kv: -_tokens(kv[1]))
            split = ", ".join(f"{selection} {_tokens(u):,}" for selection, u in ranked)
            parts.append(f"{service or '(no service)'} {_tokens(usage):,} tokens{cost} ({split})")
        return "; ".join(parts)

    @property
    def priced(self) -> bool:
        """Whether a price was set (TRACESCORE_JUDGE_*_PRICE_PER_1M): without, every cost reads 0."""
        return self.total.cost_usd > 0


def describe_budget(used: Mapping[str, int], limits: Mapping[str, int | None]) -> str | None:
    """`hour 11,404 of 20,000 tokens (57%), day 11,404 of 100,000 (11%)`: what the LLM budget's windows (UTC
    clock hour and day) have spent; None without a budget."""
    parts = [
        f"{window} {used.get(window, 0):,} of {limit:,} tokens ({used.get(window, 0) / limit:.0%})"
        if limit
        else f"{window} {used.get(window, 0):,} of 0 tokens"
        for window, limit in limits.items()
        if limit is not None
    ]
    return ", ".join(parts) or None


def _tokens(usage: Usage) -> int:
    return usage.prompt_tokens + usage.completion_tokens


def _usage(usage: Usage, *, priced: bool) -> str:
    calls = "call" if usage.calls == 1 else "calls"
    cost = f"${usage.cost_usd:.4f}" if priced else "cost unknown (no price: TRACESCORE_JUDGE_*_PRICE_PER_1M)"
    return (
        f"{usage.calls:,} {calls}, {usage.prompt_tokens:,} prompt + {usage.completion_tokens:,} completion "
        f"tokens, {cost}"
    )
