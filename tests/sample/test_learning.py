"""The suspicion score learns from LLM verdicts on baseline interactions, and its state survives a restart."""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path
from typing import Any

import pytest

from tracescore.consume._shared_policy import SharedPolicy
from tracescore.model import MetricResult, MetricStatus
from tracescore.sample import CascadePolicy, LearningConfig, SamplingConfig
from tracescore.sample._calibration import COLD_START, FEATURES, coefficients, features
from tracescore.sample._learning import STATE_VERSION, SuspicionModels


def offline(no_evidence: int, partial: int, supported: int) -> MetricResult:
    counts = {"NO_EVIDENCE": no_evidence, "PARTIALLY_SUPPORTED": partial, "FULLY_SUPPORTED": supported}
    total = sum(counts.values())
    score = (supported + 0.5 * partial) / total
    details = {"total_claims": total, "verdict_counts": counts}
    return MetricResult(metric="faithfulness", score=score, judge="offline", details=details)


def llm(label: str | None, status: MetricStatus = MetricStatus.OK) -> MetricResult:
    score = None if status is not MetricStatus.OK else (0.0 if label == "hallucinated" else 1.0)
    return MetricResult(metric="faithfulness", score=score, label=label, status=status, judge="openai")


PARTIAL = offline(0, 1, 0)  # the cold start reads "partially supported" as faithful (it was, on the dev set)


def test_labels_move_the_score_toward_what_the_llm_judge_says(make_interaction: Any) -> None:
    policy = CascadePolicy()
    span = make_interaction("1" * 32)
    before = policy.models.probability("", features(PARTIAL))
    assert before < 0.5
    # On this traffic, partially supported answers are hallucinated: the LLM judge says so every time.
    for _ in range(300):
        policy.learn(span, [PARTIAL], True)
        policy.learn(span, [offline(0, 0, 1)], False)
    after = policy.models.probability("rag-api /ask", features(PARTIAL))
    assert after > 0.5 > before, (before, after)
    assert policy.models.probability("", features(offline(0, 0, 1))) < 0.5


def test_a_route_gets_its_own_model_after_enough_labels_and_routes_are_bounded() -> None:
    models = SuspicionModels(LearningConfig(route_min_labels=50, max_routes=3))
    x = features(PARTIAL)
    for _ in range(60):
        models.learn("a", x, True)
        models.learn("b", x, False)
    # Each route with enough labels reads its own traffic; an unknown route gets the shared model.
    assert models.probability("a", x) > models.probability("unknown", x) > models.probability("b", x)
    for route in ("c", "d", "e"):
        models.learn(route, x, False)
    assert set(models.routes) == {"a", "b", "c"} and models.untracked_labels == 2


def test_noisy_labels_do_not_undo_the_cold_start() -> None:
    rng = random.Random(7)
    models = SuspicionModels()
    bad, good = features(offline(1, 0, 0)), features(offline(0, 0, 1))
    for _ in range(2000):  # 5% hallucinated traffic, 10% of verdicts wrong
        hallucinated = rng.random() < 0.05
        x = bad if hallucinated else good
        models.learn("", x, hallucinated != (rng.random() < 0.1))
    assert models.probability("", bad) > 0.5 > models.probability("", good)


def test_a_verdict_arriving_long_after_its_interaction_is_still_a_label(make_interaction: Any) -> None:
    # Nothing is kept per interaction between escalate and learn: the verdict brings the offline results.
    policy = CascadePolicy()
    span = make_interaction("4" * 32)
    policy.escalate(span, [PARTIAL])
    for i in range(5000):  # the window moves on meanwhile
        policy.escalate(make_interaction(f"{i:032x}"), [offline(0, 0, 1)])
    assert policy.learn(span, [PARTIAL], True) and policy.models.labels == 1


def test_a_stream_of_one_class_keeps_the_model_bounded() -> None:
    models = SuspicionModels()
    x = features(offline(1, 0, 0))
    for _ in range(5000):  # all hallucinated: then one faithful verdict must not swing the model
        models.learn("", x, True)
    before = models.probability("", x)
    models.learn("", x, False)
    assert all(abs(w) < 20 for w in models.shared.weights)
    assert before - models.probability("", x) < 0.2


def test_judge_errors_and_timeouts_are_no_labels(make_interaction: Any) -> None:
    locked = SharedPolicy(CascadePolicy())
    span = make_interaction("2" * 32)
    failed = MetricResult.error("faithfulness", "timeout", judge="openai")
    assert not locked.learn(span, [PARTIAL], [failed])
    assert not locked.learn(span, [PARTIAL], [])
    assert not locked.learn(span, [MetricResult.error("faithfulness", "x", judge="o")], [llm("x")])
    assert locked.policy.models.labels == 0
    assert locked.learn(span, [PARTIAL], [llm("hallucinated")])
    assert locked.policy.models.shared.positives == 1


@pytest.mark.parametrize(
    ("label", "score", "hallucinated"),
    [
        ("hallucinated", 0.9, True),
        ("Unfaithful", 0.9, True),  # the label rule reads it bad, whatever its case
        ("faithful", 0.2, False),  # the metric's own label decides, not the score
        ("B+", 0.2, True),  # a label the rule does not know: the score decides
        (None, 0.8, False),
    ],
)
def test_the_llm_verdict_is_read_by_the_label_rule_every_stage_shares(
    make_interaction: Any, label: str | None, score: float, hallucinated: bool
) -> None:
    locked = SharedPolicy(CascadePolicy())
    verdict = MetricResult(metric="faithfulness", score=score, label=label, judge="openai")
    assert locked.learn(make_interaction("4" * 32), [PARTIAL], [verdict])
    assert locked.policy.models.shared.positives == int(hallucinated)


def test_state_survives_a_restart(tmp_path: Path, make_interaction: Any) -> None:
    path = tmp_path / "state" / "cascade.json"
    config = SamplingConfig(cascade={"learning": {"state_path": path}})
    policy = CascadePolicy(config)
    for _ in range(20):
        policy.learn(make_interaction("3" * 32), [PARTIAL], True)
    policy.save()
    restarted = CascadePolicy(config)
    assert restarted.models.labels == 20
    assert restarted.models.shared.weights == policy.models.shared.weights
    assert not list(path.parent.glob("*.tmp"))  # written through a temporary file, then renamed


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("{not json", "Expecting"),
        (json.dumps({"version": 1, "features": list(FEATURES)}), "state version 1"),
        (
            json.dumps({"version": STATE_VERSION, "features": ["bias"], "cold_start": dict(COLD_START)}),
            "other features",
        ),
        (
            json.dumps(
                {
                    "version": STATE_VERSION,
                    "features": list(FEATURES),
                    "cold_start": dict(COLD_START),
                    "shared": {},
                }
            ),
            "weights",
        ),
    ],
)
def test_a_corrupt_or_older_state_file_means_the_cold_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, text: str, why: str
) -> None:
    path = tmp_path / "cascade.json"
    path.write_text(text, encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        models = SuspicionModels(LearningConfig(state_path=path))
    assert models.labels == 0 and tuple(models.shared.weights) == coefficients(COLD_START)
    assert "starting from the shipped cold start" in caplog.text and why in caplog.text, caplog.text
    # The unread state is kept beside it, not overwritten by the next save.
    assert (tmp_path / "cascade.json.unread").read_text(encoding="utf-8") == text


def test_an_unwritable_state_path_is_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    models = SuspicionModels(LearningConfig(state_path=blocker / "cascade.json"))
    models.learn("", features(PARTIAL), True)
    with caplog.at_level(logging.WARNING):
        models.save()
    assert "cannot save" in caplog.text
