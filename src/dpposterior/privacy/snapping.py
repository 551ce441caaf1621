"""Mironov's snapping mechanism: Laplace noise whose floating-point output keeps pure epsilon-DP.

A textbook Laplace release ``f(D) + Laplace(b)`` computed in floating point is not differentially
private: the set of floats the sampler can output depends on the value the noise was added to, so
the low-order bits of the release can reveal ``f(D)`` (Mironov 2012, "On significance of the least
significant bits for differential privacy", CCS). The snapping mechanism of that paper (section 5.2)
repairs it. In units where the query has sensitivity 1, with noise scale ``lam`` and a clamp bound
``B`` fixed in advance,

    out = clamp_B( round_Lam( clamp_B(x) (+) S (x) lam (x) ln(U*) ) )

where ``(+)`` and ``(x)`` are IEEE double operations, ``S`` a uniform sign, ``U*`` a uniform draw from
the doubles in (0, 1) that gives each double a probability proportional to its spacing (a geometric
exponent and 52 uniform mantissa bits), ``ln`` correctly rounded, and ``round_Lam`` rounding to the
nearest multiple of ``Lam``, the smallest power of two >= ``lam``. Mironov's Theorem (section 5.2):
for ``lam < B < 2^46 lam`` the output is ``((1 + 12 B eta) / lam + 2 eta)``-DP, ``eta = 2^-53``.

How this module uses it:

- A query of several coordinates (a vector with L1 sensitivity Delta, released as one part of a
  budget) is normalised by Delta, each coordinate is snapped with ``lam = 1 / epsilon_noise``, and
  the release is charged ``epsilon_noise + sum_i slack_i`` with ``slack_i = 12 eta B_i / lam + 2 eta``.
  The ideal mechanism (exact arithmetic, continuous Laplace, then rounding, a post-processing) is
  epsilon_noise-DP for any L1 change of at most 1; the slack is the per-coordinate margin of
  Mironov's proof between the floating-point and the ideal probability of each output, summed over
  the coordinates (our reading of the proof for vectors; for one coordinate it is his theorem). The
  slack is tiny (1e-12 for ``B / lam = 1e3``) and is taken out of the budget before the noise scale
  is set, so the recorded epsilon never exceeds the target.
- ``ln`` is computed by :class:`decimal.Decimal` (correctly rounded at 40 significant digits) and
  then rounded to a double; that double rounding differs from a correctly rounded ``ln`` only when the
  exact value lies within 1e-40 (relative) of a midpoint between doubles.
- ``B``: the public half-width of the coordinate's range (about a public centre), in sensitivity
  units, raised to ``2 lam`` when smaller (the theorem needs ``B > lam``; a wider clamp costs only its
  slack). Refused when ``B >= 2^46 lam`` (a range too wide for the noise: raise epsilon or narrow the
  bounds).
- Randomness: the OS CSPRNG (``os.urandom``) in secure mode, else the bits of a JAX key (the key
  decides the output; reproduction only).

The released value carries rounding as well as noise: the samplers that read it
(:mod:`dpposterior.baselines`) condition on the interval of pre-rounding values that snap to it
(:meth:`SnappedRelease.intervals`), so the noise-aware posteriors stay exact.

Not covered: timing side channels (the ``ln`` of a tiny ``U*`` takes longer), and the query
computation itself (normalising by Delta and shifting by the centre are float operations on the
data, whose rounding can change the sensitivity in the last bit).
"""

from __future__ import annotations

import dataclasses
import decimal
import math
import os
from typing import Any

import numpy as np

#: the unit roundoff of float64 (Mironov's eta).
ETA = 2.0**-53
#: Mironov's theorem needs B < 2^46 lam.
MAX_CLAMP_RATIO = 2.0**46
#: what the record of a Laplace release made without snapping says under ``floating_point_attack``.
UNSNAPPED = "not mitigated: plain floating-point Laplace noise (snapping=False)"
#: significant digits of the Decimal logarithm (then rounded to a double).
_LN_DIGITS = 40
#: the largest exponent drawn for U* (P(more) = 2^-1022; keeps U* a normal double).
_MAX_EXPONENT = 1021


