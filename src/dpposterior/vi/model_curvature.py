"""The model's curvature terms at a released trace's mean (:class:`~dpposterior.releases.ModelCurvature`).

Computed after the run from the released trace's mean, the public settings (clip, beta, N, the ELBO's
Monte Carlo draws per step) and the model, over records SIMULATED from the model at the trace mean: it
never reads the private records, so it is a post-processing of the release and costs no privacy.

Only a model that can simulate its records gets them: every data argument must be the observed value
of a sample site (:func:`simulated_sites`). A regression's records hold covariates, whose distribution
the model does not state; its curvature depends on them, and there the trace's own slope stays.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from numpyro import handlers

from ..releases.layout import ParamLayout
from ..releases.model_inspect import _dummy
from ..releases.window import burn_in_start
from ..releases.model_curvature import ModelCurvature, check_model_curvature

#: records simulated from the model.
NUM_RECORDS = 4000
#: public Monte Carlo keys of the ELBO over which the clipped gradient is averaged (each key draws the
#: run's ``num_mc`` values, as one DP-SGD step does).
NUM_KEYS = 16
#: of those, the keys over which the Hessian terms are averaged (they need no clipping, so fewer do).
NUM_HESSIAN_KEYS = 4
#: records of the Hessian terms (a d x d matrix of third derivatives: d^2 passes over them).
NUM_HESSIAN_RECORDS = 1000
#: the most variational parameters d for which the terms are computed: the derivatives of the Hessian's
#: diagonal take d^2 Hessian-vector products (a model with more keeps the trace's slope).
MAX_PARAMS = 32
#: the share of the trace dropped before its mean is taken (noise_aware_posterior's default burn-in).
BURN_IN = 0.2


def simulated_sites(model: Callable, data: tuple[Any, ...], model_kwargs: dict[str, Any]) -> tuple[str, ...] | None:
    """The observed site that holds each data argument, in argument order, or None where some argument is
    not the observed value of a sample site (a covariate) or the model cannot be traced so.

    Reads only the data's shapes and dtypes: the model is traced on placeholders, argument i filled with
    i + 1, and argument i is matched to the observed site whose value is that placeholder unchanged.
    """
    fills = tuple(_dummy((a,), 2, i + 1)[0] for i, a in enumerate(data))  # public: shapes and dtypes
    try:
        tr = handlers.trace(handlers.seed(model, rng_seed=0)).get_trace(*fills, **model_kwargs)
    except Exception:  # noqa: BLE001 - a model that cannot run on placeholders cannot simulate either
        return None
    observed = {k: s["value"] for k, s in tr.items() if s["type"] == "sample" and s["is_observed"]}
    names = []
    for fill in fills:
        match = [
            k
            for k, v in observed.items()
            if np.shape(v) == fill.shape and bool(np.all(np.asarray(v) == np.asarray(fill)))
        ]
        if len(match) != 1:
            return None
        names.append(match[0])
    return tuple(names) if len(set(names)) == len(names) else None


def simulate_records(
    model: Callable,
    layout: ParamLayout,
    data: tuple[Any, ...],
    model_kwargs: dict[str, Any],
    sites: tuple[str, ...],
    mean: jax.Array,
    key: jax.Array,
    num: int,
) -> tuple[jax.Array, ...]:
    """``num`` records simulated from the model with the latents at ``mean`` (unconstrained), in the
    data's dtypes; ``data`` is read for its shapes and dtypes only."""
    values = layout.constrain(mean)
    placeholders = tuple(jnp.zeros((num,) + tuple(a.shape[1:]), a.dtype) for a in data)
    sim = handlers.seed(handlers.condition(handlers.uncondition(model), values), key)
    tr = handlers.trace(sim).get_trace(*placeholders, **model_kwargs)
    return tuple(jnp.asarray(tr[s]["value"]).astype(a.dtype) for s, a in zip(sites, data))


