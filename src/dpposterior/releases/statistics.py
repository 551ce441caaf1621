"""The released noisy sufficient statistics of the baselines, and the public model descriptions they carry.

A mechanism in :mod:`dpposterior.baselines` builds these records from private data; the
post-processing (the baselines' Gibbs samplers) reads them. Nothing here reads records:

- :class:`SufficientStatisticsRelease`, the Laplace-noised sufficient statistic of a conjugate
  exponential-family sample (Bernstein & Sheldon, "Differentially private Bayesian inference for
  exponential families", 2018), with :class:`ExpFamModel`, the static description of its model;
- :class:`RegressionStatisticsRelease`, the Laplace-noised sufficient statistics of clipped
  linear-regression data (Bernstein & Sheldon, "Differentially private Bayesian linear regression",
  2019), with :func:`covariate_moments`, the covariate mean and covariance read from its ``xx`` part.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from .._checks import check_positive_int, check_real
from ..privacy.spent import PrivacySpent
from ._regression_index import index_tables

#: the conjugate exponential families of the Bernstein-Sheldon baseline.
FAMILIES = ("beta-bernoulli", "dirichlet-categorical", "gamma-exponential")

#: the models' default priors (dpposterior.models.conjugate).
DEFAULT_PRIORS: dict[str, tuple[float, ...]] = {
    "beta-bernoulli": (10.0, 10.0),
    "dirichlet-categorical": (5.0, 5.0, 5.0),
    "gamma-exponential": (8.0, 2.0),
}

#: the parts of a regression release the sampler conditions on, in its order.
PARTS = ("xx", "xy", "yy")
#: how the sampler gets the covariates' fourth moments: Isserlis from the noisy ``xx`` part, or a released ``x4`` part.
FOURTH_MOMENTS = ("normal", "released")

#: eigenvalue floor of the projected covariate covariance, relative to the mean eigenvalue.
_EIG_FLOOR = 1e-3


# ---------------------------------------------------------------------------------------------
# exponential families


@dataclasses.dataclass(frozen=True)
class ExpFamModel:
    """The static description of one conjugate model (hashable: a jit static argument).

    Attributes:
      family: one of :data:`FAMILIES`.
      num_records: N (public).
      prior: (a, b) of Beta(a, b); (shape, rate) of Gamma; the Dirichlet concentration (length K).
      bounds: (lo, hi), the clipping bounds of Exponential records (None for the other families).
    """

    family: str
    num_records: int
    prior: tuple[float, ...]
    bounds: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"family must be one of {FAMILIES}, got {self.family!r}")
        check_positive_int(self.num_records, "num_records")
        prior = tuple(float(v) for v in self.prior)
        if not all(math.isfinite(v) and v > 0 for v in prior):
            raise ValueError(f"prior parameters must be finite and > 0, got {self.prior!r}")
        if self.family == "dirichlet-categorical":
            if len(prior) < 2:
                raise ValueError(f"a Dirichlet prior needs at least 2 concentrations, got {self.prior!r}")
        elif len(prior) != 2:
            raise ValueError(f"the {self.family} prior takes 2 parameters, got {self.prior!r}")
        object.__setattr__(self, "prior", prior)
        if self.family == "gamma-exponential":
            object.__setattr__(self, "bounds", check_bounds(self.bounds))
        elif self.bounds is not None:
            raise ValueError(
                f"bounds apply only to gamma-exponential records, got bounds={self.bounds!r} for {self.family}"
            )

    @property
    def num_stats(self) -> int:
        """m, the number of released coordinates of the sufficient statistic."""
        return len(self.prior) if self.family == "dirichlet-categorical" else 1

    @property
    def num_params(self) -> int:
        """Length of the constrained parameter vector theta carried by the sampler."""
        return self.num_stats

    def prior_mean(self) -> np.ndarray:
        """The conjugate prior's mean of the family's parameter."""
        p = np.asarray(self.prior, np.float64)
        if self.family == "beta-bernoulli":
            return np.array([p[0] / (p[0] + p[1])])
        if self.family == "gamma-exponential":
            return np.array([p[0] / p[1]])
        return p / p.sum()


def check_bounds(bounds: Any) -> tuple[float, float]:
    """(lo, hi) as floats, checked: the clipping bounds of Exponential records, fixed in advance."""
    if bounds is None:
        raise ValueError(
            "gamma-exponential records need bounds=(lo, hi) fixed in advance (never computed "
            "from the data): records are clipped into [lo, hi], 0 <= lo < hi < inf"
        )
    try:
        values = [check_real("bounds", v) for v in bounds]
    except TypeError as e:
        raise TypeError(f"bounds must be a pair of numbers (lo, hi), got {bounds!r}") from e
    if len(values) != 2:
        raise ValueError(f"bounds must be a pair of numbers (lo, hi), got {len(values)} values: {bounds!r}")
    lo, hi = values
    if not (math.isfinite(lo) and math.isfinite(hi) and 0 <= lo < hi):
        raise ValueError(f"bounds must satisfy 0 <= lo < hi < inf (Exponential records are >= 0), got {bounds!r}")
    return (lo, hi)


def require_num_categories(num_categories: int | None) -> int:
    """K of a dirichlet-categorical release (a TypeError when it is missing)."""
    if num_categories is None:
        raise TypeError("dirichlet-categorical records need num_categories (K), got None")
    return int(num_categories)


@dataclasses.dataclass(frozen=True, eq=False)
class SufficientStatisticsRelease:
    """A noisy sufficient statistic: the only thing the noise-aware Gibbs sampler sees. Made by
    :func:`dpposterior.baselines.release_sufficient_statistics` (the Laplace mechanism, pure epsilon-DP).

    Attributes:
      family: the model family (:data:`FAMILIES`).
      noisy_statistic: (m,) z = s + Laplace(noise_scale) per coordinate (float64).
      num_records: N, treated as public (as in the papers): it is not noised.
      epsilon: the privacy parameter of the Laplace mechanism.
      sensitivity: Delta, the L1 sensitivity of s under ``neighbouring``.
      noise_scale: b = Delta / epsilon, the Laplace scale of every coordinate.
      neighbouring: "add_remove" or "replace_one".
      bounds: (lo, hi) clipping bounds of Exponential records (None otherwise).
      num_categories: K for the Categorical family (None otherwise).
      privacy: the PrivacySpent record (pure epsilon-DP, delta = 0).
      snapped: the :class:`~dpposterior.privacy.snapping.SnappedRelease` when the release used the
        snapping mechanism (then z is also rounded to its grid, and ``noise_scale`` is the snapping
        scale); None for the plain Laplace mechanism.
    """

    family: str
    noisy_statistic: Any
    num_records: int
    epsilon: float
    sensitivity: float
    noise_scale: float
    neighbouring: str
    bounds: tuple[float, float] | None
    num_categories: int | None
    privacy: PrivacySpent
    snapped: Any = None

    def __post_init__(self) -> None:
        z = np.asarray(self.noisy_statistic, np.float64).reshape(-1)
        object.__setattr__(self, "noisy_statistic", z)

    def observation_interval(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(lo, hi) of the latent noisy statistic s + Laplace behind a snapped z (None when not snapped)."""
        return None if self.snapped is None else self.snapped.intervals()

    def model(self, prior: Any = None) -> ExpFamModel:
        """The :class:`ExpFamModel` of this release, with the default prior of the family unless given."""
        if prior is None:
            prior = DEFAULT_PRIORS[self.family]
            if self.family == "dirichlet-categorical":
                prior = (5.0,) * require_num_categories(self.num_categories)
        try:
            arr = np.asarray(prior)
        except (TypeError, ValueError):  # ragged nested sequences
            arr = np.asarray(None)
        if arr.dtype.kind not in "iuf":  # strings, bools and objects are refused, not converted
            raise TypeError(
                f"prior must be a sequence of numbers (Beta (a, b); Gamma (shape, rate); the Dirichlet "
                f"concentrations), got {prior!r}"
            )
        values = tuple(arr.astype(np.float64).reshape(-1))
        return ExpFamModel(self.family, self.num_records, values, self.bounds)


