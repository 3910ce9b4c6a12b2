"""One public home per name: a stage's `__all__` lists what that stage defines, the shared types come from
`tracescore.model` only, and no object is public under the same name in two stages. Allowed on purpose: the
top-level `tracescore` face (the SDK's names), and a stage re-exporting its own subpackages' names
(`tracescore.score` for `tracescore.score.metrics` and `.judges`). Names that moved stay importable from the
old path through a module `__getattr__` with a DeprecationWarning (tests/model/test_model.py), outside
`__all__`.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections import defaultdict
from typing import Any

import tracescore

FACE = "tracescore"


def public_packages() -> list[str]:
    found = [FACE]
    for module in pkgutil.walk_packages(tracescore.__path__, f"{FACE}."):
        if not any(part.startswith("_") for part in module.name.split(".")[1:]):
            found.append(module.name)
    return sorted(found)


def stage_of(module: str) -> str:
    """`tracescore.score.metrics._faithfulness` -> `tracescore.score`; a top-level module is its own."""
    return ".".join(module.split(".")[:2])


def exported() -> dict[str, dict[str, Any]]:
    """Public package -> its `__all__` names and objects."""
    out = {}
    for name in public_packages():
        package = importlib.import_module(name)
        out[name] = {n: getattr(package, n) for n in getattr(package, "__all__", [])}
    return out


def second_homes(packages: dict[str, dict[str, Any]]) -> list[str]:
    homes: dict[tuple[str, int], list[str]] = defaultdict(list)
    for package, names in packages.items():
        for name, value in names.items():
            homes[(name, id(value))].append(package)
    found = []
    for (name, _), where in sorted(homes.items()):
        stages = {stage_of(p) for p in where if p != FACE}
        if len(stages) > 1 or (len(stages) == 1 and FACE in where and stages != {"tracescore.instrument"}):
            found.append(f"{name}: {', '.join(sorted(where))}")
    return found


def foreign_definitions(packages: dict[str, dict[str, Any]]) -> list[str]:
    """Names a stage lists but another stage defines (shared private modules, `tracescore._x`, may be
    published by the one stage that uses them)."""
    found = []
    for package, names in packages.items():
        if package == FACE:
            continue
        for name, value in names.items():
            defined_in = getattr(value, "__module__", None)
            if not isinstance(defined_in, str) or not defined_in.startswith(f"{FACE}."):
                continue  # a constant, or a third-party type: identity decides (second_homes)
            if stage_of(defined_in).split(".")[1].startswith("_"):
                continue
            if stage_of(defined_in) != stage_of(package):
                found.append(f"{package}.{name} is defined in {defined_in}")
    return found


def test_no_public_object_has_a_second_home() -> None:
    found = second_homes(exported())
    assert not found, "one home per name (a moved one: a DeprecationWarning alias):\n" + "\n".join(found)


def test_a_stage_lists_only_what_it_defines() -> None:
    found = foreign_definitions(exported())
    assert not found, "\n".join(found)


def test_the_rules_tell_a_second_home_from_a_face_or_a_subpackage() -> None:
    shared, own = object(), object()
    packages = {
        FACE: {"rag": own},
        "tracescore.instrument": {"rag": own},
        "tracescore.score": {"Faithfulness": shared, "MetricResult": own},
        "tracescore.score.metrics": {"Faithfulness": shared},
        "tracescore.model": {"MetricResult": own},
    }
    assert second_homes(packages) == ["MetricResult: tracescore.model, tracescore.score"]
    face_of_another_stage = {FACE: {"x": own}, "tracescore.emit": {"x": own}}
    assert second_homes(face_of_another_stage) == ["x: tracescore, tracescore.emit"]


def test_the_face_offers_the_sdk_names_it_lists_lazily() -> None:
    # The face lists the SDK's names itself (static for type checkers, imported on first use), so the two
    # lists are written twice on purpose: this keeps them the same.
    import tracescore.instrument

    assert sorted(tracescore.__all__) == sorted([*tracescore.instrument.__all__, "__version__"])
