"""Noise-aware post-processing of DPVI traces (Räisä, Jälkö & Honkela, "Noise-aware differentially private
variational inference" (2024)). Never sees
data."""

from .grid import GridPosterior
from .identify import Identifiability
from .identify import UnidentifiedLatentsWarning
from .identify import identifiability
from .identify import model_prior_sampler
from .grid import grid_h_moments
from .grid import grid_phi_star_moments
from .grid import grid_phi_star_quantiles
from .grid import grid_phi_star_sampler
from .grid import grid_posterior
from .grid import grid_sample
from .grid import grid_sample_phi_star
from .grid import phi_star_moments
from .laplace import LaplaceResult
from .laplace import laplace_posterior
from .laplace import laplace_sample
from .model import TracePriors
from .model import burn_in_priors
from .model import conditional_phi_star
from .model import log_joint
from .model import log_likelihood_full
from .model import log_likelihood_stats
from .model import log_marginal_h
from .model import noise_sd_of
from .model import trace_priors
from .nuts import nuts_posterior
from ..releases.posterior import Posterior
from ..releases.posterior import point_posterior
from ..releases.summary import PosteriorSummary
from .postprocess import METHODS
from .postprocess import noise_aware_posterior
from .simulate import heuristic_learning_rate
from .simulate import simulate_trace
from .simulate import simulate_trace_arrays
from .stats import TraceStats
from .stats import burn_in_start
from .stats import sufficient_statistics
from .stats import sufficient_statistics_jnp

__all__ = [
    "GridPosterior",
    "Identifiability",
    "LaplaceResult",
    "METHODS",
    "Posterior",
    "PosteriorSummary",
    "TracePriors",
    "TraceStats",
    "UnidentifiedLatentsWarning",
    "burn_in_priors",
    "burn_in_start",
    "conditional_phi_star",
    "grid_h_moments",
    "grid_phi_star_moments",
    "grid_phi_star_quantiles",
    "grid_phi_star_sampler",
    "grid_posterior",
    "grid_sample",
    "grid_sample_phi_star",
    "heuristic_learning_rate",
    "identifiability",
    "laplace_posterior",
    "laplace_sample",
    "log_joint",
    "log_likelihood_full",
    "log_likelihood_stats",
    "log_marginal_h",
    "model_prior_sampler",
    "noise_aware_posterior",
    "noise_sd_of",
    "nuts_posterior",
    "phi_star_moments",
    "point_posterior",
    "simulate_trace",
    "simulate_trace_arrays",
    "sufficient_statistics",
    "sufficient_statistics_jnp",
    "trace_priors",
]
