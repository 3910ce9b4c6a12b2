"""Write the generated reference pages from the code, or check that the committed ones are current.

    python docs/gen_reference.py            # (re)write them: run after changing a command, a setting, a
                                            # record (evaluation, conversation) or a fixture (make reference)
    python docs/gen_reference.py --check    # exit 1, naming each stale page and each undocumented setting

Pages: the command line (from click), every setting with its environment variable, flag and default (from
the pydantic settings classes), the evaluation record and its JSON Schema (from its pydantic model), the
integrations' tested versions (from each recorded fixture's manifest.json), the skip reasons
(from their enums) and the Node apps the recorder runs (from its NODE_SOURCES). tests/docs runs --check.
Beside the pages, the package's list of the variables every setting and option reads (from the same
classes), which the commands' misspelt-variable check reads at start instead of importing every stage.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

DOCS = Path(__file__).resolve().parent
REPO = DOCS.parent
sys.path.insert(0, str(DOCS))

from gen import apps, cli, reads, record, settings, skips, versions  # noqa: E402  (the folder above, on the path)

from tracescore.cli._environment import variables_json  # noqa: E402

# Page (relative to the repository) -> what writes it. Each writer returns the page's text; problems (a
# setting without a description, a fixture without a page) are raised as gen.Undocumented.
PAGES: dict[str, Callable[[], str]] = {
    "docs/reference/cli.md": cli.page,
    "docs/reference/settings.md": settings.page,
    "docs/reference/evaluation-record.md": record.page,
    "docs/reference/evaluation-record.schema.json": record.schema,
    "docs/reference/conversation-record.md": record.conversation_page,
    "docs/integrations/_tested_versions.md": versions.table,
    "docs/operating/_extract_skip_reasons.md": skips.extract_table,
    "docs/operating/_skip_reasons.md": skips.service_table,
    "docs/operating/_conversations_skip_reasons.md": skips.conversations_table,
    "docs/contributing/_node_apps.md": apps.node_apps,
    **reads.pages(),  # what is read from each recorded producer, one table per source
    "tracescore/cli/_variables.json": variables_json,
}


def render() -> tuple[dict[str, str], list[str]]:
    """Every page's text, and every problem found while writing them."""
    from gen import Undocumented

    texts: dict[str, str] = {}
    problems: list[str] = []
    for page, write in PAGES.items():
        try:
            texts[page] = write()
        except Undocumented as exc:
            problems += [f"{page}: {problem}" for problem in exc.problems]
    return texts, problems


def stale(texts: dict[str, str]) -> list[str]:
    """Pages whose committed text differs from what the code generates now."""
    return [page for page, text in texts.items() if _read(REPO / page) != text]


def _read(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.exists() else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a page is stale")
    args = parser.parse_args(argv)
    texts, problems = render()
    for problem in problems:
        print(f"undocumented: {problem}", file=sys.stderr)
    if args.check:
        for page in stale(texts):
            print(f"stale: {page} differs from the code; run: python docs/gen_reference.py", file=sys.stderr)
        return 1 if problems or stale(texts) else 0
    for page, text in texts.items():
        path = REPO / page
        if _read(path) != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {page}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
