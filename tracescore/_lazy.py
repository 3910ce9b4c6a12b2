"""Module-level `__getattr__`s: public names imported on first use, and names that moved to another public
home, still importable from the old path with a DeprecationWarning; and a mapping whose values are imported
on first lookup (the commands of the `tracescore` group).

A package lists `name -> private module` once and pays for a module (the judges' HTTP clients, the report's
templates) only when one of its names is looked up; a name that moved is listed `name -> its home`."""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import Any

from tracescore._extras import install_line

__all__ = ["LazyMapping", "lazy_exports", "moved_names"]


def lazy_exports(
    package: str,
    lazy: Mapping[str, str],
    names: list[str],
    moved: Mapping[str, str] | None = None,
    extra: str | None = None,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """(`__getattr__`, `__dir__`) for `package`, whose public `names` are its `__all__`: each name in `lazy`
    is imported from its module on first lookup and cached in the package's namespace; each name in `moved`
    is looked up in its new home, with a DeprecationWarning (see `moved_names`). `extra`: the optional extra
    whose dependencies the names need, named when one of them is not installed."""
    moved = moved or {}

    def __getattr__(name: str) -> Any:
        module = lazy.get(name)
        if module is None:
            return _moved(package, name, moved.get(name))
        try:
            value = getattr(importlib.import_module(module), name)
        except ModuleNotFoundError as missing:
            if extra is None or not missing.name or missing.name.partition(".")[0] == "tracescore":
                raise
            # The SDK alone (`pip install tracescore`) lacks the extra's dependencies: say which extra, as the
            # command does, not only the third-party module's name.
            raise ModuleNotFoundError(
                f"{package}.{name} needs the {extra} extra ({missing.name} is not installed): "
                f"{install_line(extra)}",
                name=missing.name,
            ) from missing
        setattr(sys.modules[package], name, value)  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(names)

    return __getattr__, __dir__


class LazyMapping(MutableMapping[str, Any]):
    """A mapping whose keys are known at once and whose values are imported on first lookup: each name in
    `lazy` is the attribute of that name of its module. Its keys, `len` and `in` import nothing; a lookup
    imports the one module (values(), items() all of them); a value set is held as given."""

    def __init__(self, lazy: Mapping[str, str]) -> None:
        self._lazy = dict(lazy)
        self._held: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._held:
            if name not in self._lazy:
                raise KeyError(name)
            self._held[name] = getattr(importlib.import_module(self._lazy[name]), name)
        return self._held[name]

    def __setitem__(self, name: str, value: Any) -> None:
        self._held[name] = value

    def __delitem__(self, name: str) -> None:
        if name not in self._held and name not in self._lazy:
            raise KeyError(name)
        self._held.pop(name, None)
        self._lazy.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter({**dict.fromkeys(self._lazy), **dict.fromkeys(self._held)})

    def __len__(self) -> int:
        return len(self._lazy.keys() | self._held.keys())

    def __contains__(self, name: object) -> bool:
        return name in self._held or name in self._lazy

    def imported(self) -> dict[str, Any]:
        """The values looked up (or set) so far, importing nothing more."""
        return dict(self._held)


def moved_names(package: str, moved: Mapping[str, str]) -> Callable[[str], Any]:
    """A `__getattr__` for `package` answering each name in `moved` (`name -> the public package that is its
    home now`) from that home, with a DeprecationWarning naming it; never cached, so every importing module
    is told."""

    def __getattr__(name: str) -> Any:
        return _moved(package, name, moved.get(name))

    return __getattr__


def _moved(package: str, name: str, home: str | None) -> Any:
    if home is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    warnings.warn(
        f"{package}.{name} is deprecated: import it from {home} (`from {home} import {name}`)",
        DeprecationWarning,
        stacklevel=3,  # the code that looked the name up, past the module's __getattr__
    )
    return getattr(importlib.import_module(home), name)
