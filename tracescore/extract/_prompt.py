"""The documents an app put into a prompt itself, under a label that names them (`Context:`, `... from this
context only:`, `<context>...</context>`, `Context: <documents>`, a Markdown heading `## Context` or bold
`**Context:**`), and the prompt's text around them (its instructions, its question). Conservative by design:
without such a label a prompt carries no documents, and the text under one is one document, never split into
guessed ones."""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import chain
from typing import Any, NamedTuple

__all__ = ["PromptDocuments", "prompt_documents"]

# A line that introduces the documents a prompt carries, ending with a colon at most two words after a word
# that names them ("Context:", "Answer from this context only:", "Here are the documents:"), or tags around
# them (`<context>...</context>`). A line that names documents earlier and introduces something else
# ("... with access to documents. Follow these rules:") is no such label.
_CONTEXT_WORDS = r"context|documents?|docs|sources?|passages?|search results|excerpts?"
_CONTEXT_LABEL = re.compile(
    rf"^[^\n]*\b(?:{_CONTEXT_WORDS})\b(?:[^\w\n]+\w+){{0,2}}[^\w\n]*:[ \t]*$", re.IGNORECASE | re.MULTILINE
)
# The label itself, at most one qualifier before the word: "Retrieved context". A line that IS the label (a
# heading, bold, or the label alone with its colon) may also say "documentation" ("Relevant documentation:");
# a sentence ending in a colon may not ("You help with our documentation. Rules:" introduces rules).
_QUALIFIER = r"(?:(?:retrieved|relevant|provided|reference)[ \t]+)?"
_LABEL = rf"{_QUALIFIER}(?:{_CONTEXT_WORDS}|documentation)"
# Or the label alone at a line's start, the documents after it on the same line: "Context: {context}", as in
# LangChain hub's rlm/rag-prompt, the prompt of LangChain's RAG tutorial ("Retrieved context: ..." too).
_BOLD = r"(?:\*\*|__)"
# A label's colon with the text after it on the line, the label bold or not ("Question: ...", "**Question:**
# ...", "**Question**: ...").
_OPEN = rf"(?P<open>{_BOLD})?"
_COLON = r"(?:[ \t]*:(?(open)(?P=open))|(?(open)(?P=open)[ \t]*:|(?!)))[ \t]*"
_INLINE_LABEL = re.compile(rf"^[ \t]*{_OPEN}{_LABEL}{_COLON}(?=\S)", re.IGNORECASE | re.MULTILINE)
_CONTEXT_TAG = re.compile(rf"<({_CONTEXT_WORDS})>(.*?)</\1>", re.IGNORECASE | re.DOTALL)


def _label_line(words: str, plain: bool) -> re.Pattern[str]:
    """A line that IS a label, nothing else on it: a Markdown heading (`## Context`, `### Retrieved
    documents:`, `## **Context**`), bold (`**Context:**`, `**Context**`) or, when `plain`, the label with its
    colon (`Relevant documentation:`). A heading that mentions the word in a sentence ("## How to use the
    context below") is none."""
    alone = r"|(?=[^\n]*:[ \t]*$)" if plain else ""
    return re.compile(
        rf"^[ \t]*(?:(?P<level>#{{1,6}})[ \t]+{_BOLD}?|(?P<bold>{_BOLD}){alone})(?P<label>{words})"
        rf"[ \t]*:?[ \t]*{_BOLD}?[ \t]*:?[ \t]*(?:#+[ \t]*)?$",
        re.IGNORECASE | re.MULTILINE,
    )


