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
* :func:`gamma_from_variates`: a Gamma variate by Marsaglia & Tsang's rejection method from variates
  drawn in bulk (with a fallback loop for the rare all-rejected case).
* :func:`interval_start`, :func:`truncated_obs`: the latent pre-rounding value of a snapped release
  (:mod:`dpposterior.privacy.snapping`): a start inside its rounding interval, and its conditional.
"""

from __future__ import annotations


import jax
import jax.numpy as jnp
from jax.scipy.special import ndtr, ndtri
from jax.typing import ArrayLike

#: beyond this many sd into a tail, the truncated normal uses the exponential tail approximation.
_TAIL = 8.0


def truncated_normal(key: jax.Array, mean: ArrayLike, sd: ArrayLike, lo: ArrayLike, hi: ArrayLike) -> jax.Array:
    """One draw of N(mean, sd^2) truncated to [lo, hi] (elementwise; lo < hi, sd > 0; +-inf allowed).

    The standardised interval [a, b] is mirrored to [-b, -a] when its centre is positive, so inversion
    works where Phi is small and accurate. When the whole interval lies more than 8 sd below the
    mean (after mirroring), x = b - E / |b| with E ~ Exponential(1) truncated to the interval: the
    first-order tail approximation (relative error O(1/b^2)), used where Phi underflows in float32.
    """
    shape = jnp.broadcast_shapes(*(jnp.shape(v) for v in (mean, sd, lo, hi)))
    u = jax.random.uniform(key, shape, jnp.float32, minval=jnp.finfo(jnp.float32).tiny, maxval=1.0)
    return truncated_normal_from_uniform(u, mean, sd, lo, hi)


def truncated_normal_from_uniform(
    u: ArrayLike, mean: ArrayLike, sd: ArrayLike, lo: ArrayLike, hi: ArrayLike
) -> jax.Array:
    """:func:`truncated_normal` given its uniform variate ``u`` in (0, 1) (same shape as the broadcast
    arguments): the transformation alone, for callers that draw their variates in bulk."""
    mean, sd, lo, hi = jnp.broadcast_arrays(*(jnp.asarray(v, jnp.float32) for v in (mean, sd, lo, hi)))
    a = (lo - mean) / sd
    b = (hi - mean) / sd
    flip = (a + b) > 0
    a2 = jnp.where(flip, -b, a)
    b2 = jnp.where(flip, -a, b)  # now a2 <= -|b2|: the interval reaches at least as far down as up
    u = jnp.asarray(u, jnp.float32)
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


def truncated_obs(
    key: jax.Array, stat: jax.Array, omega: jax.Array, interval: tuple[jax.Array, jax.Array]
) -> jax.Array:
    """y | s, omega, z for a snapped release: N(s, omega) truncated to the rounding interval [lo, hi]."""
    lo, hi = (jnp.asarray(v, jnp.float32) for v in interval)
    y = truncated_normal(key, stat, jnp.sqrt(omega), lo, hi)
    return jnp.clip(y, lo, hi)


def truncated_obs_from_uniform(
    u: jax.Array, stat: jax.Array, omega: jax.Array, interval: tuple[jax.Array, jax.Array]
) -> jax.Array:
    """:func:`truncated_obs` given its uniform variates ``u`` in (0, 1) (shape of ``stat``)."""
    lo, hi = (jnp.asarray(v, jnp.float32) for v in interval)
    y = truncated_normal_from_uniform(u, stat, jnp.sqrt(omega), lo, hi)
    return jnp.clip(y, lo, hi)


def laplace_mixture_variance(key: jax.Array, residual: jax.Array, scale: jax.Array) -> jax.Array:
    """omega | r for r ~ N(0, omega), omega ~ Exponential(mean 2 scale^2): 1/omega ~ IG(1/(scale|r|), 1/scale^2).

    With u = scale |r| and v = scale^2 nu^2 / 2 (nu ~ N(0, 1)), the Michael-Schucany-Haas draw of the
    inverse-Gaussian variable, inverted, is omega = R = u + v + sqrt(v^2 + 2 u v) with probability
    R / (R + u) and omega = u^2 / R otherwise. This form has no cancellation and is exact at r = 0
    (omega = scale^2 nu^2, the Gamma(1/2, rate 1/(2 scale^2)) conditional).
    """
    residual = jnp.asarray(residual, jnp.float32)
    k1, k2 = jax.random.split(key)
    nu = jax.random.normal(k1, residual.shape, jnp.float32)
    return laplace_mixture_variance_from(nu, jax.random.uniform(k2, residual.shape, jnp.float32), residual, scale)


def laplace_mixture_variance_from(
    nu: jax.Array, uniform: jax.Array, residual: jax.Array, scale: jax.Array
) -> jax.Array:
    """:func:`laplace_mixture_variance` given its variates: ``nu`` standard normal and ``uniform`` in
    [0, 1), both of the residual's shape (for callers that draw their variates in bulk)."""
    residual = jnp.asarray(residual, jnp.float32)
    scale = jnp.broadcast_to(jnp.asarray(scale, jnp.float32), residual.shape)
    u = scale * jnp.abs(residual)
    v = 0.5 * jnp.square(scale * jnp.asarray(nu, jnp.float32))
    r = u + v + jnp.sqrt(v * v + 2.0 * u * v)
    accept = jnp.asarray(uniform, jnp.float32) * (r + u) <= r
    small = jnp.where(r > 0, jnp.square(u) / jnp.where(r > 0, r, 1.0), 0.0)
    omega = jnp.where(accept, r, small)
    # omega = 0 only when nu = 0 and r = 0 exactly (probability zero); keep it strictly positive.
    return jnp.maximum(omega, jnp.finfo(jnp.float32).tiny)