class _Bits:
    """64-bit random words: from ``os.urandom`` (key None) or from a JAX key (counter per call)."""

    def __init__(self, raw_key: Any) -> None:
        self._key = raw_key
        self._calls = 0

    def words(self, n: int) -> list[int]:
        if n == 0:
            return []
        if self._key is None:
            arr = np.frombuffer(os.urandom(8 * n), dtype=np.uint64)
        else:
            import jax

            raw = jax.numpy.asarray(self._key, jax.numpy.uint32)
            key = jax.random.fold_in(jax.random.wrap_key_data(raw), self._calls)
            halves = np.asarray(jax.random.bits(key, (n, 2), np.uint32)).astype(np.uint64)
            arr = (halves[:, 0] << np.uint64(32)) | halves[:, 1]
        self._calls += 1
        return [int(v) for v in arr]


def _uniform_star(bits: _Bits, n: int) -> tuple[list[float], list[int]]:
    """``n`` draws of U* (each double in (0, 1) with probability equal to its spacing) and ``n`` signs."""
    exp_words = bits.words(n)
    man_words = bits.words(n)
    out, signs = [], []
    for w, m in zip(exp_words, man_words):
        zeros = 0
        while w == 0 and zeros < _MAX_EXPONENT:  # probability 2^-64 per word
            zeros += 64
            w = bits.words(1)[0]
        e = min(zeros + 64 - w.bit_length(), _MAX_EXPONENT)  # leading zeros: P(e = k) = 2^-(k+1)
        mantissa = m >> 12  # 52 uniform bits
        out.append(math.ldexp(float((1 << 52) + mantissa), -(52 + e + 1)))  # exact: in [2^-(e+1), 2^-e)
        signs.append(1 if (m & 1) else -1)
    return out, signs


def _ln(u: float) -> float:
    ctx = decimal.Context(prec=_LN_DIGITS, rounding=decimal.ROUND_HALF_EVEN)
    return float(decimal.Decimal(u).ln(ctx))


def power_of_two_at_least(x: float) -> float:
    """The smallest power of two >= x (x > 0, finite), exactly."""
    if not (math.isfinite(x) and x > 0):
        raise ValueError(f"power_of_two_at_least needs a finite positive number, got {x!r}")
    mant, exp = math.frexp(x)  # x = mant 2^exp, mant in [0.5, 1)
    return math.ldexp(1.0, exp - 1) if mant == 0.5 else math.ldexp(1.0, exp)


def clamp_ratio(half_width: float, scale: float) -> float:
    """B / lam of a coordinate: its public half-width over the Laplace scale (unit-free), at least 2."""
    return max(float(half_width) / float(scale), 2.0)


def slack(ratio: float) -> float:
    """Mironov's margin beyond 1 / lam for one coordinate with B / lam = ``ratio``: 12 eta B / lam + 2 eta."""
    return 12.0 * ETA * ratio + 2.0 * ETA


@dataclasses.dataclass(frozen=True, eq=False)
class SnappedRelease:
    """One snapped part: the released values and what a sampler needs to condition on them exactly.

    Attributes:
      value: (m,) the released coordinates in the query's units (float64): ``centre + Delta * out``.
      units: (m,) ``out``, the snapped values in sensitivity units (exact multiples of Lam, or +-B).
      centre: (m,) the public centres the coordinates were shifted by.
      sensitivity: Delta, the L1 sensitivity of the part (the unit of the snapping).
      scale: the Laplace scale in the query's units (Delta lam).
      grid: the rounding step in the query's units (Delta Lam).
      clamp: (m,) the clamp half-widths in the query's units (Delta B).
      slack: the summed slack of the part's coordinates (charged to the budget).
    """

    value: np.ndarray
    units: np.ndarray
    centre: np.ndarray
    sensitivity: float
    scale: float
    grid: float
    clamp: np.ndarray
    slack: float

    def intervals(self) -> tuple[np.ndarray, np.ndarray]:
        """(lo, hi): for each coordinate, the pre-rounding values (query units; +-inf at a clamp) that
        snap to the released one. The sampler's latent noisy value lies in [lo, hi]."""
        d, lam_grid = self.sensitivity, self.grid / self.sensitivity
        out = self.units
        b = self.clamp / d
        lo = np.empty_like(out)
        hi = np.empty_like(out)
        for i, (o, bi) in enumerate(zip(out, b)):
            if o >= bi:
                lo[i], hi[i] = lam_grid * (math.ceil(bi / lam_grid) - 0.5), math.inf
            elif o <= -bi:
                lo[i], hi[i] = -math.inf, lam_grid * (math.floor(-bi / lam_grid) + 0.5)
            else:
                lo[i], hi[i] = o - 0.5 * lam_grid, o + 0.5 * lam_grid
        return self.centre + d * lo, self.centre + d * hi


