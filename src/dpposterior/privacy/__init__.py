"""Privacy accounting, the privacy record of a release, and the randomness of privacy noise."""

from .dpsgd_accounting import calibrate_noise_multiplier
from .dpsgd_accounting import dpsgd_epsilon
from .randomness import os_seeded_key
from .randomness import resolve_key
from .spent import PrivacySpent
from .spent import not_private

__all__ = [
    "PrivacySpent",
    "calibrate_noise_multiplier",
    "dpsgd_epsilon",
    "not_private",
    "os_seeded_key",
    "resolve_key",
]
