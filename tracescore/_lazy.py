"""Module-level `__getattr__`s: public names imported on first use, and names that moved to another public
home, still importable from the old path with a DeprecationWarning.

A package lists `name -> private module` once and pays for a module (the judges' HTTP clients, the report's
templates) only when one of its names is looked up; a name that moved is listed `name -> its home`."""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports", "moved_names"]


def lazy_exports(
    package: str, lazy: Mapping[str, str], names: list[str], moved: Mapping[str, str] | None = None
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """(`__getattr__`, `__dir__`) for `package`, whose public `names` are its `__all__`: each name in `lazy`
    is imported from its module on first lookup and cached in the package's namespace; each name in `moved`
    is looked up in its new home, with a DeprecationWarning (see `moved_names`)."""
    moved = moved or {}

    def __getattr__(name: str) -> Any:
        module = lazy.get(name)
        if module is None:
            return _moved(package, name, moved.get(name))
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(names)

    return __getattr__, __dir__


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
