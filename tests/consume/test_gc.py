"""The consumer's garbage-collector tuning: raised while it runs, put back when it returns."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from kafka_helpers import run_instrumented_app

from tracescore.consume import ConsumerSettings, EvaluationConsumer
from tracescore.consume._gc import gc_tuned
from tracescore.score.judges import OfflineJudge
from tracescore.score.metrics import Faithfulness


@pytest.fixture(autouse=True)
def python_gc_thresholds() -> Iterator[tuple[int, int, int]]:
    saved = gc.get_threshold()
    gc.set_threshold(700, saved[1], saved[2])
    yield gc.get_threshold()
    gc.set_threshold(*saved)


def test_the_block_runs_with_generation_0_raised_and_every_threshold_comes_back(
    python_gc_thresholds: tuple[int, int, int],
) -> None:
    with gc_tuned(50_000):
        assert gc.get_threshold() == (50_000, *python_gc_thresholds[1:])
    assert gc.get_threshold() == python_gc_thresholds


def test_the_thresholds_come_back_when_the_block_raises(python_gc_thresholds: tuple[int, int, int]) -> None:
    with pytest.raises(RuntimeError), gc_tuned(50_000):
        raise RuntimeError("the consumer stopped with an error")
    assert gc.get_threshold() == python_gc_thresholds


def test_zero_leaves_python_s_threshold(python_gc_thresholds: tuple[int, int, int]) -> None:
    with gc_tuned(0):
        assert gc.get_threshold() == python_gc_thresholds


@pytest.mark.kafka
def test_the_consumer_scores_with_the_raised_threshold_and_gives_the_application_its_own_back(
    bootstrap: str, topic_prefix: str, python_gc_thresholds: tuple[int, int, int]
) -> None:
    run_instrumented_app(
        bootstrap,
        f"{topic_prefix}.spans",
        """
        @tracescore.rag(route="/ask")
        def answer(query, contexts):
            return "The head office is in Delhi."

        answer("Where is the head office?", ["The head office is in Delhi."])
        """,
    )
    during: list[int] = []
    settings = ConsumerSettings.model_validate(
        {
            "bootstrap_servers": bootstrap,
            "topic": f"{topic_prefix}.spans",
            "group_id": f"{topic_prefix}.group",
            "evaluations_topic": f"{topic_prefix}.evaluations",
            "dlq_topic": f"{topic_prefix}.dlq",
            "max_records": 1,
        }
    )
    consumer = EvaluationConsumer(
        settings,
        judge=OfflineJudge(),
        metrics=[Faithfulness()],
        on_evaluation=lambda _: during.append(gc.get_threshold()[0]),
    )

    assert consumer.run().scored == 1
    assert during == [ConsumerSettings().gc_gen0_threshold] == [50_000]
    assert gc.get_threshold() == python_gc_thresholds
