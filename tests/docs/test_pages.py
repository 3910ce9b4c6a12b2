"""The pages' code is code CI runs: every Python block is a snippet of a tested file, every snippet points at
a file and section that exist; every reason the code can skip something is explained on the
troubleshooting page; the README stays short, its test command is CI's and its outputs are the quickstart's;
the operating page's status line has the parts the code writes. Failures name the page."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import get_args

import pytest
from pages import DOCS, REPO, blocks, normalised, outputs, pages

_SNIPPET = re.compile(r'^\s*-{1,}8<-{1,}\s+"(?P<path>[^":]+)(?::(?P<section>[\w-]+))?"\s*$', re.M)
_SECTION = "--8<-- [{kind}:{name}]"
TROUBLESHOOTING = DOCS / "operating" / "troubleshooting.md"
README_MAX_LINES = 150


def _sections() -> set[str]:
    """The text of every marked section of the runnable examples (what the README may show verbatim)."""
    found = set()
    for path in [*REPO.glob("examples/**/*.py"), *(DOCS / "examples").glob("*.py")]:
        text = path.read_text(encoding="utf-8")
        for name in re.findall(r"--8<-- \[start:([\w-]+)\]", text):
            start, end = (_SECTION.format(kind=k, name=name) for k in ("start", "end"))
            inner = text.split(start, 1)[1].split("\n", 1)[1].split(end, 1)[0]
            found.add(inner.rsplit("\n", 1)[0].strip())
    return found


# The languages of the programs CI runs (Python, the JavaScript producers' Node apps, the JVM producers'
# Spring Boot app): a block in one of them must be a snippet of a file CI runs.
_PROGRAM_LANGS = ("python", "py", "pycon", "js", "javascript", "mjs", "ts", "typescript", "java")


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_code_on_a_page_is_a_snippet_of_a_tested_file(page: Path) -> None:
    for block in blocks(page):
        if block.lang not in _PROGRAM_LANGS:
            continue
        if page.name == "README.md":  # GitHub shows it as written: a verbatim copy of a tested section
            assert block.body.strip() in _sections(), f"{block.where()}: not a section of a tested example"
            continue
        lines = [line for line in block.body.splitlines() if line.strip()]
        code = [line for line in lines if not _SNIPPET.match(line)]
        assert not code, (
            f'{block.where()}: a {block.lang} block must include a tested file (--8<-- "path:section"), '
            f"not inline code: {code[0].strip()!r}"
        )


@pytest.mark.parametrize("page", [*pages(), *DOCS.rglob("_*.md")], ids=lambda p: str(p.relative_to(REPO)))
def test_every_snippet_names_a_file_and_section_that_exist(page: Path) -> None:
    if page.name == "_template.md":
        return  # its paths are placeholders
    text = page.read_text(encoding="utf-8")
    for match in _SNIPPET.finditer(text):
        where = f"{page.relative_to(REPO)}:{text.count(chr(10), 0, match.start()) + 1}"
        target = REPO / match["path"]
        assert target.is_file(), f"{where}: snippet file {match['path']} does not exist"
        if match["section"]:
            body = target.read_text(encoding="utf-8")
            # Any run of dashes around the scissors, as pymdownx.snippets reads them (an XML comment, a
            # pom.xml's, cannot hold `--`).
            start, end = (re.search(rf"-+8<-+ \[{k}:{match['section']}\]", body) for k in ("start", "end"))
            assert start and end, f"{where}: no section {match['section']} in {match['path']}"
            inner = body[start.end() : end.start()]
            assert inner.strip().count("\n") >= 1, f"{where}: section {match['section']} is empty"


def _literal_first_arguments(folder: Path, callee: str) -> set[str]:
    """The string literals passed first to `callee(...)` in a package folder's modules."""
    found = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", None)) == callee
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                found.add(node.args[0].value)
    return found


def _counter_keys() -> set[str]:
    """Keys the consumer counts by (`AssemblyCount`, read by the closing summary's `assembly:`) and why it
    read a trace early (`Incomplete`: the `released_<why>` counts)."""
    from tracescore.consume import AssemblyCount, Incomplete

    return {c.value for c in AssemblyCount if not c.why_read} | {why.value for why in Incomplete}


def skip_reasons() -> dict[str, str]:
    """Every reason the code gives for not scoring, delivering or reading something, with where it is."""
    from tracescore.export import DROP_REASONS
    from tracescore.model import ExtractSkip, UnreadableRecord
    from tracescore.sample import SkipReason

    package = REPO / "tracescore"
    reasons: dict[str, str] = {}
    reasons |= dict.fromkeys((r.value for r in ExtractSkip), "model.ExtractSkip")
    reasons |= dict.fromkeys((r.value for r in SkipReason), "sample.SkipReason")
    reasons |= dict.fromkeys(DROP_REASONS, "export (the SDK's drops)")
    reasons |= dict.fromkeys(_counter_keys(), "consume counters")
    reasons |= dict.fromkeys(
        get_args(UnreadableRecord.__init__.__annotations__["reason"]), "the record reader"
    )
    reasons |= dict.fromkeys(_literal_first_arguments(package / "alert", "_skip"), "alert")
    for callee in ("_skip", "skipped"):
        reasons |= dict.fromkeys(_literal_first_arguments(package / "conversations", callee), "conversations")
    reasons |= {
        "offline_only": "cascade outcome",
        "error": "record status",
        "not_applicable": "record status",
    }
    return reasons


