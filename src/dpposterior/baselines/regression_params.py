"""The inputs of the Gibbs-SS-Noisy sampler read from a regression release: the covariate moments the
CLT of the latent statistics needs, the prior, and the exact normal-inverse-gamma posterior given
statistics (Bernstein & Sheldon, "Differentially private Bayesian linear regression", NeurIPS 2019).

Post-processing of a :class:`~dpposterior.releases.statistics.RegressionStatisticsRelease` only. What
is approximated ("Gibbs-SS-Noisy" plugs in NOISY estimates, never the private data's moments, which
is one of the public code's defects):

- m_u and the mean/covariance of x are estimated from the noisy ``xx`` part: mu^ = S_x / N and
  Sigma^ = projection of S_xx / N - mu^ mu^' onto the PSD cone (eigenvalues floored at 1e-3 of their
  mean), so M2 = E[x~ x~'] is positive definite
  (:func:`~dpposterior.releases.statistics.covariate_moments`).
- C_u: ``fourth_moments="normal"`` (default) uses Isserlis' theorem for x ~ N(mu^, Sigma^) (no
  further release; exact when the clipped covariates are Gaussian, an approximation otherwise: the
  papers' x ~ N(0, I) clipped at 3 has kurtosis 2.92 instead of 3). ``"released"`` reads the noisy
  degree-3 and degree-4 moments of a release that spent a budget part on them and projects the
  resulting C_u onto the PSD cone (faithful to the paper, but in 10 dimensions its 935 coordinates
  carry so much noise that it is of little use). A public covariate model ``(mean, cov)`` may be
  given instead (Isserlis from it; the ``xx`` part is still used as data).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import check_positive
from ..releases._regression_index import index_tables, monomials
from ..releases.statistics import FOURTH_MOMENTS, RegressionStatisticsRelease, covariate_moments, project_psd

#: the model's prior (dpposterior.models.regression.linear_regression).
DEFAULT_PRIOR = {"prior_shape": 20.0, "prior_scale": 0.5, "weight_scale": 4.0}


def isserlis_moments(mean: np.ndarray, cov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(m_u, C_u): mean and covariance of u = (x_j x_k (j <= k), x_j) for x ~ N(mean, cov), by
    Isserlis' theorem applied to x~ = (x, 1) (a degenerate Gaussian with a unit last coordinate)."""
    mean = np.asarray(mean, np.float64)
    cov = np.asarray(cov, np.float64)
    p = mean.shape[0]
    ix = index_tables(p)
    mt = np.concatenate([mean, [1.0]])
    ct = np.zeros((p + 1, p + 1))
    ct[:p, :p] = cov
    a, b = ix["i1"][:-1], ix["i2"][:-1]
    m_u = ct[a, b] + mt[a] * mt[b]
    A, B = a[:, None], b[:, None]
    C, D = a[None, :], b[None, :]
    c_u = (
        ct[A, C] * ct[B, D]
        + ct[A, D] * ct[B, C]
        + mt[A] * mt[C] * ct[B, D]
        + mt[A] * mt[D] * ct[B, C]
        + mt[B] * mt[C] * ct[A, D]
        + mt[B] * mt[D] * ct[A, C]
    )
    return m_u, c_u


def _released_fourth_moments(release: RegressionStatisticsRelease, m_u: np.ndarray) -> np.ndarray:
    """C_u from the noisy moments of degree <= 4 (E[u_a u_b] looked up by monomial), PSD-projected."""
    p, n = release.num_features, release.num_records
    ix = index_tables(p)
    lookup: dict[tuple[int, ...], float] = {(): 1.0}
    for j in range(p):
        lookup[(j,)] = release.noisy["xx"][len(ix["pairs"]) + j] / n
    for a, (j, k) in enumerate(ix["pairs"]):
        lookup[(j, k)] = release.noisy["xx"][a] / n
    x4 = release.noisy["x4"] / n
    for a, mono in enumerate(monomials(p)):
        lookup[mono] = x4[a]
    i1, i2 = ix["i1"][:-1], ix["i2"][:-1]
    n_u = ix["n_u"]
    g = np.empty((n_u, n_u))
    for a in range(n_u):
        for b in range(a, n_u):
            mono = tuple(sorted(i for i in (i1[a], i2[a], i1[b], i2[b]) if i < p))
            g[a, b] = g[b, a] = lookup[mono]
    return project_psd(g - np.outer(m_u, m_u))


class RegressionGibbsParams(NamedTuple):
    """The per-release arrays of the sampler (dynamic: vmap over them for many releases).

    Attributes:
      z: (m,) the released coordinates (xx, xy, yy parts); m = p(p+1)/2 + 2p + 2.
      noise_scale: (m,) each coordinate's Laplace scale.
      m_u: (n_u,) E[u] of the covariate model; n_u = p(p+1)/2 + p.
      cov_u: (n_u, n_u) C_u = Cov[u] (PSD, with a tiny jitter).
      chol_u: (n_u, n_u) its Cholesky factor.
      prior_precision: (P, P) Lambda0 (w | sigma2 ~ N(0, sigma2 Lambda0^-1)).
      prior_shape, prior_scale: a0, b0 of sigma2 ~ InvGamma(a0, b0).
      obs_lo, obs_hi: (m,) the rounding intervals of a snapped release (used only when
        ``RegressionDims.rounded``; equal to z otherwise).
    """

    z: jax.Array
    noise_scale: jax.Array
    m_u: jax.Array
    cov_u: jax.Array
    chol_u: jax.Array
    prior_precision: jax.Array
    prior_shape: jax.Array
    prior_scale: jax.Array
    obs_lo: jax.Array
    obs_hi: jax.Array


