"""What the docs tests share: the pages, their fenced blocks, the output blocks a page marks with
`<!-- output: NAME -->`, and the normalising that lets a page's real output be compared with a new run's
(timestamps, ids and ports differ from run to run; nothing else may)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
# Set it to rewrite the marked output blocks of a page from the run instead of comparing (after a change
# that alters what a command prints): TRACESCORE_DOCS_RECORD=1 python -m pytest tests/docs
RECORD = os.environ.get("TRACESCORE_DOCS_RECORD") == "1"

_FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```", re.M | re.S)
_OUTPUT = re.compile(r"<!-- output: (?P<name>[\w-]+) -->\n```text\n(?P<body>.*?)```\n", re.S)
_VOLATILE = [
    (re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?Z?"), "<time>"),
    (re.compile(r"\b[0-9a-f]{32}\b"), "<trace-id>"),
    (re.compile(r"\b[0-9a-f]{16}\b"), "<span-id>"),
    (re.compile(r"\b(?:127\.0\.0\.1|localhost):\d+\b"), "<broker>"),
]


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    body: str

    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def pages() -> list[Path]:
    """Every Markdown page of the site and the README (not the _fragments, which pages include)."""
    return [*sorted(p for p in DOCS.rglob("*.md") if not p.name.startswith("_")), REPO / "README.md"]


def blocks(page: Path) -> Iterator[Block]:
    text = page.read_text(encoding="utf-8")
    for match in _FENCE.finditer(text):
        yield Block(page, text.count("\n", 0, match.start()) + 1, match["lang"], match["body"])


def outputs(page: Path) -> dict[str, str]:
    return {m["name"]: m["body"] for m in _OUTPUT.finditer(page.read_text(encoding="utf-8"))}


def record_output(page: Path, name: str, actual: str) -> None:
    text = page.read_text(encoding="utf-8")
    marker = f"<!-- output: {name} -->\n```text\n"
    start = text.index(marker) + len(marker)
    end = text.index("```\n", start)
    page.write_text(text[:start] + actual + text[end:], encoding="utf-8")


def normalised(text: str, renames: dict[str, str] | None = None) -> str:
    for old, new in (renames or {}).items():
        text = text.replace(old, new)
    for pattern, placeholder in _VOLATILE:
        text = pattern.sub(placeholder, text)
    return text
