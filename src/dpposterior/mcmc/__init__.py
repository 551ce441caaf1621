"""Differentially private Metropolis-Hastings: TunaMH, DP-Fast MH, the penalty algorithm, DP Barker.

Zhang, Zhang & De Sa, "DP-Fast MH: private, fast, and accurate Metropolis-Hastings for large-scale Bayesian
inference" (2023). A model is given as per-record energies U_i(theta)
with bound constants c_i (:func:`energy_model`); a kernel (:func:`tuna_mh_kernel`,
:func:`dp_fast_mh_kernel`, :func:`penalty_kernel`, :func:`dp_barker_kernel`) is a pair of pure functions
``init(position)`` / ``step(key, state)``; :func:`run_chain` runs chains and returns the samples
with the :class:`~dpposterior.privacy.PrivacySpent` of the whole run; :func:`calibrate_chain` turns
a total (epsilon, delta) into per-iteration parameters. Replace-one adjacency throughout.
:func:`numpyro_energy_model` turns a NumPyro model with a plate over records into an
:class:`EnergyModel` (the bound constants still come from the user).

Public API: the models and proposals, the kernels, the chain runner with its result and diagnostics,
the calibration and accounting a user composes, and the subpackage :mod:`.dp_sgld`; the building blocks
(RDP terms, DP-Fast MH constants, kernel configs, the Barker correction) stay in the modules.
"""

from .accounting import PerIteration
from .accounting import barker_batch_size
from .accounting import barker_epsilon
from .accounting import calibrate_chain
from .accounting import compose_iterations
from .accounting import gaussian_chain_epsilon
from .barker import dp_barker_kernel
from .chain import ChainDiagnostics
from .chain import ChainResult
from .chain import chain_privacy
from .chain import diagnostics
from .chain import run_chain
from . import dp_sgld
from .kernels import BatchLimitError
from .kernels import Kernel
from .kernels import MHState
from .kernels import dp_fast_mh_kernel
from .kernels import penalty_kernel
from .kernels import tuna_mh_kernel
from .model import EnergyModel
from .model import Proposal
from .model import energy_model
from .model import logistic_bound_constants
from .model import numpyro_energy_model
from .model import random_walk

__all__ = [
    "BatchLimitError",
    "ChainDiagnostics",
    "ChainResult",
    "EnergyModel",
    "Kernel",
    "MHState",
    "PerIteration",
    "Proposal",
    "barker_batch_size",
    "barker_epsilon",
    "calibrate_chain",
    "chain_privacy",
    "compose_iterations",
    "diagnostics",
    "dp_sgld",
    "dp_barker_kernel",
    "dp_fast_mh_kernel",
    "energy_model",
    "gaussian_chain_epsilon",
    "logistic_bound_constants",
    "numpyro_energy_model",
    "penalty_kernel",
    "random_walk",
    "run_chain",
    "tuna_mh_kernel",
]
