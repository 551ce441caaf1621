"""Gibbs-SS-Noisy: noise-aware Bayesian linear regression from Laplace-noised sufficient statistics
(Bernstein & Sheldon, "Differentially private Bayesian linear regression", NeurIPS 2019;
section 3), for the model of :func:`dpposterior.models.regression.linear_regression`:

    sigma2 ~ InvGamma(a0 = 20, b0 = 0.5),  w | sigma2 ~ N(0, 4 sigma2 I_P),  y_i ~ N(w . x~_i, sigma2),

with x~ = (x, 1) (P = p + 1 weights, the last the intercept).

The release (:func:`release_regression_statistics`, the only function here that reads records)
clips every record into a box fixed in advance (|x_j| <= B_j, |y| <= B_y; never computed from the
data) and releases with Laplace noise, as separate pure-DP parts composed sequentially (epsilon =
sum of the parts):

=======  ==========================================  ======================================
part     statistic (sums over records)               L1 sensitivity, add/remove-one
=======  ==========================================  ======================================
``xx``   x_j x_k for j <= k (upper triangle, each    sum_{j<=k} B_j B_k + sum_j B_j
         symmetric entry once) and x_j
``xy``   x_j y and y                                 B_y (sum_j B_j + 1)
``yy``   y^2                                         B_y^2
``x4``   (optional) every monomial of degree 3 and   sum over those monomials of prod B
         4 in x
=======  ==========================================  ======================================

Each bound is max ||t(x, y)||_1 over the box (attained at a corner: every |monomial| is maximal
there at once), so it is tight. Under replace-one adjacency we use the sum over coordinates of each
coordinate's range (B^alpha for a monomial with only even powers, range [0, B^alpha], and 2 B^alpha
otherwise): a valid upper bound on max ||t(r) - t(r')||_1, not always tight (the coordinates cannot
all reach their extremes together). N is public.

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

The covariate moments (what is approximated; "Gibbs-SS-Noisy" plugs in NOISY estimates, never the
private data's moments, which is one of the public code's defects):

- m_u and the mean/covariance of x are estimated from the noisy ``xx`` part: mu^ = S_x / N and
  Sigma^ = projection of S_xx / N - mu^ mu^' onto the PSD cone (eigenvalues floored at 1e-3 of their
  mean), so M2 = E[x~ x~'] is positive definite.
- C_u: ``fourth_moments="normal"`` (default) uses Isserlis' theorem for x ~ N(mu^, Sigma^) (no
  further release; exact when the clipped covariates are Gaussian, an approximation otherwise: the
  papers' x ~ N(0, I) clipped at 3 has kurtosis 2.92 instead of 3). ``"released"`` spends a budget
  part on the noisy degree-3 and degree-4 moments and projects the resulting C_u onto the PSD cone
  (faithful to the paper, but in 10 dimensions its 935 coordinates carry so much noise that it is of
  little use). A public covariate model ``(mean, cov)`` may be given instead (Isserlis from it; the
  ``xx`` part is still released and used as data).

Other approximations: the CLT for S (N records); clipping is a per-record map, but the likelihood
assumes y was generated from the clipped x and was not clipped itself (choose bounds so clipping is
rare); the truncation to the Gram cone is exact (by rejection), no other constraint (e.g. |S_x| <= N B)
is imposed.

Snapping (``snapping=True``, the default in secure mode): each part is released by Mironov's snapping
mechanism (:mod:`dpposterior.privacy.snapping`; each coordinate clamped to its public range, e.g.
|sum x_j x_k| <= N B_j B_k, and rounded to a grid after the noise). The chain then carries the
pre-rounding noisy statistics y as a latent variable (``RegressionGibbsState.obs``; y | S, omega is
a normal truncated to the rounding interval) and every step conditions on y instead of z, so the
target stays the exact posterior given the snapped release.
"""

from __future__ import annotations

