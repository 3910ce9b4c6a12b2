"""Strands Agents' multi-agent runs, recorded from the real library (fixtures/strands_multiagent): an
orchestrator calling a researcher agent as a tool, a Swarm and a Graph are each one interaction, on the span
whose answer the user reads, judged against what the researcher's search returned; what one agent hands
another (its answer as a tool result, a handoff message) is never evidence for the answer. A Graph whose last
nodes run side by side answers with all of them, as its app shows them."""

from __future__ import annotations

import pytest
from recorded import Recording, extracted, read_as_run, recordings, spans_of

RECORDED = {r.scenario: r for r in recordings() if r.source == "strands_multiagent"}
# The researcher's answer, handed to the agent that answers the user (scenarios/strands_multiagent.py).
NOTES = "Research notes: "


@pytest.mark.parametrize("recording", RECORDED.values(), ids=lambda r: r.scenario)
def test_a_multi_agent_run_is_one_interaction_on_the_span_the_user_reads(recording: Recording) -> None:
    # The one interaction, on that span (orchestrator, invoke_swarm, invoke_graph), with the app's question
    # (a Swarm's and a Graph's task, not the prompt a node was given), answer (the last node's: a Swarm's
    # and a Graph's span records none) and documents only.
    interaction = read_as_run(recording, "strands", recording.interaction_span or "")
    assert extracted(spans_of(recording)).skips == []  # no node scored or skipped on its own
    assert not any(NOTES in context for context in interaction.record.contexts)
    run = interaction.run
    assert run is not None and "search_docs" in [call.name for call in run.tool_calls]


@pytest.mark.parametrize("pattern", ["as_tool", "swarm", "graph"])
def test_an_invented_answer_the_researcher_handed_on_is_judged_against_its_search(pattern: str) -> None:
    """The researcher invented the answer and handed it on (a tool result, a handoff, a node's output): the
    answer is judged against what search_docs returned, where it is not supported."""
    recording = RECORDED[f"{pattern}_unfaithful"]
    [interaction] = extracted(spans_of(recording)).interactions
    assert sorted(interaction.record.contexts) == sorted(recording.documents)
    assert recording.answer not in " ".join(interaction.record.contexts)


@pytest.mark.parametrize("mode", ["", "default_"], ids=["attributes", "span_events"])
@pytest.mark.parametrize("faithful", [True, False], ids=["faithful", "unfaithful"])
def test_a_graph_whose_last_nodes_ran_side_by_side_answers_with_each_of_them(
    faithful: bool, mode: str
) -> None:
    """The writer and the reviewer both follow the researcher and run in parallel: what the user reads is
    both their answers (the app shows each, in the order the Graph ran them), never the last-started one
    alone, which would judge the advice and drop the answer to the question."""
    recording = RECORDED[f"{mode}graph_parallel_{'faithful' if faithful else 'unfaithful'}"]
    [interaction] = extracted(spans_of(recording)).interactions
    assert interaction.span.name == "invoke_graph"
    assert interaction.record.answer == recording.answer
    writer, reviewer = recording.answer.split("\n\n")
    assert "Aurora X2 battery lasts" in writer and "contact support" in reviewer
