"""Suspicion models that learn from the LLM judge: one for all traffic, one per route with enough labels.

Bounded: at most `max_routes` route models of a few floats each. State is versioned JSON written atomically
(temporary file + rename); a missing, corrupt or older file means the cold start, with a warning.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tracescore.sample._calibration import COLD_START, FEATURES, LogisticModel, coefficients
from tracescore.sample._config import LearningConfig
from tracescore.sample._state_file import write_json_atomically

__all__ = ["STATE_VERSION", "SuspicionModels"]

_log = logging.getLogger(__name__)

STATE_VERSION = 2  # 2: named features and cold start (1: positional)


class SuspicionModels:
    def __init__(
        self, config: LearningConfig | None = None, cold_start: Mapping[str, float] = COLD_START
    ) -> None:
        self.config = config or LearningConfig()
        coefficients(cold_start)  # every feature named, nothing else
        self.cold_start = dict(cold_start)
        self.shared = LogisticModel.cold_start(self.cold_start)
        self.routes: dict[str, LogisticModel] = {}
        self.untracked_labels = 0  # labels of routes beyond `max_routes` (they still teach the shared model)
        self._unsaved = 0
        if self.config.state_path is not None:
            self._load(self.config.state_path)

    def probability(self, route: str, x: Sequence[float]) -> float:
        own = self.routes.get(route)
        model = own if own is not None and own.labels >= self.config.route_min_labels else self.shared
        return model.probability(x)

    def learn(self, route: str, x: Sequence[float], hallucinated: bool) -> None:
        if not self.config.enabled:
            return
        rate, l2 = self.config.learning_rate, self.config.l2
        self.shared.learn(x, hallucinated, rate=rate, l2=l2)
        own = self.routes.get(route)
        if own is None and len(self.routes) < self.config.max_routes:
            own = self.routes[route] = LogisticModel.cold_start(self.cold_start)
        if own is None:
            self.untracked_labels += 1
        else:
            own.learn(x, hallucinated, rate=rate, l2=l2)
        self._unsaved += 1
        if self._unsaved >= self.config.save_every:
            self.save()

    @property
    def labels(self) -> int:
        return self.shared.labels

    # --- persistence ------------------------------------------------------------------------------------

    def save(self) -> None:
        """Write the state (if a path is set); a failure is logged, never raised: learning goes on."""
        path = self.config.state_path
        self._unsaved = 0
        if path is None:
            return
        state = {
            "version": STATE_VERSION,
            "features": list(FEATURES),
            "cold_start": self.cold_start,
            "shared": _dump(self.shared),
            "routes": {route: _dump(model) for route, model in self.routes.items()},
        }
        try:
            write_json_atomically(path, state)
        except OSError as exc:
            _log.warning("cannot save the cascade's learned suspicion models to %s: %s", path, exc)

    def _load(self, path: Path) -> None:
        if not path.exists():
            return
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
                found = state.get("version") if isinstance(state, dict) else None
                raise ValueError(f"state version {found!r}, this release reads {STATE_VERSION}")
            if state.get("features") != list(FEATURES):
                raise ValueError("the state was learned over other features")
            if state.get("cold_start") != self.cold_start:
                raise ValueError("the state was learned from another cold start")
            shared = _parse(state["shared"], self.cold_start)
            routes = {str(r): _parse(m, self.cold_start) for r, m in dict(state.get("routes") or {}).items()}
        except (OSError, ValueError, TypeError, KeyError) as exc:
            # The next save would overwrite it: keep the unread state beside it, for a rollback.
            kept = path.with_name(path.name + ".unread")
            try:
                os.replace(path, kept)
            except OSError:
                kept = path
            _log.warning(
                "ignoring the cascade's learned state in %s (%s, kept as %s): starting from the shipped cold "
                "start",
                path,
                exc,
                kept,
            )
            return
        self.shared = shared
        self.routes = dict(list(routes.items())[: self.config.max_routes])


def _dump(model: LogisticModel) -> dict[str, Any]:
    weights = dict(zip(FEATURES, model.weights, strict=True))
    return {"weights": weights, "labels": model.labels, "positives": model.positives}


def _parse(raw: Any, cold_start: Mapping[str, float]) -> LogisticModel:
    weights = list(coefficients({str(k): float(w) for k, w in dict(raw["weights"]).items()}))
    labels, positives = int(raw["labels"]), int(raw["positives"])
    if not 0 <= positives <= labels or any(w != w for w in weights):
        raise ValueError("a model with the wrong counts or a weight that is not a number")
    return LogisticModel(weights=weights, anchor=coefficients(cold_start), labels=labels, positives=positives)
