"""The Laplace mechanism of the Gibbs-SS-Noisy baseline: noisy sufficient statistics of clipped
linear-regression data (Bernstein & Sheldon, "Differentially private Bayesian linear regression",
NeurIPS 2019), for the model of :func:`dpposterior.models.regression.linear_regression`.

:func:`release_regression_statistics` is the only function here that reads records. It clips every
record into a box fixed in advance (|x_j| <= B_j, |y| <= B_y; never computed from the data) and
releases with Laplace noise, as separate pure-DP parts composed sequentially (epsilon = sum of the
parts), as a :class:`~dpposterior.releases.statistics.RegressionStatisticsRelease`:

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

Snapping (the default): each part is released by Mironov's snapping mechanism
(:mod:`dpposterior.privacy.snapping`; each coordinate clamped to its public range, e.g.
|sum x_j x_k| <= N B_j B_k, and rounded to a grid after the noise). The sampler
(:mod:`dpposterior.baselines.regression_gibbs`, post-processing) conditions on the rounding.
"""

from __future__ import annotations

import fractions
import math
from typing import Any

import jax
import numpy as np

from .._checks import check_epsilon, check_laplace_scale, check_positive
from ..privacy.secure import check_secure, resolve_noise_source, secure_laplace
from ..privacy.snapping import UNSNAPPED, snap
from ..privacy.spent import Neighbouring, PrivacySpent
from ..releases._regression_index import index_tables, monomials
from ..releases.statistics import FOURTH_MOMENTS, PARTS, RegressionStatisticsRelease
from . import _sampling as S

MECHANISM = "laplace_sufficient_statistics"
NEIGHBOURING = ("add_remove", "replace_one")


def _sensitivities(x_bound: np.ndarray, y_bound: float, neighbouring: str, fourth_moments: bool) -> dict[str, float]:
    b = np.asarray(x_bound, np.float64)
    p = b.shape[0]
    ix = index_tables(p)
    by = float(y_bound)
    rep = neighbouring == "replace_one"

    def rng(prod: float, even: bool) -> float:  # the range of one coordinate of t over the box
        return prod if (even or not rep) else 2.0 * prod

    xx = sum(rng(b[j] * b[k], j == k) for j, k in ix["pairs"]) + sum(rng(b[j], False) for j in range(p))
    xy = sum(rng(b[j] * by, False) for j in range(p)) + rng(by, False)
    out = {"xx": float(xx), "xy": float(xy), "yy": by * by}
    if fourth_moments:
        tot = 0.0
        for mono in monomials(p):
            even = all(mono.count(j) % 2 == 0 for j in set(mono))
            tot += rng(float(np.prod(b[list(mono)])), even)
        out["x4"] = float(tot)
    return out


def _statistics(x: np.ndarray, y: np.ndarray, fourth_moments: bool) -> dict[str, np.ndarray]:
    p = x.shape[1]
    ix = index_tables(p)
    xtx = x.T @ x
    out = {
        "xx": np.concatenate([xtx[ix["triu"]], x.sum(0)]),
        "xy": np.concatenate([x.T @ y, [y.sum()]]),
        "yy": np.array([y @ y]),
    }
    if fourth_moments:
        sums = []
        monos = monomials(p)
        n3 = p * (p + 1) * (p + 2) // 6  # the number of degree-3 monomials, which come first
        for idx in (np.asarray(monos[:n3]), np.asarray(monos[n3:])):
            for lo in range(0, idx.shape[0], 64):
                sums.append(np.prod(x[:, idx[lo : lo + 64]], axis=2).sum(0))
        out["x4"] = np.concatenate(sums)
    return out


def _public_ranges(bx: np.ndarray, by: float, n: int, with_x4: bool) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(centre, half-width) of every released coordinate, from the bounds and N only (public)."""
    p = bx.shape[0]
    ix = index_tables(p)
    pairs = ix["pairs"]
    xx_c = np.array([0.5 * n * bx[j] ** 2 if j == k else 0.0 for j, k in pairs] + [0.0] * p)
    xx_h = np.array([(0.5 if j == k else 1.0) * n * bx[j] * bx[k] for j, k in pairs] + list(n * bx))
    out = {
        "xx": (xx_c, xx_h),
        "xy": (np.zeros(p + 1), np.concatenate([n * bx * by, [n * by]])),
        "yy": (np.array([0.5 * n * by * by]), np.array([0.5 * n * by * by])),
    }
    if with_x4:
        monos = monomials(p)
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

    Reference: Bernstein & Sheldon, "Differentially private Bayesian linear regression", NeurIPS 2019
    (the release of Gibbs-SS-Noisy).

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
