"""Metric registry: built-ins, dotted paths, entry points (a real dist-info on sys.path), TOML configs, and
the error message of every way a name can fail."""

from __future__ import annotations

import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tracescore.model import MetricStatus, RagRecord
from tracescore.score import (
    ENTRY_POINT_GROUP,
    MetricLoadError,
    load_metric_config,
    make_metrics,
    resolve_metrics,
)
from tracescore.score._registry import BUILTIN_METRICS
from tracescore.score.judges import OfflineJudge
from tracescore.score.metrics import DistinctN, Faithfulness, LLMJudgeMetric, PythonMetric, evaluate_record

RECORD = RagRecord(query="Where is it?", contexts=("It is in Delhi.",), answer="IT IS IN DELHI")

PLUGIN = textwrap.dedent(
    """
    from tracescore.model import MetricResult
    from tracescore.score.metrics import python_metric


    class Shouty:
        name = "shouty"

        def __init__(self, factor: float = 1.0) -> None:
            self.factor = factor

        async def score(self, record, judge):
            letters = [c for c in record.answer if c.isalpha()]
            share = sum(c.isupper() for c in letters) / max(1, len(letters))
            return MetricResult(metric=self.name, score=min(1.0, share * self.factor), judge=judge.name)


    class SyncMetric:
        name = "sync"

        def score(self, record, judge):
            return None


    @python_metric
    def short_answer(record):
        return 1.0 if len(record.answer) < 20 else 0.0


    def make_shouty():
        return Shouty(0.5)


    def make_nothing():
        return "nothing"


    def broken_factory():
        raise RuntimeError("boom")


    def scorer(record):
        return 0.5


    class Holder:
        metric = Shouty(0.25)


    INSTANCE = Shouty()
    NUMBER = 42
    SYNC = SyncMetric()
    """
)


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh, importable plugin module; its name is unique so no test sees another's import."""
    name = f"tsplugin_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(PLUGIN, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def install_entry_points(root: Path, monkeypatch: pytest.MonkeyPatch, lines: list[str]) -> None:
    """A distribution with `tracescore.metrics` entry points, found by importlib.metadata on sys.path."""
    dist = root / "tsplugin_dist-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tsplugin-dist\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n" + "\n".join(lines) + "\n")
    monkeypatch.syspath_prepend(str(root))


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "metrics.toml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def error_of(names: list[str], config: Path | None = None) -> str:
    with pytest.raises(MetricLoadError) as caught:
        resolve_metrics(names, config=config)
    return str(caught.value)


# -- built-ins --------------------------------------------------------------------------------------------
def test_builtins_resolve_in_order() -> None:
    distinct, faithfulness = make_metrics(["distinct_2", "faithfulness"])
    assert isinstance(distinct, DistinctN) and distinct.name == "distinct_2"
    assert isinstance(faithfulness, Faithfulness)
    assert make_metrics([]) == []


def test_builtins_follow_the_factory_table(monkeypatch: pytest.MonkeyPatch) -> None:
    # BUILTIN_METRICS is the one table of built-ins: an entry added there is resolvable at once.
    monkeypatch.setitem(BUILTIN_METRICS, "extra", lambda: DistinctN(3))
    (metric,) = resolve_metrics(["extra"])
    assert isinstance(metric, DistinctN) and metric.name == "distinct_3"


def test_unknown_name_lists_the_known_ones() -> None:
    message = error_of(["faithfulness", "nonsense", "other"])
    assert message.startswith("unknown metric(s) nonsense, other; known: ")
    assert "distinct_2" in message and "faithfulness" in message and "package.module:attr" in message
    with pytest.raises(ValueError, match="unknown metric"):  # still a ValueError for the CLI
        make_metrics(["nonsense"])


def test_a_metric_asked_for_twice_is_an_error() -> None:
    assert "named 'faithfulness'" in error_of(["faithfulness", "faithfulness"])


# -- dotted paths -----------------------------------------------------------------------------------------
async def test_dotted_paths_load_instances_classes_and_factories(plugin: str) -> None:
    # One resolve per object: all three are named "shouty", and one run takes each name once.
    (instance,), (made,), (cls,) = (
        resolve_metrics([f"{plugin}:{a}"]) for a in ("INSTANCE", "make_shouty", "Shouty")
    )
    short, distinct = resolve_metrics([f"{plugin}:short_answer", "distinct_2"])
    assert isinstance(short, PythonMetric) and short.name == "short_answer"
    assert isinstance(distinct, DistinctN)
    assert type(made).__name__ == type(cls).__name__ == type(instance).__name__ == "Shouty"
    assert (instance.factor, made.factor, cls.factor) == (1.0, 0.5, 1.0)  # type: ignore[attr-defined]
    (shouty,) = await evaluate_record(RECORD, [instance], OfflineJudge())
    assert shouty.metric == "shouty" and shouty.score == 1.0


