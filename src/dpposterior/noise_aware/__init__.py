"""Noise-aware post-processing of DPVI traces (Räisä, Jälkö & Honkela, "Noise-aware differentially private
variational inference" (2024)). Never sees data.

Public API: :func:`noise_aware_posterior`, the solvers with their inputs and results, the priors and the
identifiability check; the building blocks (log densities, grid moments and samplers, trace
simulation) stay in the modules ``model``, ``grid``, ``laplace``, ``stats`` and ``simulate``.
"""

from .grid import GridPosterior
from .grid import grid_posterior
from .identify import Identifiability
from .identify import UnidentifiedLatentsWarning
from .identify import identifiability
from .identify import model_prior_sampler
from .laplace import LaplaceResult
from .laplace import laplace_posterior
from .model import TracePriors
from .model_terms import CoupledLatentsWarning
from .model_terms import CurvatureFromTraceWarning
from .model import burn_in_priors
from .model import trace_priors
from .nuts import nuts_posterior
from ..releases.posterior import Posterior
from ..releases.posterior import point_posterior
from ..releases.summary import PosteriorSummary
from .postprocess import METHODS
from .postprocess import noise_aware_posterior
from .stats import TraceStats
from .structure import HierarchicalPriorWarning
from .stats import sufficient_statistics

__all__ = [
    "CoupledLatentsWarning",
    "CurvatureFromTraceWarning",
    "GridPosterior",
    "HierarchicalPriorWarning",
    "Identifiability",
    "LaplaceResult",
    "METHODS",
    "Posterior",
    "PosteriorSummary",
    "TracePriors",
    "TraceStats",
    "UnidentifiedLatentsWarning",
    "burn_in_priors",
    "grid_posterior",
    "identifiability",
    "laplace_posterior",
    "model_prior_sampler",
    "noise_aware_posterior",
    "nuts_posterior",
    "point_posterior",
    "sufficient_statistics",
    "trace_priors",
]
