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
"""

from .accounting import FastMHConstants
from .accounting import PerIteration
from .accounting import barker_batch_size
from .accounting import barker_epsilon
from .accounting import barker_full_batch_rdp
from .accounting import barker_rdp
from .accounting import barker_subsampled_rdp
from .accounting import calibrate_chain
from .accounting import classic_noise_multiplier
from .accounting import compose_iterations
from .accounting import dp_fast_mh_constants
from .accounting import gaussian_chain_epsilon
from .accounting import optimal_composition_delta
from .barker import BarkerConfig
from .barker import BarkerCorrection
from .barker import barker_correction
from .barker import dp_barker_kernel
from .chain import ChainDiagnostics
from .chain import ChainResult
from .chain import chain_privacy
from .chain import diagnostics
from .chain import make_chain_run
from .chain import run_chain
from . import dp_sgld
from .dp_sgld import DPSGLDModel
from .dp_sgld import DPSGLDResult
from .kernels import BatchLimitError
from .kernels import FastMHConfig
from .kernels import Kernel
from .kernels import MHInfo
from .kernels import MHState
from .kernels import PenaltyConfig
from .kernels import TunaMHConfig
from .kernels import dp_fast_mh_kernel
from .kernels import penalty_kernel
from .kernels import tuna_mh_kernel
from .model import EnergyModel
from .model import Proposal
from .model import energy_model
from .model import euclidean_distance
from .model import logistic_bound_constants
from .model import numpyro_energy_model
from .model import random_walk

__all__ = [
    "BarkerConfig",
    "BarkerCorrection",
    "BatchLimitError",
    "ChainDiagnostics",
    "ChainResult",
    "DPSGLDModel",
    "DPSGLDResult",
    "EnergyModel",
    "FastMHConfig",
    "FastMHConstants",
    "Kernel",
    "MHInfo",
    "MHState",
    "PenaltyConfig",
    "PerIteration",
    "Proposal",
    "TunaMHConfig",
    "barker_batch_size",
    "barker_correction",
    "barker_epsilon",
    "barker_full_batch_rdp",
    "barker_rdp",
    "barker_subsampled_rdp",
    "calibrate_chain",
    "chain_privacy",
    "classic_noise_multiplier",
    "compose_iterations",
    "diagnostics",
    "dp_sgld",
    "dp_barker_kernel",
    "dp_fast_mh_constants",
    "dp_fast_mh_kernel",
    "energy_model",
    "euclidean_distance",
    "gaussian_chain_epsilon",
    "logistic_bound_constants",
    "make_chain_run",
    "numpyro_energy_model",
    "optimal_composition_delta",
    "penalty_kernel",
    "random_walk",
    "run_chain",
    "tuna_mh_kernel",
]
