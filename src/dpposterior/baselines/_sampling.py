"""Random variates the noise-aware Gibbs samplers need, written to stay finite in float32.

* :func:`truncated_normal`: N(mean, sd^2) restricted to [lo, hi], by inversion in the lower tail (the
  interval is mirrored so that the normal CDF is evaluated where it is accurate) and an exponential
  tail approximation beyond 8 sd, where float32 CDF values underflow.
* :func:`laplace_mixture_variance`: the conditional of the variance omega in the scale-mixture form of
  the Laplace distribution (Laplace(0, b) = N(0, omega) with omega ~ Exponential(mean 2 b^2)): given a
  residual r, 1/omega ~ InverseGaussian(mean 1 / (b |r|), shape 1 / b^2) (Bernstein & Sheldon 2018).
  Sampled with the transformation-with-rejection method of Michael, Schucany & Haas (1976), rewritten
  in terms of omega so that r = 0 and tiny b stay finite (see the function).
* :func:`laplace_noise`: Laplace(0, scale) noise by inversion of 32-bit uniforms.
* :func:`interval_start`, :func:`truncated_obs`: the latent pre-rounding value of a snapped release
  (:mod:`dpposterior.privacy.snapping`): a start inside its rounding interval, and its conditional.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtr, ndtri

#: beyond this many sd into a tail, the truncated normal uses the exponential tail approximation.
_TAIL = 8.0


def truncated_normal(key: jax.Array, mean: jax.Array, sd: jax.Array, lo: jax.Array, hi: jax.Array) -> jax.Array:
    """One draw of N(mean, sd^2) truncated to [lo, hi] (elementwise; lo < hi, sd > 0; +-inf allowed).

    The standardised interval [a, b] is mirrored to [-b, -a] when its centre is positive, so inversion
    works where Phi is small and accurate. When the whole interval lies more than 8 sd below the
    mean (after mirroring), x = b - E / |b| with E ~ Exponential(1) truncated to the interval: the
    first-order tail approximation (relative error O(1/b^2)), used where Phi underflows in float32.
    """
    mean, sd, lo, hi = jnp.broadcast_arrays(*(jnp.asarray(v, jnp.float32) for v in (mean, sd, lo, hi)))
    a = (lo - mean) / sd
    b = (hi - mean) / sd
    flip = (a + b) > 0
    a2 = jnp.where(flip, -b, a)
    b2 = jnp.where(flip, -a, b)  # now a2 <= -|b2|: the interval reaches at least as far down as up
    u = jax.random.uniform(key, mean.shape, jnp.float32, minval=jnp.finfo(jnp.float32).tiny, maxval=1.0)
    # Central case: inversion.
    b_c = jnp.maximum(b2, -_TAIL)
    pa, pb = ndtr(jnp.maximum(a2, -_TAIL - 30.0)), ndtr(b_c)
    x_c = ndtri(pa + u * (pb - pa))
    # Far-tail case (b2 < -TAIL): exponential approximation below b2, truncated at a2.
    slope = -jnp.minimum(b2, -_TAIL)  # |b2| >= TAIL
    width = jnp.where(jnp.isfinite(a2), (b2 - a2) * slope, jnp.inf)
    e = -jnp.log1p(-u * -jnp.expm1(-width))
    x_t = b2 - e / slope
    x = jnp.where(b2 < -_TAIL, x_t, x_c)
    x = jnp.clip(x, a2, b2)
    x = jnp.where(flip, -x, x)
    return mean + sd * x


def interval_start(interval: tuple[jax.Array, jax.Array]) -> jax.Array:
    """A point of each rounding interval of a snapped release: its midpoint, or its finite end when the
    other is infinite (a clamped coordinate)."""
    lo, hi = (jnp.asarray(v, jnp.float32) for v in interval)
    mid = 0.5 * (lo + hi)
    return jnp.where(jnp.isfinite(mid), mid, jnp.where(jnp.isfinite(lo), lo, hi))


def truncated_obs(key: jax.Array, stat: jax.Array, omega: jax.Array,
                  interval: tuple[jax.Array, jax.Array]) -> jax.Array:
    """y | s, omega, z for a snapped release: N(s, omega) truncated to the rounding interval [lo, hi]."""
    lo, hi = (jnp.asarray(v, jnp.float32) for v in interval)
    y = truncated_normal(key, stat, jnp.sqrt(omega), lo, hi)
    return jnp.clip(y, lo, hi)


def laplace_mixture_variance(key: jax.Array, residual: jax.Array, scale: jax.Array) -> jax.Array:
    """omega | r for r ~ N(0, omega), omega ~ Exponential(mean 2 scale^2): 1/omega ~ IG(1/(scale|r|), 1/scale^2).

    With u = scale |r| and v = scale^2 nu^2 / 2 (nu ~ N(0, 1)), the Michael-Schucany-Haas draw of the
    inverse-Gaussian variable, inverted, is omega = R = u + v + sqrt(v^2 + 2 u v) with probability
    R / (R + u) and omega = u^2 / R otherwise. This form has no cancellation and is exact at r = 0
    (omega = scale^2 nu^2, the Gamma(1/2, rate 1/(2 scale^2)) conditional).
    """
    residual = jnp.asarray(residual, jnp.float32)
    scale = jnp.broadcast_to(jnp.asarray(scale, jnp.float32), residual.shape)
    k1, k2 = jax.random.split(key)
    nu = jax.random.normal(k1, residual.shape, jnp.float32)
    u = scale * jnp.abs(residual)
    v = 0.5 * jnp.square(scale * nu)
    r = u + v + jnp.sqrt(v * v + 2.0 * u * v)
    accept = jax.random.uniform(k2, residual.shape, jnp.float32) * (r + u) <= r
    small = jnp.where(r > 0, jnp.square(u) / jnp.where(r > 0, r, 1.0), 0.0)
    omega = jnp.where(accept, r, small)
    # omega = 0 only when nu = 0 and r = 0 exactly (probability zero); keep it strictly positive.
    return jnp.maximum(omega, jnp.finfo(jnp.float32).tiny)


def initial_mixture_variance(key: jax.Array, scale: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """omega ~ Exponential(mean 2 scale^2): the prior of the Laplace scale mixture (the chain's start)."""
    scale = jnp.broadcast_to(jnp.asarray(scale, jnp.float32), shape)
    return 2.0 * jnp.square(scale) * jax.random.exponential(key, shape, jnp.float32)


#: the largest Laplace scale whose float32 noise stays finite: a float32 Exponential(1) draw is at
#: most about 17 (-log of the smallest uniform), so a margin of 64 is safe.
MAX_LAPLACE_SCALE = float(np.finfo(np.float32).max) / 64


def check_laplace_scale(scale: float, what: str) -> None:
    """Raises ValueError if float32 Laplace noise of this scale could overflow to inf."""
    if not (math.isfinite(scale) and 0 < scale <= MAX_LAPLACE_SCALE):
        raise ValueError(f"the Laplace noise scale {what} = {scale:.4g} must be at most {MAX_LAPLACE_SCALE:.4g} "
                         "(noise is drawn in float32 and would overflow to inf); raise epsilon or narrow the bounds")


def laplace_noise(key: jax.Array, shape: tuple[int, ...], scale: jax.Array) -> jax.Array:
    """Laplace(0, scale) noise (float32) by inversion: sign * scale * Exponential(1)."""
    k1, k2 = jax.random.split(key)
    e = jax.random.exponential(k1, shape, jnp.float32)
    sign = jnp.where(jax.random.bernoulli(k2, 0.5, shape), 1.0, -1.0)
    return sign * jnp.asarray(scale, jnp.float32) * e