def sampler_params(
    release: RegressionStatisticsRelease, *, fourth_moments: Any = None, prior: dict[str, float] | None = None
) -> RegressionGibbsParams:
    """The sampler's arrays for a release.

    Args:
      release: the noisy statistics.
      fourth_moments: None (``"released"`` if the release has the ``x4`` part, else ``"normal"``),
        ``"normal"``, ``"released"``, or a public covariate model ``(mean, cov)`` of the clipped x.
      prior: override ``prior_shape``, ``prior_scale``, ``weight_scale`` (default the model's 20, 0.5, 4).
    """
    pr = dict(DEFAULT_PRIOR)
    if prior is not None:
        unknown = set(prior) - set(pr)
        if unknown:
            raise ValueError(f"unknown prior keys {sorted(unknown)}; allowed {sorted(pr)}")
        pr.update({k: check_positive(v, k) for k, v in prior.items()})
    p = release.num_features
    if fourth_moments is None:
        fourth_moments = "released" if release.has_fourth_moments else "normal"
    if isinstance(fourth_moments, str):
        if fourth_moments not in FOURTH_MOMENTS:
            raise ValueError(f"fourth_moments must be one of {FOURTH_MOMENTS} or (mean, cov), got {fourth_moments!r}")
        mu, cov = covariate_moments(release)
        m_u, c_u = isserlis_moments(mu, cov)
        if fourth_moments == "released":
            if not release.has_fourth_moments:
                raise ValueError("fourth_moments='released' needs a release made with fourth_moments='released'")
            c_u = _released_fourth_moments(release, m_u)
    else:
        try:
            mean, cov = (np.asarray(v, np.float64) for v in fourth_moments)
        except (TypeError, ValueError) as e:
            raise TypeError(
                f"fourth_moments must be 'normal', 'released' or (mean, cov), got {fourth_moments!r}"
            ) from e
        if mean.shape != (p,) or cov.shape != (p, p):
            raise ValueError(
                f"a public covariate model needs mean (p,) and cov (p, p) with p={p}, got {mean.shape} and {cov.shape}"
            )
        if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(cov))):
            raise ValueError("a public covariate model (mean, cov) must hold finite numbers")
        if not np.allclose(cov, cov.T, rtol=1e-6, atol=1e-12) or np.min(
            np.linalg.eigvalsh(0.5 * (cov + cov.T))
        ) < -1e-9 * max(1.0, float(np.max(np.abs(cov)))):
            raise ValueError(
                "the cov of a public covariate model (mean, cov) must be a symmetric positive "
                f"semi-definite covariance matrix of the clipped covariates, got eigenvalues "
                f"{np.round(np.linalg.eigvalsh(0.5 * (cov + cov.T)), 6).tolist()}"
            )
        m_u, c_u = isserlis_moments(mean, cov)
    c_u = 0.5 * (c_u + c_u.T)
    jitter = 1e-6 * float(np.mean(np.diag(c_u)))
    c_u = c_u + jitter * np.eye(c_u.shape[0])
    chol = np.linalg.cholesky(c_u)
    z, b = release.latent_observation()
    interval = release.observation_interval()
    lo, hi = (z, z) if interval is None else interval
    f32 = jnp.float32
    return RegressionGibbsParams(
        z=jnp.asarray(z, f32),
        noise_scale=jnp.asarray(b, f32),
        m_u=jnp.asarray(m_u, f32),
        cov_u=jnp.asarray(c_u, f32),
        chol_u=jnp.asarray(chol, f32),
        prior_precision=jnp.eye(p + 1, dtype=f32) / pr["weight_scale"],
        prior_shape=jnp.float32(pr["prior_shape"]),
        prior_scale=jnp.float32(pr["prior_scale"]),
        obs_lo=jnp.asarray(lo, f32),
        obs_hi=jnp.asarray(hi, f32),
    )


def nig_posterior(
    xtx: np.ndarray, xty: np.ndarray, yty: float, num_records: int, prior: dict[str, float] | None = None
) -> dict[str, np.ndarray]:
    """The exact normal-inverse-gamma posterior given (X~'X~, X~'y, y'y) (X~ with the intercept column).

    Returns a dict with ``precision`` Lambda_n, ``mean`` mu_n, ``shape`` a_n, ``scale`` b_n, and the
    marginal moments ``w_mean``, ``w_sd`` (Student-t marginals), ``sigma2_mean``, ``sigma2_sd``.
    Used by tests and as the "as if exact" naive baseline on noisy statistics; the data term
    y'y - mu_n'X~'y is floored at 0 (it is >= 0 for exact statistics, noisy ones can break it).
    """
    pr = dict(DEFAULT_PRIOR)
    pr.update(prior or {})
    xtx = np.asarray(xtx, np.float64)
    lam = np.eye(xtx.shape[0]) / pr["weight_scale"] + xtx
    mu = np.linalg.solve(lam, np.asarray(xty, np.float64))
    a_n = pr["prior_shape"] + 0.5 * num_records
    b_n = pr["prior_scale"] + 0.5 * max(float(yty) - float(np.asarray(xty) @ mu), 0.0)
    s2_mean = b_n / (a_n - 1)
    cov_w = s2_mean * np.linalg.inv(lam)
    return {
        "precision": lam,
        "mean": mu,
        "shape": a_n,
        "scale": b_n,
        "w_mean": mu,
        "w_sd": np.sqrt(np.diag(cov_w)),
        "sigma2_mean": s2_mean,
        "sigma2_sd": s2_mean / math.sqrt(a_n - 2),
    }
