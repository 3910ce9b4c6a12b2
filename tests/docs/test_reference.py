"""The generated reference pages are the code's: `python docs/gen_reference.py --check` finds no stale page,
no setting or option without a description and no recorded producer without an integration page."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from click.testing import CliRunner
from pages import DOCS

from tracescore.cli import main


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


def _intro(page: str, title: str) -> str:
    """The paragraph under a section's title: what the page says of where its settings are read."""
    return page.split(f"\n## {title}\n\n", 1)[1].split("\n\n", 1)[0]


def test_the_settings_page_says_what_consume_does_with_a_file_without_tables(tmp_path: Path) -> None:
    """The sampling section said its settings may sit at the file's top level; `tracescore consume` refuses
    such a file (its options and the policy share it): the page says so."""
    flat = tmp_path / "sampling.toml"
    flat.write_text("default_rate = 0.5\n")
    done = CliRunner().invoke(main, ["consume", "--config", str(flat), "--bootstrap-servers", "127.0.0.1:1"])
    assert done.exit_code == 2 and "settings outside a table (default_rate)" in done.output, done.output
    said = _intro((DOCS / "reference" / "settings.md").read_text(), "Sampling policy")
    of_consume = said.split("in Python")[0]
    assert "top level" not in of_consume and "`tracescore consume` refuses a setting outside" in said, said


def test_the_settings_page_says_each_variable_and_default_once_in_a_row() -> None:
    """The options click reads a variable for repeated their help's `[env: X; default: D]` in the
    description, beside the Environment column: the default has a column of its own."""
    page = (DOCS / "reference" / "settings.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    assert rows and not [row for row in rows if "[env: " in row]
    section = page.split("\n## Command-line options with a variable\n", 1)[1]
    header = next(line for line in section.splitlines() if line.startswith("| Environment"))
    assert header == "| Environment | File | Flag | Default | Description |"
    [claims] = [row for row in section.splitlines() if row.startswith("| `TRACESCORE_MAX_CLAIMS`")]
    assert claims.split(" | ")[3] == "`200`", claims