def test_dotted_path_attribute_may_be_dotted(plugin: str) -> None:
    (metric,) = resolve_metrics([f"{plugin}:Holder.metric"])
    assert metric.name == "shouty" and metric.factor == 0.25  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("attr", "message"),
    [
        ("Missing", "module '{plugin}' has no attribute 'Missing'"),
        ("NUMBER", "'{plugin}:NUMBER' is int 42, not a Metric"),
        ("scorer", "is function scorer, which cannot be called with no arguments"),
        ("broken_factory", "'{plugin}:broken_factory': calling the factory failed: RuntimeError: boom"),
        ("make_nothing", "'{plugin}:make_nothing': the factory returned str 'nothing', not a Metric"),
        ("SYNC", "whose score() is not async, not a Metric"),
        ("SyncMetric", "the class returned SyncMetric"),
    ],
)
def test_dotted_path_errors_say_what_failed(plugin: str, attr: str, message: str) -> None:
    assert message.format(plugin=plugin) in error_of([f"{plugin}:{attr}"])


def test_dotted_path_errors_for_modules() -> None:
    message = error_of(["tsplugin_no_such_module:thing"])
    assert "cannot import module 'tsplugin_no_such_module'" in message and "ModuleNotFoundError" in message
    assert "is not a dotted path" in error_of(["tracescore.score:"])


