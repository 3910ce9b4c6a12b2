"""Real third-party programs for development and tests (a Kafka broker, a scripted judge server, Phoenix),
and what running them needs."""

from tracescore.testing._process import (
    STOP_S,
    Guard,
    closed_port,
    end_process,
    free_port,
    locked,
    log_tail,
    run_guarded,
    wait_ready,
)

__all__ = [
    "STOP_S",
    "Guard",
    "closed_port",
    "end_process",
    "free_port",
    "locked",
    "log_tail",
    "run_guarded",
    "wait_ready",
]
