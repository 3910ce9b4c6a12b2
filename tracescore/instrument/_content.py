"""What content may leave the process: capture on/off, size limits, redaction. Applied on the span, before
any exporter sees it.

Every text the SDK records goes through `ContentPolicy.text`: it never raises (None, undecodable bytes,
objects whose `str()` raises), redacts, then truncates, and reports a truncation so the span says so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_settings import NoDecode

__all__ = ["BUILTIN_REDACTORS", "ContentPolicy", "ContentSettings", "Redactor", "safe_json", "safe_str"]

Redactor = Callable[[str], str]


def _pattern_redactor(pattern: str, replacement: str, flags: int = 0) -> Redactor:
    compiled = re.compile(pattern, flags)

    def redact(text: str) -> str:
        return compiled.sub(replacement, text)

    return redact


def _luhn_ok(digits: str) -> bool:
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char)
        if position % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


_CARD = re.compile(r"\b(?:\d[ -]?){12,18}\d\b")


def _redact_cards(text: str) -> str:
    # Luhn-valid digit runs only, so order numbers and timestamps survive.
    def replace(match: re.Match[str]) -> str:
        digits = re.sub(r"[ -]", "", match.group())
        return "[REDACTED_CARD]" if 13 <= len(digits) <= 19 and _luhn_ok(digits) else match.group()

    return _CARD.sub(replace, text)


BUILTIN_REDACTORS: dict[str, Redactor] = {
    "email": _pattern_redactor(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b", "[REDACTED_EMAIL]"),
    # Card numbers run first (see `ContentSettings.redact`), so a card is never half-eaten as a phone number.
    "card": _redact_cards,
    "phone": _pattern_redactor(
        r"(?<![\w+])(?:\+?\d{1,3}[ .-]?)?\(?\d{2,4}\)?(?:[ .-]?\d{2,4}){2,3}\b", "[REDACTED_PHONE]"
    ),
    "api_key": _pattern_redactor(
        r"\b(?:sk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{30,}"
        r"|xox[abprs]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{35})\b"
        r"|(?i:\bbearer\s+)[A-Za-z0-9._~+/-]{20,}=*",
        "[REDACTED_KEY]",
    ),
}
_REDACTOR_ORDER = ("card", "api_key", "email", "phone")


class ContentSettings(BaseModel):
    """Content controls (part of `InstrumentSettings`, env `TRACESCORE_CONTENT__*`)."""

    model_config = ConfigDict(frozen=True)

    capture: bool = Field(
        default=True,
        description="Off: spans keep kinds, ids, scores, counts and timings, never a query, document or "
        "answer text.",
    )
    max_attribute_chars: int = Field(
        default=16_384, ge=16, description="Longer texts are cut and listed in tracescore.truncated."
    )
    max_documents: int = Field(
        default=50, ge=0, description="Further documents are counted in tracescore.documents.omitted."
    )
    # env: a comma-separated list, not JSON
    redact: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(),
        description="Built-in redactors by name, comma-separated: email, phone, card, api_key; all for every "
        "one.",
    )

    @field_validator("redact", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        names = list(value)
        if "all" in names:
            return _REDACTOR_ORDER
        unknown = sorted(set(names) - set(BUILTIN_REDACTORS))
        if unknown:
            raise ValueError(f"unknown redactor(s) {unknown}; known: {', '.join(_REDACTOR_ORDER)}, all")
        return tuple(n for n in _REDACTOR_ORDER if n in names)


class ContentPolicy:
    """The settings made callable once: a pipeline of redactors and the limits. Immutable after init."""

    __slots__ = ("_redactors", "capture", "max_chars", "max_documents", "verbatim")

    def __init__(self, settings: ContentSettings | None = None, redact: Redactor | None = None) -> None:
        settings = settings or ContentSettings()
        self.capture = settings.capture
        self.max_chars = settings.max_attribute_chars
        self.max_documents = settings.max_documents
        self._redactors: tuple[Redactor, ...] = tuple(BUILTIN_REDACTORS[n] for n in settings.redact) + (
            (redact,) if redact is not None else ()
        )
        # Captured and no redactor: a str within the limit is recorded as it is (the hot path, one length
        # check).
        self.verbatim = self.capture and not self._redactors

    def text(self, value: Any) -> tuple[str, bool]:
        """The recordable form of `value` and whether it was truncated."""
        text = value if type(value) is str else safe_str(value)
        for redactor in self._redactors:
            text = redactor(text)
        if len(text) > self.max_chars:
            return text[: self.max_chars], True
        return text, False


def safe_str(value: Any) -> str:
    """`str(value)` that never raises: bytes decode with replacement, a failing `__str__` is named."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", errors="replace")
    try:
        return str(value)
    except Exception:
        return f"<unprintable {type(value).__name__}>"


def safe_json(value: Any) -> str:
    """JSON for metadata of any shape: unknown objects by `safe_str`, a cyclic structure by its repr."""
    try:
        return json.dumps(value, default=safe_str, ensure_ascii=False)
    except (ValueError, TypeError, RecursionError):  # ValueError: "Circular reference detected"
        return json.dumps(safe_str(value))


def flat_items(value: Any) -> Iterable[Any]:
    """An iterable of items from one item or many (a single str/bytes/mapping is one item)."""
    if value is None:
        return ()
    if type(value) is list or type(value) is tuple:  # the common case, without the ABC checks below
        return value  # type: ignore[no-any-return]
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        return (value,)
    return value