import dataclasses
import fractions
import functools
import itertools
import math
import warnings
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import check_epsilon, check_laplace_scale, check_positive, check_positive_int
from ..privacy.randomness import resolve_key
from ..privacy.secure import check_secure, resolve_noise_source, secure_laplace
from ..privacy.snapping import UNSNAPPED, snap
from ..privacy.spent import Neighbouring, PrivacySpent
from ..releases.layout import ParamLayout, Site
from . import _sampling as S
from .draws_posterior import DrawsPosterior

MECHANISM = "laplace_sufficient_statistics"
NEIGHBOURING = ("add_remove", "replace_one")
FOURTH_MOMENTS = ("normal", "released")
PARTS = ("xx", "xy", "yy")

#: the model's prior (dpposterior.models.regression.linear_regression).
DEFAULT_PRIOR = {"prior_shape": 20.0, "prior_scale": 0.5, "weight_scale": 4.0}

#: eigenvalue floor of the projected covariate covariance, relative to the mean eigenvalue.
_EIG_FLOOR = 1e-3


# ---------------------------------------------------------------------------------------------
# index bookkeeping (numpy, per number of features)


@functools.lru_cache(maxsize=16)
def _index(p: int) -> dict[str, Any]:
    """Index tables for p features: u = (x_j x_k for j <= k, row-major; then x_j), P = p + 1."""
    pairs = [(j, k) for j in range(p) for k in range(j, p)]
    n_u = len(pairs) + p
    big_p = p + 1
    # u~ = (u, 1): entry a is x~_{i1(a)} x~_{i2(a)} with x~_p = 1.
    i1 = np.array([a for a, _ in pairs] + list(range(p)) + [p])
    i2 = np.array([b for _, b in pairs] + [p] * p + [p])
    # M(u~): P x P matrix gathered from u~.
    gather = np.zeros((big_p, big_p), np.int64)
    for a, (j, k) in enumerate(zip(i1, i2)):
        gather[j, k] = gather[k, j] = a
    return {"pairs": pairs, "n_u": n_u, "P": big_p, "i1": i1, "i2": i2, "gather": gather, "triu": np.triu_indices(p)}


@functools.lru_cache(maxsize=16)
def _onehot(p: int) -> np.ndarray:
    """E (P, P, n_u + 1) float32, E[j, k, a] = 1 where M(u~)_jk = u~_a: the sampler's linear maps of u~.
    Built only by the sampler (its size grows as p^4: 0.2 GB at p = 100), never by the release."""
    ix = _index(p)
    big_p = ix["P"]
    onehot = np.zeros((big_p, big_p, ix["n_u"] + 1), np.float32)
    onehot[np.arange(big_p)[:, None], np.arange(big_p)[None, :], ix["gather"]] = 1.0
    return onehot


@functools.lru_cache(maxsize=4)
def _monomials(p: int) -> tuple[tuple[int, ...], ...]:
    """The degree-3 then degree-4 monomials of x (combinations_with_replacement order) of the ``x4`` part.
    Built only when that part is released or used (there are O(p^4) of them: 4.4 million at p = 100)."""
    return tuple(itertools.combinations_with_replacement(range(p), 3)) + tuple(
        itertools.combinations_with_replacement(range(p), 4)
    )


def _num_latent_stats(p: int) -> int:
    return _index(p)["n_u"] + p + 2


# ---------------------------------------------------------------------------------------------
# the release (mechanism side)


