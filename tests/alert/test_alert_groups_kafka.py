"""Two alert groups on the same evaluation records, on the real broker: each group's internal topics (the
re-keyed records, the state) are its own, so each counts every record once and keeps its own alerts."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from _helpers import both_stages_read, wait_until
from alert_records import Running, produce, record
from alert_records import service_config as config

from tracescore.alert import AlertConfig
from tracescore.alert.testing import WebhookReceiver

pytestmark = pytest.mark.kafka


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as r:
        yield r


def group_config(bootstrap: str, topic_prefix: str, group: str) -> AlertConfig:
    """The test's config with the group's internal topics left to their defaults (named after the group)."""
    values = config(bootstrap, topic_prefix).model_dump(exclude={"routes_topic", "state_topic"})
    return AlertConfig(**{**values, "group_id": f"{topic_prefix}-{group}"})


def read_all(bootstrap: str, cfg: AlertConfig) -> None:
    both_stages_read(bootstrap, cfg.group_id, cfg.evaluations_topic, "routes", cfg.routes_topic)


def scored(value: float, route: str) -> bytes:
    return record(value, datetime.now(UTC), route=route).model_dump_json().encode()


def firing(receiver: WebhookReceiver, route: str) -> int:
    return sum(1 for r in receiver.requests if r.json()["route"] == route and r.json()["state"] == "firing")


def test_two_groups_on_the_same_records_each_count_every_record_once(
    bootstrap: str, topic_prefix: str, receiver: WebhookReceiver
) -> None:
    first, second = (group_config(bootstrap, topic_prefix, g) for g in ("first", "second"))
    assert first.routes_topic == f"{topic_prefix}-first.routes" != second.routes_topic
    assert first.state_topic == f"{topic_prefix}-first.routes.changelog" != second.state_topic
    answers = [(0.1, "/billing")] * 8 + [(0.95, "/support")] * 8  # one record each, their own trace
    produce(bootstrap, first.evaluations_topic, [scored(v, r) for v, r in answers])

    for groups, cfg in enumerate((first, second), start=1):
        with Running(cfg, receiver) as service:
            read_all(bootstrap, cfg)
            # Before, the second group also read the first group's re-keyed records: 32.
            assert service.stats.records == len(answers), cfg.group_id
            # Each group fires its own alert: the other group's state is not restored as its own.
            wait_until(lambda: firing(receiver, "/billing") == groups, f"{cfg.group_id}'s alert")  # noqa: B023
    assert firing(receiver, "/support") == 0