def test_a_module_not_found_says_where_modules_are_imported_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`tracescore` is a script: a metrics file in the folder it runs in is not importable without
    PYTHONPATH, and the message says so; a module that is found but imports a missing one is not told."""
    name = f"tsplugin_{uuid.uuid4().hex[:8]}"
    assert "for tsplugin_nowhere.py or tsplugin_nowhere/ in the current folder, run with PYTHONPATH=." in (
        error_of(["tsplugin_nowhere.metrics:thing"])
    )
    (tmp_path / f"{name}.py").write_text("import tsplugin_its_missing_dependency\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    message = error_of([f"{name}:thing"])
    assert "No module named 'tsplugin_its_missing_dependency'" in message and "PYTHONPATH" not in message


def test_a_scoring_function_hints_at_python_metric(plugin: str) -> None:
    assert "@python_metric" in error_of([f"{plugin}:scorer"])


# -- entry points -----------------------------------------------------------------------------------------
async def test_entry_points_resolve_by_name(
    plugin: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_entry_points(
        tmp_path, monkeypatch, [f"shouty = {plugin}:Shouty", f"half_shouty = {plugin}:make_shouty"]
    )
    (shouty,) = resolve_metrics(["shouty"])
    (half,) = resolve_metrics(["half_shouty"])
    assert shouty.name == half.name == "shouty"
    (result,) = await evaluate_record(RECORD, [half], OfflineJudge())
    assert result.score == 0.5
    assert "half_shouty" in error_of(["nonsense"]) and "shouty" in error_of(["nonsense"])


def test_entry_point_errors_name_the_entry_point(
    plugin: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_entry_points(
        tmp_path, monkeypatch, ["gone = tsplugin_missing_mod:thing", f"number = {plugin}:NUMBER"]
    )
    message = error_of(["gone"])
    assert message.startswith(
        f"entry point 'gone' (tsplugin_missing_mod:thing) in group '{ENTRY_POINT_GROUP}' cannot be loaded"
    )
    assert "ModuleNotFoundError" in message
    assert f"entry point 'number' ({plugin}:NUMBER)" in error_of(["number"])
    assert "is int 42, not a Metric" in error_of(["number"])


# -- TOML config ------------------------------------------------------------------------------------------
async def test_config_declares_template_and_path_metrics(plugin: str, tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        f"""
        [[metric]]
        name = "politeness"
        template = "Rate how polite the answer is to the question."
        scale = [1, 5]
        samples = 3
        description = "Tone check."

        [[metric]]
        name = "mine"
        path = "{plugin}:Shouty"
        options = {{ factor = 0.5 }}
        """,
    )
    config = load_metric_config(path)
    assert list(config.metrics) == ["politeness", "mine"] and config.source == path

    politeness, mine, faithfulness = make_metrics(["politeness", "mine", "faithfulness"], config=path)
    assert isinstance(politeness, LLMJudgeMetric) and isinstance(faithfulness, Faithfulness)
    assert (politeness.samples, politeness.scale, politeness.description) == (3, (1, 5), "Tone check.")
    assert politeness.task.name == "custom.politeness"
    # A path metric answers to the name its entry gives it.
    (result,) = await evaluate_record(RECORD, [mine], OfflineJudge())
    assert mine.name == result.metric == "mine" and result.score == 0.5
    # A loaded config hands out the metrics it built; it does not rebuild them per resolve.
    assert resolve_metrics(["politeness"], config=config)[0] is config.metrics["politeness"]
    assert "politeness" in error_of(["nonsense"], config=path)


def test_a_config_template_metric_may_say_how_it_uses_the_contexts(tmp_path: Path) -> None:
    """Inferred from the template as in Python (prose criteria are given the whole record, so they read the
    documents if present); `uses_contexts` overrides it."""
    path = write_config(
        tmp_path,
        """
        [[metric]]
        name = "supported"
        template = "The answer {{ answer }} is supported by {{ context }}."

        [[metric]]
        name = "tone"
        template = "Rate how polite the answer is."

        [[metric]]
        name = "tone_alone"
        template = "Rate how polite the answer is."
        uses_contexts = false
        """,
    )
    uses = {name: metric.uses_contexts for name, metric in load_metric_config(path).metrics.items()}
    assert uses == {"supported": "needed", "tone": "if_present", "tone_alone": "no"}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            '[[metric]]\nname = "x"\ntemplate = "t"\nuses_contexts = "always"\n',
            "uses_contexts: Input should be True, False, 'no', 'if_present' or 'needed'",
        ),
        ('[[metric]]\nname = "x"\npath = "a:b"\nuses_contexts = true\n', "uses_contexts apply to template"),
        (
            '[[metric]]\nname = "x"\ntemplate = "t"\ntemperature = 0\n',
            "temperature: unknown setting 'temperature' (did you mean 'template'? valid: description, name,",
        ),
        ('[[metric]]\nname = "x"\n', "give exactly one of 'template'"),
        ('[[metric]]\nname = "x"\ntemplate = "t"\npath = "a:b"\n', "give exactly one of 'template'"),
        ('[[metric]]\nname = "x"\npath = "a:b"\nsamples = 2\n', "samples apply to template metrics"),
        ('[[metric]]\nname = "x"\ntemplate = "t"\nscale = [5, 1]\n', "lo < hi"),
        ('[[metric]]\nname = "x"\ntemplate = "t"\nscale = ["1", "5"]\n', "scale.0: Input should be"),
        ('[[metric]]\nname = "x"\ntemplate = "t"\nsamples = 0\n', "samples: Input should be greater"),
        ('[[metric]]\nname = "x"\ntemplate = "{{ answr }}"\n', "unknown variable(s) answr"),
        ('[[metric]]\ntemplate = "t"\n', "#1: name: Field required"),
        ('[[metric]]\nname = "x"\ntemplate = "t"\n[[metric]]\nname = "x"\ntemplate = "u"\n', "twice"),
        ('[[metric]]\nname = "faithfulness"\ntemplate = "t"\n', "taken by a built-in metric"),
        ('[[metrics]]\nname = "x"\n', "unknown top-level key(s) metrics"),
        ("metric = 3\n", "must be an array of tables"),
        ("[[metric]\n", "invalid TOML"),
        (
            '[[metric]]\nname = "x"\npath = "tsplugin_missing_mod:M"\n',
            "#1 'x': metric 'tsplugin_missing_mod:M': cannot import module 'tsplugin_missing_mod'",
        ),
    ],
)
def test_config_errors_name_the_entry(tmp_path: Path, body: str, message: str) -> None:
    path = write_config(tmp_path, body)
    with pytest.raises(MetricLoadError) as caught:
        load_metric_config(path)
    text = str(caught.value)
    assert text.startswith(f"metric config {path}") and message in text


def test_missing_config_file(tmp_path: Path) -> None:
    message = error_of(["x"], config=tmp_path / "absent.toml")
    assert "absent.toml: cannot read" in message


def test_config_path_metric_options_must_fit(plugin: str, tmp_path: Path) -> None:
    path = write_config(
        tmp_path, f'[[metric]]\nname = "m"\npath = "{plugin}:Shouty"\noptions = {{ nope = 1 }}\n'
    )
    with pytest.raises(MetricLoadError, match="cannot be called with options nope"):
        load_metric_config(path)
    path = write_config(
        tmp_path, f'[[metric]]\nname = "m"\npath = "{plugin}:INSTANCE"\noptions = {{ a = 1 }}\n'
    )
    with pytest.raises(MetricLoadError, match="already a Metric instance"):
        load_metric_config(path)


async def test_resolved_metrics_score_together(plugin: str) -> None:
    metrics = resolve_metrics(["distinct_2", f"{plugin}:short_answer"])
    results = await evaluate_record(RECORD, metrics, OfflineJudge())
    assert [(r.metric, r.status) for r in results] == [
        ("distinct_2", MetricStatus.OK),
        ("short_answer", MetricStatus.OK),
    ]
