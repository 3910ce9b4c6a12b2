"""An alert's state as the state topic holds it: `RouteState` (schema 2) around the evaluator's own
`AlertState`, fields the evaluator adds later read from older states as their defaults, the bare
`AlertState` the earlier version wrote carried over, a future version refused with its reason."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from tracescore.alert import AlertConfig, AlertEvaluator, AlertKey, AlertState
from tracescore.alert._logic import AlertLogic, RouteState

CODEC = AlertLogic.codec
KEY = AlertKey("rag-api", "/billing", "faithfulness")


def logic() -> AlertLogic:
    config = AlertConfig()
    return AlertLogic(
        config,
        AlertEvaluator(config),
        deliver=lambda notes: [],
        resend_firing=lambda now: None,
        skip=lambda reason, detail: None,
        count_record=lambda: None,
        clock=lambda: datetime.now(UTC),
    )


def test_the_evaluators_state_round_trips_inside_a_versioned_route_state() -> None:
    raw = CODEC.encode(RouteState(through=41, alert=AlertState(level="warning", judge_firing=True)))
    assert json.loads(raw)["schema_version"] == 2
    back = CODEC.decode(raw)
    assert (back.through, back.alert.level, back.alert.judge_firing, back.pending) == (
        41,
        "warning",
        True,
        [],
    )


def test_fields_are_additive_within_the_schema_version() -> None:
    # Written before the evaluator kept more (only the level), and by one that keeps a field this one lacks.
    older = {"schema_version": 2, "through": 3, "alert": {"level": "critical"}}
    newer = {"schema_version": 2, "through": 3, "alert": {"level": "ok", "normal": {"ewma": 0.93}}, "x": 1}
    assert CODEC.decode(json.dumps(older).encode()).alert == AlertState(level="critical")
    assert CODEC.decode(json.dumps(newer).encode()).alert == AlertState(level="ok")


def test_the_bare_alert_state_of_the_earlier_version_is_carried_over() -> None:
    state = logic().legacy(KEY.encode(), AlertState(level="warning").model_dump_json().encode())
    assert (state.schema_version, state.through, state.alert.level) == (2, -1, "warning")


@pytest.mark.parametrize(
    ("key", "raw", "reason"),
    [
        (KEY.encode(), b'{"schema_version": 3, "alert": {}}', "future_state_version"),
        (KEY.encode(), b'{"level": "warning"}', "invalid_state"),  # unversioned: the old topic only
        (KEY.encode(), b'{"schema_version": 2, "alert": {"level": "purple"}}', "invalid_state"),
    ],
)
def test_another_version_or_garbage_is_refused_with_its_reason(key: bytes, raw: bytes, reason: str) -> None:
    with pytest.raises(ValueError) as refused:
        CODEC.decode(raw)
    assert refused.value.reason == reason  # type: ignore[attr-defined]


def test_an_old_entry_under_a_key_no_alert_has_is_refused() -> None:
    with pytest.raises(ValueError) as refused:
        logic().legacy(b"\xff\xfe", b"{}")
    assert refused.value.reason == "invalid_state"  # type: ignore[attr-defined]
