"""Gibbs-SS-Noisy: noise-aware Bayesian linear regression from Laplace-noised sufficient statistics
(Bernstein & Sheldon, "Differentially private Bayesian linear regression", NeurIPS 2019;
section 3), for the model of :func:`dpposterior.models.regression.linear_regression`:

    sigma2 ~ InvGamma(a0 = 20, b0 = 0.5),  w | sigma2 ~ N(0, 4 sigma2 I_P),  y_i ~ N(w . x~_i, sigma2),

with x~ = (x, 1) (P = p + 1 weights, the last the intercept).

Post-processing of a :class:`~dpposterior.releases.statistics.RegressionStatisticsRelease` (made by
:func:`dpposterior.baselines.regression_release.release_regression_statistics`: Laplace-noised sums of
x x', x y and y^2 over records clipped into a box fixed in advance). :func:`gibbs_ss_noisy_kernel`
builds the sampler as a :class:`~dpposterior.baselines._chain.GibbsAlgorithm` ``(init, step)`` with
the release and its settings closed over (:func:`gibbs_kernel` from the sampler's arrays,
:class:`~dpposterior.baselines.regression_params.RegressionGibbsParams`, for jit and vmap over many
releases); :func:`sample_chain` runs it; :func:`gibbs_ss_noisy` is the user-facing posterior.

The sampler (post-processing of the release) is a three-step Gibbs sweep over the latent statistic
S = (S_u, S_b, S_c) (S_u: the 65 ``xx`` coordinates, S_b: the 11 ``xy`` coordinates, S_c = sum y^2),
the Laplace mixture variances omega, and theta = (w, sigma2):

1. S | theta, omega, z: the CLT gives S ~ N(N mu_t, N Sigma_t) for t = (u, x~ y, y^2), u = (x_j x_k,
   x_j). Writing y = x~'w + e, x~ y = M(u) w + x~ e and y^2 = w'M(u)w + 2 e x~'w + e^2 are LINEAR in
   u plus noise terms uncorrelated with u, so with J(w) = [I; L_b(w); L_c(w)],
       mu_t = (m_u, M(m_u) w, w'M(m_u)w + sigma2),
       Sigma_t = J C_u J' + blockdiag(0, Cov_r),
       Cov_r = [[sigma2 M2, 2 sigma2 M2 w], [2 sigma2 w'M2, 4 sigma2 w'M2 w + 2 sigma2^2]],
   exactly (M2 = E[x~ x~']); only m_u = E[u] and C_u = Cov[u] (moments of x up to order 4) are
   needed from the covariates, and Sigma_t is PSD whenever C_u is. The Gaussian conditional given
   z = S + noise, noise_k ~ N(0, omega_k), is drawn exactly by Matheron's rule (a prior draw
   corrected by Sigma0 (Sigma0 + D)^-1 (z - draw - noise draw)), and then truncated to the support of
   S, the set where the Gram matrix [[X~'X~, X~'y], [y'X~, y'y]] is positive definite (which also
   makes the conjugate update below proper): a proposal outside it is rejected and S kept, which is
   the independence Metropolis-Hastings step whose target is the truncated conditional.
2. 1/omega_k ~ InverseGaussian(mean 1/(b_k |z_k - S_k|), shape 1/b_k^2), b_k the Laplace scale.
3. (w, sigma2) | S from the normal-inverse-gamma conjugate posterior: Lambda_n = Lambda0 + X~'X~,
   mu_n = Lambda_n^-1 X~'y, a_n = a0 + N/2, b_n = b0 + (y'y - mu_n' X~'y)/2.

Added to the paper's sweep (``interweave=True``, the default): the three steps alone mix very slowly
when the noise is large next to the sampling spread of S (w | S moves by about sigma / sqrt(N) per
sweep while its posterior spread is about noise / N: at epsilon = 1, N = 5,000 the autocorrelation
time of w runs to thousands of sweeps). Each sweep therefore ends with moves in the ancillary
augmentation (Yu & Meng 2011, "interweaving"): three preconditioned Crank-Nicolson moves of w that
shift (S_b, S_c) with the residual statistics held fixed (:func:`_shift_step`), and a random-walk
move of log sigma2 with the standardised residual statistics held fixed (:func:`_scale_step`). Both
leave the same joint posterior invariant (their Metropolis-Hastings ratios are derived in the
functions), so the target is the paper's. Measured (p = 10, N = 5,000, public covariate moments):
about 4,000 sweeps give an ESS of 200-400 for every coordinate at epsilon = 1 and 0.3; the plain
sweep gave 15-300.

The covariate moments m_u and C_u are estimated from the release
(:mod:`dpposterior.baselines.regression_params`), never from the private data.

Other approximations: the CLT for S (N records); clipping is a per-record map, but the likelihood
assumes y was generated from the clipped x and was not clipped itself (choose bounds so clipping is
rare); the truncation to the Gram cone is exact (by rejection), no other constraint (e.g. |S_x| <= N B)
is imposed.

Snapping (the release's default): each part is released by Mironov's snapping mechanism
(:mod:`dpposterior.privacy.snapping`; each coordinate clamped to its public range and rounded to a
grid after the noise). The chain then carries the pre-rounding noisy statistics y as a latent
variable (``RegressionGibbsState.obs``; y | S, omega is a normal truncated to the rounding interval)
and every step conditions on y instead of z, so the target stays the exact posterior given the
snapped release.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import check_positive_int
from ..privacy.randomness import resolve_key
from ..releases._regression_index import index_tables, num_latent_stats
from ..releases.layout import ParamLayout, Site
from ..releases.statistics import RegressionStatisticsRelease
from . import _sampling as S
from ._chain import GibbsAlgorithm, run_sweeps, typed_key
from .draws_posterior import DrawsPosterior
from .regression_params import RegressionGibbsParams, sampler_params

__all__ = [
    "LOW_ACCEPTANCE",
    "SLOW_SAMPLER_SECONDS",
    "RegressionDims",
    "RegressionGibbsInfo",
    "RegressionGibbsParams",
    "RegressionGibbsState",
    "RegressionStatisticsRelease",
    "expected_sampler_seconds",
    "gibbs_kernel",
    "gibbs_ss_noisy",
    "gibbs_ss_noisy_kernel",
    "num_latent_stats",
    "regression_layout",
    "sample_chain",
    "sampler_params",
    "slow_sampler_message",
    "to_unconstrained",
]


@dataclasses.dataclass(frozen=True)
class RegressionDims:
    """Static settings (hashable): p features, N records, and whether the release was snapped (rounded:
    the chain then samples the pre-rounding statistics, ``RegressionGibbsState.obs``)."""

    num_features: int
    num_records: int
    rounded: bool = False


@functools.lru_cache(maxsize=16)
def _onehot(p: int) -> np.ndarray:
    """E (P, P, n_u + 1) float32, E[j, k, a] = 1 where M(u~)_jk = u~_a: the sampler's linear maps of u~.
    Built only by the sampler (its size grows as p^4: 0.2 GB at p = 100), never by the release."""
    ix = index_tables(p)
    big_p = ix["P"]
    onehot = np.zeros((big_p, big_p, ix["n_u"] + 1), np.float32)
    onehot[np.arange(big_p)[:, None], np.arange(big_p)[None, :], ix["gather"]] = 1.0
    return onehot


class RegressionGibbsState(NamedTuple):
    """State of the Gibbs-SS-Noisy chain.

    Attributes:
      w: (P,) regression weights (intercept last).
      sigma2: () noise variance.
      stat: (m,) latent statistic (S_u, S_b, S_c).
      omega: (m,) Laplace mixture variances.
      obs: (m,) the noisy statistics the chain conditions on: z itself, or for a snapped release the
        latent pre-rounding values y (resampled every sweep within the rounding intervals).
    """

    w: jax.Array
    sigma2: jax.Array
    stat: jax.Array
    omega: jax.Array
    obs: jax.Array


class RegressionGibbsInfo(NamedTuple):
    """Per-sweep diagnostics. ``accepted``: the proposed latent statistic lay in the support (positive
    definite Gram matrix) and was kept."""

    accepted: jax.Array


def _moment_matrix(u_tilde: jax.Array, dims: RegressionDims) -> jax.Array:
    return u_tilde[jnp.asarray(index_tables(dims.num_features)["gather"])]


def _clt(w: jax.Array, sigma2: jax.Array, params: RegressionGibbsParams, dims: RegressionDims):
    """(N mu_t, chol-free pieces): mean (m,), covariance Sigma0 = N Sigma_t (m, m), J (m, n_u), chol of Cov_r."""
    ix = index_tables(dims.num_features)
    n = float(dims.num_records)
    e = jnp.asarray(_onehot(dims.num_features))  # (P, P, n_u + 1)
    lb_full = jnp.einsum("jkq,k->jq", e, w)  # x~ y mean as a linear map of u~
    lc_full = jnp.einsum("jq,j->q", lb_full, w)  # y^2 mean part
    n_u = ix["n_u"]
    lb, lc = lb_full[:, :n_u], lc_full[:n_u]
    jm = jnp.concatenate([jnp.eye(n_u, dtype=jnp.float32), lb, lc[None, :]], axis=0)
    u1 = jnp.concatenate([params.m_u, jnp.ones((1,), jnp.float32)])
    m2 = _moment_matrix(u1, dims)
    m2w = m2 @ w
    mean_t = jnp.concatenate([params.m_u, lb_full @ u1, jnp.reshape(lc_full @ u1 + sigma2, (1,))])
    wm2w = w @ m2w
    cov_r = jnp.block(
        [
            [sigma2 * m2, (2.0 * sigma2 * m2w)[:, None]],
            [(2.0 * sigma2 * m2w)[None, :], jnp.reshape(4.0 * sigma2 * wm2w + 2.0 * sigma2**2, (1, 1))],
        ]
    )
    # J C_u J' by blocks (J = [I; L]): [[C_u, C_u L'], [L C_u, L C_u L' + Cov_r]].
    c_u = params.cov_u
    lmat = jm[n_u:]
    cl = (lmat @ c_u).T  # = C_u L' (C_u symmetric), in the layout C_u is stored in
    sig = jnp.block([[c_u, cl], [cl.T, lmat @ cl + cov_r]])
    return n * mean_t, n * sig, jm, jnp.linalg.cholesky(cov_r)


def _gram_ok(stat: jax.Array, dims: RegressionDims) -> jax.Array:
    ix = index_tables(dims.num_features)
    n_u, big_p = ix["n_u"], ix["P"]
    a = _moment_matrix(jnp.concatenate([stat[:n_u], jnp.full((1,), float(dims.num_records), jnp.float32)]), dims)
    sb, sc = stat[n_u : n_u + big_p], stat[-1]
    g = jnp.block([[a, sb[:, None]], [sb[None, :], jnp.reshape(sc, (1, 1))]])
    d = jnp.sqrt(jnp.clip(jnp.diag(g), jnp.finfo(jnp.float32).tiny))
    chol = jnp.linalg.cholesky(g / d[:, None] / d[None, :])
    return jnp.all(jnp.isfinite(chol)) & jnp.all(jnp.diag(chol) > 1e-4) & jnp.all(jnp.diag(g) > 0)


def _conjugate(
    key: jax.Array,
    xi: jax.Array,
    gamma_z: jax.Array,
    gamma_u: jax.Array,
    stat: jax.Array,
    params: RegressionGibbsParams,
    dims: RegressionDims,
):
    """(w, sigma2) | S, normal-inverse-gamma: sigma2 = b_n / Gamma(a_n) (Marsaglia-Tsang from the sweep's
    variates ``gamma_z``, ``gamma_u``; ``key`` only for the rare case that all their proposals are
    rejected), w = mu_n + sqrt(sigma2) Lambda_n^(-1/2) xi."""
    ix = index_tables(dims.num_features)
    n_u, big_p = ix["n_u"], ix["P"]
    n = float(dims.num_records)
    a = _moment_matrix(jnp.concatenate([stat[:n_u], jnp.full((1,), n, jnp.float32)]), dims)
    sb, sc = stat[n_u : n_u + big_p], stat[-1]
    lam = params.prior_precision + a
    chol = jnp.linalg.cholesky(lam)
    mu_n = jax.scipy.linalg.cho_solve((chol, True), sb)
    a_n = params.prior_shape + 0.5 * n
    b_n = params.prior_scale + 0.5 * jnp.maximum(sc - sb @ mu_n, 0.0)
    sigma2 = b_n / S.gamma_from_variates(key, a_n, gamma_z, gamma_u)
    w = mu_n + jnp.sqrt(sigma2) * jax.scipy.linalg.solve_triangular(chol.T, xi, lower=False)
    return w, sigma2


def _init(key: jax.Array, params: RegressionGibbsParams, dims: RegressionDims) -> RegressionGibbsState:
    """Start: w = 0, sigma2 = its prior mean b0 / (a0 - 1) (or b0 / a0 when a0 <= 1), S = N mu_t there
    (inside the support), omega ~ Exponential(mean 2 b^2). Data-independent."""
    big_p = dims.num_features + 1
    w = jnp.zeros((big_p,), jnp.float32)
    sigma2 = params.prior_scale / jnp.where(params.prior_shape > 1, params.prior_shape - 1.0, params.prior_shape)
    mean, _, _, _ = _clt(w, sigma2, params, dims)
    omega = S.initial_mixture_variance(key, params.noise_scale, params.z.shape)
    obs = S.interval_start((params.obs_lo, params.obs_hi)) if dims.rounded else params.z
    return RegressionGibbsState(w=w, sigma2=sigma2, stat=mean, omega=omega, obs=obs)


def _latent_parts(stat: jax.Array, dims: RegressionDims):
    ix = index_tables(dims.num_features)
    n_u, big_p = ix["n_u"], ix["P"]
    a = _moment_matrix(jnp.concatenate([stat[:n_u], jnp.full((1,), float(dims.num_records), jnp.float32)]), dims)
    return a, stat[n_u : n_u + big_p], stat[-1]


def _with_y_parts(stat: jax.Array, sb: jax.Array, sc: jax.Array, dims: RegressionDims) -> jax.Array:
    n_u = index_tables(dims.num_features)["n_u"]
    return jnp.concatenate([stat[:n_u], sb, jnp.reshape(sc, (1,))])


def _gauss_loglik(z: jax.Array, s: jax.Array, omega: jax.Array) -> jax.Array:
    return -0.5 * jnp.sum(jnp.square(z - s) / omega)


#: pCN step sizes of the w move (one chosen at random each time; 1 = independence proposal).
_PCN_STEPS = (1.0, 0.3, 0.1)


def _shift_step(
    xi: jax.Array,
    pick: jax.Array,
    uniform: jax.Array,
    state: RegressionGibbsState,
    params: RegressionGibbsParams,
    dims: RegressionDims,
) -> tuple[RegressionGibbsState, jax.Array]:
    """Interweaving move for w (ancillary augmentation): w -> w', S_b -> S_b + A (w' - w),
    S_c -> S_c(w') with the residual statistics R_b = S_b - A w and R_c0 = S_c - w'Aw - 2 w'R_b fixed
    (in data terms: y -> y + X~(w' - w), residuals unchanged). The CLT density of (S_u, R_b, R_c0)
    does not depend on w and the map has unit Jacobian, so the target of w' is its prior times the
    likelihood of z_b and z_c at the moved statistics. Prior x z_b part is a Gaussian G in w'
    (linear in w'); the proposal is preconditioned Crank-Nicolson with respect to G,
    w' = m + sqrt(1 - beta^2) (w - m) + beta G^(1/2) xi (reversible for G; beta = 1 is G itself), with
    beta drawn from :data:`_PCN_STEPS`, so the Metropolis-Hastings ratio is the z_c likelihood ratio.
    Small beta keeps the acceptance up when z_c pins w'Aw (a shell) tighter than G does.
    Variates: ``xi`` (P,) standard normal, ``pick`` and ``uniform`` in (0, 1) (beta's index and the
    acceptance test)."""
    ix = index_tables(dims.num_features)
    n_u, big_p = ix["n_u"], ix["P"]
    a, sb, sc = _latent_parts(state.stat, dims)
    w, s2 = state.w, state.sigma2
    r_b = sb - a @ w
    r_c0 = sc - w @ a @ w - 2.0 * w @ r_b
    om_b, om_c = state.omega[n_u : n_u + big_p], state.omega[-1]
    z_b, z_c = state.obs[n_u : n_u + big_p], state.obs[-1]
    prec = params.prior_precision / s2 + (a.T / om_b[None, :]) @ a
    h = a.T @ ((z_b - r_b) / om_b)
    d = jnp.sqrt(jnp.diag(prec))
    chol = jnp.linalg.cholesky(prec / d[:, None] / d[None, :])
    mean = jax.scipy.linalg.cho_solve((chol, True), h / d) / d
    beta = jnp.asarray(_PCN_STEPS, jnp.float32)[_pick(pick, len(_PCN_STEPS))]
    w_new = (
        mean
        + jnp.sqrt(1.0 - beta * beta) * (w - mean)
        + beta * jax.scipy.linalg.solve_triangular(chol.T, xi, lower=False) / d
    )

    def s_c(v):
        return v @ a @ v + 2.0 * v @ r_b + r_c0

    log_ratio = -0.5 * (jnp.square(z_c - s_c(w_new)) - jnp.square(z_c - s_c(w))) / om_c
    ok = jnp.all(jnp.isfinite(w_new)) & jnp.isfinite(log_ratio)
    accept = ok & (jnp.log(uniform) < log_ratio)
    w2 = jnp.where(accept, w_new, w)
    stat = _with_y_parts(state.stat, a @ w2 + r_b, s_c(w2), dims)
    return state._replace(w=w2, stat=jnp.where(accept, stat, state.stat)), accept


#: w moves per sweep (each cheap: P x P algebra).
_SHIFT_MOVES = 3

#: proposal scales of the random-walk move on log sigma2 (one chosen at random each sweep).
_LOG_SIGMA2_STEPS = (0.02, 0.1, 0.5)


def _scale_step(
    z: jax.Array,
    pick: jax.Array,
    uniform: jax.Array,
    state: RegressionGibbsState,
    params: RegressionGibbsParams,
    dims: RegressionDims,
) -> tuple[RegressionGibbsState, jax.Array]:
    """Interweaving move for sigma2: with the standardised residual statistics R_b / sigma and
    (S_c - w'Aw - 2 w'R_b) / sigma2 fixed (CLT distributions free of sigma), a random walk on
    log sigma2 whose target is the prior of (w, sigma2) times the likelihood of z_b, z_c at the
    moved statistics (times sigma2, the Jacobian of the log scale). Variates: ``z`` () standard
    normal, ``pick`` and ``uniform`` in (0, 1) (the proposal scale's index and the acceptance test)."""
    ix = index_tables(dims.num_features)
    n_u, big_p = ix["n_u"], ix["P"]
    a, sb, sc = _latent_parts(state.stat, dims)
    w, s2 = state.w, state.sigma2
    sd = jnp.sqrt(s2)
    rt_b = (sb - a @ w) / sd
    q = (sc - w @ a @ w - 2.0 * sd * (w @ rt_b)) / s2
    om_b, om_c = state.omega[n_u : n_u + big_p], state.omega[-1]
    z_b, z_c = state.obs[n_u : n_u + big_p], state.obs[-1]
    wlw = w @ params.prior_precision @ w
    a0, b0 = params.prior_shape, params.prior_scale

    def log_target(log_s2):
        v = jnp.exp(log_s2)
        sdv = jnp.sqrt(v)
        sbv = a @ w + sdv * rt_b
        scv = w @ a @ w + 2.0 * sdv * (w @ rt_b) + v * q
        lp = -(a0 + 1.0) * log_s2 - b0 / v - 0.5 * big_p * log_s2 - 0.5 * wlw / v + log_s2
        return lp + _gauss_loglik(z_b, sbv, om_b) - 0.5 * jnp.square(z_c - scv) / om_c, sbv, scv

    tau = jnp.asarray(_LOG_SIGMA2_STEPS, jnp.float32)[_pick(pick, len(_LOG_SIGMA2_STEPS))]
    cur = jnp.log(s2)
    new = cur + tau * z
    lt_new, sb_new, sc_new = log_target(new)
    lt_cur, _, _ = log_target(cur)
    log_ratio = lt_new - lt_cur
    accept = jnp.isfinite(log_ratio) & (jnp.log(uniform) < log_ratio)
    stat = _with_y_parts(state.stat, sb_new, sc_new, dims)
    return state._replace(sigma2=jnp.where(accept, jnp.exp(new), s2), stat=jnp.where(accept, stat, state.stat)), accept


#: Marsaglia-Tsang proposals of the Gamma(a_n) variate drawn with every sweep (a further one is drawn,
#: from the sweep's key, only when all of them are rejected: rarely, about (1e-3)^2 for a_n near 20).
_GAMMA_PROPOSALS = 2


class _SweepVariates(NamedTuple):
    """The random variates of one sweep, drawn in two calls (normals, uniforms in (0, 1)): each call of
    JAX's counter-based generator costs a loop of its own on CPU, which for these small arrays costs far
    more than the numbers it makes. Shapes per field; ``key`` is kept for the rare Gamma fallback."""

    key: jax.Array
    xi_u: jax.Array  # (n_u,) normal: the prior draw of S_u
    xi_r: jax.Array  # (P + 1,) normal: the prior draw of the residual statistics
    noise: jax.Array  # (m,) normal: the Matheron noise draw
    nu_omega: jax.Array  # (m,) normal: omega's inverse-Gaussian draw
    xi_w: jax.Array  # (P,) normal: w | sigma2, S
    gamma_z: jax.Array  # (_GAMMA_PROPOSALS,) normal: Marsaglia-Tsang proposals
    xi_shift: jax.Array  # (_SHIFT_MOVES, P) normal: the pCN moves of w
    z_scale: jax.Array  # (1,) normal: the log sigma2 random walk
    u_omega: jax.Array  # (m,) uniform: omega's acceptance test
    gamma_u: jax.Array  # (_GAMMA_PROPOSALS + 1,) uniform: acceptance tests, then the shape boost
    pick_shift: jax.Array  # (_SHIFT_MOVES,) uniform: pCN step index
    u_shift: jax.Array  # (_SHIFT_MOVES,) uniform: pCN acceptance
    pick_scale: jax.Array  # (1,) uniform: log sigma2 step index
    u_scale: jax.Array  # (1,) uniform: its acceptance
    u_obs: jax.Array  # (m,) uniform if dims.rounded, else (0,): the pre-rounding statistics


def _draw_variates(key: jax.Array, dims: RegressionDims, interweave: bool) -> _SweepVariates:
    ix = index_tables(dims.num_features)
    n_u, big_p = ix["n_u"], ix["P"]
    m = num_latent_stats(dims.num_features)
    moves = _SHIFT_MOVES if interweave else 0
    one = 1 if interweave else 0
    normal_sizes = (n_u, big_p + 1, m, m, big_p, _GAMMA_PROPOSALS, moves * big_p, one)
    uniform_sizes = (m, _GAMMA_PROPOSALS + 1, moves, moves, one, one, m if dims.rounded else 0)
    k_normal, k_uniform, k_rest = jax.random.split(key, 3)
    normals = jax.random.normal(k_normal, (sum(normal_sizes),), jnp.float32)
    uniforms = jax.random.uniform(
        k_uniform, (sum(uniform_sizes),), jnp.float32, minval=jnp.finfo(jnp.float32).tiny, maxval=1.0
    )
    z = jnp.split(normals, np.cumsum(normal_sizes)[:-1])
    u = jnp.split(uniforms, np.cumsum(uniform_sizes)[:-1])
    return _SweepVariates(
        k_rest,
        z[0],
        z[1],
        z[2],
        z[3],
        z[4],
        z[5],
        z[6].reshape(moves, big_p),
        z[7],
        u[0],
        u[1],
        u[2],
        u[3],
        u[4],
        u[5],
        u[6],
    )


def _pick(uniform: jax.Array, count: int) -> jax.Array:
    """An index uniform on {0, ..., count - 1} from a uniform variate in (0, 1)."""
    return jnp.minimum(jnp.floor(uniform * count).astype(jnp.int32), count - 1)


def _step(
    key: jax.Array,
    state: RegressionGibbsState,
    params: RegressionGibbsParams,
    dims: RegressionDims,
    interweave: bool = True,
) -> tuple[RegressionGibbsState, RegressionGibbsInfo]:
    """One sweep: S | theta, omega, z (Matheron draw, truncated by rejection); omega | S, z;
    (w, sigma2) | S (normal-inverse-gamma); then, with ``interweave``, the two ancillary moves
    (:func:`_shift_step` for w, :func:`_scale_step` for sigma2).

    Why the extra moves: the three-step sweep alone mixes very slowly whenever the noise is large
    next to the sampling spread of the statistic (w | S moves by about sigma / sqrt(N) per sweep
    while its posterior spread is about noise / N; at epsilon = 1 and N = 5,000 the integrated
    autocorrelation time of w is thousands of sweeps). Moves in the ancillary augmentation
    (Yu & Meng 2011, interweaving) update w and sigma2 against the noisy statistic directly. Each
    move leaves the same joint posterior invariant, so the sampler's target is unchanged.

    Randomness: the sweep's variates come from ``key`` in two bulk draws (standard normals and
    uniforms; :class:`_SweepVariates`), and sigma2's Gamma variate is a Marsaglia-Tsang draw from
    them (:func:`~dpposterior.baselines._sampling.gamma_from_variates`).
    """
    ix = index_tables(dims.num_features)
    n_u = ix["n_u"]
    n = float(dims.num_records)
    var = _draw_variates(key, dims, interweave)
    mean, sig0, jm, chol_r = _clt(state.w, state.sigma2, params, dims)
    y_u = params.chol_u @ var.xi_u
    lmat = jm[n_u:]  # J = [I; L]: J y = (y, L y)
    draw = mean + math.sqrt(n) * jnp.concatenate([y_u, lmat @ y_u + chol_r @ var.xi_r])
    noise = jnp.sqrt(state.omega) * var.noise
    cov_obs = sig0 + jnp.diag(state.omega)
    scale = jnp.sqrt(jnp.diag(cov_obs))
    chol = jnp.linalg.cholesky(cov_obs / scale[:, None] / scale[None, :])
    v = jax.scipy.linalg.cho_solve((chol, True), (state.obs - draw - noise) / scale) / scale
    proposal = draw + sig0 @ v
    ok = _gram_ok(proposal, dims) & jnp.all(jnp.isfinite(proposal))
    stat = jnp.where(ok, proposal, state.stat)
    obs = state.obs
    if dims.rounded:  # y | S, omega: N(S, omega) truncated to the rounding intervals
        obs = S.truncated_obs_from_uniform(var.u_obs, stat, state.omega, (params.obs_lo, params.obs_hi))
    omega = S.laplace_mixture_variance_from(var.nu_omega, var.u_omega, obs - stat, params.noise_scale)
    w, sigma2 = _conjugate(var.key, var.xi_w, var.gamma_z, var.gamma_u, stat, params, dims)
    state = RegressionGibbsState(w=w, sigma2=sigma2, stat=stat, omega=omega, obs=obs)
    if interweave:
        for i in range(_SHIFT_MOVES):  # unrolled: a loop of three costs more than its body on CPU
            state, _ = _shift_step(var.xi_shift[i], var.pick_shift[i], var.u_shift[i], state, params, dims)
        state, _ = _scale_step(var.z_scale[0], var.pick_scale[0], var.u_scale[0], state, params, dims)
    return state, RegressionGibbsInfo(accepted=ok)


def gibbs_kernel(params: RegressionGibbsParams, dims: RegressionDims, *, interweave: bool = True) -> GibbsAlgorithm:
    """The Gibbs-SS-Noisy sampler of a release given as the sampler's arrays (jit- and vmap-friendly).

    Args:
      params: the per-release arrays (:func:`~dpposterior.baselines.regression_params.sampler_params`).
      dims: the static sizes (p, N) and whether the release was snapped.
      interweave: end each sweep with the two ancillary moves (default; see :func:`_step`). False
        gives the plain three-step sweep of the paper, which mixes very slowly at small epsilon.

    Returns:
      A :class:`~dpposterior.baselines._chain.GibbsAlgorithm`: ``init(key)`` starts the chain at w = 0,
      sigma2 at its prior mean, S at its CLT mean there, omega ~ Exponential(mean 2 b^2)
      (data-independent); ``step(key, state)`` is one sweep returning
      ``(RegressionGibbsState, RegressionGibbsInfo)``.
    """

    def init(key: jax.Array) -> RegressionGibbsState:
        return _init(key, params, dims)

    def step(key: jax.Array, state: RegressionGibbsState) -> tuple[RegressionGibbsState, RegressionGibbsInfo]:
        return _step(key, state, params, dims, interweave)

    return GibbsAlgorithm(init, step)


def gibbs_ss_noisy_kernel(
    release: RegressionStatisticsRelease,
    *,
    fourth_moments: Any = None,
    prior: dict[str, float] | None = None,
    interweave: bool = True,
) -> GibbsAlgorithm:
    """The Gibbs-SS-Noisy sampler of ``release`` as ``(init, step)`` (post-processing only).

    Args:
      release: from :func:`~dpposterior.baselines.release_regression_statistics`.
      fourth_moments: see :func:`~dpposterior.baselines.regression_params.sampler_params`.
      prior: override the model's prior (``prior_shape``, ``prior_scale``, ``weight_scale``).
      interweave: add the two ancillary moves to each sweep (default; see :func:`gibbs_kernel`).

    Returns:
      A :class:`~dpposterior.baselines._chain.GibbsAlgorithm` (:func:`gibbs_kernel`):
      ``state = init(key)``, then ``state, info = step(key, state)``.
    """
    params, dims = _release_arrays(release, fourth_moments, prior)
    if not isinstance(interweave, bool):
        raise TypeError(f"interweave must be True or False, got {interweave!r}")
    return gibbs_kernel(params, dims, interweave=interweave)


def _release_arrays(
    release: RegressionStatisticsRelease, fourth_moments: Any, prior: dict[str, float] | None
) -> tuple[RegressionGibbsParams, RegressionDims]:
    """The sampler's arrays and static sizes of a release."""
    if not isinstance(release, RegressionStatisticsRelease):
        raise TypeError(f"release must be a RegressionStatisticsRelease, got {type(release).__name__}")
    params = sampler_params(release, fourth_moments=fourth_moments, prior=prior)
    return params, RegressionDims(release.num_features, release.num_records, rounded=release.snapped is not None)


@functools.partial(jax.jit, static_argnames=("dims", "num_warmup", "num_draws", "thin", "interweave"))
def sample_chain(
    key: jax.Array,
    params: RegressionGibbsParams,
    *,
    dims: RegressionDims,
    num_warmup: int,
    num_draws: int,
    thin: int = 1,
    interweave: bool = True,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(w draws (num_draws, P), sigma2 draws (num_draws,), acceptance rate of the latent step over
    all sweeps). Pure and jitted; vmap over (key, params) for many releases."""
    key = typed_key(key)
    k0, k_run = jax.random.split(key)
    algorithm = gibbs_kernel(params, dims, interweave=interweave)
    state = algorithm.init(k0)

    def sweep_counting(k, carry):
        st, n_acc = carry
        st, info = algorithm.step(k, st)
        return st, n_acc + info.accepted.astype(jnp.float32)

    out = run_sweeps(
        k_run,
        (state, jnp.float32(0.0)),
        sweep_counting,
        lambda c: jnp.concatenate([c[0].w, c[0].sigma2[None], c[1][None]]),
        num_warmup=num_warmup,
        num_draws=num_draws,
        thin=thin,
    )
    big_p = dims.num_features + 1
    total = num_warmup + num_draws * thin
    return out[:, :big_p], out[:, big_p], out[-1, big_p + 1] / total


def regression_layout(num_features: int = 10) -> ParamLayout:
    """The layout of ``linear_regression`` with an intercept: sigma2 (positive, log map), then w (P reals),
    as ``inspect_model`` gives it (a test checks they agree)."""
    big_p = int(num_features) + 1
    return ParamLayout(
        (
            Site("sigma2", (), (), {"kind": "positive"}),
            Site("w", (big_p,), (big_p,), {"kind": "independent", "base": {"kind": "real"}, "ndims": 1}),
        )
    )


def to_unconstrained(w: jax.Array, sigma2: jax.Array) -> jax.Array:
    """(..., P) weights and (...) variances -> (..., 1 + P) unconstrained (log sigma2, w)."""
    return jnp.concatenate([jnp.log(sigma2)[..., None], w], axis=-1)


def gibbs_ss_noisy(
    release: RegressionStatisticsRelease,
    *,
    num_warmup: int = 1000,
    num_draws: int = 4000,
    thin: int = 1,
    fourth_moments: Any = None,
    prior: dict[str, float] | None = None,
    interweave: bool = True,
    rng_key: Any = None,
) -> DrawsPosterior:
    """The Gibbs-SS-Noisy posterior of (sigma2, w) for a regression release (post-processing only).

    Args:
      release: from :func:`~dpposterior.baselines.release_regression_statistics`.
      num_warmup, num_draws, thin: chain settings.
      fourth_moments: see :func:`~dpposterior.baselines.regression_params.sampler_params`.
      prior: override the model's prior (``prior_shape``, ``prior_scale``, ``weight_scale``).
      interweave: add the two ancillary moves to each sweep (default; see :func:`_step`).
        False gives the plain three-step sweep of the paper, which mixes very slowly at small epsilon.
      rng_key: post-processing randomness (None: from the OS).

    Cost: every sweep factorises matrices of the m latent statistics (m = 77 at p = 10, 1,952 at p = 60),
    so the time grows as m^3, about p^6 (benchmarks/README.md gives measured sweep times). A
    chain expected to take over ``SLOW_SAMPLER_SECONDS`` (10 minutes) gets a RuntimeWarning with the
    estimate before it starts (:func:`expected_sampler_seconds`).

    Returns:
      A :class:`DrawsPosterior` (sites sigma2, w; unconstrained (log sigma2, w)) with the release's
      PrivacySpent; ``diagnostics["acceptance"]`` is the share of sweeps whose latent proposal lay in
      the support (low values mean the chain moves slowly).
    """
    if not isinstance(release, RegressionStatisticsRelease):
        raise TypeError(f"release must be a RegressionStatisticsRelease, got {type(release).__name__}")
    num_warmup = check_positive_int(num_warmup, "num_warmup", minimum=0)
    num_draws = check_positive_int(num_draws, "num_draws")
    thin = check_positive_int(thin, "thin")
    params, dims = _release_arrays(release, fourth_moments, prior)
    raw, _ = resolve_key(rng_key)
    if not isinstance(interweave, bool):
        raise TypeError(f"interweave must be True or False, got {interweave!r}")
    slow = slow_sampler_message(release.num_features, num_warmup + num_draws * thin)
    if slow is not None:
        warnings.warn(slow, RuntimeWarning, stacklevel=2)
    ws, s2s, acc = sample_chain(
        raw, params, dims=dims, num_warmup=num_warmup, num_draws=num_draws, thin=thin, interweave=interweave
    )
    draws = to_unconstrained(ws, s2s)
    if float(acc) < LOW_ACCEPTANCE:  # a function of the release only: safe to say
        warnings.warn(
            f"Gibbs-SS-Noisy kept {float(acc):.1%} of its latent proposals (below {LOW_ACCEPTANCE:.0%}): "
            "the chain barely moves and its draws mostly reflect its data-independent start (typical "
            f"with few records, here N = {release.num_records} for {release.num_features} features; N is "
            "public, not privatised); do not read them as a posterior without checking "
            "diagnostics['acceptance'] and the mixing",
            RuntimeWarning,
            stacklevel=2,
        )
    diag = {
        "acceptance": float(acc),
        "num_warmup": num_warmup,
        "num_draws": num_draws,
        "thin": thin,
        "snapped": release.snapped is not None,
        "fourth_moments": fourth_moments if isinstance(fourth_moments, str) or fourth_moments is None else "public",
    }
    return DrawsPosterior(
        layout=regression_layout(release.num_features),
        draws=draws,
        privacy=release.privacy,
        method="gibbs_ss_noisy",
        diagnostics=diag,
    )


#: below this share of kept latent proposals :func:`gibbs_ss_noisy` warns that its chain barely moves.
LOW_ACCEPTANCE = 0.05

#: the cost of one sweep: (latent statistics m, seconds) at p = 60, from a measurement on a small CPU host
#: (benchmarks/README.md). A sweep's factorisations
#: of m x m matrices dominate from about p = 30, so the time grows as m^3, about p^6.
_REFERENCE_SWEEP = (1952, 1.83)
#: :func:`gibbs_ss_noisy` warns before sampling when the chain is expected to take longer than this.
SLOW_SAMPLER_SECONDS = 600.0


def expected_sampler_seconds(num_features: int, num_sweeps: int) -> float:
    """A rough wall time of ``num_sweeps`` Gibbs-SS-Noisy sweeps with ``num_features`` features.

    Scaled as m^3 (m = the number of latent statistics, :func:`num_latent_stats`) from one measured
    sweep (``_REFERENCE_SWEEP``); compilation not counted. Below about p = 30 it underestimates
    (other work dominates there), which never matters: those chains take seconds.
    """
    m_ref, t_ref = _REFERENCE_SWEEP
    return float(num_sweeps) * t_ref * (num_latent_stats(int(num_features)) / m_ref) ** 3


def slow_sampler_message(num_features: int, num_sweeps: int) -> str | None:
    """The warning :func:`gibbs_ss_noisy` gives when its chain would take over ``SLOW_SAMPLER_SECONDS``
    (None when it would not). Depends on public sizes only (p and the chain length)."""
    secs = expected_sampler_seconds(num_features, num_sweeps)
    if secs <= SLOW_SAMPLER_SECONDS:
        return None
    m = num_latent_stats(int(num_features))
    return (
        f"Gibbs-SS-Noisy with p = {num_features} features samples m = {m} latent statistics and factorises "
        f"m x m matrices every sweep: {num_sweeps} sweeps are expected to take about {secs / 3600:.1f} hours "
        f"on a small CPU host (the cost grows as m^3, about p^6). Use fewer features "
        "(or fewer sweeps) for this baseline, or a method whose cost grows with the data instead (NA-DPVI)"
    )