_SECTION_LABEL = _label_line(_LABEL, plain=True)
# What follows the documents: a short line ending with a colon ("Rules:"), or the question's label with the
# question on the same line ("Question: How long ...?") or a heading that is the question's label
# ("## Question", "**Question:**").
_HEADING = re.compile(r"^[^\n]{1,40}:[ \t]*$", re.MULTILINE)
_QUESTION_WORDS = r"(?:the[ \t]+|user(?:'s)?[ \t]+)?(?:question|query|q)"
_QUESTION_LABEL = re.compile(
    rf"^[ \t]*{_OPEN}(?P<label>{_QUESTION_WORDS}){_COLON}", re.IGNORECASE | re.MULTILINE
)
_QUESTION_LINE = _label_line(_QUESTION_WORDS, plain=False)
# Markdown's own headings: any heading line (`# ...` .. `###### ...`), and a bold line (`**Rules:**`).
_MARKDOWN_HEADING = re.compile(r"^[ \t]{0,3}(#{1,6})[ \t]+\S", re.MULTILINE)
_BOLD_HEADING = re.compile(rf"^[ \t]*{_BOLD}[^\n]{{1,40}}{_BOLD}[ \t]*:?[ \t]*$", re.MULTILINE)
# A heading of any kind: where a labelled question, or the documents under a bold label, end.
_ANY_HEADING = (_HEADING, _MARKDOWN_HEADING, _BOLD_HEADING)
# Fenced code (``` or ~~~): what looks like a label or a heading inside it is quoted text (a user's pasted
# Markdown, a document's code comments `# ...`), never the prompt's own.
_FENCE = re.compile(
    r"^[ \t]{0,3}(`{3,}|~{3,})[^\n]*$.*?(?:^[ \t]{0,3}\1[ \t]*$|\Z)", re.MULTILINE | re.DOTALL
)
# An answer given on its label's line ("A: Hold the button."): a question label it follows is a document's
# (an FAQ's `Q:` / `A:` pairs), not the prompt's; the prompt's own "Answer:" is left for the model to fill.
_ANSWER_LABEL = re.compile(
    rf"^[ \t]*{_OPEN}(?P<label>(?:the[ \t]+)?(?:answer|a)){_COLON}\S", re.IGNORECASE | re.MULTILINE
)
# Paragraphs are separated by a blank line; a paragraph that ends with a question mark asks.
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")
_ASKS = re.compile(r"\?[ \t\"'\u201d)\]*_]*(?:\n[ \t]*\n|\s*\Z)")


class PromptDocuments(NamedTuple):
    """The documents a prompt text carries under a label (`block`, one document), the prompt's text
    outside them (`outside`: the instructions and the question around the block; None when empty) and,
    when the block's end was found where an unlabelled question starts, that question (`asked`)."""

    block: str
    outside: str | None
    asked: str | None = None

    @property
    def question(self) -> str | None:
        """The question the prompt asks beside its documents: the unlabelled question the block ended at,
        else after its label (`Question:`) when there is one, else the text outside the documents."""
        if self.asked is not None:
            return self.asked
        outside = self.outside
        if outside is None:
            return None
        label = next(_question_labels(outside, 0), None)
        if label is None:
            return outside
        rest = outside[label.end() :]
        # The question ends at the next heading (`Rules:`, `## Answer`), or at the answer a template starts
        # for the model ("Answer: Let's think step by step.").
        ends = [_first(pattern, rest, 0, _fenced(rest)) for pattern in (*_ANY_HEADING, _ANSWER_LABEL)]
        return rest[: min(ends, default=len(rest))].strip() or outside


