"""Kafka client steps shared by the services."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from kafka import KafkaConsumer

__all__ = ["wait_for_partitions"]

_log = logging.getLogger("tracescore")


def wait_for_partitions(
    client_config: Mapping[str, Any], topics: Iterable[str], timeout_s: float = 30.0
) -> None:
    """Return once the cluster's metadata holds partitions for every topic (or after `timeout_s`).

    Call it before a group member subscribes: a member that joins while the metadata does not show a topic
    yet (one created moments before, by this process or another) is assigned none of its partitions until a
    later metadata refresh. A separate client asks, so the member's own metadata state stays untouched (the
    member asking itself rebalanced once more right after joining)."""
    missing = set(topics)
    deadline = time.monotonic() + timeout_s
    probe = KafkaConsumer(**client_config, group_id=None, enable_auto_commit=False)
    try:
        while True:
            # partitions_for_topic fetches metadata when the topic is not in the cache yet.
            missing = {topic for topic in missing if not probe.partitions_for_topic(topic)}
            if not missing:
                return
            if time.monotonic() >= deadline:
                _log.warning(
                    "no partitions known for %s after %.0fs; subscribing anyway (assigned once they are)",
                    ", ".join(sorted(missing)),
                    timeout_s,
                )
                return
            time.sleep(0.2)
    finally:
        probe.close()
