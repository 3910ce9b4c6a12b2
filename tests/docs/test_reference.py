"""The generated reference pages are the code's: `python docs/gen_reference.py --check` finds no stale page,
no setting or option without a description and no recorded producer without an integration page."""

from __future__ import annotations

import importlib.util
from types import ModuleType

from pages import DOCS


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_reference", DOCS / "gen_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_reference_is_what_the_code_generates() -> None:
    generator = _generator()
    texts, problems = generator.render()
    assert not problems, "undocumented: " + "; ".join(problems)
    stale = generator.stale(texts)
    assert not stale, f"stale: {', '.join(stale)}; run: make reference"
