"""The Laplace mechanism of the Bernstein-Sheldon baseline: the noisy sufficient statistic of a
conjugate exponential-family sample.

:func:`release_sufficient_statistics` is the only function here that reads records; it releases
z = s + Laplace(Delta / epsilon) per coordinate of s = sum_i t(x_i), pure epsilon-DP, as a
:class:`~dpposterior.releases.statistics.SufficientStatisticsRelease`. Neighbouring relation:
add/remove-one (default) or replace-one, N public; :func:`sensitivity` gives Delta under each.
The noise-aware posterior of the release is post-processing (:mod:`dpposterior.baselines.expfam_gibbs`).

Reference: Bernstein & Sheldon, "Differentially private Bayesian inference for exponential families",
NeurIPS 2018.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import check_epsilon, check_laplace_scale, check_positive_int, check_trace_memory
from ..privacy.secure import check_secure, resolve_noise_source, secure_laplace
from ..privacy.snapping import UNSNAPPED, snap
from ..privacy.spent import Neighbouring, PrivacySpent
from ..releases.statistics import FAMILIES, SufficientStatisticsRelease, check_bounds, require_num_categories
from . import _sampling as S

NEIGHBOURING = ("add_remove", "replace_one")
MECHANISM = "laplace_sufficient_statistics"


def sensitivity(family: str, *, neighbouring: str = "add_remove", bounds: Any = None) -> float:
    """The L1 sensitivity Delta of the summed sufficient statistic.

    add/remove-one (N treated as public, as in the papers and in ``dpvi``): Delta = max_x ||t(x)||_1:
    Bernoulli 1; Categorical 1 (one one-hot vector); Exponential clipped to [lo, hi]: hi.
    replace-one: Delta = max_{x, x'} ||t(x) - t(x')||_1: Bernoulli 1; Categorical 2 (two counts change
    by one); Exponential hi - lo.

    ``bounds`` = (lo, hi) is required for gamma-exponential and refused (ValueError) for the other families.
    """
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    if neighbouring not in NEIGHBOURING:
        raise ValueError(f"neighbouring must be one of {NEIGHBOURING}, got {neighbouring!r}")
    if family != "gamma-exponential":
        if bounds is not None:  # as release_sufficient_statistics: bounds of another family are a mistake
            raise ValueError(f"bounds apply only to gamma-exponential records, got bounds={bounds!r} for {family}")
        return 1.0 if family == "beta-bernoulli" or neighbouring == "add_remove" else 2.0
    lo, hi = check_bounds(bounds)
    return hi if neighbouring == "add_remove" else hi - lo


def statistic(
    family: str, x: jax.Array, *, bounds: tuple[float, float] | None = None, num_categories: int | None = None
) -> jax.Array:
    """s = sum_i t(x_i) (float32, (m,)) for records that already passed validation (pure, vmappable)."""
    if family == "beta-bernoulli":
        return jnp.sum(jnp.asarray(x, jnp.float32), keepdims=True)
    if family == "dirichlet-categorical":
        onehot = jax.nn.one_hot(jnp.asarray(x, jnp.int32), require_num_categories(num_categories), dtype=jnp.float32)
        return jnp.sum(onehot, axis=0)
    if bounds is None:
        raise TypeError("gamma-exponential records need bounds=(lo, hi), got None")
    lo, hi = bounds
    return jnp.sum(jnp.clip(jnp.asarray(x, jnp.float32), lo, hi), keepdims=True)


def _check_records(family: str, x: Any, num_categories: int | None) -> np.ndarray:
    try:
        arr = np.asarray(x)
    except (ValueError, TypeError) as e:  # ragged nested lists and the like
        raise TypeError(f"x must be a 1-D array of numbers, could not convert {type(x).__name__}: {e}") from e
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"x must hold numbers (bool, int or float), got dtype {arr.dtype}")
    if arr.ndim != 1:
        raise ValueError(f"x must be a 1-D array of records, got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError("x holds no records (length 0)")
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise ValueError(
            f"x contains {int(np.sum(~np.isfinite(arr)))} NaN or infinite value(s); remove or impute "
            "them first (nothing is silently dropped)"
        )
    if family == "beta-bernoulli":
        if not np.all((arr == 0) | (arr == 1)):
            raise ValueError("beta-bernoulli records must be 0 or 1 (the support of a Bernoulli variable)")
    elif family == "dirichlet-categorical":
        k = require_num_categories(num_categories)
        if not np.all((arr == np.round(arr)) & (arr >= 0) & (arr < k)):
            raise ValueError(
                f"dirichlet-categorical records must be integer categories in 0..{k - 1} (num_categories={k})"
            )
    else:
        if np.any(arr < 0):
            raise ValueError(
                "gamma-exponential records must be >= 0 (the support of an Exponential variable); "
                "values above the upper bound are clipped, negative values are refused"
            )
    return arr


def release_sufficient_statistics(
    family: str,
    x: Any,
    *,
    epsilon: float,
    bounds: Any = None,
    num_categories: int | None = None,
    neighbouring: Neighbouring = "add_remove",
    rng_key: Any = None,
    secure: bool = False,
    snapping: bool | None = None,
) -> SufficientStatisticsRelease:
    """Releases the sufficient statistic of an exponential-family sample with Laplace noise.

    Privacy: pure epsilon-DP by the Laplace mechanism (Dwork et al. 2006): z = s + Laplace(Delta /
    epsilon) independently per coordinate, where s = sum_i t(x_i) and Delta is the L1 sensitivity
    of s (:func:`sensitivity`). Neighbouring relation: ``"add_remove"`` (default; one record added or
    removed, the relation DP-SGD is accounted under, so budgets compare with NA-DPVI) or
    ``"replace_one"``. The number of records N is treated as public (as in Bernstein & Sheldon 2018
    and in ``dpvi``): it is released exactly. Under replace-one this costs nothing (neighbours share
    N); under add/remove it is an assumption the user must be able to make (N known in advance).

    Statistics and sensitivities:
      - beta-bernoulli: s = number of ones (x_i in {0, 1}); Delta = 1.
      - dirichlet-categorical: s = the K category counts (one-hot t); Delta = 1 under add/remove (a
        record adds one to one count), 2 under replace-one. All K counts are released (each with the
        full Laplace scale; the counts share one Delta because a record touches only one of them).
      - gamma-exponential: records are clipped into [lo, hi] (``bounds``, fixed in advance, never
        computed from the data), s = sum_i clip(x_i, lo, hi); Delta = hi under add/remove and hi - lo
        under replace-one. Clipping (not dropping) keeps N public and is a per-record map, so it costs
        no privacy; how the sampler accounts for it is described in
        :mod:`dpposterior.baselines.expfam_gibbs`.

    Randomness: with ``rng_key=None`` the noise is seeded from the operating system and the seed is not
    stored; a given key is recorded as ``seeded_by="user"`` (whoever knows it can remove the noise).
    By default (``snapping=None`` or True) the release uses
    Mironov's snapping mechanism (:mod:`dpposterior.privacy.snapping`): each count is clamped to its
    public range [0, N] (the sum of clipped records to [N lo, N hi]), noised with correctly rounded
    float64 Laplace noise of a scale slightly above Delta / epsilon (the mechanism's slack is taken out
    of the budget) and rounded to a power-of-two grid; z then carries rounding as well as noise, and
    :func:`~dpposterior.baselines.bernstein_sheldon_gibbs` conditions on the rounding interval exactly. The snapping bits come
    from the OS CSPRNG (``secure=True``) or from the JAX key. ``snapping=False`` (for reproducing the
    papers' plain-Laplace experiments) draws float32 noise from the key (float64 from the OS CSPRNG in
    secure mode) and adds it in floating point: Mironov's floating-point attack is then not mitigated,
    and the record says so (``details["floating_point_attack"]``).

    Reference: Bernstein & Sheldon, "Differentially private Bayesian inference for exponential
    families", NeurIPS 2018.

    Args:
      family: "beta-bernoulli", "dirichlet-categorical" or "gamma-exponential".
      x: (N,) records: 0/1 values; integer categories 0..K-1; non-negative reals.
      epsilon: finite, > 0.
      bounds: (lo, hi) for gamma-exponential (required there, refused elsewhere).
      num_categories: K for dirichlet-categorical (default 3, the papers' model); public, never
        inferred from the data.
      neighbouring: "add_remove" (default) or "replace_one".
      rng_key: None (OS seed) or an int / JAX key (reproduction only).
      secure: draw the noise from the OS CSPRNG; ``rng_key`` must then be None (ValueError).
      snapping: use the snapping mechanism (default True). With a key it is reproducible (tests);
        False releases plain floating-point Laplace noise (not protected against the float attack).

    Returns:
      A frozen :class:`SufficientStatisticsRelease` with its PrivacySpent.

    Raises:
      ValueError, TypeError: invalid epsilon, family, bounds, neighbouring relation, or records
        outside the family's support type (NaN, non-binary Bernoulli values, categories outside
        0..K-1, negative Exponential values).
    """
    if not isinstance(family, str):  # e.g. the records first: never echo them in the message
        raise TypeError(
            f"family must be one of {FAMILIES} (a string), got a {type(family).__name__}; the records "
            "come second: release_sufficient_statistics(family, x, epsilon=...)"
        )
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    epsilon = check_epsilon(epsilon)
    if family == "dirichlet-categorical":
        num_categories = check_positive_int(
            3 if num_categories is None else num_categories, "num_categories", minimum=2
        )
        # the release holds K noisy counts (float64, with a few copies while they are made)
        check_trace_memory(num_categories, 8, "the release of the counts", name="num_categories", unit="categories")
    elif num_categories is not None:
        raise ValueError(f"num_categories applies only to dirichlet-categorical, got {num_categories!r}")
    if family == "gamma-exponential":
        bounds = check_bounds(bounds)
    elif bounds is not None:
        raise ValueError(f"bounds apply only to gamma-exponential records, got bounds={bounds!r} for {family}")
    delta_l1 = sensitivity(family, neighbouring=neighbouring, bounds=bounds)
    arr = _check_records(family, x, num_categories)
    raw_key, seeded_by = resolve_noise_source(rng_key, secure)

    if family == "beta-bernoulli":
        s = np.array([np.sum(arr, dtype=np.float64)])
    elif family == "dirichlet-categorical":
        s = np.bincount(arr.astype(np.int64), minlength=require_num_categories(num_categories)).astype(np.float64)
    else:  # records clipped into [lo, hi]: a per-record map
        s = np.array([np.sum(np.clip(arr.astype(np.float64), bounds[0], bounds[1]))])
    scale = delta_l1 / epsilon
    check_laplace_scale(scale, f"sensitivity/epsilon = {delta_l1!r}/{epsilon!r}")
    check_secure(secure)
    snapping = True if snapping is None else check_secure(snapping)
    snapped = None
    if snapping:
        n = float(arr.shape[0])
        lo_s, hi_s = (0.0, n) if bounds is None else (n * bounds[0], n * bounds[1])
        snapped = snap(
            s,
            centre=0.5 * (lo_s + hi_s),
            half_width=0.5 * (hi_s - lo_s),
            sensitivity=delta_l1,
            epsilon=epsilon,
            raw_key=raw_key,
        )
        z, scale = snapped.value, snapped.scale
    elif raw_key is None:  # secure mode
        z = s + secure_laplace(s.shape, scale)
    else:
        z = s + np.asarray(S.laplace_noise(jax.random.wrap_key_data(raw_key), s.shape, scale), np.float64)
    details = [
        (
            "statistic",
            {
                "beta-bernoulli": "count of ones",
                "dirichlet-categorical": "category counts",
                "gamma-exponential": "sum of clipped records",
            }[family],
        ),
        ("sensitivity_l1", delta_l1),
        ("noise_scale", scale),
        ("num_records", "public"),
    ]
    if snapped is not None:
        details += [
            ("snapping", "Mironov 2012: clamp to the public range, float64 Laplace, round to the grid"),
            ("snapping_grid", snapped.grid),
            ("snapping_slack", snapped.slack),
        ]
    else:
        details += [("floating_point_attack", UNSNAPPED)]
    if bounds is not None:
        details += [("bounds", tuple(bounds)), ("records_outside_bounds", "clipped")]
    privacy = PrivacySpent(
        epsilon=epsilon,
        delta=0.0,
        neighbouring=neighbouring,
        accountant="pure",
        mechanism=MECHANISM,
        noise_multiplier=None,
        sampling_rate=1.0,
        num_steps=1,
        seeded_by=seeded_by,
        details=tuple(details),
    )
    return SufficientStatisticsRelease(
        family=family,
        noisy_statistic=z,
        num_records=int(arr.shape[0]),
        epsilon=epsilon,
        sensitivity=delta_l1,
        noise_scale=scale,
        neighbouring=neighbouring,
        bounds=bounds,
        num_categories=num_categories,
        privacy=privacy,
        snapped=snapped,
    )
