"""Vendored data sets: UCI Adult and MNIST 7-vs-9, read from files inside the package.

Mechanism-side only. These loaders return sensitive records, and only mechanism code (DP-SGD,
the DP MCMC kernels, the noisy sufficient statistics of the baselines), experiments and tests may
call them. Post-processing modules (``noise_aware``, ``validation``, ``plots``) must not import
``dpposterior.datasets``: they take releases, never data.

Nothing is downloaded at run time; the files live in ``dpposterior/datasets/data/`` with their
sources and licences in ``data/LICENSE.md`` (UCI Adult: CC BY 4.0; MNIST: CC BY-SA 3.0). Every
preprocessing step is a fixed per-record map (public category levels, public scaling bounds), so
none of it depends on other records or costs privacy.
"""

from .adult import ADULT_CATEGORIES
from .adult import ADULT_COLUMNS
from .adult import ADULT_REFERENCE_LEVELS
from .adult import ADULT_SCALING_BOUNDS
from .adult import AdultDesign
from .adult import adult_design
from .adult import adult_feature_names
from .adult import encode_adult
from .adult import load_adult
from .mnist import load_mnist79
from .mnist import load_mnist_public_digits

__all__ = [
    "ADULT_CATEGORIES",
    "ADULT_COLUMNS",
    "ADULT_REFERENCE_LEVELS",
    "ADULT_SCALING_BOUNDS",
    "AdultDesign",
    "adult_design",
    "adult_feature_names",
    "encode_adult",
    "load_adult",
    "load_mnist79",
    "load_mnist_public_digits",
]
