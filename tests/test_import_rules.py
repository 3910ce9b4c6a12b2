"""One public path per name: a private module (`_name`) is imported only from inside its own package, or
from the tests of that package (tests/<stage>/... mirrors tracescore/<stage>/...). Examples and benchmarks
import public names only, and a test imports a name that has a public path from that path. Which stage
may import which is import-linter's job (`lint-imports`, pyproject.toml); these rules are here because
import-linter cannot say "private, except from its own tests".

`make lint` runs this file.
"""

from __future__ import annotations

import ast
import functools
from collections import deque
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# The command line (tracescore/cli/) is the composition root of the commands: it may reach a stage's private
# helpers (score a file, render a report, describe the cascade's lift) rather than make them public API.
COMPOSITION_ROOTS = ("tracescore.cli.",)
# Files that read another stage's internals on purpose, each with why. Keep this short: a name used here
# by more than a benchmark of that very internal wants to be public instead.
READS_INTERNALS = {
    # the offline judge's sentence and block splitting, timed on their own
    "benchmarks/consumer_throughput.py": {"tracescore.score"},
    "benchmarks/offline_throughput.py": {"tracescore.score"},
    # judge prompts sized with the same sentence splitter the metrics use
    "benchmarks/judge_cost.py": {"tracescore.score"},
    # the offline judge's word lists and the verdicts task, to build and check its inputs; the split the
    # cascade calibrates on (sample._calibration.calibration_half), so both benchmarks split alike
    "benchmarks/halueval_accuracy.py": {"tracescore.score", "tracescore.sample"},
    "benchmarks/offline_shapes.py": {"tracescore.score", "tracescore.sample"},
    # the offline judge's context sentences, embedded to test a semantic alignment against it
    "benchmarks/offline_semantic.py": {"tracescore.score"},
    # the same sentences and word lists, to pair each claim with its closest context windows for an NLI model
    "benchmarks/offline_nli.py": {"tracescore.score"},
    "benchmarks/offline_long_context.py": {"tracescore.score"},
    # the offline judge's stemmer swapped for a variant (and the keys built from it when imported)
    "benchmarks/offline_stemmer.py": {"tracescore.score"},
    # fits the cascade's calibration coefficients (sample._calibration) on the labelled split
    "benchmarks/cascade_sampling.py": {"tracescore.sample"},
    # the consumer's pipeline step and judging queue, timed on their own (hooks around the admission path)
    "benchmarks/consumer_latency.py": {"tracescore.consume"},
    "benchmarks/trace_assembly.py": {"tracescore.consume"},
    # the consumer's pipeline step driven with a clock of its own: its reading timed hot against cold
    "benchmarks/reading_hot_cold.py": {"tracescore.consume"},
    # the same step's parts (the pipeline's find, the reader's steps and found) counted one at a time
    "benchmarks/reading_instructions.py": {"tracescore.consume", "tracescore.extract"},
    # swaps the kafka-python client the consumer builds (consume._clients) to measure client settings
    "benchmarks/kafka_consumer_levers.py": {"tracescore.consume"},
    # the services' restore look for their outputs (the service base's OutputLog and FoundOutputs), timed
    "benchmarks/restore_look.py": {"tracescore"},
    # the services' look for their named topics (the shared tracescore._kafka.topic_partitions), timed
    "benchmarks/metadata_lookup.py": {"tracescore"},
    # the held turns of grounding across turns (conversations._grounder), measured on their own
    "benchmarks/grounding_cost.py": {"tracescore.conversations"},
    # the learning models fed through the consumer's lock (consume._shared_policy.SharedPolicy)
    "tests/sample/test_learning.py": {"tracescore.consume"},
    # writes the command line's list of every variable read (tracescore/cli/_variables.json, which its
    # misspelt-variable check reads) beside the settings reference it generates from the same classes
    "docs/gen_reference.py": {"tracescore.cli"},
}


Imports = list[ast.Import | ast.ImportFrom]
# What holds statements: an import is one, and no expression holds one (a lambda's body is an expression).
_BLOCKS = (ast.stmt, ast.excepthandler, ast.match_case)


def _imports(tree: ast.AST) -> Imports:
    """Every import statement of a module, nested ones included, in `ast.walk`'s order: only the statements
    are walked, not their expressions (most of a module's nodes)."""
    found: Imports = []
    todo = deque([tree])
    while todo:
        node = todo.popleft()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
            continue
        for _, value in ast.iter_fields(node):
            if isinstance(value, list):
                todo.extend(child for child in value if isinstance(child, _BLOCKS))
    return found


@pytest.fixture(scope="module")
def imports() -> list[tuple[Path, Imports]]:
    """Every file's imports, each file parsed once for the tests of this module (it does not change)."""
    return [(path, _imports(ast.parse(path.read_text(), str(path)))) for path in _python_files()]


def _imported_modules(nodes: Imports, package: str) -> Iterator[tuple[int, str]]:
    """(line, dotted module) for every import; `from a import _b` counts as importing `a._b`."""
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative import inside the package
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            yield node.lineno, base
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    yield node.lineno, f"{base}.{alias.name}"


def _owner(module: str) -> str | None:
    """The stage a private module belongs to (`tracescore.score.judges._offline` -> `tracescore.score`;
    `tracescore._kafka` -> `tracescore`); None for a public path."""
    parts = module.split(".")
    if parts[0] != "tracescore":
        return None
    if any(part.startswith("_") and not part.startswith("__") for part in parts[1:]):
        return "tracescore" if parts[1].startswith("_") else ".".join(parts[:2])
    return None


