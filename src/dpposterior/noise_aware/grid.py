"""The "grid" solver: exact integration of phi* given h (and s), an adaptive grid over h (or (h, s)).

Per coordinate, phi* | trace, h, s is Gaussian (:func:`model.conditional_phi_star`), so p(phi* | trace)
is a one-dimensional mixture over h (two-dimensional over (h, s) with subsampling noise) of Gaussians.
The mixing density p(h[, s] | trace) is known up to a constant in closed form
(:func:`model.log_marginal_h`) and is evaluated on a grid of cells:

1. stage 1 covers a wide box: h in [m - 32 sd, softplus^-1(max(softplus(m + 32 sd), |b|/q + 32 se))]
   (prior location m, prior sd sd, least-squares slope b and its standard error se), s in
   [0, max(6 s_scale, the residual-variance bound)], capped at 3 sqrt(v_hat), v_hat the 10-standard-
   error upper bound of the residual variance R0 / n (s^2 cannot exceed the variance of the residuals:
   without it the stages could not resolve s when the DP noise sd sigma C / beta is far below s_scale);
2. each further stage re-grids the box between the ``tail`` and 1 - ``tail`` quantiles of the current
   stage's marginals (default 1e-7), widened by two cells on each side.

Working on the h marginal with phi* integrated out removes the funnel of the (phi*, h) posterior
: when softplus(h) is small, phi* falls back to its prior, and a grid over
(phi*, h) centred on the likelihood misses that mass. The cells are tiled by their midpoints (the
midpoint rule); sampling draws a cell by weight, a uniform point inside it, then phi* from its exact
conditional Gaussian at that point.

Everything is pure ``jax.numpy`` with static shapes: ``jax.vmap`` over a leading replicate axis of
(stats, priors, noise_sd, sampling_rate) gives the vmapped solver the coverage engine needs; the
keyword options are static. Cost: ``num_stages * num_points (* num_points_s)`` closed-form evaluations
per coordinate.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import ndtr

from . import model as M
from .model import TracePriors
from .stats import TraceStats

STAGE1_WIDTH = 32.0  # stage 1 spans this many prior sds / slope standard errors on each side
S_PRIOR_WIDTH = 6.0  # and s up to this many s_scale (HalfNormal tail 2e-9),
S_LIK_WIDTH = 3.0  # but at most this many times the residual sd bound sqrt(v_hat) (likelihood tail)
MARGIN_CELLS = 2


class GridPosterior(NamedTuple):
    """A gridded posterior p(h[, s] | trace) with exact Gaussian p(phi* | h, s, trace), per coordinate.

    Shapes: (d,) per coordinate and (d, Gh, Gs) per cell (Gs = 1 without subsampling noise); under
    ``vmap`` every field gains the leading replicate axis.

    Attributes:
      h_lo, h_width: lower edge and cell width of the final h grid (cell i is
        [h_lo + i w, h_lo + (i + 1) w], its node the midpoint).
      s_lo, s_width: the same for s (s_lo = s_width = 0 without subsampling noise).
      log_weights: normalised log probabilities of the cells.
      phi_offset, phi_var: mean - phibar and variance of phi* given the trace at each cell's node.
      log_evidence: log p(trace) per coordinate (midpoint rule over the final grid).
      edge_mass: posterior mass in the outermost cells of the stage-1 box (missed mass if not tiny).
      max_cell_mass: the largest single cell probability of the final grid (resolution check).
      stats, priors, noise_sd, sampling_rate: the problem (kept for exact sampling inside the cells).
    """

    h_lo: jax.Array
    h_width: jax.Array
    s_lo: jax.Array
    s_width: jax.Array
    log_weights: jax.Array
    phi_offset: jax.Array
    phi_var: jax.Array
    log_evidence: jax.Array
    edge_mass: jax.Array
    max_cell_mass: jax.Array
    stats: TraceStats
    priors: TracePriors
    noise_sd: jax.Array
    sampling_rate: jax.Array


def _cells(lo, hi, num):
    width = (hi - lo) / num
    nodes = lo[..., None] + (jnp.arange(num, dtype=width.dtype) + 0.5) * width[..., None]
    return nodes, width


def _cumsum(x):
    """Cumulative sum along the last axis as a triangular matmul (jnp.cumsum lowers to an associative
    scan that is slow to compile and to run on CPU)."""
    k = x.shape[-1]
    tri = jnp.triu(jnp.ones((k, k), dtype=x.dtype))
    return jnp.matmul(x, tri, precision=jax.lax.Precision.HIGHEST)


def _cumsum_2d(x):
    """Cumulative sum of x (..., a, b) flattened in C order to (..., a * b), by two small matmuls."""
    within = _cumsum(x)
    totals = within[..., -1]
    before = _cumsum(totals) - totals
    return (before[..., None] + within).reshape(x.shape[:-2] + (-1,))


def _quantile_box(wm, lo, width, num, tail):
    """Bounds of the cells holding the tail .. 1 - tail quantiles of weights wm (..., num), widened."""
    cdf = _cumsum(wm)
    i_lo = jnp.sum(cdf < tail, axis=-1)
    ccdf = _cumsum(wm[..., ::-1])
    i_hi = num - 1 - jnp.sum(ccdf < tail, axis=-1)
    new_lo = lo + (i_lo - MARGIN_CELLS).astype(width.dtype) * width
    new_hi = lo + (i_hi + 1 + MARGIN_CELLS).astype(width.dtype) * width
    return new_lo, new_hi


def _expand(tree, k):
    return jax.tree.map(lambda x: jnp.asarray(x)[(...,) + (None,) * k], tree)


@partial(jax.jit, static_argnames=("subsampling_noise", "num_points", "num_points_s", "num_stages", "tail"))
def grid_posterior(
    stats: TraceStats,
    priors: TracePriors,
    noise_sd,
    sampling_rate,
    *,
    subsampling_noise: bool = False,
    num_points: int = 256,
    num_points_s: int = 48,
    num_stages: int = 3,
    tail: float = 1e-7,
) -> GridPosterior:
    """Grids p(h[, s] | trace) per coordinate, with phi* integrated out exactly.

    Args:
      stats: per-coordinate sufficient statistics (d,) (see :mod:`.stats`).
      priors: the priors (:func:`model.trace_priors` for the paper's trace-based ones).
      noise_sd: (d,) sigma C / beta.
      sampling_rate: q.
      subsampling_noise: grid (h, s) instead of h alone.
      num_points, num_points_s: cells per stage along h and s.
      num_stages: grid refinements (>= 1); stage 1 is the wide box of the module docstring.
      tail: the quantile (each side) that bounds the next stage's box.

    Returns:
      A :class:`GridPosterior`.
    """
    dtype = jnp.result_type(stats.phi_mean, float)
    stats = stats.astype(dtype)
    priors = TracePriors(*(jnp.asarray(x, dtype=dtype) for x in priors))
    noise_sd = jnp.asarray(noise_sd, dtype=dtype)
    q = jnp.asarray(sampling_rate, dtype=dtype)
    shape = stats.phi_mean.shape
    b, r0 = M._slope_and_residual(stats)
    n = stats.count

    gh = num_points
    gs = num_points_s if subsampling_noise else 1
    if subsampling_noise:
        v_hat = r0 / n * (1.0 + 10.0 * jnp.sqrt(2.0 / n))
        s_lik = 1.2 * jnp.sqrt(jnp.maximum(v_hat - jnp.square(noise_sd), 0.0))
        s_lo = jnp.zeros(shape, dtype)
        # s^2 <= v_hat - v0 (10 standard errors) under the likelihood; a box of 6 s_scale alone cannot be
        # resolved by the stages when s is far below s_scale (e.g. s_scale = 1, sigma C / beta = 1e-4)
        s_hi = jnp.broadcast_to(
            jnp.minimum(jnp.maximum(S_PRIOR_WIDTH * priors.s_scale, s_lik), S_LIK_WIDTH * jnp.sqrt(v_hat)), shape
        )
        v_hi = jnp.square(noise_sd) + jnp.square(s_hi)
    else:
        s_lo = s_hi = jnp.zeros(shape, dtype)
        v_hi = jnp.square(noise_sd)
    se_a = jnp.sqrt(v_hi / stats.phi_ss) / q
    h_lo = jnp.broadcast_to(priors.h_loc - STAGE1_WIDTH * priors.h_scale, shape)
    a_hi = jnp.maximum(
        jax.nn.softplus(priors.h_loc + STAGE1_WIDTH * priors.h_scale), jnp.abs(b) / q + STAGE1_WIDTH * se_a
    )
    h_hi = jnp.broadcast_to(M.softplus_inverse(a_hi), shape)

    st, pr, ns = _expand(stats, 2), _expand(priors, 2), _expand(noise_sd, 2)

    def cells(box):
        h_lo, h_hi, s_lo, s_hi = box
        hs, dh = _cells(h_lo, h_hi, gh)
        if subsampling_noise:
            ss, ds = _cells(s_lo, s_hi, gs)
            lw, const = M.log_marginal_h_parts(st, pr, ns, q, hs[..., :, None], ss[..., None, :])
            lw = lw + (jnp.log(dh) + jnp.log(ds))[..., None, None]
        else:
            ss, ds = jnp.zeros(shape + (1,), dtype), jnp.zeros(shape, dtype)
            lw, const = M.log_marginal_h_parts(st, pr, ns, q, hs[..., :, None])
            lw = lw + jnp.log(dh)[..., None, None]
        log_z = jax.nn.logsumexp(lw, axis=(-2, -1))
        w = jnp.exp(lw - log_z[..., None, None])
        wh, ws = jnp.sum(w, axis=-1), jnp.sum(w, axis=-2)
        edge = wh[..., 0] + wh[..., -1] + (ws[..., -1] if subsampling_noise else 0.0)
        return hs, dh, ss, ds, lw, const, log_z, w, wh, ws, edge

    def refine(i, carry):
        box, edge_mass = carry
        h_lo, _, s_lo, s_hi = box
        _, dh, _, ds, _, _, _, _, wh, ws, edge = cells(box)
        new_h = _quantile_box(wh, h_lo, dh, gh, tail)
        new_s = _quantile_box(ws, s_lo, ds, gs, tail) if subsampling_noise else (s_lo, s_hi)
        new_box = (new_h[0], new_h[1], jnp.maximum(new_s[0], 0.0), new_s[1])
        return new_box, jnp.where(i == 0, edge, edge_mass)

    box, stage1_edge = jax.lax.fori_loop(0, num_stages - 1, refine, ((h_lo, h_hi, s_lo, s_hi), jnp.zeros(shape, dtype)))
    hs, dh, ss, ds, lw, const, log_z, w, _, _, edge = cells(box)
    edge_mass = edge if num_stages == 1 else stage1_edge
    h_lo, _, s_lo, _ = box
    offset, var = M.conditional_phi_star(st, pr, ns, q, hs[..., :, None], ss[..., None, :])
    return GridPosterior(
        h_lo=h_lo,
        h_width=dh,
        s_lo=s_lo,
        s_width=ds,
        log_weights=lw - log_z[..., None, None],
        phi_offset=offset,
        phi_var=var,
        log_evidence=log_z + jnp.reshape(const, log_z.shape),
        edge_mass=edge_mass,
        max_cell_mass=jnp.max(w, axis=(-2, -1)),
        stats=stats,
        priors=priors,
        noise_sd=noise_sd,
        sampling_rate=q,
    )


def grid_sample(grid: GridPosterior, key: jax.Array, num_samples: int) -> dict[str, jax.Array]:
    """Exact draws (up to the grid) of (phi*, h, s): each (num_samples, d), for one unbatched grid.

    Inverse-CDF sampling of the piecewise-uniform cell density: one uniform picks the cell and, rescaled
    within it, the position along h; a second uniform places s inside its cell (subsampling noise only);
    then phi* is drawn from its exact conditional Gaussian at that point. ``num_samples`` is static under
    ``jit``.
    """
    lw = grid.log_weights
    d, _, gs = lw.shape
    dt = lw.dtype
    cdf = _cumsum_2d(jnp.exp(lw))
    cdf = cdf / cdf[:, -1:]
    k_cell, k_s, k_phi = jax.random.split(key, 3)
    u = jax.random.uniform(k_cell, (d, num_samples), dtype=dt)
    idx = jax.vmap(lambda c, x: jnp.searchsorted(c, x, side="right"))(cdf, u)
    idx = jnp.minimum(idx, cdf.shape[1] - 1)
    upper = jnp.take_along_axis(cdf, idx, axis=1)
    lower = jnp.where(idx > 0, jnp.take_along_axis(cdf, jnp.maximum(idx - 1, 0), axis=1), 0.0)
    frac = jnp.clip((u - lower) / jnp.maximum(upper - lower, jnp.finfo(dt).tiny), 0.0, 1.0).T
    idx = idx.T  # (num_samples, d)
    ih, is_ = idx // gs, idx % gs
    h = grid.h_lo + (ih + frac) * grid.h_width
    if gs > 1:
        s = grid.s_lo + (is_ + jax.random.uniform(k_s, idx.shape, dtype=dt)) * grid.s_width
    else:
        s = jnp.broadcast_to(grid.s_lo, idx.shape)
    offset, var = M.conditional_phi_star(grid.stats, grid.priors, grid.noise_sd, grid.sampling_rate, h, s)
    phi = grid.stats.phi_mean + offset + jnp.sqrt(var) * jax.random.normal(k_phi, idx.shape, dtype=dt)
    return {"phi_star": phi, "h": h, "s": s}


@partial(jax.jit, static_argnames=("num_samples",))
def grid_sample_phi_star(grid: GridPosterior, key: jax.Array, num_samples: int) -> jax.Array:
    """(num_samples, d) draws of phi* from a :class:`GridPosterior` (jit-compiled)."""
    return grid_sample(grid, key, num_samples)["phi_star"]


@partial(
    jax.jit, static_argnames=("num_samples", "subsampling_noise", "num_points", "num_points_s", "num_stages", "tail")
)
def grid_phi_star_sampler(
    stats: TraceStats,
    noise_sd,
    sampling_rate,
    key: jax.Array,
    num_samples: int,
    *,
    priors: TracePriors | None = None,
    subsampling_noise: bool = False,
    num_points: int = 256,
    num_points_s: int = 48,
    num_stages: int = 3,
    tail: float = 1e-7,
) -> jax.Array:
    """Pure function: (num_samples, d) posterior draws of phi* straight from the statistics.

    The trace-based priors are used unless ``priors`` is given. Under ``jax.vmap`` (over stats,
    noise_sd, sampling_rate, key) it samples many replicates at once; ``num_samples`` and the options
    are static.
    """
    if priors is None:
        priors = M.trace_priors(stats, noise_sd, sampling_rate)
    grid = grid_posterior(
        stats,
        priors,
        noise_sd,
        sampling_rate,
        subsampling_noise=subsampling_noise,
        num_points=num_points,
        num_points_s=num_points_s,
        num_stages=num_stages,
        tail=tail,
    )
    return grid_sample(grid, key, num_samples)["phi_star"]


@jax.jit
def grid_phi_star_moments(grid: GridPosterior) -> tuple[jax.Array, jax.Array]:
    """Posterior mean and standard deviation of phi* per coordinate (midpoint rule), each (..., d)."""
    w = jnp.exp(grid.log_weights)
    mean_off = jnp.sum(w * grid.phi_offset, axis=(-2, -1))
    var = jnp.sum(w * (grid.phi_var + jnp.square(grid.phi_offset - mean_off[..., None, None])), axis=(-2, -1))
    return grid.stats.phi_mean + mean_off, jnp.sqrt(var)


@jax.jit
def grid_h_moments(grid: GridPosterior) -> tuple[jax.Array, jax.Array]:
    """Posterior mean and standard deviation of h per coordinate (cells uniform within), each (..., d)."""
    wh = jnp.sum(jnp.exp(grid.log_weights), axis=-1)
    g = wh.shape[-1]
    nodes = grid.h_lo[..., None] + (jnp.arange(g, dtype=wh.dtype) + 0.5) * grid.h_width[..., None]
    mean = jnp.sum(wh * nodes, axis=-1)
    var = jnp.sum(wh * jnp.square(nodes - mean[..., None]), axis=-1) + jnp.square(grid.h_width) / 12.0
    return mean, jnp.sqrt(var)


@partial(jax.jit, static_argnames=("subsampling_noise", "num_points", "num_points_s", "num_stages", "tail"))
def phi_star_moments(
    stats: TraceStats,
    noise_sd,
    sampling_rate,
    *,
    priors: TracePriors | None = None,
    subsampling_noise: bool = False,
    num_points: int = 256,
    num_points_s: int = 48,
    num_stages: int = 3,
    tail: float = 1e-7,
) -> tuple[jax.Array, jax.Array]:
    """Pure function: per-coordinate posterior mean and sd of phi* (grid solver) from the statistics."""
    if priors is None:
        priors = M.trace_priors(stats, noise_sd, sampling_rate)
    return grid_phi_star_moments(
        grid_posterior(
            stats,
            priors,
            noise_sd,
            sampling_rate,
            subsampling_noise=subsampling_noise,
            num_points=num_points,
            num_points_s=num_points_s,
            num_stages=num_stages,
            tail=tail,
        )
    )


@partial(jax.jit, static_argnames=("num_iterations",))
def grid_phi_star_quantiles(grid: GridPosterior, probs, num_iterations: int = 60) -> jax.Array:
    """Quantiles (len(probs), ..., d) of the phi* marginal: bisection on the Gaussian-mixture CDF.

    Cost O(len(probs) * cells * num_iterations) per coordinate.
    """
    probs = jnp.asarray(probs, dtype=grid.phi_offset.dtype)
    batch = grid.log_weights.shape[:-2]
    w = jnp.exp(grid.log_weights).reshape(batch + (-1,))
    off = grid.phi_offset.reshape(batch + (-1,))
    sd = jnp.sqrt(grid.phi_var).reshape(batch + (-1,))
    lo = jnp.broadcast_to(jnp.min(off - 40.0 * sd, axis=-1), (probs.shape[0],) + batch)
    hi = jnp.broadcast_to(jnp.max(off + 40.0 * sd, axis=-1), (probs.shape[0],) + batch)
    target = probs.reshape((-1,) + (1,) * len(batch))

    def body(_, bounds):
        lo, hi = bounds
        mid = 0.5 * (lo + hi)
        cdf = jnp.sum(w * ndtr((mid[..., None] - off) / sd), axis=-1)
        below = cdf < target
        return jnp.where(below, mid, lo), jnp.where(below, hi, mid)

    lo, hi = jax.lax.fori_loop(0, num_iterations, body, (lo, hi))
    return grid.stats.phi_mean + 0.5 * (lo + hi)
