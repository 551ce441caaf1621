"""Differentially private Metropolis-Hastings: TunaMH, DP-Fast MH and the penalty algorithm.

papers/dp-fast-mh.txt and NOTES.md section 4. A model is given as per-record energies U_i(theta)
with bound constants c_i (:func:`energy_model`); a kernel (:func:`tuna_mh_kernel`,
:func:`dp_fast_mh_kernel`, :func:`penalty_kernel`) is a pair of pure functions
``init(position)`` / ``step(key, state)``; :func:`run_chain` runs chains and returns the samples
with the :class:`~dpposterior.privacy.PrivacySpent` of the whole run; :func:`calibrate_chain` turns
a total (epsilon, delta) into per-iteration parameters. Replace-one adjacency throughout.

DP Barker (Heikkila et al. 2019) is not built yet.
"""

from .accounting import FastMHConstants
from .accounting import PerIteration
from .accounting import calibrate_chain
from .accounting import classic_noise_multiplier
from .accounting import compose_iterations
from .accounting import dp_fast_mh_constants
from .accounting import gaussian_chain_epsilon
from .accounting import optimal_composition_delta
from .chain import ChainDiagnostics
from .chain import ChainResult
from .chain import chain_privacy
from .chain import diagnostics
from .chain import make_chain_run
from .chain import run_chain
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
from .model import random_walk

__all__ = [
    "ChainDiagnostics",
    "ChainResult",
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
    "calibrate_chain",
    "chain_privacy",
    "classic_noise_multiplier",
    "compose_iterations",
    "diagnostics",
    "dp_fast_mh_constants",
    "dp_fast_mh_kernel",
    "energy_model",
    "euclidean_distance",
    "gaussian_chain_epsilon",
    "make_chain_run",
    "optimal_composition_delta",
    "penalty_kernel",
    "random_walk",
    "run_chain",
    "tuna_mh_kernel",
]
