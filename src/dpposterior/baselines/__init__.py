"""Baselines of the papers' experiments: Bernstein-Sheldon noise-aware Gibbs for exponential families,
Gibbs-SS-Noisy for linear regression, and their (and DPVIm's) coverage-cell functions.

Mechanisms (read records): ``release_sufficient_statistics``, ``release_regression_statistics`` (pure
epsilon-DP Laplace through Mironov's snapping mechanism by default, whose rounding the samplers
condition on; ``snapping=False`` gives the papers' plain floating-point Laplace).
Post-processing (read releases only): ``bernstein_sheldon_gibbs``, ``gibbs_ss_noisy``, the pure
``expfam_*`` / ``regression_*`` init/step functions and ``DrawsPosterior``.
Coverage cells (synthetic data): ``bernstein_sheldon_cell``, ``gibbs_ss_noisy_cell``, ``dpvim_cell``.
"""

from .cells import BaselineCellOutput
from .cells import bernstein_sheldon_cell
from .cells import dpvim_cell
from .cells import gibbs_ss_noisy_cell
from .cells import simulate_replicates
from .draws_posterior import DrawsPosterior
from .expfam import ExpFamModel
from .expfam import GibbsInfo as ExpFamGibbsInfo
from .expfam import GibbsState as ExpFamGibbsState
from .expfam import SufficientStatisticsRelease
from .expfam import bernstein_sheldon_gibbs
from .expfam import gibbs_init as expfam_gibbs_init
from .expfam import gibbs_step as expfam_gibbs_step
from .expfam import release_sufficient_statistics
from .expfam import sample_chain as expfam_sample_chain
from .expfam import sensitivity as expfam_sensitivity
from .regression import RegressionDims
from .regression import RegressionGibbsInfo
from .regression import RegressionGibbsParams
from .regression import RegressionGibbsState
from .regression import RegressionStatisticsRelease
from .regression import gibbs_init as regression_gibbs_init
from .regression import gibbs_ss_noisy
from .regression import gibbs_step as regression_gibbs_step
from .regression import release_regression_statistics
from .regression import sample_chain as regression_sample_chain
from .regression import sampler_params as regression_sampler_params

__all__ = [
    "BaselineCellOutput",
    "DrawsPosterior",
    "ExpFamGibbsInfo",
    "ExpFamGibbsState",
    "ExpFamModel",
    "RegressionDims",
    "RegressionGibbsInfo",
    "RegressionGibbsParams",
    "RegressionGibbsState",
    "RegressionStatisticsRelease",
    "SufficientStatisticsRelease",
    "bernstein_sheldon_cell",
    "bernstein_sheldon_gibbs",
    "dpvim_cell",
    "expfam_gibbs_init",
    "expfam_gibbs_step",
    "expfam_sample_chain",
    "expfam_sensitivity",
    "gibbs_ss_noisy",
    "gibbs_ss_noisy_cell",
    "regression_gibbs_init",
    "regression_gibbs_step",
    "regression_sample_chain",
    "regression_sampler_params",
    "release_regression_statistics",
    "release_sufficient_statistics",
    "simulate_replicates",
]
