"""Releases: what a mechanism publishes and post-processing reads, and nothing that reads data.

- the parameter layout of a model's latent sites (:class:`ParamLayout`, :class:`Site`; a layout is built
  from a model's structure by :func:`dpposterior.releases.model_inspect.inspect_model`, on dummy records);
- the variational family q(theta; phi) (:mod:`dpposterior.releases.family`);
- the released traces: :class:`DPVITrace` (with its save and load) and :class:`DPVImTrace`, and the model's
  curvature terms a DPVITrace may carry (:class:`ModelCurvature`, computed from the trace and simulated records);
- the posterior handed to users, a mixture of variational Gaussians (:class:`Posterior`), and the table
  its ``summary()`` returns (:class:`PosteriorSummary`);
- the baselines' noisy sufficient statistics (:class:`SufficientStatisticsRelease` with its model
  description :class:`ExpFamModel`, and :class:`RegressionStatisticsRelease`;
  :mod:`dpposterior.releases.statistics`).

The mechanisms (``vi``, ``dpsgd``, ``mcmc``, the baselines' releases) build these; post-processing
(``noise_aware``, ``validation``, ``plots``) reads them. This package imports neither a mechanism nor
post-processing, so post-processing never needs a mechanism and the two never import each other.
"""

from .layout import ParamLayout
from .layout import Site
from .model_curvature import ModelCurvature
from .trace import DPVITrace
from .dpvim_trace import DPVImTrace
from .posterior import Posterior
from .summary import PosteriorSummary
from .statistics import ExpFamModel
from .statistics import RegressionStatisticsRelease
from .statistics import SufficientStatisticsRelease

__all__ = [
    "DPVITrace",
    "DPVImTrace",
    "ExpFamModel",
    "ModelCurvature",
    "ParamLayout",
    "Posterior",
    "PosteriorSummary",
    "RegressionStatisticsRelease",
    "Site",
    "SufficientStatisticsRelease",
]