def initial_mixture_variance(key: jax.Array, scale: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """omega ~ Exponential(mean 2 scale^2): the prior of the Laplace scale mixture (the chain's start)."""
    scale = jnp.broadcast_to(jnp.asarray(scale, jnp.float32), shape)
    return 2.0 * jnp.square(scale) * jax.random.exponential(key, shape, jnp.float32)


def laplace_noise(key: jax.Array, shape: tuple[int, ...], scale: ArrayLike) -> jax.Array:
    """Laplace(0, scale) noise (float32) by inversion: sign * scale * Exponential(1)."""
    k1, k2 = jax.random.split(key)
    e = jax.random.exponential(k1, shape, jnp.float32)
    sign = jnp.where(jax.random.bernoulli(k2, 0.5, shape), 1.0, -1.0)
    return sign * jnp.asarray(scale, jnp.float32) * e


#: |t| below which :func:`_log1p_tail` sums its series (16 terms: relative error below 1e-9).
_SERIES_T = 0.25


def _log1p_tail(t: jax.Array) -> jax.Array:
    """h(t) = log(1 + t) - t + t^2/2 - t^3/3 for t > -1, without the cancellation of the direct form
    near 0 (there the series -t^4/4 + t^5/5 - ..., summed by Horner's rule)."""
    small = jnp.abs(t) < _SERIES_T
    ts = jnp.where(small, t, 0.0)
    acc = jnp.zeros_like(ts)
    for j in range(14, -1, -1):
        acc = 1.0 / (j + 4.0) - ts * acc
    series = -jnp.square(jnp.square(ts)) * acc
    td = jnp.where(small, 0.5, t)
    direct = jnp.log1p(td) - td * (1.0 - td * (0.5 - td / 3.0))
    return jnp.where(small, series, direct)


def _marsaglia_tsang(alpha: jax.Array, x: jax.Array, u: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(accepted, value) of one Marsaglia-Tsang proposal for Gamma(alpha), alpha >= 1: with d = alpha - 1/3,
    c = 1 / sqrt(9 d), t = c x, the proposal d (1 + t)^3 is accepted when t > -1 and
    log u < x^2/2 + d (1 - (1 + t)^3 + 3 log(1 + t)) = 3 d h(t) (the x^2/2 term cancels exactly, which
    keeps the test accurate in float32 for large alpha, where the two sides nearly cancel)."""
    d = alpha - 1.0 / 3.0
    t = x / jnp.sqrt(9.0 * d)
    ok = t > -1.0
    tt = jnp.where(ok, t, 0.0)
    accepted = ok & (jnp.log(u) < 3.0 * d * _log1p_tail(tt))
    return accepted, d * jnp.power(1.0 + tt, 3)


def gamma_from_variates(key: jax.Array, shape: jax.Array, normals: jax.Array, uniforms: jax.Array) -> jax.Array:
    """One Gamma(shape, rate 1) variate (shape > 0, a scalar) from pre-drawn variates.

    Marsaglia & Tsang (2000), exact rejection sampling: the first accepted of the proposals made from
    ``normals`` (k,) and ``uniforms[:k]`` (the acceptance tests); when all k are rejected, further
    proposals from ``key`` until one is accepted (a loop that runs no iteration in the common case:
    the acceptance rate is 0.95 at shape 1 and tends to 1). For shape < 1 the variate of shape + 1 is
    multiplied by ``uniforms[k] ** (1 / shape)`` (the same paper's boost).

    Args:
      key: for the fallback proposals only.
      shape: the shape parameter, > 0.
      normals: (k,) standard normal variates.
      uniforms: (k + 1,) uniform variates in (0, 1).
    """
    a = jnp.asarray(shape, jnp.float32)
    boost = a < 1.0
    alpha = jnp.where(boost, a + 1.0, a)
    k = normals.shape[0]
    done, value = jnp.bool_(False), jnp.float32(0.0)
    for i in range(k - 1, -1, -1):  # the first accepted proposal wins
        acc, val = _marsaglia_tsang(alpha, normals[i], uniforms[i])
        value = jnp.where(acc, val, value)
        done = done | acc

    def more(carry):
        i, done, value = carry
        kx, ku = jax.random.split(jax.random.fold_in(key, i))
        acc, val = _marsaglia_tsang(
            alpha,
            jax.random.normal(kx, (), jnp.float32),
            jax.random.uniform(ku, (), jnp.float32, minval=jnp.finfo(jnp.float32).tiny, maxval=1.0),
        )
        return i + 1, done | acc, jnp.where(done, value, val)

    _, _, value = jax.lax.while_loop(lambda c: ~c[1], more, (jnp.int32(0), done, value))
    return value * jnp.where(boost, jnp.power(uniforms[k], 1.0 / a), 1.0)
