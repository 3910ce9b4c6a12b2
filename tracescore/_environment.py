"""The environment variables tracescore reads, and the ones in its prefix it does not: a misspelt name
(`TRACESCORE_BROKER`) is otherwise silently ignored, as pydantic settings ignore what they do not know."""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Iterator, Mapping
from typing import Annotated, Any, get_args, get_origin

from pydantic import AliasChoices, BaseModel
from pydantic_settings import BaseSettings

__all__ = [
    "env_prefix",
    "leading_words",
    "misspelt_among",
    "misspelt_variables",
    "variables_named",
    "variables_read",
]

_WORD = re.compile(r"[A-Za-z]{4,}")
# How much of a description says what the setting is: the rest says how it behaves.
_LEADING_WORDS = 3
_DESCRIPTION_WEIGHT = 0.95
# difflib's own cutoff for a close match (get_close_matches).
_ALIKE = 0.6


def variables_read(model: type[BaseSettings]) -> dict[str, str]:
    """The variables `model` reads, each with its field's description: its prefix and each field's name in
    capitals, a nested model's fields joined with its delimiter (`TRACESCORE_ASSEMBLY__GRACE_S`), and the
    names a field lists as aliases."""
    prefix = env_prefix(model)
    delimiter = model.model_config.get("env_nested_delimiter")

    def walk(inner: type[BaseModel], stem: str) -> Iterator[tuple[str, str]]:
        for name, field in inner.model_fields.items():
            said = field.description or ""
            yield stem + name.upper(), said
            alias = field.validation_alias
            if isinstance(alias, AliasChoices):
                yield from ((c, said) for c in alias.choices if isinstance(c, str) and c.isupper())
            nested = _model_of(field.annotation)
            if delimiter and nested is not None:
                yield from walk(nested, stem + name.upper() + delimiter)

    return dict(walk(model, prefix))


def variables_named(settings: BaseModel) -> set[str]:
    """The variables `settings` names in its values, in capitals: every setting whose name ends in `_env`
    (a webhook's `secret_env`), at any depth. Their names are the user's, whatever prefix they have: never
    ours to call misspelt."""

    def walk(value: Any) -> Iterator[str]:
        if isinstance(value, BaseModel):
            for name in type(value).model_fields:
                held = getattr(value, name)
                if name.endswith("_env") and isinstance(held, str):
                    yield held.upper()
                else:
                    yield from walk(held)
        elif isinstance(value, (list, tuple, set, frozenset, Mapping)):
            for item in value.values() if isinstance(value, Mapping) else value:
                yield from walk(item)

    return set(walk(settings))


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds as a table of its own (optional or not); None for a list of them (one JSON
    variable) and for plain values."""
    if get_origin(annotation) is Annotated:
        return _model_of(get_args(annotation)[0])
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    members = [a for a in get_args(annotation) if a is not type(None)]
    return _model_of(members[0]) if get_origin(annotation) is not list and len(members) == 1 else None


def misspelt_variables(
    environ: Collection[str],
    models: Collection[type[BaseSettings]],
    also: Mapping[str, str] | None = None,
    unchecked: Collection[str] = (),
) -> dict[str, str | None]:
    """Each variable named in `environ` in the models' prefixes that none of them reads, with the name most
    like it under the same prefix (None: none is alike): the shortest prefix (`TRACESCORE_`) is compared
    with its own names, a settings group's longer one (`TRACESCORE_JUDGE_`, `TRACESCORE_SAMPLING__`) with
    that group's. `also`: names read elsewhere (a command-line option's own variable), with what they set.
    A variable under a prefix in `unchecked` (a service's own, `TRACESCORE_ALERT_`, which only that service
    can check: its config names variables of the user's) and one outside the prefix (`KAFKA_BROKER`) are
    not ours: neither is named."""
    known = dict(also or {})
    for model in models:
        known.update(variables_read(model))
    return misspelt_among(environ, known, [env_prefix(m) for m in models], unchecked)


def env_prefix(model: type[BaseSettings]) -> str:
    """The prefix of the variables `model` reads, in capitals."""
    return str(model.model_config.get("env_prefix", "")).upper()


def misspelt_among(
    environ: Collection[str],
    known: Mapping[str, str],
    prefixes: Collection[str],
    unchecked: Collection[str] = (),
) -> dict[str, str | None]:
    """`misspelt_variables` against the variables read already listed: `known` (name -> what it sets, or the
    first words of that: `leading_words`) under `prefixes`."""
    ordered = sorted({p.upper() for p in prefixes}, key=len, reverse=True)
    skipped = tuple(p.upper() for p in unchecked)
    known = {name.upper(): said for name, said in known.items()}
    found: dict[str, str | None] = {}
    for name in sorted(map(str.upper, environ)):
        prefix = next((p for p in ordered if name.startswith(p)), None)
        if prefix is None or name.startswith(skipped):
            continue
        # A nested variable (`TRACESCORE_ASSEMBLY__GRACE_S`) is its group's by its first part; the nested
        # model reads the rest.
        if prefix + name.removeprefix(prefix).split("__")[0] in known or name in known:
            continue
        candidates = {c: said for c, said in sorted(known.items()) if _under(c, prefix, ordered)}
        found[name] = (
            _closest(name.removeprefix(prefix), _alike(name, candidates), prefix) if candidates else None
        )
    return found


def leading_words(said: str) -> str:
    """The start of a description that says what the setting is (the rest says how it behaves): what a
    misspelt name is compared with, beside the names."""
    return " ".join(said.split(maxsplit=_LEADING_WORDS)[:_LEADING_WORDS])


def _under(name: str, prefix: str, prefixes: Collection[str]) -> bool:
    """`name` is under `prefix` and under no longer one of `prefixes` (a group's names are its own)."""
    return name.startswith(prefix) and not any(len(p) > len(prefix) and name.startswith(p) for p in prefixes)


def _alike(name: str, candidates: Mapping[str, str]) -> Mapping[str, str]:
    """The candidates nested as deep as `name` (a top-level name is compared with top-level names), or all."""
    depth = name.count("__")
    same = {c: said for c, said in candidates.items() if c.count("__") == depth}
    return same or candidates


def _closest(stem: str, candidates: Mapping[str, str], top: str) -> str | None:
    """The candidate most like `stem` (difflib's ratio), by its name, a word of its name, or a word at the
    start of its description: a user writes the thing they mean (`BROKER`), which a description names first
    ("Kafka brokers, host:port") where the name does not (`BOOTSTRAP_SERVERS`). None when none is alike."""

    def likeness(name: str) -> tuple[float, float]:
        own = name.removeprefix(top)
        by_description = [w.upper() for w in _WORD.findall(leading_words(candidates[name]))]
        best = max(
            max(_ratio(stem, word) for word in [own, *own.split("_")]),
            # a little below a name's: a word that is the name's beats the same word in a description
            max((_ratio(stem, word) * _DESCRIPTION_WEIGHT for word in by_description), default=0.0),
        )
        return best, _ratio(stem, own)  # of two alike, the one alike as a whole (TOPICS: TOPIC)

    best = max(candidates, key=likeness)
    return best if likeness(best)[0] >= _ALIKE else None


def _ratio(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a, b).ratio()