@dataclasses.dataclass(frozen=True, eq=False)
class RegressionStatisticsRelease:
    """Laplace-noised sufficient statistics of clipped regression data.

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


def _sensitivities(x_bound: np.ndarray, y_bound: float, neighbouring: str, fourth_moments: bool) -> dict[str, float]:
    b = np.asarray(x_bound, np.float64)
    p = b.shape[0]
    ix = _index(p)
    by = float(y_bound)
    rep = neighbouring == "replace_one"

    def rng(prod: float, even: bool) -> float:  # the range of one coordinate of t over the box
        return prod if (even or not rep) else 2.0 * prod

    xx = sum(rng(b[j] * b[k], j == k) for j, k in ix["pairs"]) + sum(rng(b[j], False) for j in range(p))
    xy = sum(rng(b[j] * by, False) for j in range(p)) + rng(by, False)
    out = {"xx": float(xx), "xy": float(xy), "yy": by * by}
    if fourth_moments:
        tot = 0.0
        for mono in _monomials(p):
            even = all(mono.count(j) % 2 == 0 for j in set(mono))
            tot += rng(float(np.prod(b[list(mono)])), even)
        out["x4"] = float(tot)
    return out


def _statistics(x: np.ndarray, y: np.ndarray, fourth_moments: bool) -> dict[str, np.ndarray]:
    p = x.shape[1]
    ix = _index(p)
    xtx = x.T @ x
    out = {
        "xx": np.concatenate([xtx[ix["triu"]], x.sum(0)]),
        "xy": np.concatenate([x.T @ y, [y.sum()]]),
        "yy": np.array([y @ y]),
    }
    if fourth_moments:
        sums = []
        monos = _monomials(p)
        n3 = p * (p + 1) * (p + 2) // 6  # the number of degree-3 monomials, which come first
        for idx in (np.asarray(monos[:n3]), np.asarray(monos[n3:])):
            for lo in range(0, idx.shape[0], 64):
                sums.append(np.prod(x[:, idx[lo : lo + 64]], axis=2).sum(0))
        out["x4"] = np.concatenate(sums)
    return out


def _public_ranges(bx: np.ndarray, by: float, n: int, with_x4: bool) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(centre, half-width) of every released coordinate, from the bounds and N only (public)."""
    p = bx.shape[0]
    ix = _index(p)
    pairs = ix["pairs"]
    xx_c = np.array([0.5 * n * bx[j] ** 2 if j == k else 0.0 for j, k in pairs] + [0.0] * p)
    xx_h = np.array([(0.5 if j == k else 1.0) * n * bx[j] * bx[k] for j, k in pairs] + list(n * bx))
    out = {
        "xx": (xx_c, xx_h),
        "xy": (np.zeros(p + 1), np.concatenate([n * bx * by, [n * by]])),
        "yy": (np.array([0.5 * n * by * by]), np.array([0.5 * n * by * by])),
    }
    if with_x4:
        monos = _monomials(p)
        out["x4"] = (np.zeros(len(monos)), np.array([n * float(np.prod(bx[list(m)])) for m in monos]))
    return out


def _check_split(budget_split: Any, parts: tuple[str, ...]) -> dict[str, float]:
    if budget_split is None:
        return {k: 1.0 / len(parts) for k in parts}
    if not isinstance(budget_split, dict):
        raise TypeError(f"budget_split must be a dict part -> fraction over {parts}, got {budget_split!r}")
    if set(budget_split) != set(parts):
        raise ValueError(f"budget_split must give a fraction for exactly the parts {parts}, got {sorted(budget_split)}")
    fr = {k: check_positive(v, f"budget_split[{k!r}]") for k, v in budget_split.items()}
    total = sum(fr.values())
    if abs(total - 1.0) > 1e-9:
        raise ValueError(f"budget_split fractions must sum to 1, got {total!r}")
    # rescaled to sum to 1, so that the parts' epsilons never add up to more than the epsilon recorded
    # (a sum of 1 + 1e-10 passes the check above)
    return {k: v / total for k, v in fr.items()}


def _epsilon_parts(split: dict[str, float], epsilon: float, parts: tuple[str, ...]) -> dict[str, float]:
    """epsilon_k = split[k] * epsilon, nudged down (by at most a few ulps) until their EXACT sum is <= epsilon:
    the float products can add up to 1 ulp more than epsilon (e.g. epsilon = 0.7 with the default 1/3
    shares), and sequential composition needs sum_k epsilon_k <= the epsilon that PrivacySpent records."""
    eps = {k: split[k] * epsilon for k in parts}
    target = fractions.Fraction(epsilon)
    while sum(fractions.Fraction(v) for v in eps.values()) > target:
        eps = {k: math.nextafter(v, 0.0) for k, v in eps.items()}
    return eps


