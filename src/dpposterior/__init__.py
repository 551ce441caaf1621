"""dpposterior: noise-aware Bayesian inference under differential privacy.

The data path: private data -> mechanism (``dpsgd``, ``dpvi``) -> release with its PrivacySpent (the
released types live in ``releases``) -> post-processing (``noise_aware_posterior``, ``validation``) that
never sees data.
"""

from . import baselines
from . import datasets
from . import dpsgd
from . import mcmc
from . import models
from . import noise_aware
from . import pacbayes
from . import privacy
from . import releases
from . import validation
from . import vi
from .noise_aware import Posterior
from .noise_aware import noise_aware_posterior
from .privacy import Ledger
from .privacy import PrivacySpent
from .vi import DPVITrace
from .vi import ParamLayout
from .vi.dpvi import dpvi

__version__ = "0.1.0"  # the one place the version is written (pyproject.toml reads it from here)

__all__ = [
    "DPVITrace",
    "Ledger",
    "ParamLayout",
    "Posterior",
    "PrivacySpent",
    "baselines",
    "datasets",
    "dpsgd",
    "dpvi",
    "mcmc",
    "models",
    "noise_aware",
    "noise_aware_posterior",
    "pacbayes",
    "privacy",
    "releases",
    "validation",
    "vi",
]
