"""Baselines of the papers' experiments: Bernstein-Sheldon noise-aware Gibbs for exponential families,
Gibbs-SS-Noisy for linear regression, and their (and DPVIm's) coverage-cell functions.

Mechanisms (read records; ``expfam_release``, ``regression_release``): ``release_sufficient_statistics``,
``release_regression_statistics`` (pure epsilon-DP Laplace through Mironov's snapping mechanism by
default, whose rounding the samplers condition on; ``snapping=False`` gives the papers' plain
floating-point Laplace). Their records (``SufficientStatisticsRelease``, ``RegressionStatisticsRelease``,
``ExpFamModel``) live in :mod:`dpposterior.releases.statistics`.
Post-processing (read releases only; ``expfam_gibbs``, ``regression_params``, ``regression_gibbs``):
``bernstein_sheldon_gibbs``, ``gibbs_ss_noisy`` and ``DrawsPosterior``; ``bernstein_sheldon_kernel`` and
``gibbs_ss_noisy_kernel`` give the samplers as a ``GibbsAlgorithm`` ``(init, step)`` with the release
closed over, as BlackJAX's samplers are.
Coverage cells (synthetic data): ``bernstein_sheldon_cell``, ``gibbs_ss_noisy_cell``, ``dpvim_cell``.
"""

from ..releases.statistics import ExpFamModel
from ..releases.statistics import RegressionStatisticsRelease
from ..releases.statistics import SufficientStatisticsRelease
from ._chain import GibbsAlgorithm
from .cells import BaselineCellOutput
from .cells import bernstein_sheldon_cell
from .cells import dpvim_cell
from .cells import gibbs_ss_noisy_cell
from .cells import simulate_replicates
from .draws_posterior import DrawsPosterior
from .expfam_gibbs import GibbsInfo as ExpFamGibbsInfo
from .expfam_gibbs import GibbsState as ExpFamGibbsState
from .expfam_gibbs import bernstein_sheldon_gibbs
from .expfam_gibbs import bernstein_sheldon_kernel
from .expfam_release import release_sufficient_statistics
from .regression_gibbs import RegressionGibbsInfo
from .regression_gibbs import RegressionGibbsState
from .regression_gibbs import gibbs_ss_noisy
from .regression_gibbs import gibbs_ss_noisy_kernel
from .regression_release import release_regression_statistics

__all__ = [
    "BaselineCellOutput",
    "DrawsPosterior",
    "ExpFamGibbsInfo",
    "ExpFamGibbsState",
    "ExpFamModel",
    "GibbsAlgorithm",
    "RegressionGibbsInfo",
    "RegressionGibbsState",
    "RegressionStatisticsRelease",
    "SufficientStatisticsRelease",
    "bernstein_sheldon_cell",
    "bernstein_sheldon_gibbs",
    "bernstein_sheldon_kernel",
    "dpvim_cell",
    "gibbs_ss_noisy",
    "gibbs_ss_noisy_cell",
    "gibbs_ss_noisy_kernel",
    "release_regression_statistics",
    "release_sufficient_statistics",
    "simulate_replicates",
]
