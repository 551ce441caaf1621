"""DP Barker: the minibatch Barker test with Gaussian noise (Heikkila, Jalko, Dikmen & Honkela 2019).

Barker's test accepts theta' with probability 1 / (1 + exp(-Delta)), Delta the log ratio of the
targets (plus the proposal ratio): equivalently, accept iff Delta + V > 0 with V ~ Logistic(0, 1).
Seita et al. (2017) replace Delta by a minibatch estimate Delta* ~ N(Delta, s2) (central limit),
add N(0, C - s2) so that the total Gaussian part is N(0, C), and add a correction variable V_corr
whose sum with N(0, C) is Logistic(0, 1). Heikkila et al. clip the per-record log ratios so that
s2 < C always holds and the added Gaussian makes the test differentially private
(the Barker baseline of Zhang, Zhang & De Sa 2023).

The correction V_corr has no closed form; :func:`barker_correction` fits it once as a symmetric
Gaussian mixture (non-negative least squares on the CDF) and caches the fit. The fit is the one
approximation that remains with exact log ratios: its largest CDF error (``max_cdf_error``, about
6e-4 for C = 2) bounds the error of every acceptance probability. The minibatch test adds the
central-limit approximation on top; the private version also clips (biased when the clip binds).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from scipy import optimize, special, stats

from .._checks import check_delta, check_positive, check_positive_int
from ..privacy.noise import add_gaussian_noise, normal_words
from .accounting import BARKER_CLIP_FACTOR, BARKER_NORMAL_VARIANCE
from .kernels import Kernel, _check_model, _check_proposal, _decide_with, _energies, make_kernel
from .kernels import _propose, _refuse_unused_privacy, _take, _violations
from .model import EnergyModel, Proposal

Array = Any

#: the clip bound on each per-record log ratio is CLIP_FACTOR sqrt(b) / N (energy units).
CLIP_FACTOR = BARKER_CLIP_FACTOR
#: the most pairs of components :func:`barker_correction` fits (the default fit has 81)
MAX_CORRECTION_PAIRS = 2000


@dataclasses.dataclass(frozen=True)
class BarkerCorrection:
    """A fitted correction distribution: V_corr = sum_k weights[k] N(means[k], std^2), symmetric.

    N(0, normal_variance) + V_corr approximates Logistic(0, 1); ``max_cdf_error`` is the largest
    |CDF(N(0, C) + V_corr) - CDF(Logistic)| measured on a fine grid of [-40, 40] (it bounds the
    error of the acceptance probability of every test). Frozen: built once by
    :func:`barker_correction` and cached.
    """

    normal_variance: float
    means: tuple[float, ...]
    weights: tuple[float, ...]
    std: float
    max_cdf_error: float


def _mixture_cdf(x: np.ndarray, means: np.ndarray, weights: np.ndarray, total_std: float) -> np.ndarray:
    return stats.norm.cdf((x[:, None] - means[None, :]) / total_std) @ weights


@functools.lru_cache(maxsize=8)
def barker_correction(
    normal_variance: float = BARKER_NORMAL_VARIANCE, spacing: float = 0.1, span: float = 8.0
) -> BarkerCorrection:
    """Fits (once; cached) the correction distribution of the minibatch Barker test.

    V_corr is a symmetric mixture of pairs N(+-m_k, h^2) with m_k = h k on [0, span], h =
    ``spacing``; the weights minimise the largest error between the CDF of N(0, C) + V_corr and the
    logistic CDF on a grid of [0, 30] (a linear programme, exact by symmetry on the negative side),
    under non-negativity and total weight one. For C = 2 the error is about 6e-4: the logistic
    density's part with variance below C cannot be represented (the deconvolution is ill-posed),
    so no correction reaches 0; ``max_cdf_error`` records the measured error on [-40, 40].

    Raises:
      ValueError: C >= pi^2 / 3 (the logistic variance) or non-positive; non-positive spacing/span,
        or span / spacing above 2000 pairs of components.
    """
    c = check_positive(normal_variance, "normal_variance")
    if not c < math.pi**2 / 3.0:
        raise ValueError(f"normal_variance must be < pi^2/3 = {math.pi**2 / 3:.4f} (the logistic variance), got {c!r}")
    h = check_positive(spacing, "spacing")
    top = check_positive(span, "span")
    if not top / h <= MAX_CORRECTION_PAIRS:  # the linear programme has one column per pair
        raise ValueError(
            f"span / spacing must be <= {MAX_CORRECTION_PAIRS} (pairs of mixture components), got "
            f"span={span!r}, spacing={spacing!r}"
        )
    pair_means = h * np.arange(0, int(round(top / h)) + 1, dtype=np.float64)
    total_std = math.sqrt(c + h * h)

    def pair_cdf(x):
        return 0.5 * (
            stats.norm.cdf((x[:, None] - pair_means) / total_std)
            + stats.norm.cdf((x[:, None] + pair_means) / total_std)
        )

    x = np.linspace(0.0, 30.0, 1201)
    a = pair_cdf(x)
    y = special.expit(x)
    k = pair_means.size
    cost = np.r_[np.zeros(k), 1.0]
    a_ub = np.block([[a, -np.ones((x.size, 1))], [-a, -np.ones((x.size, 1))]])
    res = optimize.linprog(
        cost,
        A_ub=a_ub,
        b_ub=np.r_[y, -y],
        A_eq=np.r_[np.ones(k), 0.0][None, :],
        b_eq=[1.0],
        bounds=[(0.0, None)] * (k + 1),
        method="highs",
    )
    if not res.success:  # pragma: no cover - the programme is feasible and bounded
        raise RuntimeError(f"the Barker correction fit failed: {res.message}")
    w = np.clip(res.x[:k], 0.0, None)
    w = w / w.sum()
    keep = w > 1e-10
    pair_means, w = pair_means[keep], w[keep]
    means = np.concatenate([-pair_means[::-1], pair_means])
    weights = 0.5 * np.concatenate([w[::-1], w])
    grid = np.linspace(-40.0, 40.0, 16001)
    err = float(np.max(np.abs(_mixture_cdf(grid, means, weights, total_std) - special.expit(grid))))
    return BarkerCorrection(
        normal_variance=c,
        means=tuple(float(v) for v in means),
        weights=tuple(float(v) for v in weights),
        std=h,
        max_cdf_error=err,
    )


def sample_correction(key: Array, correction: BarkerCorrection, shape: tuple[int, ...] = ()) -> Array:
    """Draws V_corr (float32) from a fitted :class:`BarkerCorrection` (uniform, then normal)."""
    cum = jnp.asarray(np.cumsum(correction.weights), jnp.float32)
    means = jnp.asarray(correction.means, jnp.float32)
    k_comp, k_norm = jax.random.split(key)
    u = jax.random.uniform(k_comp, shape) * cum[-1]
    comp = jnp.minimum(jnp.searchsorted(cum, u, side="right"), means.shape[0] - 1)
    return means[comp] + jnp.float32(correction.std) * jax.random.normal(k_norm, shape)


@dataclasses.dataclass(frozen=True)
class BarkerConfig:
    """DP Barker's settings.

    Attributes:
      private: whether the test clips and adds the Gaussian (False: NOT PRIVATE).
      batch_size: b, records per test, drawn uniformly without replacement (b = N: full data).
      normal_variance: C, the Gaussian variance of the test.
      clip: the bound on each per-record log ratio, CLIP_FACTOR sqrt(b)/N (None when not private).
      correction: the fitted correction (None for the exact full-data test, which draws Logistic).
      delta: the default total delta at which a chain is accounted.
    """

    private: bool
    batch_size: int
    normal_variance: float
    clip: float | None
    correction: BarkerCorrection | None
    delta: float


def dp_barker_kernel(
    model: EnergyModel,
    proposal: Proposal,
    *,
    batch_size: int | None = None,
    private: bool = True,
    normal_variance: float | None = None,
    delta: float | None = None,
) -> Kernel:
    """DP Barker (Heikkila et al. 2019), the minibatch DP MH baseline of Zhang, Zhang & De Sa 2023.

    Each step proposes theta' and draws b records uniformly without replacement. With
    d_i = U_i(theta) - U_i(theta') (the tempered log-likelihood ratio; clipped to
    [-B, B], B = 0.99 sqrt(b)/N, when private): Delta* = N mean(d) + log prior ratio + proposal
    log ratio, s2 = (1 - b/N) N^2 var(d) / b (the variance of Delta*, sample variance with the
    finite-population factor of sampling without replacement; < C by the clip), and theta' is
    accepted iff Delta* + N(0, C - s2) + V_corr > 0, V_corr from :func:`barker_correction`. A
    proposal outside the box is rejected.

    Deviation from the usual statement (s2 = var(r)(N tau)^2 / b): the factor (1 - b/N). Without
    it, a batch of all N records (Delta* exact) would still subtract s2 from C and the test would
    be wrong by up to the whole of s2. Privacy is unaffected: the factor is public and <= 1, and
    when private s2 is capped at 0.99^2 = 0.9801 (the clip bounds the population variance of the
    d_i so that N^2 B^2 / b = 0.9801, but the unbiased sample variance can exceed that bound by the
    factor b/(b - 1)), so the Gaussian variance C - s2 always lies in [C - 0.9801, C] and its
    change between neighbouring batches only shrinks; the RDP bound, a supremum over that set,
    still holds. (The cap binds only when the clip binds for most of the batch.)

    Privacy (``private=True``): each step is an RDP mechanism on the batch
    (:func:`dpposterior.mcmc.accounting.barker_rdp`), amplified by sampling b of N records without
    replacement and composed over the chain (:func:`dpposterior.mcmc.barker_epsilon`; with b = N, where
    s2 = 0 and the step is a Gaussian mechanism, each order takes the smaller of that bound and
    :func:`dpposterior.mcmc.accounting.barker_full_batch_rdp`);
    :func:`dpposterior.mcmc.barker_batch_size` picks b for a target. Replace-one adjacency. N is
    public. The clip is the privacy: records whose ratio exceeds it are biased, not leaked; a record
    whose ratio is NaN (its energy NaN, or inf at both positions) counts as a ratio of 0.

    Exactness: the private test is approximate (central limit for b < N, the clip, and the
    correction fit, whose CDF error ``config.correction.max_cdf_error`` bounds the error of every
    acceptance probability). ``private=False`` with b = N (the default) is Barker's exact test on
    the full data (V ~ Logistic(0, 1), no clip, no correction): it samples the exact posterior.
    ``private=False`` with b < N is Seita et al.'s non-private minibatch test (no clip; approximate);
    a step whose variance estimate s2 reaches C cannot be corrected (the test is invalid there): s2 is
    set to C, no Gaussian is added, :func:`dpposterior.mcmc.run_chain` warns with the number of such
    steps and ``ChainDiagnostics.nonprivate_invalid_test_fraction`` gives their share (use a larger b).

    Randomness: all from the given key through ``jax.random`` (split, uniform, normal). A batch
    b < N is the top b of N uniforms (exactly uniform without replacement): N uniforms a step, which
    in secure mode means N values read from the OS per step.

    Args:
      model, proposal: as :func:`dpposterior.mcmc.tuna_mh_kernel`.
      batch_size: b in [2, N] (default N).
      private: False: no clip and no privacy (NOT PRIVATE).
      normal_variance: C (None: 2, as in Heikkilä et al. 2019), in (0, pi^2/3). The privacy analysis
        (:func:`dpposterior.mcmc.accounting.barker_rdp`) is for C = 2 only: other values need ``private=False``
        with b < N (the exact full-data test draws Logistic(0, 1) noise and uses no C: giving one
        there is an error, not ignored).
      delta: the total delta at which :func:`dpposterior.mcmc.run_chain` accounts the chain by
        default (its ``total_delta`` overrides it); None: 1e-5. With ``private=False`` nothing is
        accounted, and giving a delta is an error.

    Raises:
      ValueError / TypeError: an argument outside its range, a private test on fewer than 15
        records, or a setting that the chosen test would ignore (see ``normal_variance``, ``delta``).
    """
    model = _check_model(model)
    proposal = _check_proposal(proposal)
    if not isinstance(private, (bool, np.bool_)):
        raise TypeError(f"private must be True or False, got {private!r}")
    _refuse_unused_privacy(private, delta=delta)
    n = model.num_records
    b = n if batch_size is None else check_positive_int(batch_size, "batch_size", minimum=2)
    if b > n:
        raise ValueError(f"batch_size must be <= the number of records {n}, got {b}")
    if not private and b == n and normal_variance is not None:
        raise ValueError(
            f"normal_variance={normal_variance!r} would be ignored: the exact full-data test "
            "(private=False, batch_size = N) draws Logistic(0, 1) noise and has no Gaussian part; pass "
            "None, or a batch_size < N for the minibatch test"
        )
    c_var = BARKER_NORMAL_VARIANCE if normal_variance is None else check_positive(normal_variance, "normal_variance")
    if not c_var < math.pi**2 / 3.0:  # checked also for the exact test, which does not use it
        raise ValueError(
            f"normal_variance must be < pi^2/3 = {math.pi**2 / 3:.4f} (the logistic variance), got {normal_variance!r}"
        )
    if private and c_var != BARKER_NORMAL_VARIANCE:
        raise ValueError(
            f"the DP Barker privacy analysis holds for normal_variance = {BARKER_NORMAL_VARIANCE} only, "
            f"got {normal_variance!r}; use private=False for other values"
        )
    if private and b < 15:
        given = "" if batch_size is not None else f" (batch_size defaults to N, and the data hold N = {n} records)"
        raise ValueError(f"a private DP Barker test needs batch_size >= 15 (an RDP order below b/5), got {b}{given}")
    dlt = 1e-5 if delta is None else check_delta(delta)
    exact = (not private) and b == n
    correction = None if exact else barker_correction(c_var)
    clip = CLIP_FACTOR * math.sqrt(b) / n if private else None
    config = BarkerConfig(
        private=bool(private), batch_size=b, normal_variance=c_var, clip=clip, correction=correction, delta=dlt
    )

    def step_on_data(key, state, data, c):
        k_prop, k_batch, k_acc = jax.random.split(key, 3)
        p = _propose(k_prop, state, model, proposal)
        if b == n:
            records, ci = data, c
        else:
            _, idx = jax.lax.top_k(jax.random.uniform(k_batch, (n,)), b)  # b of N without replacement
            records, ci = _take(data, idx), c[idx]
        du = _energies(model.energy_fn, p.theta_new, records) - _energies(model.energy_fn, state.position, records)
        viol = _violations(du, ci * p.m, jnp.ones(du.shape, bool))
        d = -du
        if private:
            # the clip is the privacy: a NaN ratio (a record whose energy is NaN or inf - inf there) would pass
            # through it and decide the test alone (always reject), so it counts as 0, as an absent record would
            clipped = jnp.sum(~(jnp.abs(d) <= clip))  # NOT PRIVATE diagnostic: ratios the clip changed (or NaN)
            d = jnp.clip(jnp.where(jnp.isnan(d), 0.0, d), -clip, clip)
        else:
            clipped = 0
        delta_star = n * jnp.mean(d) + p.base_log_ratio
        k_gauss, k_corr = jax.random.split(k_acc)
        if exact:
            u = jax.random.uniform(k_gauss, (), minval=1e-7, maxval=1.0 - 1e-7)
            noisy = delta_star + (jnp.log(u) - jnp.log1p(-u))  # Logistic(0, 1)
            sd = jnp.float32(0.0)
        else:
            s2 = (1.0 - b / n) * n * n * jnp.var(d, ddof=1) / b
            if private:
                # The clip bounds the population variance of d by B^2, so N^2 B^2 / b = CLIP_FACTOR^2; the
                # unbiased (ddof=1) estimate can exceed it by b/(b - 1) (up to 1.07 B^2 at b = 15), which
                # would push C - s2 below C - 1, outside the range the RDP bound assumes. Capped there.
                s2 = jnp.minimum(s2, CLIP_FACTOR**2)
            elif b < n:
                s2 = jnp.minimum(s2, c_var)  # Seita et al.: the test is invalid when s2 > C (non-private only)
            sd = jnp.sqrt(jnp.maximum(c_var - s2, 0.0)).astype(jnp.float32)
            # the privacy noise N(0, sd^2) is drawn and added in float64 (privacy.noise); the correction
            # V_corr is the Barker test's own randomness
            noisy = add_gaussian_noise(delta_star + sample_correction(k_corr, correction), sd, normal_words(k_gauss, 1))
        accept = p.in_box & (noisy > 0)
        return _decide_with(state, p, accept, sd, b, b == n, viol, clipped=clipped)

    return make_kernel(model, step_on_data, "dp_barker", config)


__all__ = ["BarkerConfig", "BarkerCorrection", "barker_correction", "dp_barker_kernel", "sample_correction"]
