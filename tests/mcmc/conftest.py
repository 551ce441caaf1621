"""Fixtures of the DP MH tests (helpers in mcmc_testlib.py)."""

from __future__ import annotations

import pytest
from mcmc_testlib import Conjugate


@pytest.fixture(scope="module")
def conj() -> Conjugate:
    return Conjugate()