def model_curvature(
    model: Callable,
    layout: ParamLayout,
    data: tuple[Any, ...],
    model_kwargs: dict[str, Any],
    loss: Callable,
    phi: np.ndarray,
    beta: np.ndarray,
    clip: float,
    dataset_size: int,
    key: jax.Array,
) -> ModelCurvature | None:
    """The :class:`ModelCurvature` of a trace ``phi`` (T, d), or None where the model cannot simulate its
    records, d exceeds :data:`MAX_PARAMS`, or its curvature at the trace mean is not positive in every
    mean coordinate.

    Args:
      model, layout, model_kwargs: the model, as dpvi ran it.
      data: read for the shapes and dtypes of the data arguments only.
      loss: dpvi's per-record ELBO loss ``loss(phi, record, key)`` (its ``num_mc`` draws per key).
      phi: the released trace of the variational parameters.
      beta, clip, dataset_size: the release's public settings.
      key: the key of the simulation (post-processing randomness, not privacy noise).
    """
    sites = simulated_sites(model, data, model_kwargs)
    if sites is None or np.shape(phi)[1] > MAX_PARAMS:
        return None
    phi = np.asarray(phi, np.float64)
    point = phi[burn_in_start(phi.shape[0], BURN_IN) :].mean(axis=0)
    d = point.shape[0]
    n = d // 2
    k_sim, k_mc = jax.random.split(key)
    try:
        records = simulate_records(
            model, layout, data, model_kwargs, sites, jnp.asarray(point[:n], jnp.float32), k_sim, NUM_RECORDS
        )
    except Exception:  # noqa: BLE001 - a model whose observed sites cannot be sampled (an improper likelihood)
        return None
    if not all(bool(jnp.all(jnp.isfinite(r))) for r in records):
        return None
    keys = jax.random.split(k_mc, NUM_KEYS)
    h_records = tuple(r[:NUM_HESSIAN_RECORDS] for r in records)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = _terms_fn(loss, d)(
            jnp.asarray(point, jnp.float32),
            records,
            h_records,
            keys,
            jnp.asarray(beta, jnp.float32),
            float(clip),
            float(dataset_size),
        )
    slope, clipped, plain, h, dh = (np.asarray(v, np.float64) for v in out)
    if not (np.all(np.isfinite(slope)) and np.all(slope > 0)):
        return None
    safe = np.where(h > 0, h, 1.0)
    shift = np.where(h > 0, -(plain - clipped) / safe, 0.0)
    if not (np.all(np.isfinite(h)) and np.all(np.isfinite(dh)) and np.all(np.isfinite(shift))):
        return None
    return check_model_curvature(
        ModelCurvature(
            point=point,
            curvature=slope,
            hessian_diag=h,
            hessian_diag_slope=dh,
            clip_shift=shift,
            num_records=NUM_RECORDS,
        ),
        d,
    )


@functools.lru_cache(maxsize=16)
def _terms_fn(loss: Callable, d: int) -> Callable:
    """The compiled terms for dpvi's cached loss object (one per model and settings), so that repeated
    releases of a model compile once: (A_j of the mean coordinates, the clipped and the unclipped
    gradient of N records, H_jj, dH_jj / dphi_k), each averaged over the keys and records."""
    n = d // 2
    per_record = jax.vmap(jax.grad(loss), in_axes=(None, 0, None))
    per_loss = jax.vmap(loss, in_axes=(None, 0, None))
    basis = jnp.eye(d, dtype=jnp.float32)

    @jax.jit
    def terms(point, records, h_records, keys, beta, clip, size):
        def sums(p):
            def one(k):
                g = per_record(p, records, k) * beta
                factor = jnp.minimum(1.0, clip / jnp.linalg.norm(g, axis=1))
                g = jnp.where(jnp.isfinite(g), g, 0.0)  # DP-SGD drops a gradient that is not finite
                return (g * factor[:, None]).mean(0) / beta, g.mean(0) / beta

            clipped, plain = jax.vmap(one)(keys)
            return clipped.mean(0) * size, plain.mean(0) * size

        def total(p):
            return jnp.mean(jax.vmap(lambda k: jnp.mean(per_loss(p, h_records, k)))(keys[:NUM_HESSIAN_KEYS])) * size

        def hessian_diag(p):
            return jax.lax.map(lambda e: jnp.vdot(jax.jvp(jax.grad(total), (p,), (e,))[1], e), basis)

        def slope_of(e):  # one mean coordinate's jvp; its primal is the gradients themselves
            (clipped, plain), (d_clipped, _) = jax.jvp(sums, (point,), (e,))
            return clipped, plain, jnp.vdot(d_clipped, e)

        clipped, plain, slope = jax.lax.map(slope_of, basis[:n])

        def slope_h_of(e):  # dH_jj / dphi_k one k at a time (lax.map, not jacfwd's vmap): bounded memory
            return jax.jvp(hessian_diag, (point,), (e,))

        h, slope_h = jax.lax.map(slope_h_of, basis)
        return slope, clipped[0], plain[0], h[0], slope_h.T

    return terms
