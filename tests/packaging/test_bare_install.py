"""`pip install tracescore` (no extras) into a fresh virtualenv outside the repo: what it pulls in, and a
decorated call running there.

The virtualenv holds the default dependencies only and is cached under ~/.cache/tracescore, keyed by the
content of pyproject.toml (parallel sessions share it under a lock). The package itself is built from this
tree on every run and installed beside it with --target, so the code under test is always the current one.
It is built without pip's build isolation, by the backend pyproject.toml names installed once into a cached
virtualenv of its own: what is checked here is the wheel's content, not the build (the README's lines, which
build with isolation as a newcomer does, are run in test_readme_install.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from tracescore.testing import locked

REPO = Path(__file__).resolve().parents[2]
CACHE_ROOT = Path(os.environ.get("TRACESCORE_CACHE_DIR", Path.home() / ".cache" / "tracescore"))
PIP_TIMEOUT_S = 900

# What the scoring service or other transports need, and the SDK must not pull in.
NOT_IN_THE_SDK = {
    "grpcio",
    "openai",
    "jinja2",
    "click",
    "pysbd",
    "tqdm",
    "tenacity",
    "httpx2",
    "httpx",
    "requests",
}
SDK_NEEDS = {"opentelemetry-api", "opentelemetry-sdk", "opentelemetry-proto", "kafka-python", "pydantic"}


def _run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, check=False, **kwargs
    )
    assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}"
    return done


def checkout_copy(source: Path) -> Path:
    """What building the package reads of a checkout, copied to `source`: setuptools leaves build/ and
    *.egg-info beside the sources it builds, so nothing is built in the working tree."""
    source.mkdir(parents=True, exist_ok=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    shutil.copytree(REPO / "tracescore", source / "tracescore", ignore=shutil.ignore_patterns("__pycache__"))
    return source


def _cached_venv(kind: str, key: str, fill: Callable[[list[str]], None]) -> Path:
    """A virtualenv under the cache, made once per `key` (parallel sessions wait on its lock) and filled by
    `fill`, which gets the command that runs its pip."""
    home = CACHE_ROOT / kind / key
    (CACHE_ROOT / kind).mkdir(parents=True, exist_ok=True)
    with locked(CACHE_ROOT / kind / f"{key}.lock"):
        if not (home / ".complete").exists():
            _run([sys.executable, "-m", "venv", "--clear", str(home)])
            fill([str(home / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "--quiet"])
            (home / ".complete").write_text(key)
    return home


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    requires = tomllib.loads((REPO / "pyproject.toml").read_text())["build-system"]["requires"]
    key = hashlib.sha256("\n".join(requires).encode()).hexdigest()[:16]
    # An isolated build installed its backend from the index on every run (three quarters of the build's CPU).
    backend = _cached_venv("wheel-build", key, lambda pip: _run([*pip, "install", *requires]))
    source = checkout_copy(tmp_path_factory.mktemp("source"))
    out = tmp_path_factory.mktemp("wheel")
    build = ["wheel", "--no-deps", "--no-build-isolation", "--quiet", "-w", str(out), str(source)]
    _run([str(backend / "bin" / "python"), "-m", "pip", *build])
    [built] = out.glob("tracescore-*.whl")
    return built


@pytest.fixture(scope="module")
def bare_venv(wheel: Path) -> Path:
    def fill(pip: list[str]) -> None:
        _run([*pip, "install", str(wheel)])  # the default dependencies, exactly as a user gets them
        _run([*pip, "uninstall", "-y", "tracescore"])  # the package comes from each run's own wheel

    key = hashlib.sha256((REPO / "pyproject.toml").read_bytes()).hexdigest()[:16]
    return _cached_venv("bare-install", key, fill)


@pytest.fixture(scope="module")
def package_dir(wheel: Path, bare_venv: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site")
    python = str(bare_venv / "bin" / "python")
    # --no-compile: the tests import a few of its modules; the rest need no bytecode.
    _run(
        [
            python,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-compile",
            "--target",
            str(target),
            str(wheel),
        ]
    )
    return target


def _bare_python(bare_venv: Path, package_dir: Path, code: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACESCORE_", "OTEL_", "PYTHON"))}
    env["PYTHONPATH"] = str(package_dir)
    return subprocess.run(
        [str(bare_venv / "bin" / "python"), "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=package_dir.parent,  # outside the repo: nothing imports from the working tree
        env=env,
    )


def test_the_bare_install_holds_only_what_the_sdk_needs(bare_venv: Path) -> None:
    listed = _run([str(bare_venv / "bin" / "python"), "-m", "pip", "list", "--format=json"]).stdout
    installed = {entry["name"].lower() for entry in json.loads(listed)}
    assert installed >= SDK_NEEDS, SDK_NEEDS - installed
    assert not installed & NOT_IN_THE_SDK, installed & NOT_IN_THE_SDK
    assert not [name for name in installed if name.startswith("opentelemetry-exporter-otlp-proto-g")]


def test_a_decorated_call_runs_on_the_bare_install(
    bare_venv: Path, package_dir: Path, closed_port: int
) -> None:
    done = _bare_python(
        bare_venv,
        package_dir,
        """
        import json, sys
        import tracescore

        # The broker is down: nothing listens there.
        instrumentation = tracescore.init("bare-app", bootstrap_servers="127.0.0.1:CLOSED_PORT")

        @tracescore.retriever
        def search(query):
            return [{"content": "Paris is the capital of France.", "id": "d1", "score": 0.9}]

        @tracescore.rag
        def answer(query):
            search(query)
            return "Paris."

        result = answer("Capital of France?")
        tracescore.shutdown(timeout_s=1)
        heavy = sorted(m for m in ("openai", "jinja2", "click", "grpc", "httpx2") if m in sys.modules)
        print(json.dumps({"result": result, "stats": instrumentation.stats(), "heavy": heavy,
                          "from": tracescore.__file__}))
        """.replace("CLOSED_PORT", str(closed_port)),
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["result"] == "Paris."
    assert report["heavy"] == []
    assert report["from"].startswith(str(package_dir))
    assert sum(report["stats"]["dropped"].values()) == 2  # the rag and the retriever span, counted


def test_the_command_says_which_extra_to_install(bare_venv: Path, package_dir: Path) -> None:
    done = _bare_python(
        bare_venv, package_dir, "import runpy; runpy.run_module('tracescore.cli', run_name='__main__')"
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "the tracescore command needs the consumer extra (click is not installed): "
        "pip install '.[consumer]' in a tracescore checkout"
    ]


def test_the_library_without_its_extra_names_the_extra(bare_venv: Path, package_dir: Path) -> None:
    done = _bare_python(
        bare_venv,
        package_dir,
        """
        import tracescore.score

        try:
            tracescore.score.Faithfulness
        except ModuleNotFoundError as exc:
            print(exc)
        """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "tracescore.score.Faithfulness needs the consumer extra (pysbd is not installed): "
        "pip install '.[consumer]' in a tracescore checkout"
    )


def test_otlp_export_without_its_extra_names_the_extra(bare_venv: Path, package_dir: Path) -> None:
    done = _bare_python(
        bare_venv,
        package_dir,
        """
        import os
        import tracescore

        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:4318"
        try:
            tracescore.init("bare-app")
        except ImportError as exc:
            print(exc)
        """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "OTLP export over http/protobuf needs the otlp extra: pip install '.[otlp]' in a tracescore checkout"
    )