def _shown(page: Path) -> str:
    """A page's text as the site shows it: each file it includes whole (`--8<-- "path"`) in its place."""
    text = page.read_text(encoding="utf-8")
    return _SNIPPET.sub(
        lambda m: m[0] if m["section"] else (REPO / m["path"]).read_text(encoding="utf-8"), text
    )


def test_every_skip_reason_is_explained_on_the_troubleshooting_page() -> None:
    text = _shown(TROUBLESHOOTING)
    missing = [
        f"{reason} ({where})"
        for reason, where in sorted(skip_reasons().items())
        if not re.search(rf"(?<![\w]){re.escape(reason)}(?![\w])", text)
    ]
    assert not missing, f"{TROUBLESHOOTING.relative_to(REPO)} does not explain: {', '.join(missing)}"


def test_the_troubleshooting_table_of_extract_skips_has_a_row_per_reason_in_its_order() -> None:
    """The table is written from `ExtractSkip` (docs/gen/skips.py): a reason extract gives is a member, so
    none is given that the page does not explain, and none is explained that extract no longer gives."""
    from tracescore.model import ExtractSkip

    table = REPO / "docs" / "operating" / "_extract_skip_reasons.md"
    assert f'--8<-- "{table.relative_to(REPO)}"' in TROUBLESHOOTING.read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(\w+)` \|", table.read_text(encoding="utf-8"), re.M)
    assert rows == [reason.value for reason in ExtractSkip]


def test_the_readme_is_short_and_its_test_command_is_cis() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= README_MAX_LINES, f"README.md has {len(readme.splitlines())} lines"
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    for command in ("make test", "make demo"):
        assert command in readme, f"README.md does not show `{command}`"
        assert re.search(rf"^{command}$", ci, re.M), f".ci/run does not run `{command}`"


def test_the_readmes_outputs_are_the_quickstarts() -> None:
    """README's "What you get" shows the quickstart's flagged answer as `tracescore tail` prints it, and its
    evaluation span's explanation: the quickstart's outputs are checked against a real run, so a wording
    change there must reach the README too (it once kept "0 of 1 claims" after the code said "claim")."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    quickstart = outputs(DOCS / "quickstart.md")
    tail = quickstart["tail"].splitlines()
    start = next(i for i, line in enumerate(tail) if "  FLAGGED  " in line)
    end = next(i for i in range(start + 1, len(tail)) if not tail[i].startswith(" "))
    flagged = "\n".join(tail[start:end])
    assert normalised(flagged) in normalised(readme), "README.md's tail output is not the quickstart's"
    reason = json.loads(quickstart["tail-json"].splitlines()[0])["reason"]
    assert f"gen_ai.evaluation.explanation = {reason!r}" in readme, (
        f"README.md's evaluation span does not say the quickstart record's reason: {reason!r}"
    )


def _status_line_format() -> str:
    """The format string of consume's status line, read from its source (tests/docs imports no private
    module): the `_log.info("status: ...", ...)` call of tracescore/consume/_status.py."""
    source = REPO / "tracescore" / "consume" / "_status.py"
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "info" and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and str(first.value).startswith("status: "):
                return str(first.value)
    raise AssertionError(f"no status line format in {source.relative_to(REPO)}")


def test_the_operating_pages_status_line_is_the_one_consume_writes() -> None:
    """The page shows a status line of a real run; its parts must still be the ones the code writes (the
    sample once lacked the `| cascade lift:` part added later)."""
    page = DOCS / "operating" / "index.md"
    shown = [
        line
        for line in page.read_text(encoding="utf-8").splitlines()
        if "tracescore.consume: status: " in line
    ]
    assert shown, f"{page.relative_to(REPO)} shows no status line"
    pattern = "".join(
        ".*" if part in ("%s", "%d") else re.escape(part)
        for part in re.split(r"(%[sd])", _status_line_format())
    )
    for line in shown:
        assert re.fullmatch(pattern, line.split("tracescore.consume: ", 1)[1]), (
            f"{page.relative_to(REPO)}: a status line not of the form consume writes: {line[:80]}..."
        )


def test_the_offline_page_lists_the_labels_the_code_reads_good_and_bad() -> None:
    """A label column whose values the code does not read gets no confusion matrix, and one read the other
    way round (`true` is good) an inverted one: the page's two lists are the code's two sets."""
    from tracescore.model import BAD_LABELS, GOOD_LABELS

    page = DOCS / "offline" / "index.md"
    text = " ".join(page.read_text(encoding="utf-8").split("## Labels", 1)[1].split())
    lists = re.search(r"whatever the case: (.*?) are good; (.*?) are bad", text)
    assert lists, f"{page.relative_to(REPO)}: no list of the labels read as good and bad"
    good, bad = (set(re.findall(r"`([^`]+)`", lists[i])) for i in (1, 2))
    assert (good, bad) == (set(GOOD_LABELS), set(BAD_LABELS)), f"{page.relative_to(REPO)}: the labels"
