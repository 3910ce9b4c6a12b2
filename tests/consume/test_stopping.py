"""StopPlan: the steps of a stop of `tracescore consume` share one budget counted from the signal, on a fake
clock. Whatever each step takes (all of its share: the broker gone), the whole stop ends within
`stop_timeout_s`; with time to spare, each step keeps its own limit."""

from __future__ import annotations

from tracescore.consume import ConsumerSettings
from tracescore.consume._stopping import StopPlan


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_every_step_waiting_all_it_may_ends_the_stop_within_its_budget() -> None:
    clock = Clock()
    plan = StopPlan(ConsumerSettings(), clock)  # drain 60 s, acks 30 s, commit and leaving 10 s: 110 s alone
    assert plan.broker_call() == 10.0, "before a stop, a broker call has its own limit (BROKER_WAIT_S)"
    plan.start()
    signal_at = clock.now
    drain_until, why = plan.drain_deadline()
    assert drain_until == signal_at + 35.0 and why == "what --stop-timeout 50s left the drain"
    clock.now = drain_until  # the judge call never answered
    assert plan.broker_call() == 0.0, "no broker call of the loop past the drain's share"
    # A call blocks the judges' loop (cancelling it waits in vain), and the broker is gone: each step waits
    # all it may.
    steps = (plan.cancelling, plan.acknowledgements, plan.last_commit, plan.producer_close, plan.leaving)
    for step in steps:
        wait = step()
        assert wait.s > 0, step
        clock.now += wait.s
    assert clock.now == signal_at + 50.0
    assert str(plan.last_commit()) == "0.0s, what --stop-timeout 50s left this step"
    assert str(plan.sinks()) == "0.0s, what --stop-timeout 50s left closing the sinks"  # Phoenix: none


def test_the_sinks_are_closed_with_what_the_budget_has_left() -> None:
    """Closed last (a Phoenix slow but accepting would post for its own timeout_s): the rest, no more."""
    clock = Clock()
    plan = StopPlan(ConsumerSettings(stop_timeout_s=20.0), clock)
    plan.start()
    clock.now += 1.5  # the broker up: the steps before took little
    assert str(plan.sinks()) == "18.5s, what --stop-timeout 20s left closing the sinks"


def test_a_step_with_time_to_spare_keeps_its_own_limit() -> None:
    clock = Clock()
    plan = StopPlan(ConsumerSettings(drain_timeout_s=5.0, close_timeout_s=2.0), clock)
    plan.start()
    assert plan.drain_deadline() == (clock.now + 5.0, "--drain-timeout 5s")
    clock.now += 1.0  # the drain ended early
    assert str(plan.last_commit()) == "2.0s, --close-timeout"
    assert str(plan.acknowledgements()) == "30.0s, --ack-timeout"
    assert str(plan.cancelling()) == "30.0s, the cancel's own limit"


def test_cancelling_the_judge_calls_after_a_drain_that_ran_out_takes_half_of_the_acknowledgements_share() -> (
    None
):
    clock = Clock()
    plan = StopPlan(ConsumerSettings(), clock)
    plan.start()
    clock.now = plan.drain_deadline()[0]
    assert str(plan.cancelling()) == "2.5s, what --stop-timeout 50s left this step"
    clock.now += 2.5  # a call blocks the judges' loop
    assert str(plan.acknowledgements()) == "2.5s, what --stop-timeout 50s left this step"
