"""An epsilon far beyond what the noise sampler certifies, as a knob that makes the DP noise negligible."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import pytest

from dpposterior.privacy import noise


@contextlib.contextmanager
def uncertified_epsilon() -> Iterator[None]:
    """Lifts dpvi's and dpvim's refusal of a budget whose sampler tail term exceeds 1% of delta
    (:func:`dpposterior.privacy.noise.check_noise_tail`), for correctness tests that run at an epsilon
    such as 1e4 to make the noise negligible. The record still states its delta with the term (vacuous)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(noise, "MAX_TAIL_SHARE", math.inf)
        yield
