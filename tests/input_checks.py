"""Helpers for the tests of bad input: an error must be a ValueError or TypeError that names what was wrong,
never an internal traceback, a hang, or a silent NaN."""

from __future__ import annotations

import contextlib
import signal

import pytest
from hypothesis import HealthCheck, settings

#: hypothesis settings of the property tests: many cheap examples, or a few that compile a program
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FEW = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
#: the errors a bad input may raise
CLEAR = (ValueError, TypeError)


def raises_with(fn, exc, *words):
    """Calls ``fn``; asserts it raises ``exc`` with every one of ``words`` in the message."""
    with pytest.raises(exc) as info:
        fn()
    for w in words:
        assert w in str(info.value), (w, str(info.value))


def raises_clear(fn, *names):
    """Calls fn; asserts a ValueError/TypeError whose message names one of ``names``."""
    with pytest.raises(CLEAR) as info:
        fn()
    msg = str(info.value)
    assert any(n in msg for n in names), f"message does not name {names}: {msg}"
    return msg


@contextlib.contextmanager
def finishes_within(seconds: int):
    """Fails (instead of hanging) if the block runs longer than ``seconds``."""

    def on_alarm(signum, frame):
        raise AssertionError(f"did not finish within {seconds} s (a hang)")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
