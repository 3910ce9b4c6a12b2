"""Metric names to Metric instances: built-ins, installed plugins, dotted paths and TOML-declared metrics.

A name resolves, first match wins, to:
1. a metric declared in the TOML config passed in (`load_metric_config`);
2. a built-in (`BUILTIN_METRICS`);
3. an entry point of group `tracescore.metrics` that an installed package declares;
4. a dotted path `package.module:attr` (only names with a colon).

Whatever a plugin or path names may be a Metric instance, a Metric class, or a zero-argument factory that
returns a Metric. Every failure is a MetricLoadError (a ValueError) that says which name, module or object
was at fault.
"""

from __future__ import annotations

import importlib
import inspect
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, model_validator

from tracescore._config import did_you_mean, one_line
from tracescore.model import MetricResult, RagRecord
from tracescore.score.judges._embeddings import embedder_from_env
from tracescore.score.judges._protocol import Judge
from tracescore.score.metrics._answer_relevancy import AnswerRelevancy
from tracescore.score.metrics._context_relevance import ContextRelevance
from tracescore.score.metrics._custom import DistinctN, LLMJudgeMetric
from tracescore.score.metrics._faithfulness import Faithfulness
from tracescore.score.metrics._protocol import Metric, UsesContexts
from tracescore.score.metrics._quality import Quality
from tracescore.score.metrics._run_judged import goal_completion, tool_selection
from tracescore.score.metrics._run_signals import RUN_SIGNALS

__all__ = [
    "BUILTIN_METRICS",
    "ENTRY_POINT_GROUP",
    "MetricConfig",
    "MetricLoadError",
    "as_metric",
    "builtin_metrics",
    "load_dotted",
    "load_metric_config",
    "metric_names",
    "resolve_metrics",
]

ENTRY_POINT_GROUP = "tracescore.metrics"
_SHAPE = (
    "a Metric (an object with `name` and `async score(record, judge)`), a Metric class, "
    "or a zero-argument factory"
)

# The one table of built-in metrics, by the names the CLI and configs use.
BUILTIN_METRICS: dict[str, Callable[[], Metric]] = {
    "faithfulness": Faithfulness,
    "answer_relevancy": lambda: AnswerRelevancy(embedder=embedder_from_env()),
    "context_relevance": ContextRelevance,
    "quality": Quality,
    "distinct_2": DistinctN,
    # Agent-run signals, read from the record's run without a judge call.
    **RUN_SIGNALS,
    # Agent runs judged by an LLM (one shared call for both).
    "tool_selection": tool_selection,
    "goal_completion": goal_completion,
}


class MetricLoadError(ValueError):
    """A metric name, plugin, dotted path or config entry could not become a Metric."""


def builtin_metrics() -> dict[str, Callable[[], Metric]]:
    """Built-in name -> factory (a copy: BUILTIN_METRICS is the table to extend)."""
    return dict(BUILTIN_METRICS)


def metric_names() -> list[str]:
    """Every metric name this installation knows without a config file: the built-ins and the installed
    plugins. What config files (sampling rates, alert rules) are checked against."""
    return sorted({*BUILTIN_METRICS, *_entry_points()})


