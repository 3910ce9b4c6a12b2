"""The import contracts at run time: importing a stage in a process of its own loads only what the contracts
in pyproject.toml let it import. import-linter checks the import statements; this checks what `import
tracescore.score` (a notebook, a CI gate) really loads, parent packages and module-level side effects
included, which no static graph sees.

`make lint` runs this file.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from _forked import run_forked

REPO = Path(__file__).resolve().parents[1]

# Libraries a stage must not load when imported, beyond what the contracts say about tracescore's own
# stages, each with why.
LIBRARIES_NOT_LOADED = {
    # Kafka is the SDK's and the services' transport; the stages without Kafka never need its client.
    "tracescore.model": {"kafka"},
    "tracescore.extract": {"kafka"},
    "tracescore.sample": {"kafka"},
    # ... and score's judges load their HTTP clients on first use (tracescore/score/__init__.py).
    "tracescore.score": {"kafka", "openai", "httpx", "httpx2"},
    # The services start without the LLM client: alert never judges, conversations and consume make one only
    # when a judge is configured (its import is over half of a service's start). Nor the HTTP client of
    # the sinks that post (a webhook, Phoenix) unless one is configured, nor jinja2 unless a metric is
    # declared with a template.
    "tracescore.alert": {"openai", "httpx2", "jinja2"},
    "tracescore.conversations": {"openai", "httpx2", "jinja2"},
    "tracescore.consume": {"openai", "httpx2", "jinja2"},
}


def contracts() -> list[dict[str, object]]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    found: list[dict[str, object]] = config["tool"]["importlinter"]["contracts"]
    return found


def forbidden_at_run_time(contract_list: list[dict[str, object]]) -> dict[str, set[str]]:
    """Stage -> the tracescore packages importing it must not load: a forbidden contract's modules, and in a
    layers contract every layer above the stage's own and its independent siblings (`a | b`)."""
    rules: dict[str, set[str]] = {}
    for contract in contract_list:
        if contract["type"] == "forbidden":
            for source in contract["source_modules"]:  # type: ignore[attr-defined]
                rules.setdefault(source, set()).update(contract["forbidden_modules"])  # type: ignore[arg-type]
        elif contract["type"] == "layers":
            layers = [[m.strip() for m in layer.split("|")] for layer in contract["layers"]]  # type: ignore[attr-defined]
            for index, layer in enumerate(layers):
                above = {m for higher in layers[:index] for m in higher}
                for module in layer:
                    siblings = {m for m in layer if m != module}
                    rules.setdefault(module, set()).update(above | siblings)
    for stage, libraries in LIBRARIES_NOT_LOADED.items():
        rules.setdefault(stage, set()).update(libraries)
    return rules


def breaches(stage: str, loaded: list[str], forbidden: set[str]) -> list[str]:
    return sorted(m for m in loaded if any(m == f or m.startswith(f + ".") for f in forbidden))


RULES = forbidden_at_run_time(contracts())

# What a service's process loads before it reaches Kafka (`tracescore alert`, settings read and checked):
# what its stage may load, the command line itself included, and beyond the contracts none of the other
# stages it never runs. The misspelt-variable check reads every stage's variables from
# tracescore/cli/_variables.json: importing those stages instead was a third of each service's start
# (benchmarks/service_start.py).
# Nor, started without a config file, the YAML parser.
COMMANDS_NOT_LOADING = {
    "alert": {"tracescore.instrument", "yaml"},
    "conversations": {"tracescore.instrument", "yaml"},
    "consume": {"tracescore.conversations", "tracescore.instrument", "yaml"},
}
COMMAND_RULES = {
    command: (RULES[f"tracescore.{command}"] - {"tracescore.cli"}) | others
    for command, others in COMMANDS_NOT_LOADING.items()
}
# Started against a port nothing listens on: it reads its settings, checks the environment's variables, then
# gives up on Kafka.
_STARTED = """
from tracescore.cli import main
from tracescore.testing import closed_port
with closed_port() as port:
    try:
        main([{command!r}, "--bootstrap-servers", f"127.0.0.1:{{port}}", "--connect-timeout", "0.5"])
    except SystemExit as exit:
        assert exit.code == 1, exit.code
"""


# Imported once, before each stage's process is forked: libraries several stages load. They are in every
# stage's list, so none may load what a rule forbids (checked first, by itself: a library that came to load
# a forbidden module fails here, not in the stages that never import it). No tracescore module: which of
# ours a stage loads is what is checked.
PRELOAD = "import opentelemetry.sdk.trace, pydantic_settings, tenacity"
_NOTHING = "(the preload alone)"


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """Stage -> every module in sys.modules after `import <stage>` in a process of its own (forked from one
    interpreter that imported only PRELOAD: an interpreter's start and pydantic's import were a fifth or more
    of each stage's time)."""
    program = "import importlib, json, sys\n{}\nprint(json.dumps([*sys.modules]))"
    jobs = {stage: (program.format(f"importlib.import_module({stage!r})"), {}) for stage in RULES}
    jobs.update({f"tracescore {c}": (program.format(_STARTED.format(command=c)), {}) for c in COMMAND_RULES})
    jobs[_NOTHING] = (program.format("pass"), {})
    done = {}
    for stage, outcome in run_forked(PRELOAD, jobs, tmp_path_factory.mktemp("imports")).items():
        assert outcome.returncode == 0, f"import {stage} failed:\n{outcome.stderr}"
        done[stage] = json.loads(outcome.stdout.strip().splitlines()[-1])
    alone = done.pop(_NOTHING)
    preloaded = {m for forbidden in RULES.values() for m in breaches("", alone, forbidden)}
    assert not preloaded, f"PRELOAD loads modules a rule forbids (take it out): {sorted(preloaded)}"
    return done


@pytest.mark.parametrize("stage", sorted(RULES))
def test_importing_a_stage_loads_only_what_the_contracts_allow(
    loaded: dict[str, list[str]], stage: str
) -> None:
    found = breaches(stage, loaded[stage], RULES[stage])
    assert not found, f"import {stage} loaded modules its contracts forbid: {found}"


@pytest.mark.parametrize("command", sorted(COMMAND_RULES))
def test_a_service_s_start_loads_only_its_own_stage(loaded: dict[str, list[str]], command: str) -> None:
    found = breaches(command, loaded[f"tracescore {command}"], COMMAND_RULES[command])
    assert not found, f"tracescore {command} loaded modules it never runs at its start: {found}"


def test_every_stage_of_the_contracts_is_checked() -> None:
    stages = {p.name for p in (REPO / "tracescore").iterdir() if (p / "__init__.py").exists()}
    checked = {stage.split(".")[1] for stage in RULES if stage.count(".") == 1}
    assert stages - {"testing"} <= checked, "a stage without a contract is not checked"


def test_the_rules_read_the_contracts() -> None:
    rules = forbidden_at_run_time(
        [
            {"type": "layers", "layers": ["app.top", "app.a | app.b", "app.base"]},
            {"type": "forbidden", "source_modules": ["app.base"], "forbidden_modules": ["app.sdk"]},
        ]
    )
    assert rules["app.a"] == {"app.top", "app.b"}, "the layers above and the independent sibling"
    assert rules["app.base"] == {"app.top", "app.a", "app.b", "app.sdk"}
    assert rules["app.top"] == set()
    assert breaches("app.a", ["app.b._x", "app.base", "app.bx"], rules["app.a"]) == ["app.b._x"]
