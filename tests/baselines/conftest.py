"""Shared helpers for the baselines' tests: exact conjugate moments in the unconstrained space and
interval coverage with its binomial tolerance."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import digamma, polygamma


def exact_unconstrained_moments(family: str, params) -> tuple[np.ndarray, np.ndarray]:
    """Mean and sd of the model's unconstrained coordinates under the conjugate posterior.

    Beta(a, b) -> logit p: psi(a) - psi(b), psi'(a) + psi'(b). Gamma(a, rate b) -> softplus^-1 theta
    = log(expm1(theta)): by quadrature (no closed form; the model unconstrains its rate by softplus,
    :mod:`dpposterior.models.conjugate`). Dirichlet(alpha) -> NumPyro stick-breaking y_i = logit(v_i) + log(K-1-i),
    v_i = theta_i / (1 - theta_1 - ... - theta_{i-1}) ~ Beta(alpha_i, sum_{j>i} alpha_j) independent.
    ``params`` has a leading batch axis (K, p).
    """
    p = np.asarray(params, np.float64)
    if family == "beta-bernoulli":
        a, b = p[:, 0], p[:, 1]
        return ((digamma(a) - digamma(b))[:, None], np.sqrt(polygamma(1, a) + polygamma(1, b))[:, None])
    if family == "gamma-exponential":
        from scipy import stats
        from scipy.special import gammaln

        # trapezoid rule in u = log(theta) between the 1e-13 quantiles (4,001 points, vectorised over
        # the batch): the integrand is smooth and decays at both ends, so the rule converges
        # geometrically; it agrees with adaptive quadrature (epsrel 1e-12) to 1e-10 sd, 80 times faster
        a, b = p[:, 0:1], p[:, 1:2]
        lo = np.log(stats.gamma.ppf(1e-13, a, scale=1.0 / b))
        hi = np.log(stats.gamma.isf(1e-13, a, scale=1.0 / b))
        u = lo + (hi - lo) * np.linspace(0.0, 1.0, 4001)[None, :]
        t = np.exp(u)
        log_dens = a * np.log(b) - gammaln(a) + a * u - b * t  # density of log(theta)
        w = np.exp(log_dens - log_dens.max(axis=1, keepdims=True))
        inv = t + np.log(-np.expm1(-t))  # log(expm1(theta)), stable
        trapezoid = getattr(np, "trapezoid", None) or np.trapz  # numpy < 2 has only the old name
        z = trapezoid(w, u, axis=1)[:, None]
        m1 = trapezoid(w * inv, u, axis=1)[:, None] / z
        m2 = trapezoid(w * (inv - m1) ** 2, u, axis=1)[:, None] / z
        return m1, np.sqrt(m2)
    k = p.shape[1]
    means, sds = [], []
    for i in range(k - 1):
        a, b = p[:, i], p[:, i + 1 :].sum(1)
        means.append(digamma(a) - digamma(b) + math.log(k - 1 - i))
        sds.append(np.sqrt(polygamma(1, a) + polygamma(1, b)))
    return np.stack(means, 1), np.stack(sds, 1)


def central_coverage(draws: np.ndarray, truth: np.ndarray, level: float = 0.9) -> np.ndarray:
    """Share of replicates whose central ``level`` interval (per coordinate) holds the truth.
    draws (K, M, n), truth (K, n) -> (n,)."""
    lo = np.quantile(draws, (1 - level) / 2, axis=1)
    hi = np.quantile(draws, 1 - (1 - level) / 2, axis=1)
    return np.mean((truth >= lo) & (truth <= hi), axis=0)


def binomial_tolerance(k: int, level: float = 0.9, z: float = 3.0) -> float:
    """z binomial standard deviations of an empirical coverage over k replicates."""
    return z * math.sqrt(level * (1 - level) / k)


def ess(x: np.ndarray) -> np.ndarray:
    """Effective sample size of chains along axis -1 (any leading shape), vectorised: autocorrelations
    by FFT, summed over Geyer's initial positive sequence of pair sums."""
    x = np.asarray(x, np.float64)
    m = x.shape[-1]
    xc = x - x.mean(-1, keepdims=True)
    f = np.fft.rfft(xc, n=2 * m, axis=-1)
    acov = np.fft.irfft(f * np.conj(f), axis=-1)[..., :m] / m
    rho = acov / np.maximum(acov[..., :1], 1e-300)
    pairs = rho[..., 0 : m - 1 : 2] + rho[..., 1:m:2]
    positive = np.cumprod(pairs > 0, axis=-1).astype(bool)
    tau = -1.0 + 2.0 * np.sum(np.where(positive, pairs, 0.0), axis=-1)
    return m / np.maximum(tau, 1.0 / np.log10(max(m, 10)))


@pytest.fixture(scope="session")
def helpers():
    """The helper functions above, as a namespace (test modules here are not a package)."""
    import types

    return types.SimpleNamespace(
        exact_unconstrained_moments=exact_unconstrained_moments,
        central_coverage=central_coverage,
        binomial_tolerance=binomial_tolerance,
        ess=ess,
    )


@pytest.fixture(scope="session")
def rng():
    return np.random.default_rng(20240607)


@pytest.fixture(scope="module")
def dirichlet_release():
    """A Dirichlet-Categorical release of six records over three categories at epsilon 1."""
    from dpposterior.baselines import release_sufficient_statistics

    return release_sufficient_statistics("dirichlet-categorical", [0, 1, 1, 2, 2, 2], epsilon=1.0, rng_key=0)