# -- loading objects -------------------------------------------------------------------------------------
def load_dotted(spec: str) -> Any:
    """The object at `package.module:attr` (attr may be dotted: `module:Class.factory`)."""
    module_name, colon, attr = spec.partition(":")
    if not colon or not module_name.strip() or not attr.strip():
        raise MetricLoadError(f"{spec!r} is not a dotted path of the form 'package.module:attr'")
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:  # an ImportError, or whatever the module raised while importing
        raise MetricLoadError(
            f"metric {spec!r}: cannot import module {module_name!r}: {type(exc).__name__}: {exc}"
            f"{_where_modules_come_from(module_name, exc)}"
        ) from exc
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise MetricLoadError(f"metric {spec!r}: module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def _where_modules_come_from(module_name: str, exc: Exception) -> str:
    """Where a module not found is looked for: the `tracescore` command is a script, so the folder it runs in
    is not on the import path (as it is for `python -m`), and a metrics file beside the data is not found."""
    missing = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
    if not missing or not (module_name == missing or module_name.startswith(f"{missing}.")):
        return ""  # a module the metric's own code imports: the message names it
    top = module_name.partition(".")[0]
    return (
        f" (it is imported from an installed package or a folder on PYTHONPATH; for {top}.py or {top}/ in "
        "the current folder, run with PYTHONPATH=.)"
    )


def as_metric(obj: Any, origin: str, options: Mapping[str, Any] | None = None) -> Metric:
    """`obj` as a Metric: used as is, instantiated, or called; `options` are keyword arguments for the
    class or factory. `origin` names where it came from, for error messages."""
    options = dict(options or {})
    if _is_metric(obj):
        if options:
            raise MetricLoadError(f"{origin} is already a Metric instance; it takes no options")
        return obj
    if not callable(obj):
        raise MetricLoadError(f"{origin} is {_describe(obj)}, not {_SHAPE}")
    what = "class" if isinstance(obj, type) else "factory"
    try:
        inspect.signature(obj).bind(**options)
    except TypeError as exc:
        hint = "" if options else "; wrap a scoring function (record) -> float with @python_metric"
        raise MetricLoadError(
            f"{origin} is {_describe(obj)}, which cannot be called with "
            f"{'options ' + ', '.join(options) if options else 'no arguments'} ({exc}){hint}"
        ) from None
    except ValueError:
        pass  # no introspectable signature (some builtins): just try the call
    try:
        made = obj(**options)
    except Exception as exc:
        raise MetricLoadError(f"{origin}: calling the {what} failed: {type(exc).__name__}: {exc}") from exc
    if not _is_metric(made):
        raise MetricLoadError(f"{origin}: the {what} returned {_describe(made)}, not a Metric")
    return made


def _is_metric(obj: Any) -> bool:
    # A Metric class has `name` and `score` too; only instances count. `score` must be async because
    # evaluate() gathers it.
    return (
        not isinstance(obj, type)
        and isinstance(obj, Metric)
        and isinstance(obj.name, str)
        and inspect.iscoroutinefunction(obj.score)
    )


def _describe(obj: Any) -> str:
    if isinstance(obj, type):
        return f"class {obj.__module__}.{obj.__qualname__}"
    if inspect.isroutine(obj):
        return f"function {getattr(obj, '__qualname__', obj)!s}"
    if isinstance(obj, Metric) and not inspect.iscoroutinefunction(obj.score):
        return f"{type(obj).__name__} {obj!r:.60} whose score() is not async"
    return f"{type(obj).__name__} {obj!r:.60}"


def _entry_points() -> dict[str, EntryPoint]:
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep)  # the first distribution on sys.path wins, as for imports
    return found


def _from_entry_point(ep: EntryPoint) -> Metric:
    origin = f"entry point {ep.name!r} ({ep.value}) in group {ENTRY_POINT_GROUP!r}"
    try:
        obj = ep.load()
    except Exception as exc:
        raise MetricLoadError(f"{origin} cannot be loaded: {type(exc).__name__}: {exc}") from exc
    return as_metric(obj, origin)


