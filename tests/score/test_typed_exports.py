"""The library's names are typed where they are imported from: `tracescore.score` imports them on first use
(`_LAZY`), which an IDE cannot follow, so each is also imported under TYPE_CHECKING from the module `_LAZY`
names; without it Jupyter (jedi) completed nothing after `result = evaluate_dataset(...); result.`."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest


def _typed_imports(package: str) -> dict[str, str]:
    """Name -> module of each `from module import name as name` under the package's `if TYPE_CHECKING:`."""
    init = Path(importlib.import_module(package).__file__ or "")
    tree = ast.parse(init.read_text(encoding="utf-8"))
    typed: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom), ast.unparse(statement)
                for alias in statement.names:
                    assert alias.asname == alias.name, f"{alias.name} is not re-exported (`X as X`)"
                    typed[alias.name] = statement.module or ""
    return typed


@pytest.mark.parametrize("package", ["tracescore.score", "tracescore.score.judges"])
def test_every_lazy_name_is_typed_for_ides(package: str) -> None:
    lazy = importlib.import_module(package)._LAZY
    assert _typed_imports(package) == lazy