# ---------------------------------------------------------------------------------------------
# linear regression


@dataclasses.dataclass(frozen=True, eq=False)
class RegressionStatisticsRelease:
    """Laplace-noised sufficient statistics of clipped regression data. Made by
    :func:`dpposterior.baselines.release_regression_statistics` (Laplace mechanisms on the parts,
    composed sequentially: pure epsilon-DP).

    Attributes:
      noisy: dict part -> float64 array: ``"xx"`` (p(p+1)/2 + p,) the upper triangle of X'X
        (row-major, j <= k) then sum x_j; ``"xy"`` (p + 1,) sum x_j y then sum y; ``"yy"`` (1,);
        ``"x4"`` (optional) the degree-3 then degree-4 monomial sums (itertools'
        combinations_with_replacement order).
      num_records: N (public).
      num_features: p.
      x_bound: (p,) the clipping bounds B_j (|x_j| <= B_j).
      y_bound: B_y.
      epsilon: total epsilon (sum of the parts').
      epsilon_parts, sensitivities, noise_scales: dicts part -> value.
      neighbouring: "add_remove" or "replace_one".
      privacy: the PrivacySpent record.
      snapped: dict part -> :class:`~dpposterior.privacy.snapping.SnappedRelease` when the release used
        the snapping mechanism (None otherwise).
    """

    noisy: dict[str, np.ndarray]
    num_records: int
    num_features: int
    x_bound: np.ndarray
    y_bound: float
    epsilon: float
    epsilon_parts: dict[str, float]
    sensitivities: dict[str, float]
    noise_scales: dict[str, float]
    neighbouring: str
    privacy: PrivacySpent
    snapped: dict[str, Any] | None = None

    def observation_interval(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(lo, hi): the rounding intervals of the latent noisy statistics behind a snapped release, in
        the order of :meth:`latent_observation` (None when not snapped)."""
        if self.snapped is None:
            return None
        ivs = [self.snapped[k].intervals() for k in PARTS]
        return np.concatenate([iv[0] for iv in ivs]), np.concatenate([iv[1] for iv in ivs])

    @property
    def has_fourth_moments(self) -> bool:
        """Whether the release holds the ``x4`` part (the noisy degree-3 and degree-4 moments of x)."""
        return "x4" in self.noisy

    def latent_observation(self) -> tuple[np.ndarray, np.ndarray]:
        """(z, b): the released coordinates the sampler conditions on, in its order (xx, xy, yy), and
        each coordinate's Laplace scale."""
        z = np.concatenate([self.noisy[k] for k in PARTS])
        b = np.concatenate([np.full(self.noisy[k].shape, self.noise_scales[k]) for k in PARTS])
        return z, b

    def second_moment_matrix(self) -> np.ndarray:
        """The noisy X~'X~ / N (P x P), projected: [[Sigma^ + mu^ mu^', mu^], [mu^', 1]] (positive definite)."""
        mu, cov = covariate_moments(self)
        p = self.num_features
        m = np.empty((p + 1, p + 1))
        m[:p, :p] = cov + np.outer(mu, mu)
        m[:p, p] = m[p, :p] = mu
        m[p, p] = 1.0
        return m


def project_psd(mat: np.ndarray, floor_rel: float = _EIG_FLOOR) -> np.ndarray:
    """The symmetric part of ``mat`` with its eigenvalues floored at ``floor_rel`` times their mean absolute
    value: a positive definite matrix near a noisy covariance."""
    mat = 0.5 * (mat + mat.T)
    vals, vecs = np.linalg.eigh(mat)
    floor = max(floor_rel * max(float(np.mean(np.abs(vals))), 1e-12), 1e-12)
    vals = np.maximum(vals, floor)
    return (vecs * vals) @ vecs.T


def covariate_moments(release: RegressionStatisticsRelease) -> tuple[np.ndarray, np.ndarray]:
    """(mu^, Sigma^): the noisy mean of x and its noisy covariance projected onto the PSD cone
    (eigenvalues floored at 1e-3 of their mean absolute value)."""
    p, n = release.num_features, release.num_records
    ix = index_tables(p)
    xx = release.noisy["xx"]
    n_pairs = len(ix["pairs"])
    mu = xx[n_pairs:] / n
    m2 = np.zeros((p, p))
    m2[ix["triu"]] = xx[:n_pairs] / n
    m2 = m2 + np.triu(m2, 1).T
    return mu, project_psd(m2 - np.outer(mu, mu))
