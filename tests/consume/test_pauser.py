"""Pauser: backpressure pauses fetching at `max_in_flight` pending interactions and resumes at half."""

from __future__ import annotations

from tracescore.consume._pauser import Pauser


def test_pauses_when_the_judges_are_full_and_resumes_at_half() -> None:
    pauser = Pauser(max_in_flight=8)
    assert [pauser.update(n) for n in (0, 7)] == [False, False]
    assert pauser.update(8) is True
    assert [pauser.update(n) for n in (7, 5)] == [True, True]  # no flapping just under the limit
    assert pauser.update(4) is False
    assert pauser.pauses == 1


def test_counts_every_pause() -> None:
    pauser = Pauser(max_in_flight=2)
    for pending in (2, 1, 3, 0, 2):
        pauser.update(pending)
    assert pauser.pauses == 3
    assert pauser.paused


def test_a_limit_of_one_resumes_only_when_nothing_is_pending() -> None:
    pauser = Pauser(max_in_flight=1)
    assert pauser.update(1)
    assert not pauser.update(0)