def _check_bound_vector(x_bound: Any, p: int) -> np.ndarray:
    try:
        b = np.asarray(x_bound)
    except (ValueError, TypeError) as e:
        raise TypeError(f"x_bound must be a number or a vector of length p={p}, got {x_bound!r}") from e
    if b.dtype.kind not in "iuf":  # bools, strings, complex and objects are refused, not converted
        raise TypeError(
            f"x_bound must be a real number or a vector of length p={p} of real numbers, "
            f"got {x_bound!r} (dtype {b.dtype})"
        )
    b = b.astype(np.float64)
    if b.ndim == 0:
        b = np.full((p,), float(b))
    if b.shape != (p,):
        raise ValueError(f"x_bound must be a number or a vector of length p={p}, got shape {b.shape}")
    if not np.all(np.isfinite(b) & (b > 0)):
        raise ValueError(f"x_bound must be finite and > 0, got {x_bound!r}")
    return b


def release_regression_statistics(
    X: Any,
    y: Any,
    *,
    epsilon: float,
    x_bound: Any,
    y_bound: float,
    budget_split: dict[str, float] | None = None,
    fourth_moments: str = "normal",
    neighbouring: Neighbouring = "add_remove",
    rng_key: Any = None,
    secure: bool = False,
    snapping: bool | None = None,
) -> RegressionStatisticsRelease:
    """Releases Laplace-noised sufficient statistics of clipped linear-regression data.

    Privacy: pure epsilon-DP. Records are clipped into the box |x_j| <= x_bound_j, |y| <= y_bound
    fixed in advance (never computed from the data; clipping is a per-record map, so it costs no
    privacy, and the sensitivities below hold for every input). The statistics are released in parts
    (module docstring table: ``xx`` = upper triangle of X'X with sum x, ``xy`` = X'y with sum y,
    ``yy`` = y'y, and with ``fourth_moments="released"`` also ``x4`` = the degree-3 and 4 moment
    sums), part k with Laplace noise of scale Delta_k / epsilon_k per coordinate, Delta_k its L1
    sensitivity and epsilon_k = budget_split[k] * epsilon (rounded down, by a few ulps at most, so
    that the parts' exact sum never exceeds epsilon); by sequential composition the release is
    epsilon-DP. Symmetric entries of X'X are released once. N is treated as public (as in the papers).
    Neighbouring relation "add_remove" (default) or "replace_one". Noise seeded from the OS unless
    ``rng_key`` is given (then ``seeded_by="user"``; with ``secure=True`` the bits come from the
    operating system's CSPRNG, ``seeded_by="secure"``). By default (``snapping`` None or True) every
    part goes through Mironov's snapping mechanism (module docstring; threat
    model in docs/user-guide.md): each coordinate clamped to its public range, noise of a scale slightly
    above Delta_k / epsilon_k (the slack comes out of the part's budget), output rounded to a grid.
    ``snapping=False`` (for reproducing the papers' plain-Laplace experiments) adds floating-point
    Laplace noise without that protection, and the record says so (``details["floating_point_attack"]``).

    Reference: Bernstein & Sheldon, NeurIPS 2019 (Gibbs-SS-Noisy).

    Args:
      X: (N, p) covariates WITHOUT the intercept column (the model adds it).
      y: (N,) responses.
      epsilon: total budget, finite and > 0.
      x_bound: a number or (p,) vector B_j > 0.
      y_bound: B_y > 0.
      budget_split: fractions per part (default equal: 1/3 each, or 1/4 each with ``x4``).
      fourth_moments: "normal" (no ``x4`` part) or "released".
      neighbouring: "add_remove" or "replace_one".
      rng_key: None (OS seed) or an int / JAX key (reproduction only).
      secure: draw the noise from the OS CSPRNG; ``rng_key`` must then be None (ValueError).
      snapping: use the snapping mechanism (default True; False: plain floating-point Laplace noise).

    Raises:
      ValueError, TypeError: invalid epsilon, bounds, split, shapes, NaN/inf or empty data, or a key
        given with ``secure=True``.
    """
    epsilon = check_epsilon(epsilon)
    if fourth_moments not in FOURTH_MOMENTS:
        raise ValueError(f"fourth_moments must be one of {FOURTH_MOMENTS}, got {fourth_moments!r}")
    if neighbouring not in NEIGHBOURING:
        raise ValueError(f"neighbouring must be one of {NEIGHBOURING}, got {neighbouring!r}")
    xa, ya = np.asarray(X), np.asarray(y)
    for name, a in (("X", xa), ("y", ya)):
        if a.dtype.kind not in "biuf":
            raise TypeError(f"{name} must hold numbers, got dtype {a.dtype}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{name} contains NaN or infinite values; remove or impute them first")
    if xa.ndim != 2 or ya.ndim != 1 or xa.shape[0] != ya.shape[0]:
        raise ValueError(f"X must be (N, p) and y (N,) with the same N, got shapes {xa.shape} and {ya.shape}")
    if xa.shape[0] == 0 or xa.shape[1] == 0:
        raise ValueError(f"the data hold no records or no features: X has shape {xa.shape}")
    p = xa.shape[1]
    bx = _check_bound_vector(x_bound, p)
    by = check_positive(y_bound, "y_bound")
    with_x4 = fourth_moments == "released"
    parts = PARTS + (("x4",) if with_x4 else ())
    split = _check_split(budget_split, parts)
    raw_key, seeded_by = resolve_noise_source(rng_key, secure)

    xc = np.clip(xa.astype(np.float64), -bx, bx)
    yc = np.clip(ya.astype(np.float64), -by, by)
    stats = _statistics(xc, yc, with_x4)
    sens = _sensitivities(bx, by, neighbouring, with_x4)
    eps_parts = _epsilon_parts(split, epsilon, parts)
    scales = {k: sens[k] / eps_parts[k] for k in parts}
    for k in parts:
        if not np.all(np.isfinite(stats[k])):
            raise ValueError(
                f"the statistics of part {k!r} overflow float64 with x_bound={x_bound!r}, "
                f"y_bound={y_bound!r}; use bounds of a realistic size (rescale the data)"
            )
        check_laplace_scale(
            scales[k],
            f"of part {k!r} (sensitivity/epsilon = {sens[k]:.4g}/{eps_parts[k]:.4g}, "
            "from x_bound, y_bound and epsilon)",
        )
    check_secure(secure)
    snapping = True if snapping is None else check_secure(snapping)
    snapped = None
    if snapping:
        ranges = _public_ranges(bx, by, int(xa.shape[0]), with_x4)
        keys = (
            (None,) * len(parts)
            if raw_key is None
            else [
                np.asarray(jax.random.key_data(k))
                for k in jax.random.split(jax.random.wrap_key_data(raw_key), len(parts))
            ]
        )
        snapped = {
            k: snap(
                stats[k],
                centre=ranges[k][0],
                half_width=ranges[k][1],
                sensitivity=sens[k],
                epsilon=eps_parts[k],
                raw_key=keys[i],
            )
            for i, k in enumerate(parts)
        }
        noisy = {k: snapped[k].value for k in parts}
        scales = {k: snapped[k].scale for k in parts}
    elif raw_key is None:  # secure mode
        noisy = {k: stats[k] + secure_laplace(stats[k].shape, scales[k]) for k in parts}
    else:
        part_keys = jax.random.split(jax.random.wrap_key_data(raw_key), len(parts))
        noisy = {
            k: stats[k] + np.asarray(S.laplace_noise(part_keys[i], stats[k].shape, scales[k]), np.float64)
            for i, k in enumerate(parts)
        }
    details: tuple[tuple[str, Any], ...] = (
        ("parts", parts),
        ("epsilon_parts", tuple(eps_parts[k] for k in parts)),
        ("sensitivity_l1", tuple(sens[k] for k in parts)),
        ("noise_scale", tuple(scales[k] for k in parts)),
        ("composition", "sequential (sum of the parts' epsilons)"),
        ("x_bound", tuple(bx.tolist())),
        ("y_bound", by),
        ("records_outside_bounds", "clipped"),
        ("num_records", "public"),
    )
    if snapped is not None:
        details += (
            ("snapping", "Mironov 2012: clamp to the public range, float64 Laplace, round to the grid"),
            ("snapping_grid", tuple(snapped[k].grid for k in parts)),
            ("snapping_slack", sum(snapped[k].slack for k in parts)),
        )
    else:
        details += (("floating_point_attack", UNSNAPPED),)
    privacy = PrivacySpent(
        epsilon=epsilon,
        delta=0.0,
        neighbouring=neighbouring,
        accountant="pure",
        mechanism=MECHANISM,
        noise_multiplier=None,
        sampling_rate=1.0,
        num_steps=len(parts),
        seeded_by=seeded_by,
        details=details,
    )
    return RegressionStatisticsRelease(
        noisy=noisy,
        num_records=int(xa.shape[0]),
        num_features=p,
        x_bound=bx,
        y_bound=by,
        epsilon=epsilon,
        epsilon_parts=eps_parts,
        sensitivities=sens,
        noise_scales=scales,
        neighbouring=neighbouring,
        privacy=privacy,
        snapped=snapped,
    )


