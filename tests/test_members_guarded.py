"""A test's raw kafka-python group member joins through the services' guards (`GuardedJoins`, in
tests/_members.py's `GuardedMember`): kafka-python 3.0.12 can leave a join undone between two polls, and a
member whose join was left undone stays "rebalancing" with its heartbeats off. A raw consumer joins a group
only by subscribing, so no test subscribes one itself: no `KafkaConsumer(topic, ...)` (subscribed at
construction) and no `.subscribe(...)` on a consumer a test made (or takes as a `KafkaConsumer`)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _is_consumer(node: ast.expr | None) -> bool:
    """`KafkaConsumer(...)` (or `kafka.KafkaConsumer(...)`)."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Name) and func.id == "KafkaConsumer") or (
        isinstance(func, ast.Attribute) and func.attr == "KafkaConsumer"
    )


def _consumers(tree: ast.AST) -> set[str]:
    """What names a raw consumer in this file: targets assigned one, parameters typed as one."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _is_consumer(node.value):
            names |= {ast.unparse(target) for target in node.targets}
        elif isinstance(node, ast.AnnAssign) and _is_consumer(node.value):
            names.add(ast.unparse(node.target))
        elif isinstance(node, ast.arg) and _names_consumer(node.annotation):
            names.add(node.arg)
    return names


def _names_consumer(annotation: ast.expr | None) -> bool:
    return annotation is not None and ast.unparse(annotation).strip("'\"").endswith("KafkaConsumer")


def unguarded(source: str) -> Iterator[int]:
    """The lines of `source` where a raw consumer subscribes itself."""
    tree = ast.parse(source)
    consumers = _consumers(tree)
    for node in ast.walk(tree):
        if _is_consumer(node) and isinstance(node, ast.Call) and node.args:
            yield node.lineno
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        receiver = node.func.value
        if node.func.attr == "subscribe" and (_is_consumer(receiver) or ast.unparse(receiver) in consumers):
            yield node.lineno


def test_no_test_subscribes_a_raw_consumer_itself() -> None:
    found = [
        f"{path.relative_to(TESTS.parent)}:{line}"
        for path in sorted(TESTS.rglob("*.py"))
        for line in unguarded(path.read_text(encoding="utf-8"))
    ]
    assert found == [], f"subscribe through tests/_members.py's GuardedMember: {found}"


def test_the_check_finds_each_way_a_raw_consumer_subscribes() -> None:
    made = "c = KafkaConsumer(group_id='g')\nc.subscribe(['t'])\n"
    taken = "def f(consumer: KafkaConsumer) -> None:\n    consumer.subscribe(['t'])\n"
    held = (
        "class A:\n    def __init__(self):\n"
        "        self.c = kafka.KafkaConsumer(group_id='g')\n        self.c.subscribe(['t'])\n"
    )
    at_construction = "c = KafkaConsumer('t', group_id='g')\n"
    assert [list(unguarded(s)) for s in (made, taken, held, at_construction)] == [[2], [2], [4], [1]]
    guarded = "m = GuardedMember(KafkaConsumer(group_id='g'), 't')\njoins.subscribe(['t'], listener)\n"
    assert list(unguarded(guarded)) == []
