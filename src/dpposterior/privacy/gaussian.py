"""Calibrating the Gaussian mechanism: the classic bound and the analytic (exact) one.

The Gaussian mechanism releases ``f(D) + N(0, sigma^2 I)``. Its guarantee holds for whichever
neighbouring relation the L2 sensitivity ``Delta = max ||f(D) - f(D')||_2`` is computed under: for a
sum of per-record vectors clipped to norm C, Delta = C under add/remove-one adjacency and 2C under
replace-one adjacency. No sampling is involved here (see :mod:`.composition` for amplification by
subsampling).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
from scipy.special import log_ndtr, ndtr

from .._checks import check_delta, check_epsilon, check_positive
from .noise import mechanism_delta, with_noise_tail
from .secure import resolve_noise_source, secure_normal
from .spent import NEIGHBOURING_RELATIONS, Neighbouring, PrivacySpent


def gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """The classic calibration of the Gaussian mechanism: sigma = Delta sqrt(2 ln(1.25/delta)) / epsilon.

    Privacy: adding N(0, sigma^2 I) with this sigma to a function of L2 sensitivity ``sensitivity``
    gives (epsilon, delta)-DP under the neighbouring relation the sensitivity is computed for
    (Dwork & Roth 2014, Theorem A.1). The theorem holds only for epsilon < 1; for larger epsilon
    use :func:`analytic_gaussian_sigma`, which is exact for every epsilon and never larger than
    this bound. No subsampling.

    Args:
      epsilon: target epsilon, in (0, 1).
      delta: target delta, in (0, 1).
      sensitivity: L2 sensitivity Delta of the released function, finite and > 0.

    Returns:
      The noise standard deviation sigma (in the units of the released function).

    Raises:
      ValueError: epsilon outside (0, 1), delta outside (0, 1), a sensitivity that is not a
        finite number > 0, or a sigma that overflows (e.g. a subnormal epsilon or delta).
    """
    eps = check_epsilon(epsilon)
    if eps >= 1.0:
        raise ValueError(
            f"the classic Gaussian mechanism bound sqrt(2 ln(1.25/delta))/epsilon holds only for "
            f"epsilon < 1 (Dwork & Roth 2014, Theorem A.1), got epsilon={epsilon!r}; use "
            "analytic_gaussian_sigma, which is exact for every epsilon"
        )
    d = check_delta(delta)
    sens = check_positive(sensitivity, "sensitivity")
    return _finite_sigma(sens * math.sqrt(2.0 * math.log(1.25 / d)) / eps, epsilon, delta, sensitivity)


def _finite_sigma(sigma: float, epsilon: float, delta: float, sensitivity: float) -> float:
    """``sigma``, or a ValueError when it overflowed (never a silent inf or 0)."""
    if not (math.isfinite(sigma) and sigma > 0):
        raise ValueError(
            f"the noise standard deviation for epsilon={epsilon!r}, delta={delta!r}, "
            f"sensitivity={sensitivity!r} is not representable as a positive float (got {sigma!r}); "
            "use an epsilon, delta and sensitivity within a few hundred orders of magnitude of 1"
        )
    return sigma


def _analytic_gaussian_delta(noise_multiplier: float, epsilon: float) -> float:
    """The exact delta(epsilon) of the Gaussian mechanism with noise std = noise_multiplier * Delta.

    Balle & Wang (2018), Theorem 8: the mechanism is (epsilon, delta)-DP iff
    delta >= Phi(1/(2s) - epsilon s) - e^epsilon Phi(-1/(2s) - epsilon s), s = sigma / Delta.
    """
    s = noise_multiplier
    a = 0.5 / s - epsilon * s
    b = -0.5 / s - epsilon * s
    first = float(ndtr(a))
    second = math.exp(min(epsilon + float(log_ndtr(b)), 700.0))
    return max(first - second, 0.0)


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """The smallest sigma for which the Gaussian mechanism is (epsilon, delta)-DP (analytic calibration).

    Privacy: adding N(0, sigma^2 I) to a function of L2 sensitivity ``sensitivity`` is
    (epsilon, delta)-DP, under the neighbouring relation the sensitivity is computed for, exactly
    when Phi(Delta/(2 sigma) - epsilon sigma/Delta) - e^epsilon Phi(-Delta/(2 sigma) - epsilon sigma/Delta)
    <= delta (Balle & Wang 2018, "Improving the Gaussian mechanism for differential privacy",
    Theorem 8). We solve that condition by bisection on sigma / Delta to about 1e-12 relative
    and return the upper end of the final bracket, so the condition holds at the returned sigma
    (conservative). Valid for every epsilon > 0; never larger than :func:`gaussian_sigma`. No
    subsampling.

    Args:
      epsilon: target epsilon, finite and > 0.
      delta: target delta, in (0, 1).
      sensitivity: L2 sensitivity Delta of the released function, finite and > 0.

    Returns:
      The noise standard deviation sigma (in the units of the released function).

    Raises:
      ValueError: epsilon not a finite number > 0, delta outside (0, 1), an invalid sensitivity, or
        a sigma that overflows (e.g. a subnormal epsilon or delta; the search then stops at once).
    """
    eps = check_epsilon(epsilon)
    d = check_delta(delta)
    sens = check_positive(sensitivity, "sensitivity")
    # Bracket s = sigma / Delta: delta(s) decreases in s. The classic bound is a valid upper end;
    # it is not representable for subnormal epsilon (then no finite sigma is).
    hi = _finite_sigma(math.sqrt(2.0 * math.log(1.25 / d)) / eps, epsilon, delta, 1.0)
    while _analytic_gaussian_delta(hi, eps) > d:
        hi *= 2.0
        if not math.isfinite(hi):
            _finite_sigma(hi, epsilon, delta, sensitivity)
    lo = hi / 2.0
    while _analytic_gaussian_delta(lo, eps) <= d:
        hi, lo = lo, lo / 2.0
        if lo < 1e-300:
            raise ArithmeticError(f"analytic Gaussian calibration failed for epsilon={eps}, delta={d}")
    for _ in range(200):
        if hi - lo <= 1e-12 * hi:
            break
        mid = 0.5 * (lo + hi)
        if _analytic_gaussian_delta(mid, eps) <= d:
            hi = mid
        else:
            lo = mid
    return _finite_sigma(sens * hi, epsilon, delta, sensitivity)


@dataclasses.dataclass(frozen=True)
class GaussianRelease:
    """A value released by the Gaussian mechanism.

    Attributes:
      value: the noisy value (float64, the shape of the input).
      noise_std: the standard deviation sigma of the noise added to every coordinate.
      sensitivity: the L2 sensitivity the noise was calibrated for.
      privacy: the :class:`~dpposterior.privacy.PrivacySpent` of the release.
    """

    value: np.ndarray
    noise_std: float
    sensitivity: float
    privacy: PrivacySpent


def gaussian_mechanism(
    value: Any,
    *,
    epsilon: float,
    delta: float,
    sensitivity: float,
    neighbouring: Neighbouring = "add_remove",
    rng_key: Any = None,
    secure: bool = False,
) -> GaussianRelease:
    """Releases ``value + N(0, sigma^2 I)`` with sigma from :func:`analytic_gaussian_sigma`.

    Privacy: (epsilon, delta)-DP for a ``value`` of L2 sensitivity ``sensitivity`` under the
    ``neighbouring`` relation it was computed for (the caller's claim: for a sum of per-record
    vectors clipped to norm C it is C under ``"add_remove"`` and 2C under ``"replace_one"``). No
    subsampling, one release. Reference: Balle & Wang 2018 (analytic calibration, Theorem 8).

    Randomness: default mode draws float32 normals from JAX's threefry generator seeded from the OS
    (or from ``rng_key``, recorded as ``seeded_by="user"``). With ``secure=True`` the normals are
    computed in float64 from the operating system's CSPRNG (:mod:`dpposterior.privacy.secure`,
    ``seeded_by="secure"``). Either way the noise is floating-point (threat model:
    docs/user-guide.md).

    Args:
      value: a finite real number or array, computed from the private data.
      epsilon: finite, > 0.
      delta: in (0, 1).
      sensitivity: the L2 sensitivity of ``value``, finite and > 0.
      neighbouring: ``"add_remove"`` or ``"replace_one"``: the relation ``sensitivity`` holds for.
      rng_key: None (OS seed) or an int / JAX key (reproduction only).
      secure: draw the noise from the OS CSPRNG; ``rng_key`` must then be None.

    Returns:
      A frozen :class:`GaussianRelease`.

    Raises:
      TypeError: a non-numeric ``value``, ``secure`` not a bool, an invalid key.
      ValueError: NaN/inf in ``value``, invalid epsilon, delta, sensitivity or neighbouring
        relation, a key given with ``secure=True``, or an epsilon so large that the noise sampler's
        tail term would exceed 1% of delta (:func:`dpposterior.privacy.noise.check_noise_tail`).
    """
    try:
        arr = np.asarray(value)
    except ValueError as e:  # ragged nested lists
        raise TypeError(f"value must be a real number or array, could not convert it: {e}") from e
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"value must be a real number or array, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError("value must be finite: it contains NaN or inf")
    if neighbouring not in NEIGHBOURING_RELATIONS:
        raise ValueError(f"neighbouring must be one of {NEIGHBOURING_RELATIONS}, got {neighbouring!r}")
    # calibrated at delta less the sampler's tail term, so that the record states at most delta
    delta = mechanism_delta(check_epsilon(epsilon), check_delta(delta), arr.size, "gaussian_mechanism")
    sigma = analytic_gaussian_sigma(epsilon, delta, sensitivity)
    raw_key, seeded_by = resolve_noise_source(rng_key, secure)
    if raw_key is None:  # secure mode
        xi = secure_normal(arr.shape)
    else:
        import jax

        from .noise import normal_words, normals_from_words_np

        words = np.asarray(normal_words(jax.random.wrap_key_data(raw_key), arr.size))
        xi = normals_from_words_np(words, arr.size).reshape(arr.shape)
    privacy = PrivacySpent(
        epsilon=float(epsilon),
        delta=float(delta),
        neighbouring=neighbouring,
        accountant="analytic_gaussian",
        mechanism="gaussian",
        noise_multiplier=sigma / float(sensitivity),
        sampling_rate=1.0,
        num_steps=1,
        seeded_by=seeded_by,
        details=(("sensitivity_l2", float(sensitivity)),),
    )
    privacy = with_noise_tail(privacy, arr.size)
    return GaussianRelease(value=arr + sigma * xi, noise_std=sigma, sensitivity=float(sensitivity), privacy=privacy)