def noise_epsilon(epsilon: float, half_widths: Any, sensitivity: float) -> float:
    """The epsilon left for the noise of a part after its coordinates' slack: epsilon - sum_i slack_i,
    the slack evaluated at the full epsilon (an upper bound, as slack grows with epsilon)."""
    hw = np.asarray(half_widths, np.float64).reshape(-1)
    lam = sensitivity / epsilon
    if hw.size and float(np.max(hw)) / lam >= MAX_CLAMP_RATIO:
        raise ValueError(
            f"a public range of half-width {float(np.max(hw)):.4g} is too wide for Laplace noise of "
            f"scale {lam:.4g}: the snapping mechanism needs half-width / scale < 2^46; raise "
            "epsilon or narrow the bounds"
        )
    total = sum(slack(clamp_ratio(h, lam)) for h in hw)
    eps_noise = epsilon - total
    if not eps_noise > 0:
        raise ValueError(f"epsilon {epsilon!r} is too small for the snapping mechanism's slack {total:.3g}")
    return eps_noise


def snap(
    values: Any, *, centre: Any, half_width: Any, sensitivity: float, epsilon: float, raw_key: Any = None
) -> SnappedRelease:
    """Snapped Laplace release of a part (Mironov 2012, section 5.2), charged at most ``epsilon``.

    Privacy: for any neighbouring relation under which the part's L1 sensitivity is ``sensitivity``,
    the release is epsilon-DP (pure): ``epsilon_noise + sum of slack <= epsilon`` (module docstring).
    The centre and half-widths must be public (fixed in advance, never computed from the data);
    values outside ``centre +- half_width`` are clamped (a per-query map, part of the mechanism).

    Args:
      values: (m,) the exact query values (float64).
      centre, half_width: (m,) or scalars: the public range of each coordinate.
      sensitivity: the part's L1 sensitivity Delta > 0.
      epsilon: the part's budget, > 0.
      raw_key: uint32 key data (reproduction) or None (the OS CSPRNG).

    Raises:
      ValueError: a clamp too wide for the noise (B >= 2^46 lam), or an epsilon below the slack.
    """
    x = np.asarray(values, np.float64).reshape(-1)
    m = x.shape[0]
    c = np.broadcast_to(np.asarray(centre, np.float64), (m,)).copy()
    hw = np.broadcast_to(np.asarray(half_width, np.float64), (m,)).copy()
    d = float(sensitivity)
    if not (math.isfinite(d) and d > 0):
        raise ValueError(f"sensitivity must be finite and > 0, got {sensitivity!r}")
    if not (np.all(np.isfinite(hw)) and np.all(hw >= 0) and np.all(np.isfinite(c))):
        raise ValueError("the snapping mechanism needs finite public centres and finite half-widths >= 0")
    eps_noise = noise_epsilon(epsilon, hw, d)
    lam = 1.0 / eps_noise  # in sensitivity units
    big_lam = power_of_two_at_least(lam)
    # B in sensitivity units, >= 2 lam; B / lam < 2^46 (noise_epsilon refused larger ratios at epsilon >= eps_noise)
    b = np.array([clamp_ratio(h, d * lam) * lam for h in hw])
    u, signs = _uniform_star(_Bits(raw_key), m)
    out = np.empty(m)
    for i in range(m):
        xi = min(max((x[i] - c[i]) / d, -b[i]), b[i])
        noisy = xi + signs[i] * (lam * _ln(u[i]))
        r = round(noisy / big_lam) * big_lam  # exact: big_lam is a power of two
        out[i] = min(max(r, -b[i]), b[i])
    total_slack = sum(slack(clamp_ratio(h, d * lam)) for h in hw)
    return SnappedRelease(
        value=c + d * out,
        units=out,
        centre=c,
        sensitivity=d,
        scale=d * lam,
        grid=d * big_lam,
        clamp=d * b,
        slack=total_slack,
    )
