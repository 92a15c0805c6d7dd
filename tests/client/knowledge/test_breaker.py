"""The circuit breaker's state machine with an injected clock."""

from __future__ import annotations

from ivoai.client.knowledge.breaker import CircuitBreaker


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_breaker_opens_after_two_consecutive_failures_and_refuses_for_thirty_seconds() -> None:
    clock = Clock()
    breaker = CircuitBreaker(clock=clock)
    breaker.record_failure()
    assert breaker.state == "closed" and breaker.allow()
    breaker.record_failure()
    assert str(breaker.state) == "open"
    assert not breaker.allow()
    clock.now += 29.9
    assert not breaker.allow()
    assert 0 < breaker.retry_after() <= 0.2


def test_half_open_lets_one_trial_through_and_success_closes() -> None:
    clock = Clock()
    breaker = CircuitBreaker(clock=clock)
    breaker.record_failure()
    breaker.record_failure()
    clock.now += 30
    assert breaker.state == "half_open"
    assert breaker.allow()
    assert not breaker.allow()  # one trial at a time
    breaker.record_success()
    assert str(breaker.state) == "closed" and breaker.failures == 0


def test_failed_trial_reopens_for_a_full_period() -> None:
    clock = Clock()
    breaker = CircuitBreaker(clock=clock)
    breaker.record_failure()
    breaker.record_failure()
    clock.now += 30
    assert breaker.allow()
    breaker.record_failure()
    assert breaker.state == "open"
    clock.now += 29
    assert not breaker.allow()


def test_a_success_between_failures_resets_the_count() -> None:
    breaker = CircuitBreaker(clock=Clock())
    breaker.record_failure()
    breaker.record_success()
    breaker.record_failure()
    assert breaker.state == "closed"


def test_an_open_breaker_names_the_failure_that_opened_it_until_a_success() -> None:
    clock = Clock()
    breaker = CircuitBreaker(clock=clock)
    breaker.record_failure("could not connect: connection refused")
    breaker.record_failure("could not connect: connection refused")
    assert not breaker.allow()
    assert breaker.refusal() == "could not connect: connection refused (circuit open: not retried for 30s)"
    clock.now += 30
    assert breaker.allow()
    breaker.record_success()
    assert breaker.last_error is None
