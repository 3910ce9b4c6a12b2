"""`tracescore consume`'s closing summary: the assembly counts line, whatever the counts were counted by."""

from __future__ import annotations

from tracescore.cli._consume import assembly_summary
from tracescore.consume import AssemblyCount, ConsumerStats


def test_assembly_counts_given_by_their_plain_names_are_summed_and_summarised() -> None:
    """`ConsumerStats.assembly` is public: a count added by its plain name ("late_spans", the word the summary
    and the docs show) was kept under a plain string, and the closing summary, which asks each key whether
    it says why traces were read, ended the run in an AttributeError instead of printing its counts."""
    stats = ConsumerStats()
    stats.assembly["late_spans"] += 2
    stats.assembly.update({"duplicate_spans": 1, "released_complete": 5})
    stats.assembly.update({AssemblyCount.LATE_SPANS: 1})
    stats.assembly.update(["rescored"])
    assert all(type(key) is AssemblyCount for key in stats.assembly), list(stats.assembly)
    assert stats.assembly[AssemblyCount.LATE_SPANS] == 3
    assert assembly_summary(stats.assembly) == "duplicate_spans=1, late_spans=3, rescored=1"
