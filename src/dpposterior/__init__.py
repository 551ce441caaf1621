"""dpposterior: noise-aware Bayesian inference under differential privacy."""

from . import privacy
from .privacy import PrivacySpent

__version__ = "0.1.0"

__all__ = [
    "PrivacySpent",
    "privacy",
]