def prompt_documents(text: Any) -> PromptDocuments | None:
    """The documents a prompt text carries under a label that names them (`Context:`, `... from this context
    only:`, `<context>...</context>`, `Context: <the documents>` on one line, or a line that is the label:
    `## Context`, `**Context:**`, `Relevant documentation:`): the text after the label, up to where the
    label's kind of section ends (`_section_end`), the question's label (`_question_label`: never an answered
    `Q:` of the documents) or an unlabelled question (`_unlabelled_question`), as one document (prompt text
    is never split into guessed documents), and the text around them. None without such a label:
    instructions alone are never documents."""
    if not isinstance(text, str):
        return None
    asked = None
    tagged = _CONTEXT_TAG.search(text)
    if tagged is not None:
        block, start, end = tagged.group(2), tagged.start(), tagged.end()
    else:
        fenced = _fenced(text)
        found = (
            _section_label(text, fenced),
            _search(_CONTEXT_LABEL, text, 0, fenced),
            _search(_INLINE_LABEL, text, 0, fenced),
        )
        labels = [m for m in found if m is not None]
        if not labels:
            return None
        label = min(labels, key=lambda m: m.start())  # a line that is the label first: it says its kind
        start = end = label.end()
        stop = _section_end(text, label, fenced)
        question = _question_label(text, end, fenced)
        if question is not None and question.start() < stop:
            end = question.start()
        else:
            end = stop
            asks = _unlabelled_question(text, start, end, label.start())
            if asks is not None:
                asked, end = text[asks:end].strip(), asks
        block, start = text[start:end], label.start()
    block = block.strip()
    if not block:
        return None
    outside = f"{text[:start].strip()}\n\n{text[end:].strip()}".strip()
    return PromptDocuments(block, outside or None, asked)


def _section_label(text: str, fenced: list[tuple[int, int]]) -> re.Match[str] | None:
    """The first line that is a documents label. A bare heading `## Context` (or `**Context**`) is one only
    where the prompt asks its question after it, under a label or in a paragraph ending with a question mark
    (a RAG template's `## Context` / `## Question`): the sections of a system prompt (`# Role`, `# Context`,
    `# Task`) give the app's background, not documents, and read as documents they would flag every answer
    of an app that retrieves nothing."""
    for label in _outside_fences(_SECTION_LABEL.finditer(text), fenced):
        bare = (label["level"] or label["bold"]) and label["label"].strip().lower() == "context"
        asks = _question_label(text, label.end(), fenced) is not None or _search(
            _ASKS, text, label.end(), fenced
        )
        if not bare or asks:
            return label
    return None


def _section_end(text: str, label: re.Match[str], fenced: list[tuple[int, int]]) -> int:
    """Where the documents under `label` end at the latest: under a Markdown heading (`## Context`), at the
    next heading of the same or a higher level (its subheadings are the documents'); under a bold label
    (`**Context:**`), at the next heading of any kind; under a `Context:` label, at the next short line
    ending with a colon (`Rules:`)."""
    level = label.groupdict().get("level")
    if level:
        same_or_higher = re.compile(rf"^[ \t]{{0,3}}#{{1,{len(level)}}}[ \t]+\S", re.MULTILINE)
        return _first(same_or_higher, text, label.end(), fenced)
    ends = _ANY_HEADING if label.groupdict().get("bold") else (_HEADING,)
    return min(_first(pattern, text, label.end(), fenced) for pattern in ends)


def _fenced(text: str) -> list[tuple[int, int]]:
    """The spans of the text's fenced code blocks."""
    if "```" not in text and "~~~" not in text:
        return []  # most prompts: no scan
    return [m.span() for m in _FENCE.finditer(text)]


def _search(
    pattern: re.Pattern[str], text: str, pos: int, fenced: list[tuple[int, int]]
) -> re.Match[str] | None:
    """The first match of `pattern` from `pos` outside fenced code."""
    return next(_outside_fences(pattern.finditer(text, pos), fenced), None)


def _first(pattern: re.Pattern[str], text: str, pos: int, fenced: list[tuple[int, int]]) -> int:
    """Where `pattern` first matches from `pos` outside fenced code, else the text's end."""
    found = _search(pattern, text, pos, fenced)
    return found.start() if found is not None else len(text)


def _outside_fences(
    matches: Iterator[re.Match[str]], fenced: list[tuple[int, int]]
) -> Iterator[re.Match[str]]:
    """The matches that start outside the fenced code spans."""
    return (m for m in matches if not any(a <= m.start() < b for a, b in fenced))


