"""The "laplace" solver: the joint posterior mode of (phi*, h[, log s]) and the inverse Hessian there.

Per coordinate the unconstrained posterior (phi*, h) - or (phi*, h, u = log s) with subsampling noise,
with the log-Jacobian u added - is maximised by damped Newton (Levenberg-Marquardt: solve
(-H + lambda I) delta = grad, accept the step if the density rises, shrink lambda, else grow it), all
coordinates at once, from the best node of a coarse profile grid (phi* at its exact conditional mode
given h, s). The variables are rescaled by rough posterior scales first so that float32 Hessians stay
well conditioned. The covariance is the inverse of the negative Hessian at the mode; the Laplace
posterior of phi* is N(mode, [(-H)^-1]_{phi* phi*}) per coordinate (Räisä et al. 2024, section 8,
"Laplace form").

Limitation (measured): when A is poorly identified (relative standard error of a above about 0.3, as on
the Adult demo trace at epsilon 1) the marginal of phi* is a heavy-tailed scale mixture over h and the
Gaussian at the joint mode is too narrow, by up to 3-4x in sd on that trace; its 90% intervals cover
0.83 in simulations of that regime even with exact priors. Use the grid there.

Pure ``jax.numpy``; ``vmap``-able over a leading replicate axis like :mod:`.grid`.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from . import grid as G
from . import model as M
from .model import TracePriors
from .stats import TraceStats


class LaplaceResult(NamedTuple):
    """The Laplace approximation per coordinate (each field (..., d) unless stated).

    Attributes:
      phi_star_mode, h_mode, s_mode: the joint posterior mode (s_mode = 0 without subsampling noise).
      phi_star_sd: sqrt of the marginal variance of phi* from the inverse negative Hessian.
      cov: (..., d, k, k) covariance of (phi*, h[, log s]) (k = 2 or 3).
      grad_norm: the gradient norm at the mode in the rescaled variables (convergence check).
      converged: grad_norm small and the negative Hessian positive definite.
    """

    phi_star_mode: jax.Array
    phi_star_sd: jax.Array
    h_mode: jax.Array
    s_mode: jax.Array
    cov: jax.Array
    grad_norm: jax.Array
    converged: jax.Array


def _unpack(x, scale, ref, subsampling_noise):
    """Rescaled variables x (k,) -> (phi* - phibar, h, s, log-Jacobian of s)."""
    y = ref + scale * x
    if subsampling_noise:
        return y[0], y[1], jnp.exp(y[2]), y[2]
    return y[0], y[1], None, 0.0


@partial(jax.jit, static_argnames=("subsampling_noise", "num_iterations", "num_points"))
def laplace_posterior(
    stats: TraceStats,
    priors: TracePriors,
    noise_sd,
    sampling_rate,
    *,
    subsampling_noise: bool = False,
    num_iterations: int = 100,
    num_points: int = 128,
    tol: float = 1e-2,
) -> LaplaceResult:
    """Laplace approximation of p(phi*, h[, s] | trace) per coordinate, from the statistics.

    Args:
      stats, priors, noise_sd, sampling_rate: the problem, as for :func:`grid.grid_posterior`.
      subsampling_noise: include s (optimised as log s).
      num_iterations: Levenberg-Marquardt iterations (fixed count, so the function stays pure).
      num_points: nodes per axis of the coarse grid that picks the starting point and the scales.
      tol: gradient-norm threshold for ``converged``, in variables rescaled by rough posterior sds
        (so 1e-2 puts the mode within about 0.01 sd; float32 gradients are accurate to about 1e-3).
    """
    dtype = jnp.result_type(stats.phi_mean, float)
    stats = stats.astype(dtype)
    priors = TracePriors(*(jnp.broadcast_to(jnp.asarray(x, dtype=dtype), stats.phi_mean.shape) for x in priors))
    noise_sd = jnp.broadcast_to(jnp.asarray(noise_sd, dtype=dtype), stats.phi_mean.shape)
    q = jnp.asarray(sampling_rate, dtype=dtype)

    # A coarse 2-stage grid of the marginal gives scales; its profile maximum gives the start.
    coarse = G.grid_posterior(
        stats,
        priors,
        noise_sd,
        q,
        subsampling_noise=subsampling_noise,
        num_points=num_points,
        num_points_s=max(num_points // 4, 8),
        num_stages=2,
    )
    gh, gs = coarse.log_weights.shape[-2:]
    hs = coarse.h_lo[..., None] + (jnp.arange(gh, dtype=dtype) + 0.5) * coarse.h_width[..., None]
    ss = coarse.s_lo[..., None] + (jnp.arange(gs, dtype=dtype) + 0.5) * coarse.s_width[..., None]
    hh, sg = hs[..., :, None], ss[..., None, :]
    st2, pr2, ns2 = G._expand(stats, 2), G._expand(priors, 2), G._expand(noise_sd, 2)
    offset = coarse.phi_offset
    s_arg = sg if subsampling_noise else None
    profile = M.log_joint_parts(st2, pr2, ns2, q, offset, hh, s_arg)[0]
    if subsampling_noise:
        profile = profile + jnp.log(sg)
    flat = jnp.argmax(profile.reshape(profile.shape[:-2] + (-1,)), axis=-1)
    ih, is_ = flat // gs, flat % gs
    take = lambda a, i: jnp.take_along_axis(a, i[..., None], axis=-1)[..., 0]  # noqa: E731
    h0 = take(hs, ih)
    off0 = take(offset.reshape(offset.shape[:-2] + (-1,)), flat)
    h_mean, h_sd = G.grid_h_moments(coarse)
    _, phi_sd = G.grid_phi_star_moments(coarse)
    if subsampling_noise:
        s0 = take(ss, is_)
        u0 = jnp.log(s0)
        ws = jnp.sum(jnp.exp(coarse.log_weights), axis=-2)
        lu = jnp.log(ss)
        lu_mean = jnp.sum(ws * lu, axis=-1)
        u_sd = jnp.sqrt(jnp.sum(ws * jnp.square(lu - lu_mean[..., None]), axis=-1))
        ref = jnp.stack([off0, h0, u0], axis=-1)
        scale = jnp.stack([phi_sd, h_sd, jnp.clip(u_sd, 1e-2, 10.0)], axis=-1)
    else:
        ref = jnp.stack([off0, h0], axis=-1)
        scale = jnp.stack([phi_sd, h_sd], axis=-1)
    k = ref.shape[-1]

    def one(st, pr, ns, ref, scale):
        def f(x):
            off, h, s, log_jac = _unpack(x, scale, ref, subsampling_noise)
            return M.log_joint_parts(st, pr, ns, q, off, h, s)[0] + log_jac

        grad = jax.grad(f)
        hess = jax.hessian(f)
        eye = jnp.eye(k, dtype=dtype)

        def body(_, carry):
            x, fx, lam = carry
            g = grad(x)
            a = -hess(x) + lam * eye
            step = jnp.linalg.solve(a, g)
            x_new = x + step
            f_new = f(x_new)
            ok = jnp.isfinite(f_new) & (f_new >= fx)
            return (
                jnp.where(ok, x_new, x),
                jnp.where(ok, f_new, fx),
                jnp.where(ok, lam * 0.25, jnp.minimum(lam * 4.0, 1e12)),
            )

        x0 = jnp.zeros(k, dtype)
        x, _, _ = jax.lax.fori_loop(0, num_iterations, body, (x0, f(x0), jnp.asarray(1e-3, dtype)))
        g = grad(x)
        neg_h = -hess(x)
        cov_x = jnp.linalg.inv(neg_h)
        pd = jnp.all(jnp.linalg.eigvalsh(0.5 * (neg_h + neg_h.T)) > 0)
        cov = cov_x * scale[:, None] * scale[None, :]
        off, h, s, _ = _unpack(x, scale, ref, subsampling_noise)
        s = jnp.zeros((), dtype) if s is None else s
        gn = jnp.sqrt(jnp.sum(jnp.square(g)))
        return off, h, s, cov, gn, pd & (gn < tol)

    fn = one
    for _ in range(stats.phi_mean.ndim):
        fn = jax.vmap(fn)
    off, h, s, cov, gn, conv = fn(stats, priors, noise_sd, ref, scale)
    return LaplaceResult(
        phi_star_mode=stats.phi_mean + off,
        phi_star_sd=jnp.sqrt(cov[..., 0, 0]),
        h_mode=h,
        s_mode=s,
        cov=cov,
        grad_norm=gn,
        converged=conv,
    )


def laplace_sample(result: LaplaceResult, key: jax.Array, num_samples: int) -> jax.Array:
    """(num_samples, d) draws of phi* ~ N(mode, marginal variance) for one unbatched result."""
    z = jax.random.normal(key, (num_samples,) + result.phi_star_mode.shape, dtype=result.phi_star_mode.dtype)
    return result.phi_star_mode + result.phi_star_sd * z
