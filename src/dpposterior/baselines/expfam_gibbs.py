"""Bernstein & Sheldon (2018) noise-aware Gibbs sampling for conjugate exponential families
("Differentially private Bayesian inference for exponential families", NeurIPS 2018).

Three models, with the priors of :mod:`dpposterior.models.conjugate` (Räisä et al. 2024):

==========================  =============================  ==================================
family                      sufficient statistic t(x)      conjugate update given s = sum t
==========================  =============================  ==================================
``beta-bernoulli``          x in {0, 1}                    Beta(a + s, b + N - s)
``dirichlet-categorical``   one-hot(x), x in {0..K-1}      Dirichlet(alpha + s)
``gamma-exponential``       clip(x, lo, hi), x >= 0        Gamma(shape + N, rate + s)
==========================  =============================  ==================================

Post-processing of a :class:`~dpposterior.releases.statistics.SufficientStatisticsRelease` (made by
:func:`dpposterior.baselines.expfam_release.release_sufficient_statistics`, the Laplace mechanism:
z = s + Laplace(Delta / epsilon) per coordinate). :func:`bernstein_sheldon_kernel` builds the
sampler as a :class:`~dpposterior.baselines._chain.GibbsAlgorithm` ``(init, step)`` with the release
and its settings closed over (:func:`gibbs_kernel` from the release's arrays, for jit and vmap over
many releases); :func:`sample_chain` runs it; :func:`bernstein_sheldon_gibbs` is the user-facing
posterior. The sweep:

1. s | theta, omega, z ~ N(m, V) truncated to the support of s, where the CLT gives s | theta ~
   N(N mu, N Sigma) (mu, Sigma the mean and covariance of t(x) under theta) and the Laplace noise is
   written as a scale mixture z_k | s_k, omega_k ~ N(s_k, omega_k):
   V = ((N Sigma)^-1 + D^-1)^-1, m = V ((N Sigma)^-1 N mu + D^-1 z), D = diag(omega).
2. 1 / omega_k ~ InverseGaussian(mean 1 / (b |z_k - s_k|), shape 1 / b^2), b = Delta / epsilon.
3. theta | s from the conjugate posterior.

A release made with the snapping mechanism (``snapping=True``, the default in secure mode) rounds
z to a grid after the noise: z is then the rounding of y = s + Laplace, and the chain carries y as
one more latent variable (``GibbsState.obs``): y_k | s_k, omega_k, z ~ N(s_k, omega_k) truncated
to the interval of values that round to z_k, and steps 1 and 2 use y in place of z. The joint
posterior of (theta, s, omega, y) given z is the target, so the noise-aware posterior stays exact.

The chain starts at the prior mean of theta with omega_k ~ Exponential(mean 2 b^2) (both
data-independent). Defects of the public implementation that this code avoids:
the truncation bounds of s are the support of the statistic (never the true parameter); the CLT
moments are those of the model at the current theta (never non-private data moments); every
released coordinate is noised once and its omega enters once.

Support handling: Bernoulli s in [0, N]; Exponential s in [N lo, N hi] (each clipped record lies in
[lo, hi]); Categorical: the one-hot statistic has a singular covariance (its coordinates sum to N), so
the sampler works in the first K-1 coordinates s' with s_K = N - sum(s'). The prior of s' is
N(N theta', N (diag(theta') - theta' theta'^T)), whose precision is diag(1/(N theta')) + 11^T/(N theta_K);
all K noisy counts are used (z_K observes N - sum(s')), and s' is drawn coordinate by coordinate from
its truncated conditional (s'_j in [0, N - sum of the others]: the scaled simplex), a Gibbs step
that leaves the truncated Gaussian invariant (Geweke 1991). Each sweep then redraws pairs of counts
with their sum held fixed (:func:`_pair_moves`), which lets mass move between categories: without
these moves a chain with unused categories and little noise stayed near its start at the prior mean.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import check_positive_int
from ..privacy.randomness import resolve_key
from ..releases.layout import ParamLayout
from ..releases.statistics import DEFAULT_PRIORS, FAMILIES, ExpFamModel, SufficientStatisticsRelease
from . import _sampling as S
from ._chain import GibbsAlgorithm, run_sweeps, typed_key
from .draws_posterior import DrawsPosterior

__all__ = [
    "CLIP_WARN_FRACTION",
    "DEFAULT_PRIORS",
    "FAMILIES",
    "ExpFamModel",
    "GibbsInfo",
    "GibbsState",
    "SufficientStatisticsRelease",
    "bernstein_sheldon_gibbs",
    "bernstein_sheldon_kernel",
    "check_finite_draws",
    "clipped_exponential_moments",
    "clipping_check",
    "conjugate_posterior_params",
    "family_layout",
    "gibbs_kernel",
    "sample_chain",
    "to_unconstrained",
]


# ---------------------------------------------------------------------------------------------
# the chain: (init, step) over NamedTuple states


class GibbsState(NamedTuple):
    """State of the noise-aware Gibbs chain.

    Attributes:
      theta: (k,) the constrained parameter (Bernoulli probability; Exponential rate; category
        probabilities).
      stat: (m,) the latent sufficient statistic s (for Categorical all K counts, summing to N).
      omega: (m,) the variances of the Laplace noise's normal scale mixture.
      obs: (m,) the latent pre-rounding noisy statistic y of a snapped release (None otherwise: the
        released z itself is the noisy statistic).
      unconstrained: (n,) theta in the model's unconstrained space (logit; softplus inverse;
        stick-breaking), drawn in log space from the same Gamma variates as ``theta`` (Beta and
        Dirichlet), so it stays finite and exact where the float32 ``theta`` rounds to the boundary of
        its support (small prior concentrations); None unless the kernel was built with ``unconstrained=True``.
    """

    theta: jax.Array
    stat: jax.Array
    omega: jax.Array
    obs: Any = None
    unconstrained: Any = None


class GibbsInfo(NamedTuple):
    """Per-sweep diagnostics.

    Attributes:
      stat_mean: (m,) the mean of the Gaussian conditional of s before truncation (for Categorical,
        of the first K-1 coordinates, with the last set to N minus their sum).
    """

    stat_mean: jax.Array


def clipped_exponential_moments(rate: jax.Array, lo: float, hi: float) -> tuple[jax.Array, jax.Array]:
    """Mean and variance of clip(x, lo, hi) for x ~ Exponential(rate) (0 <= lo < hi).

    clip(x) = lo + W with W = 0 w.p. 1 - p, p = exp(-rate lo), and W = min(Y, hi - lo), Y ~ Exp(rate)
    otherwise (memorylessness): E[min(Y, c)] = (1 - e^{-rc}) / r,
    E[min(Y, c)^2] = 2 (1 - e^{-rc} - rc e^{-rc}) / r^2.
    """
    r = jnp.asarray(rate, jnp.float32)
    c = hi - lo
    p = jnp.exp(-r * lo)
    rc = r * c
    m1 = -jnp.expm1(-rc) / r
    m2 = 2.0 * (-jnp.expm1(-rc) - rc * jnp.exp(-rc)) / (r * r)
    mean = lo + p * m1
    var = jnp.maximum(p * m2 - jnp.square(p * m1), jnp.finfo(jnp.float32).tiny)
    return mean, var


def _clip_bounds(model: ExpFamModel) -> tuple[float, float]:
    """The clipping bounds of a gamma-exponential model (which always has them)."""
    if model.bounds is None:
        raise ValueError(f"a {model.family} model has no clipping bounds (gamma-exponential only)")
    return model.bounds


def _init(
    key: jax.Array,
    model: ExpFamModel,
    noise_scale: jax.Array,
    interval: tuple[jax.Array, jax.Array] | None = None,
    *,
    unconstrained: bool = False,
) -> GibbsState:
    """The chain's start: theta at the prior mean, s at N E[t | theta], omega ~ Exponential(mean 2 b^2),
    and for a snapped release (``interval`` = its rounding intervals) y at each interval's midpoint.
    With ``unconstrained=True`` the state also carries theta in the unconstrained space, which every
    step then updates (``GibbsState.unconstrained``).

    Data-independent (and release-independent except for the public noise scale and grid).
    """
    theta = jnp.asarray(model.prior_mean(), jnp.float32)
    n = float(model.num_records)
    if model.family == "gamma-exponential":
        mean, _ = clipped_exponential_moments(theta[0], *_clip_bounds(model))
        stat = jnp.reshape(n * mean, (1,))
    else:
        stat = n * theta
    omega = S.initial_mixture_variance(key, noise_scale, (model.num_stats,))
    obs = None if interval is None else S.interval_start(interval)
    unc = to_unconstrained(model.family, theta) if unconstrained else None
    return GibbsState(theta=theta, stat=stat.astype(jnp.float32), omega=omega, obs=obs, unconstrained=unc)


def _pair_moves(
    key: jax.Array, stat: jax.Array, theta: jax.Array, omega: jax.Array, z: jax.Array, n: float
) -> jax.Array:
    """Categorical: exact Gibbs moves of the count vector s that shift mass between two categories.

    The coordinate updates of :func:`_step` hold the other counts fixed, and with them (through
    s_K = N - sum of the others) the last count; when the noise is small next to the counts that pins
    every count to its current value, and mass moves between categories only by small steps (a chain
    started at the prior mean with unused categories stayed there for thousands of sweeps). Here each
    category i in turn is paired with j = (i + r) mod K (r uniform in 1..K-1, drawn once per sweep) and
    (s_i, s_j) is redrawn from its conditional with s_i + s_j = C fixed: the full conditional of s is
    proportional to exp(-1/2 sum_k [(s_k - N theta_k)^2 / (N theta_k) + (z_k - s_k)^2 / omega_k]) on
    {s >= 0, sum s = N} (the CLT prior of :func:`_step` written over all K counts), so t = s_i is
    a normal of precision p_i + p_j and mean (b_i - b_j + p_j C) / (p_i + p_j) truncated to [0, C], with
    p_k = 1 / (N theta_k) + 1 / omega_k and b_k = 1 + z_k / omega_k. Each move leaves that conditional
    invariant, and r does not depend on the state, so the sweep's target is unchanged.
    """
    kk = stat.shape[0]
    k_r, k_t = jax.random.split(key)
    r = jax.random.randint(k_r, (), 1, kk)
    p = 1.0 / (n * theta) + 1.0 / omega
    b = 1.0 + z / omega
    keys = jax.random.split(k_t, kk)

    def move(i, s):
        j = (i + r) % kk
        c = s[i] + s[j]
        prec = p[i] + p[j]
        mean = (b[i] - b[j] + p[j] * c) / prec
        hi = jnp.maximum(c, jnp.finfo(jnp.float32).tiny)
        t = jnp.clip(S.truncated_normal(keys[i], mean, 1.0 / jnp.sqrt(prec), 0.0, hi), 0.0, c)
        t = jnp.where(c > 0.0, t, s[i])
        return s.at[i].set(t).at[j].set(c - t)

    return jax.lax.fori_loop(0, kk, move, stat)


def _step(
    key: jax.Array,
    state: GibbsState,
    z: jax.Array,
    noise_scale: jax.Array,
    model: ExpFamModel,
    interval: tuple[jax.Array, jax.Array] | None = None,
) -> tuple[GibbsState, GibbsInfo]:
    """One sweep: s | theta, omega, z (truncated CLT Gaussian); omega | s, z; theta | s (conjugate).

    With ``interval`` (a snapped release's rounding intervals; ``state.obs`` then holds y), the sweep
    is s | theta, omega, y; y | s, omega (truncated to the interval); omega | s, y; theta | s.

    Gamma-Exponential: the CLT step uses the exact mean and variance of a CLIPPED Exponential record
    (:func:`clipped_exponential_moments`), and s is truncated to [N lo, N hi]. The conjugate step
    Gamma(shape + N, rate + s) is the exact posterior given s only when no record was clipped; with
    c clipped records the exact clipped-data posterior would be Gamma(shape + N - c, rate + s). Choose
    ``hi`` so that clipping is rare under the prior (for the papers' Gamma(8, 2) prior and hi = 5 the
    expected clipped fraction is E[exp(-5 theta)] = (2/7)^8 = 4.5e-5). :func:`clipping_check` reports the
    share under the posterior draws (and :func:`bernstein_sheldon_gibbs` warns when it is not small).
    """
    k_s, k_w, k_t = jax.random.split(key, 3)
    z = jnp.asarray(z, jnp.float32) if interval is None else state.obs
    b = jnp.asarray(noise_scale, jnp.float32)
    n = float(model.num_records)
    theta, omega = state.theta, state.omega
    prior = jnp.asarray(model.prior, jnp.float32)

    if model.family == "dirichlet-categorical":
        kk = model.num_stats
        th = jnp.clip(theta, jnp.finfo(jnp.float32).tiny, 1.0)
        coupling = 1.0 / (n * th[-1]) + 1.0 / omega[-1]  # P_ij for i != j
        diag = 1.0 / (n * th[:-1]) + 1.0 / omega[:-1] + coupling  # P_jj
        h = 1.0 / th[-1] + z[:-1] / omega[:-1] + (n - z[-1]) / omega[-1]
        keys = jax.random.split(k_s, kk - 1)

        def coord(j, s):
            others = jnp.sum(s) - s[j]
            mean = (h[j] - coupling * others) / diag[j]
            upper = jnp.maximum(n - others, 0.0)
            sj = S.truncated_normal(keys[j], mean, 1.0 / jnp.sqrt(diag[j]), 0.0, upper)
            return s.at[j].set(jnp.clip(sj, 0.0, upper))

        s_part = jax.lax.fori_loop(0, kk - 1, coord, state.stat[:-1])
        stat = jnp.concatenate([s_part, jnp.reshape(jnp.maximum(n - jnp.sum(s_part), 0.0), (1,))])
        stat = _pair_moves(jax.random.fold_in(k_s, 1), stat, th, omega, z, n)
        cond_mean = jnp.linalg.solve(jnp.diag(diag - coupling) + coupling, h)
        stat_mean = jnp.concatenate([cond_mean, jnp.reshape(n - jnp.sum(cond_mean), (1,))])
    else:
        if model.family == "beta-bernoulli":
            p = jnp.clip(theta[0], jnp.finfo(jnp.float32).tiny, 1.0 - jnp.finfo(jnp.float32).epsneg)
            mean_t, var_t = p, p * (1.0 - p)
            lo, hi = 0.0, n
        else:
            b_lo, b_hi = _clip_bounds(model)
            mean_t, var_t = clipped_exponential_moments(theta[0], b_lo, b_hi)
            lo, hi = n * b_lo, n * b_hi
        prec = 1.0 / (n * var_t) + 1.0 / omega[0]
        mean = (mean_t / var_t + z[0] / omega[0]) / prec
        s0 = S.truncated_normal(k_s, mean, 1.0 / jnp.sqrt(prec), lo, hi)
        stat = jnp.reshape(jnp.clip(s0, lo, hi), (1,))
        stat_mean = jnp.reshape(mean, (1,))

    obs = None
    if interval is not None:
        k_w, k_y = jax.random.split(k_w)
        obs = S.truncated_obs(k_y, stat, omega, interval)
        z = obs
    omega = S.laplace_mixture_variance(k_w, z - stat, b)

    unc = None
    if model.family == "beta-bernoulli":
        conc = jnp.stack([prior[0] + stat[0], prior[1] + n - stat[0]])
        g = jax.random.gamma(k_t, conc)
        theta = jnp.reshape(g[0] / (g[0] + g[1]), (1,))
        if state.unconstrained is not None:  # the same variates in log space: logit(theta) = ln g0 - ln g1
            lg = jax.random.loggamma(k_t, conc)
            unc = jnp.reshape(lg[0] - lg[1], (1,))
    elif model.family == "gamma-exponential":
        g = jax.random.gamma(k_t, prior[0] + n)
        theta = jnp.reshape(g / (prior[1] + stat[0]), (1,))
        if state.unconstrained is not None:  # shape >= N >= 1: theta never leaves float32
            unc = to_unconstrained(model.family, theta)
    else:
        theta = jax.random.dirichlet(k_t, prior + stat)  # softmax of loggamma(k_t, prior + stat)
        if state.unconstrained is not None:
            unc = _stick_breaking_from_log_gammas(jax.random.loggamma(k_t, prior + stat))
    return (GibbsState(theta=theta, stat=stat, omega=omega, obs=obs, unconstrained=unc), GibbsInfo(stat_mean=stat_mean))


def _stick_breaking_from_log_gammas(lg: jax.Array) -> jax.Array:
    """NumPyro's stick-breaking unconstrained value (K-1,) of theta = softmax(lg), from the log-Gamma
    variates lg (K,) themselves: x_k = lg_k - log sum_{j>k} e^{lg_j} + log(K-1-k) (the inverse of
    ``StickBreakingTransform``), finite even where a component of theta underflows in float32."""
    kk = lg.shape[-1]
    tail = jax.lax.cumlogsumexp(lg[::-1])[::-1]  # tail[k] = log sum_{j>=k} e^{lg_j}
    return lg[:-1] - tail[1:] + jnp.log(kk - 1.0 - jnp.arange(kk - 1, dtype=lg.dtype))


def gibbs_kernel(
    model: ExpFamModel,
    z: jax.Array,
    noise_scale: jax.Array,
    interval: tuple[jax.Array, jax.Array] | None = None,
    *,
    unconstrained: bool = False,
) -> GibbsAlgorithm:
    """The Bernstein-Sheldon sampler of a release given as arrays (jit- and vmap-friendly).

    Args:
      model: the static model (hashable).
      z: (m,) the released noisy statistic (float32).
      noise_scale: () the Laplace scale b of every coordinate.
      interval: the rounding intervals (lo, hi) of a snapped release
        (:meth:`SufficientStatisticsRelease.observation_interval`), None for a plain one.
      unconstrained: carry theta in the model's unconstrained space as well
        (:attr:`GibbsState.unconstrained`).

    Returns:
      A :class:`~dpposterior.baselines._chain.GibbsAlgorithm`: ``init(key)`` starts the chain at the
      prior mean of theta with omega ~ Exponential(mean 2 b^2) (and y at the interval midpoints),
      data-independent; ``step(key, state)`` is one sweep returning ``(GibbsState, GibbsInfo)``.
    """

    def init(key: jax.Array) -> GibbsState:
        return _init(key, model, noise_scale, interval, unconstrained=unconstrained)

    def step(key: jax.Array, state: GibbsState) -> tuple[GibbsState, GibbsInfo]:
        return _step(key, state, z, noise_scale, model, interval)

    return GibbsAlgorithm(init, step)


def bernstein_sheldon_kernel(
    release: SufficientStatisticsRelease, *, prior: Any = None, unconstrained: bool = False
) -> GibbsAlgorithm:
    """The Bernstein-Sheldon Gibbs sampler of ``release`` as ``(init, step)`` (post-processing only).

    Args:
      release: from :func:`~dpposterior.baselines.release_sufficient_statistics`.
      prior: override the family's default prior ((a, b); (shape, rate); concentrations).
      unconstrained: carry theta in the model's unconstrained space too (:attr:`GibbsState.unconstrained`).

    Returns:
      A :class:`~dpposterior.baselines._chain.GibbsAlgorithm` (:func:`gibbs_kernel`) over the
      release's float32 arrays: ``state = init(key)``, then ``state, info = step(key, state)``.
    """
    model, z, noise_scale, interval = _release_arrays(release, prior)
    return gibbs_kernel(model, z, noise_scale, interval, unconstrained=unconstrained)


def _release_arrays(
    release: SufficientStatisticsRelease, prior: Any
) -> tuple[ExpFamModel, jax.Array, jax.Array, tuple[jax.Array, jax.Array] | None]:
    """(model, z, b, interval) of a release as the sampler reads them, checked against the prior."""
    if not isinstance(release, SufficientStatisticsRelease):
        raise TypeError(f"release must be a SufficientStatisticsRelease, got {type(release).__name__}")
    model = release.model(prior)
    if model.num_stats != release.noisy_statistic.shape[0]:
        raise ValueError(
            f"prior {model.prior} does not match the release's {release.noisy_statistic.shape[0]} statistic coordinates"
        )
    rounding = release.observation_interval()
    interval = None
    if rounding is not None:
        interval = (jnp.asarray(rounding[0], jnp.float32), jnp.asarray(rounding[1], jnp.float32))
    return model, jnp.asarray(release.noisy_statistic, jnp.float32), jnp.float32(release.noise_scale), interval


@functools.partial(jax.jit, static_argnames=("model", "num_warmup", "num_draws", "thin", "unconstrained"))
def sample_chain(
    key: jax.Array,
    z: jax.Array,
    noise_scale: jax.Array,
    *,
    model: ExpFamModel,
    num_warmup: int,
    num_draws: int,
    thin: int = 1,
    interval: tuple[jax.Array, jax.Array] | None = None,
    unconstrained: bool = False,
) -> jax.Array:
    """``num_draws`` draws (num_draws, k) of the constrained theta after ``num_warmup`` sweeps, keeping
    every ``thin``-th sweep; with ``unconstrained=True`` the same draws (num_draws, n) in the model's
    unconstrained space, computed in log space (``GibbsState.unconstrained``): finite where a float32
    theta rounds to 0 or 1 (small prior concentrations), which :func:`to_unconstrained` maps to inf.
    Pure and jitted; vmap over (key, z, noise_scale) for many releases.
    ``key`` is a typed JAX key or a raw uint32 (2,) key. Mixing: the latent statistic and theta are
    coupled, so the chain is slow when the noise dominates the statistic's sampling spread
    (Gamma-Exponential, epsilon = 0.1, N = 5,000, hi = 5: about 30 sweeps per effective draw; the
    Beta-Bernoulli and Dirichlet cells about 1.5); thin accordingly. ``interval``: the rounding
    intervals (lo, hi) of a snapped release (:meth:`SufficientStatisticsRelease.observation_interval`).
    """
    key = typed_key(key)
    k0, k_run = jax.random.split(key)
    algorithm = gibbs_kernel(model, z, noise_scale, interval, unconstrained=unconstrained)
    return run_sweeps(
        k_run,
        algorithm.init(k0),
        lambda k, st: algorithm.step(k, st)[0],
        (lambda st: st.unconstrained) if unconstrained else (lambda st: st.theta),
        num_warmup=num_warmup,
        num_draws=num_draws,
        thin=thin,
    )


# ---------------------------------------------------------------------------------------------
# layouts and the user-facing posterior


@functools.lru_cache(maxsize=32)
def family_layout(family: str, num_categories: int = 3) -> ParamLayout:
    """The unconstrained layout of the model's latent site ``theta``, as NA-DPVI gets it from the
    NumPyro model (``inspect_model``; a test checks they agree): logit for Beta-Bernoulli
    (support ``unit_interval``), softplus for Gamma-Exponential (``softplus_positive``), stick-breaking for the
    Dirichlet (``simplex``, K-1 coordinates). Built directly, without tracing the model; the
    Gamma-Exponential support is read from the model's prior class, so the two cannot drift apart."""
    from ..models.conjugate import SoftplusGamma
    from ..releases.layout import Site, support_to_spec

    if family == "beta-bernoulli":
        return ParamLayout((Site("theta", (), (), {"kind": "unit_interval"}),))
    if family == "gamma-exponential":
        return ParamLayout((Site("theta", (), (), support_to_spec(SoftplusGamma.support)),))
    if family == "dirichlet-categorical":
        k = int(num_categories)
        return ParamLayout((Site("theta", (k,), (k - 1,), {"kind": "simplex"}),))
    raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")


def to_unconstrained(family: str, thetas: jax.Array) -> jax.Array:
    """(..., k) constrained draws of the sampler -> (..., n) in the model's unconstrained space."""
    layout = family_layout(family, int(thetas.shape[-1]) if family == "dirichlet-categorical" else 3)
    value = thetas if family == "dirichlet-categorical" else thetas[..., 0]
    return layout.unconstrain({"theta": value})


#: the largest expected share of clipped Exponential records (under any posterior draw) for which the
#: conjugate theta step is trusted; above it a warning says to widen the bounds (:func:`_step`).
CLIP_WARN_FRACTION = 1e-3


def clipping_check(thetas: Any, bounds: tuple[float, float] | None, where: str | None) -> dict[str, float]:
    """Gamma-Exponential: the largest expected share of clipped records over the posterior draws.

    The conjugate step Gamma(shape + N, rate + s) ignores clipping (:func:`_step`), so it is right
    only while P(x < lo) + P(x > hi) = 1 - exp(-theta lo) + exp(-theta hi) is small under the posterior.
    Returns ``{"clipped_fraction_max": ...}`` (empty for the other families) and, with ``where`` given,
    warns (UserWarning) when that share exceeds :data:`CLIP_WARN_FRACTION`; ``thetas`` of shape (K, M)
    (K replicates) also give ``replicates_clipped_over_warn``. Computed from the draws only
    (post-processing).
    """
    if bounds is None:
        return {}
    import warnings

    th = np.asarray(thetas, np.float64)
    lo, hi = bounds
    share = -np.expm1(-th * lo) + np.exp(-th * hi)
    frac = float(np.max(share)) if th.size else 0.0
    out = {"clipped_fraction_max": frac}
    if th.ndim >= 2:
        per_rep = share.reshape(th.shape[0], -1).max(axis=1)
        out["replicates_clipped_over_warn"] = int(np.sum(per_rep > CLIP_WARN_FRACTION))
    if where is not None and frac > CLIP_WARN_FRACTION:
        warnings.warn(
            f"{where}: under some posterior draws {frac:.3g} of the Exponential records lie outside the "
            f"clipping bounds {tuple(bounds)} (more than {CLIP_WARN_FRACTION:g}); the conjugate step "
            "ignores clipping, so this posterior is biased: release with a wider (lo, hi) fixed in "
            "advance (lo = 0 and hi well above the largest plausible 1/rate)",
            UserWarning,
            stacklevel=3,
        )
    return out


def check_finite_draws(thetas: Any, noise_scale: float, where: str) -> None:
    """A clear error when the chain left the float32 range (a Laplace scale so small that its mixture
    variance 2 b^2 underflows: epsilon far beyond any useful privacy level)."""
    if not np.all(np.isfinite(np.asarray(thetas))):
        raise ValueError(
            f"{where}: the Gibbs chain produced non-finite draws: the Laplace noise scale "
            f"b = {noise_scale:.3g} is too small for float32 (its mixture variance 2 b^2 underflows); "
            "release with a smaller epsilon (at such an epsilon the noise is negligible: the exact "
            "conjugate posterior, conjugate_posterior_params, is the answer)"
        )


def bernstein_sheldon_gibbs(
    release: SufficientStatisticsRelease,
    *,
    num_warmup: int = 1000,
    num_draws: int = 4000,
    thin: int = 1,
    prior: Any = None,
    rng_key: Any = None,
) -> DrawsPosterior:
    """The noise-aware posterior of Bernstein & Sheldon (2018) for a noisy sufficient statistic.

    Post-processing of ``release`` only (costs no privacy): runs the chain of
    :func:`bernstein_sheldon_kernel`. See the module docstring for the sweep and :func:`_step` for the
    treatment of clipping.

    Args:
      release: from :func:`~dpposterior.baselines.release_sufficient_statistics`.
      num_warmup: sweeps discarded first.
      num_draws: draws kept.
      thin: sweeps per kept draw.
      prior: override the family's default prior ((a, b); (shape, rate); concentrations).
      rng_key: post-processing randomness (None: from the OS; an int or JAX key to reproduce).

    Returns:
      A :class:`DrawsPosterior` with the release's PrivacySpent; draws in the model's unconstrained
      space (same maps as NA-DPVI). Gamma-Exponential: ``diagnostics["clipped_fraction_max"]``, with a
      UserWarning when it exceeds :data:`CLIP_WARN_FRACTION` (:func:`clipping_check`).

    Raises:
      ValueError: a chain that left the float32 range (epsilon so large that the noise scale underflows).
    """
    if not isinstance(release, SufficientStatisticsRelease):
        raise TypeError(f"release must be a SufficientStatisticsRelease, got {type(release).__name__}")
    num_warmup = check_positive_int(num_warmup, "num_warmup", minimum=0)
    num_draws = check_positive_int(num_draws, "num_draws")
    thin = check_positive_int(thin, "thin")
    model, z, noise_scale, interval = _release_arrays(release, prior)
    raw, _ = resolve_key(rng_key)
    # unconstrained draws computed in log space: a float32 theta of exactly 0 or 1 (Beta(0.5, 0.5) prior, all
    # records positive) has no finite logit, and near the boundary float32 loses the draw's tail
    draws = sample_chain(
        raw,
        z,
        noise_scale,
        model=model,
        num_warmup=num_warmup,
        num_draws=num_draws,
        thin=thin,
        interval=interval,
        unconstrained=True,
    )
    check_finite_draws(draws, release.noise_scale, "bernstein_sheldon_gibbs")
    layout = family_layout(release.family, release.num_categories or 3)
    diag = {
        "num_warmup": num_warmup,
        "num_draws": num_draws,
        "thin": thin,
        "prior": model.prior,
        "noise_scale": release.noise_scale,
        "snapped": release.snapped is not None,
        **clipping_check(
            np.asarray(layout.constrain(draws)["theta"]) if model.bounds else None,
            model.bounds,
            "bernstein_sheldon_gibbs",
        ),
    }
    return DrawsPosterior(
        layout=layout, draws=draws, privacy=release.privacy, method="bernstein_sheldon_gibbs", diagnostics=diag
    )


def conjugate_posterior_params(
    release_or_family: Any, statistic_value: Any, num_records: int | None = None, prior: Any = None
) -> tuple[float, ...]:
    """Parameters of the exact (non-private) conjugate posterior given a statistic value s.

    Beta: (a + s, b + N - s); Gamma: (shape + N, rate + s); Dirichlet: alpha + s. Used by tests and by
    the "as if exact" naive baseline (feeding it the noisy z ignores the noise).
    """
    n: int | None
    if isinstance(release_or_family, SufficientStatisticsRelease):
        family, n = release_or_family.family, release_or_family.num_records
        if prior is None:
            prior = release_or_family.model().prior
    else:
        family, n = release_or_family, num_records
        if prior is None:
            prior = DEFAULT_PRIORS[family]
    s = np.asarray(statistic_value, np.float64).reshape(-1)
    p = np.asarray(prior, np.float64)
    if family == "beta-bernoulli":
        return (p[0] + s[0], p[1] + _num_records(n) - s[0])
    if family == "gamma-exponential":
        return (p[0] + _num_records(n), p[1] + s[0])
    return tuple(p + s)


def _num_records(num_records: int | None) -> int:
    """N, which the Beta and Gamma posteriors need (a TypeError when it is missing)."""
    if num_records is None:
        raise TypeError("num_records (N) is required for the beta-bernoulli and gamma-exponential posteriors")
    return num_records