# -- TOML config -----------------------------------------------------------------------------------------
class _Entry(BaseModel):
    """One [[metric]] table: an LLM-judge template metric or a `path` to a Metric."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    template: str | None = None
    path: str | None = None
    scale: tuple[StrictInt, StrictInt] = (1, 5)
    samples: StrictInt = Field(default=1, ge=1)
    threshold: float = Field(default=0.5, ge=0.0, le=1.0)
    description: str | None = None
    # None: inferred from the template. One literal, so a wrong value gets one message listing the right ones.
    uses_contexts: Literal[(True, False, *(u.value for u in UsesContexts))] | None = None  # type: ignore[valid-type]
    options: dict[str, Any] = Field(default_factory=dict)  # keyword arguments for a path's class/factory

    @model_validator(mode="after")
    def _one_kind(self) -> _Entry:
        if (self.template is None) == (self.path is None):
            raise ValueError("give exactly one of 'template' (an LLM-judge metric) or 'path'")
        template_only = {
            "scale",
            "samples",
            "threshold",
            "description",
            "uses_contexts",
        } & self.model_fields_set
        if self.path is not None and template_only:
            raise ValueError(f"{', '.join(sorted(template_only))} apply to template metrics; use 'options'")
        if self.template is not None and self.options:
            raise ValueError("'options' applies to path metrics")
        return self


@dataclass(frozen=True)
class MetricConfig:
    """Metrics declared in a TOML file, by the name the file gives them."""

    source: Path
    metrics: Mapping[str, Metric]


def load_metric_config(path: Path | str) -> MetricConfig:
    """Parse and build every [[metric]] of a TOML file now, so a bad entry fails before any scoring."""
    source = Path(path)
    try:
        document = tomllib.loads(source.read_text(encoding="utf-8"))
    except OSError as exc:
        raise MetricLoadError(f"metric config {source}: cannot read: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise MetricLoadError(f"metric config {source}: invalid TOML: {exc}") from exc
    extra = sorted(set(document) - {"metric"})
    if extra:
        raise MetricLoadError(
            f"metric config {source}: unknown top-level key(s) {', '.join(extra)}; declare [[metric]] tables"
        )
    tables = document.get("metric", [])
    if not isinstance(tables, list):
        raise MetricLoadError(f"metric config {source}: 'metric' must be an array of tables ([[metric]])")
    builtins = builtin_metrics()
    metrics: dict[str, Metric] = {}
    for number, table in enumerate(tables, start=1):
        where = f"metric config {source}, [[metric]] #{number}"
        if isinstance(table, dict) and isinstance(table.get("name"), str):
            where += f" {table['name']!r}"
        try:
            entry = _Entry.model_validate(table)
        except ValidationError as exc:
            raise MetricLoadError(f"{where}: {one_line(exc, _Entry)}") from None
        if entry.name in metrics:
            raise MetricLoadError(f"{where}: the name is declared twice")
        if entry.name in builtins:
            raise MetricLoadError(f"{where}: the name is taken by a built-in metric; choose another")
        metrics[entry.name] = _build(entry, where)
    return MetricConfig(source=source, metrics=metrics)


def _build(entry: _Entry, where: str) -> Metric:
    if entry.template is not None:
        try:
            return LLMJudgeMetric(
                entry.name,
                entry.template,
                scale=entry.scale,
                samples=entry.samples,
                threshold=entry.threshold,
                description=entry.description,
                uses_contexts=entry.uses_contexts,
            )
        except ValueError as exc:
            raise MetricLoadError(f"{where}: {exc}") from None
    assert entry.path is not None  # _Entry guarantees one of the two
    try:
        metric = as_metric(load_dotted(entry.path), repr(entry.path), entry.options)
    except MetricLoadError as exc:
        raise MetricLoadError(f"{where}: {exc}") from exc.__cause__
    return metric if metric.name == entry.name else _Renamed(entry.name, metric)


class _Renamed:
    """A path metric under the name its config entry gives it, so results match what was asked for."""

    def __init__(self, name: str, inner: Metric) -> None:
        self.name = name
        self.inner = inner
        # The judge tasks it needs, so an unsuitable judge is refused before scoring starts.
        self.tasks = tuple(getattr(inner, "tasks", ()))

    async def score(self, record: RagRecord, judge: Judge) -> MetricResult:
        result = await self.inner.score(record, judge)
        return result.model_copy(update={"metric": self.name})


# -- resolution ------------------------------------------------------------------------------------------
def resolve_metrics(names: Sequence[str], config: MetricConfig | Path | str | None = None) -> list[Metric]:
    """One Metric per name, in order. Raises MetricLoadError naming every unknown name and the known
    ones, or saying which plugin, module, attribute or object failed to load."""
    if isinstance(config, Path | str):
        config = load_metric_config(config)
    declared = dict(config.metrics) if config is not None else {}
    builtins = builtin_metrics()
    # The installed plugins are read only when a name is neither declared nor built in: reading every
    # distribution's entry points is ~9 ms, more than scoring a record offline (evaluate() in a loop).
    plugins = _entry_points() if any(n not in declared and n not in builtins for n in names) else {}
    unknown = [
        n for n in names if n not in declared and n not in builtins and n not in plugins and ":" not in n
    ]
    if unknown:
        known = sorted({*declared, *builtins, *plugins})
        named = ", ".join(f"{n} ({meant})" if (meant := did_you_mean(n, known)) else n for n in unknown)
        raise MetricLoadError(
            f"unknown metric(s) {named}; known: {', '.join(known)}; "
            "or give a dotted path 'package.module:attr'"
        )
    metrics: list[Metric] = []
    for name in names:
        if name in declared:
            metric = declared[name]
        elif name in builtins:
            metric = as_metric(builtins[name], f"built-in metric {name!r}")
        elif name in plugins:
            metric = _from_entry_point(plugins[name])
        else:
            metric = as_metric(load_dotted(name), repr(name))
        metrics.append(metric)
    seen: set[str] = set()
    for metric in metrics:
        if metric.name in seen:
            raise MetricLoadError(f"two of the requested metrics are named {metric.name!r}; each name once")
        seen.add(metric.name)
    return metrics