def _question_labels(
    text: str, start: int, fenced: list[tuple[int, int]] | None = None
) -> Iterator[re.Match[str]]:
    """The question labels after `start`, in order, outside fenced code: `Question: ...` and the lines that
    are the question's label (`## Question`, `**Question:**`)."""
    fenced = _fenced(text) if fenced is None else fenced
    found = chain(_QUESTION_LABEL.finditer(text, start), _QUESTION_LINE.finditer(text, start))
    by_start = {m.start(): m for m in sorted(found, key=lambda m: -m.end())}  # one a line: `**Question:**`
    return _outside_fences(iter(sorted(by_start.values(), key=lambda m: m.start())), fenced)


def _question_label(text: str, start: int, fenced: list[tuple[int, int]]) -> re.Match[str] | None:
    """The prompt's question label after `start`: the first one no answer follows before the next question
    label. `Q:` lines answered by `A:` lines are a document's (an FAQ), not where the documents end; a single
    answered label is the prompt's own (a template's "Answer: Let's think step by step."), and so is the last
    of several when the template ends with it (`_templates_own`)."""
    labels = list(_question_labels(text, start, fenced))
    answers = []
    for label, following in zip(labels, [*labels[1:], None], strict=False):
        stop = following.start() if following is not None else len(text)
        answer = _ANSWER_LABEL.search(text, label.end(), stop)
        if answer is None:
            return label
        answers.append(answer)
    if len(labels) == 1 or (labels and _templates_own(text, labels, answers)):
        return labels[-1]
    return None


def _templates_own(text: str, labels: list[re.Match[str]], answers: list[re.Match[str]]) -> bool:
    """Whether the last of several answered question labels is the prompt's own, not the FAQ's: the prompt
    ends on its answer's line (a template that starts the model's answer, "Answer: Let's think step by
    step."), and it stands apart from the FAQ the earlier labels make, which share one way of writing their
    pairs: it is written another way (`Question:` / `Answer:` after `Q:` / `A:` lines), or a blank line sets
    it off where none parts the FAQ's pairs. Otherwise every pair is the FAQ's (a prompt that is an FAQ
    alone ends on its last answer too)."""
    last, answer = labels[-1], answers[-1]
    if "\n" in text[answer.end() :].rstrip():
        return False  # text after its answer's line: the template does not end with it
    forms = {_pair_form(q, a) for q, a in zip(labels[:-1], answers[:-1], strict=True)}
    if len(forms) != 1:
        return False
    if _pair_form(last, answer) not in forms:
        return True
    faq = text[labels[0].start() : last.start()]
    pairs = faq.rstrip()
    return _PARAGRAPH_BREAK.search(pairs) is None and faq.count("\n", len(pairs)) >= 2


def _pair_form(question: re.Match[str], answer: re.Match[str]) -> tuple[str, str]:
    """How a question / answer pair is labelled (`("q", "a")`, `("question", "answer")`), case and spacing
    aside."""
    return " ".join(question["label"].lower().split()), " ".join(answer["label"].lower().split())


def _unlabelled_question(text: str, start: int, end: int, label: int) -> int | None:
    """Where the question starts when the labelled block (`text[start:end]`) ends with it, unlabelled:
    the block's last paragraph (after a blank line) when it ends with a question mark and nothing else in
    the prompt asks one (no question label, no paragraph outside the block that ends with a question mark).
    A block of one paragraph is never cut, nor one whose question is elsewhere: a document's own question
    stays in the document. None when the block keeps its whole text."""
    outside = f"{text[:label]}\n\n{text[end:]}"
    if next(_question_labels(outside, 0), None) or _ASKS.search(outside.strip()):
        return None
    end = start + len(text[start:end].rstrip())
    breaks = list(_PARAGRAPH_BREAK.finditer(text, start, end))
    if not breaks or not _ASKS.search(text[breaks[-1].end() : end].strip()):
        return None
    if not text[start : breaks[-1].start()].strip():
        return None
    return breaks[-1].end()