# ---------------------------------------------------------------------------------------------
# covariate moments from the release (post-processing)


def _project_psd(mat: np.ndarray, floor_rel: float = _EIG_FLOOR) -> np.ndarray:
    mat = 0.5 * (mat + mat.T)
    vals, vecs = np.linalg.eigh(mat)
    floor = max(floor_rel * max(float(np.mean(np.abs(vals))), 1e-12), 1e-12)
    vals = np.maximum(vals, floor)
    return (vecs * vals) @ vecs.T


def covariate_moments(release: RegressionStatisticsRelease) -> tuple[np.ndarray, np.ndarray]:
    """(mu^, Sigma^): the noisy mean of x and its noisy covariance projected onto the PSD cone
    (eigenvalues floored at 1e-3 of their mean absolute value)."""
    p, n = release.num_features, release.num_records
    ix = _index(p)
    xx = release.noisy["xx"]
    n_pairs = len(ix["pairs"])
    mu = xx[n_pairs:] / n
    m2 = np.zeros((p, p))
    m2[ix["triu"]] = xx[:n_pairs] / n
    m2 = m2 + np.triu(m2, 1).T
    return mu, _project_psd(m2 - np.outer(mu, mu))


def isserlis_moments(mean: np.ndarray, cov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(m_u, C_u): mean and covariance of u = (x_j x_k (j <= k), x_j) for x ~ N(mean, cov), by
    Isserlis' theorem applied to x~ = (x, 1) (a degenerate Gaussian with a unit last coordinate)."""
    mean = np.asarray(mean, np.float64)
    cov = np.asarray(cov, np.float64)
    p = mean.shape[0]
    ix = _index(p)
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
    ix = _index(p)
    lookup: dict[tuple[int, ...], float] = {(): 1.0}
    for j in range(p):
        lookup[(j,)] = release.noisy["xx"][len(ix["pairs"]) + j] / n
    for a, (j, k) in enumerate(ix["pairs"]):
        lookup[(j, k)] = release.noisy["xx"][a] / n
    x4 = release.noisy["x4"] / n
    for a, mono in enumerate(_monomials(p)):
        lookup[mono] = x4[a]
    i1, i2 = ix["i1"][:-1], ix["i2"][:-1]
    n_u = ix["n_u"]
    g = np.empty((n_u, n_u))
    for a in range(n_u):
        for b in range(a, n_u):
            mono = tuple(sorted(i for i in (i1[a], i2[a], i1[b], i2[b]) if i < p))
            g[a, b] = g[b, a] = lookup[mono]
    return _project_psd(g - np.outer(m_u, m_u))


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


# ---------------------------------------------------------------------------------------------
# the sampler: pure init / step over NamedTuple states


@dataclasses.dataclass(frozen=True)
class RegressionDims:
    """Static settings (hashable): p features, N records, and whether the release was snapped (rounded:
    the chain then samples the pre-rounding statistics, ``RegressionGibbsState.obs``)."""

    num_features: int
    num_records: int
    rounded: bool = False


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
    return u_tilde[jnp.asarray(_index(dims.num_features)["gather"])]


def _clt(w: jax.Array, sigma2: jax.Array, params: RegressionGibbsParams, dims: RegressionDims):
    """(N mu_t, chol-free pieces): mean (m,), covariance Sigma0 = N Sigma_t (m, m), J (m, n_u), chol of Cov_r."""
    ix = _index(dims.num_features)
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
    ix = _index(dims.num_features)
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
    ix = _index(dims.num_features)
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


def gibbs_init(key: jax.Array, params: RegressionGibbsParams, dims: RegressionDims) -> RegressionGibbsState:
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
    ix = _index(dims.num_features)
    n_u, big_p = ix["n_u"], ix["P"]
    a = _moment_matrix(jnp.concatenate([stat[:n_u], jnp.full((1,), float(dims.num_records), jnp.float32)]), dims)
    return a, stat[n_u : n_u + big_p], stat[-1]


def _with_y_parts(stat: jax.Array, sb: jax.Array, sc: jax.Array, dims: RegressionDims) -> jax.Array:
    n_u = _index(dims.num_features)["n_u"]
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
    ix = _index(dims.num_features)
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
    ix = _index(dims.num_features)
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
    ix = _index(dims.num_features)
    n_u, big_p = ix["n_u"], ix["P"]
    m = _num_latent_stats(dims.num_features)
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


def gibbs_step(
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
    ix = _index(dims.num_features)
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
    key = jnp.asarray(key) if not isinstance(key, jax.Array) else key
    if not jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.wrap_key_data(key.astype(jnp.uint32))
    k0, k_run = jax.random.split(key)
    state = gibbs_init(k0, params, dims)

    def sweep(k, st):
        st, info = gibbs_step(k, st, params, dims, interweave)
        return st, info.accepted

    def sweep_counting(k, carry):
        st, n_acc = carry
        st, acc = sweep(k, st)
        return st, n_acc + acc.astype(jnp.float32)

    from .expfam import run_sweeps

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
      release: from :func:`release_regression_statistics`.
      num_warmup, num_draws, thin: chain settings.
      fourth_moments: see :func:`sampler_params`.
      prior: override the model's prior (``prior_shape``, ``prior_scale``, ``weight_scale``).
      interweave: add the two ancillary moves to each sweep (default; see :func:`gibbs_step`).
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
    params = sampler_params(release, fourth_moments=fourth_moments, prior=prior)
    dims = RegressionDims(release.num_features, release.num_records, rounded=release.snapped is not None)
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

    Scaled as m^3 (m = the number of latent statistics, :func:`_num_latent_stats`) from one measured
    sweep (``_REFERENCE_SWEEP``); compilation not counted. Below about p = 30 it underestimates
    (other work dominates there), which never matters: those chains take seconds.
    """
    m_ref, t_ref = _REFERENCE_SWEEP
    return float(num_sweeps) * t_ref * (_num_latent_stats(int(num_features)) / m_ref) ** 3


def slow_sampler_message(num_features: int, num_sweeps: int) -> str | None:
    """The warning :func:`gibbs_ss_noisy` gives when its chain would take over ``SLOW_SAMPLER_SECONDS``
    (None when it would not). Depends on public sizes only (p and the chain length)."""
    secs = expected_sampler_seconds(num_features, num_sweeps)
    if secs <= SLOW_SAMPLER_SECONDS:
        return None
    m = _num_latent_stats(int(num_features))
    return (
        f"Gibbs-SS-Noisy with p = {num_features} features samples m = {m} latent statistics and factorises "
        f"m x m matrices every sweep: {num_sweeps} sweeps are expected to take about {secs / 3600:.1f} hours "
        f"on a small CPU host (the cost grows as m^3, about p^6). Use fewer features "
        "(or fewer sweeps) for this baseline, or a method whose cost grows with the data instead (NA-DPVI)"
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
