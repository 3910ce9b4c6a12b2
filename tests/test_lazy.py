"""A mapping whose values are imported on first lookup (the `tracescore` group's commands): its keys, size
and membership import nothing; a lookup imports that value's module only."""

from __future__ import annotations

import json

import pytest

from tracescore._lazy import LazyMapping


def test_a_lazy_mapping_imports_a_module_only_when_its_value_is_looked_up() -> None:
    lazy = LazyMapping({"dumps": "json", "missing": "tracescore.no_such_module"})
    assert list(lazy) == ["dumps", "missing"] and len(lazy) == 2 and "missing" in lazy  # nothing imported
    assert lazy.imported() == {}
    assert lazy["dumps"] is json.dumps and lazy.get("dumps") is json.dumps
    assert lazy.imported() == {"dumps": json.dumps}
    with pytest.raises(ModuleNotFoundError):
        lazy["missing"]
    assert lazy.get("other") is None and "other" not in lazy


def test_a_value_set_is_held_as_given_and_a_deleted_one_is_gone() -> None:
    lazy = LazyMapping({"dumps": "json"})
    lazy["loads"] = json.loads
    assert dict(lazy.items()) == {"dumps": json.dumps, "loads": json.loads}
    del lazy["dumps"]
    assert list(lazy) == ["loads"] and len(lazy) == 1
    with pytest.raises(KeyError):
        del lazy["dumps"]
