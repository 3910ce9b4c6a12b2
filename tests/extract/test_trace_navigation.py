"""Trace navigation (tracescore/model/_trace.py) the recognisers share: where an interaction is anchored and
what ran beside it."""

from __future__ import annotations

from trace_builder import span, trace

from tracescore.model import Trace


def test_outermost_keeps_a_chain_calling_a_chain_as_one_anchor() -> None:
    root = span("request", sid="a" * 16)
    outer = span("chain", {"kind": "CHAIN"}, sid="b" * 16, parent=root.span_id, start=1)
    inner = span("chain", {"kind": "CHAIN"}, sid="c" * 16, parent=outer.span_id, start=2)
    sibling = span("chain", {"kind": "CHAIN"}, sid="d" * 16, parent=root.span_id, start=3)
    built = trace(inner, sibling, root, outer)
    assert built.outermost(lambda s: s.attributes.get("kind") == "CHAIN") == [outer, sibling]


def test_outermost_survives_a_parent_cycle() -> None:
    a = span("a", {"kind": "CHAIN"}, sid="1" * 16, parent="2" * 16)
    b = span("b", {"kind": "CHAIN"}, sid="2" * 16, parent="1" * 16)
    assert trace(a, b).outermost(lambda s: True) == []  # each has the other above it; nothing hangs


def test_beside_is_the_parents_subtree_or_the_whole_trace() -> None:
    root = span("request", sid="a" * 16)
    retrieve = span("retrieve", sid="b" * 16, parent=root.span_id, start=1)
    llm = span("llm", sid="c" * 16, parent=root.span_id, start=2)
    elsewhere = span("other", sid="d" * 16, start=3)
    built = trace(root, retrieve, llm, elsewhere)
    assert built.beside(llm) == [retrieve, llm]
    assert set(built.beside(root)) == {root, retrieve, llm, elsewhere}


def test_a_one_span_trace_is_its_own_root_with_no_children() -> None:
    only = span("answer", sid="a" * 16)
    built = trace(only)
    assert (built.roots, built.children(only), list(built.descendants(only))) == ([only], [], [])
    assert (built.in_order(), built.beside(only), list(built.ancestors(only))) == ([only], [only], [])
    assert built.outermost(lambda s: True) == [only]


def test_a_trace_handed_its_spans_by_id_navigates_by_them_without_building_its_own() -> None:
    root = span("request", sid="a" * 16)
    chain = span("chain", sid="b" * 16, parent=root.span_id, start=1)
    by_id = {root.span_id: root, chain.span_id: chain}
    built = Trace(root.trace_id, (root, chain), by_id=by_id)
    assert built.by_id is by_id
    assert (list(built.ancestors(chain)), built.children(root), built.roots) == ([root], [chain], [root])