def _allowed(importer: Path, owner: str) -> bool:
    relative = importer.relative_to(REPO)
    if owner in READS_INTERNALS.get(relative.as_posix(), ()):
        return True
    top = relative.parts[0]
    if top == "tracescore":
        module = ".".join(relative.with_suffix("").parts)
        if f"{module}.".startswith(COMPOSITION_ROOTS):
            return True
        # Anywhere inside the owning package; the top-level private modules (`tracescore._kafka`) are the
        # shared internals every stage may use.
        return module.startswith(owner + ".")
    if top == "tests":
        # tests/score/judges/test_x.py tests the stage tracescore.score; tests/test_x.py the shared internals.
        return owner == ".".join(("tracescore", *relative.parts[1:-1])[:2])
    return False  # examples, benchmarks, docs: public names only


def _python_files() -> Iterator[Path]:
    for folder in ("tracescore", "tests", "examples", "benchmarks", "docs"):
        yield from sorted((REPO / folder).rglob("*.py"))


def _violations(imports: list[tuple[Path, Imports]]) -> list[str]:
    found = []
    for path, nodes in imports:
        relative = path.relative_to(REPO)
        package = ".".join(relative.parent.parts)
        for line, module in _imported_modules(nodes, package):
            owner = _owner(module)
            if owner is not None and not _allowed(path, owner):
                found.append(f"{relative}:{line}: imports {module} (private to {owner})")
    return sorted(set(found))


@functools.cache  # asked once per import of a private module, of a few packages
def _public_names(package: str) -> frozenset[str]:
    """What a package's `__init__` exports: its `__all__` and the names it imports on first use (`_LAZY`)."""
    init = REPO.joinpath(*package.split("."), "__init__.py")
    if not init.exists():
        return frozenset()
    names: set[str] = set()
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in ("__all__", "_LAZY") for t in node.targets
        ):
            items = node.value.keys if isinstance(node.value, ast.Dict) else getattr(node.value, "elts", [])
            names |= {i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)}
    return frozenset(names)


def _public_home(module: str, name: str) -> str | None:
    """Where `name`, imported from the private `module`, is public: the shared model, else the nearest
    public package above the module."""
    parts = module.split(".")
    first_private = next(i for i, part in enumerate(parts) if part.startswith("_"))
    packages = ["tracescore.model", *(".".join(parts[:j]) for j in range(first_private, 1, -1))]
    return next((p for p in packages if name in _public_names(p)), None)


def _private_paths_to_public_names(imports: list[tuple[Path, Imports]]) -> list[str]:
    found = []
    for path, nodes in imports:
        relative = path.relative_to(REPO)
        if relative.parts[0] == "tracescore":
            continue  # inside the package a private path avoids import cycles
        for node in nodes:
            if isinstance(node, ast.ImportFrom) and _owner(node.module or "") is not None:
                for alias in node.names:
                    home = _public_home(node.module or "", alias.name)
                    if home is not None:
                        found.append(f"{relative}:{node.lineno}: {alias.name} from {home}, not {node.module}")
    return found


def test_names_that_are_public_are_imported_from_their_public_path(
    imports: list[tuple[Path, Imports]],
) -> None:
    found = _private_paths_to_public_names(imports)
    assert not found, "\n".join(found)


def test_private_modules_are_imported_only_by_their_package_and_its_tests(
    imports: list[tuple[Path, Imports]],
) -> None:
    violations = _violations(imports)
    assert not violations, "import the public name instead:\n" + "\n".join(violations)


@pytest.mark.parametrize(
    ("importer", "module", "allowed"),
    [
        ("tracescore/sample/_policy.py", "tracescore.score._types", False),
        ("tracescore/score/metrics/_quality.py", "tracescore.score.judges._protocol", True),
        ("tracescore/consume/_consumer.py", "tracescore.emit._kafka", False),
        ("tracescore/alert/_service.py", "tracescore._kafka", True),
        ("tests/score/judges/test_offline.py", "tracescore.score.judges._offline", True),
        ("tests/score/test_batch.py", "tracescore.score.judges._offline", True),
        ("tests/consume/test_faults.py", "tracescore.score.judges._offline", False),
        ("tests/sample/test_policy.py", "tracescore.score._types", False),
        ("tests/test_kafka_config.py", "tracescore._kafka_config", True),
        ("tests/test_kafka_config.py", "tracescore.consume._settings", False),
        ("benchmarks/trace_assembly.py", "tracescore.score._types", False),
        ("examples/demo.py", "tracescore.score._report", False),
    ],
)
def test_the_rule_tells_own_from_foreign(importer: str, module: str, allowed: bool) -> None:
    owner = _owner(module)
    assert owner is not None
    assert _allowed(REPO / importer, owner) is allowed


def test_a_public_name_has_its_home() -> None:
    assert _public_home("tracescore.score.judges._offline", "OfflineJudge") == "tracescore.score.judges"
    assert _public_home("tracescore.score.metrics._faithfulness", "Verdict") == "tracescore.model"
    assert _public_home("tracescore.score._report", "render_report") == "tracescore.score"
    assert _public_home("tracescore.score._report", "ReportCollector") is None
