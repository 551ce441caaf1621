"""Noise-aware post-processing of DPVI traces (papers/na-dpvi.txt). Never sees data."""

from .posterior import Posterior
from .posterior import point_posterior

__all__ = [
    "Posterior",
    "point_posterior",
]
