"""The model's curvature terms at a released trace's mean (:class:`~dpposterior.releases.ModelCurvature`).

Computed after the run from the released trace's mean, the public settings (clip, beta, N, the ELBO's
Monte Carlo draws per step) and the model, over records SIMULATED from the model at the trace mean: it
never reads the private records, so it is a post-processing of the release and costs no privacy.

Only a model that can simulate its records gets them: every data argument must be the observed value
of a sample site (:func:`simulated_sites`). A regression's records hold covariates, whose distribution
the model does not state; its curvature depends on them. There the terms need a public sample of the
covariates (``dpvi(..., public_covariates=...)``): the simulated records take their covariates from it,
drawn with replacement, and their observed values from the model. Without one, the trace's own slope stays.
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


def argument_sites(
    model: Callable, data: tuple[Any, ...], model_kwargs: dict[str, Any]
) -> tuple[str | None, ...] | None:
    """Per data argument, the observed sample site whose value it is (None where no single site is: a
    covariate); None where the model cannot be traced on placeholders.

    Reads only the data's shapes and dtypes: the model is traced on placeholders, argument i filled with
    i + 1, and argument i is matched to the observed site whose value is that placeholder unchanged.
    """
    fills = tuple(_dummy((a,), 2, i + 1)[0] for i, a in enumerate(data))  # public: shapes and dtypes
    try:
        tr = handlers.trace(handlers.seed(model, rng_seed=0)).get_trace(*fills, **model_kwargs)
    except Exception:  # noqa: BLE001 - a model that cannot run on placeholders cannot simulate either
        return None
    observed = {k: s["value"] for k, s in tr.items() if s["type"] == "sample" and s["is_observed"]}
    names: list[str | None] = []
    for fill in fills:
        match = [
            k
            for k, v in observed.items()
            if np.shape(v) == fill.shape and bool(np.all(np.asarray(v) == np.asarray(fill)))
        ]
        names.append(match[0] if len(match) == 1 else None)
    return tuple(names)


def simulated_sites(
    model: Callable,
    data: tuple[Any, ...],
    model_kwargs: dict[str, Any],
    given: tuple[bool, ...] | None = None,
) -> tuple[str | None, ...] | None:
    """The observed site that holds each data argument, in argument order, or None where some argument is
    not the observed value of a sample site (a covariate) and not ``given``, or the model cannot be traced.

    ``given`` marks the arguments whose records come from elsewhere (a public sample of covariates): their
    entry is None. See :func:`argument_sites`.
    """
    sites = argument_sites(model, data, model_kwargs)
    if sites is None:
        return None
    given = given or (False,) * len(data)
    names = tuple(None if g else s for s, g in zip(sites, given))
    if any(s is None and not g for s, g in zip(names, given)):
        return None
    found = [k for k in names if k is not None]
    return names if found and len(set(found)) == len(found) else None


def simulate_records(
    model: Callable,
    layout: ParamLayout,
    data: tuple[Any, ...],
    model_kwargs: dict[str, Any],
    sites: tuple[str | None, ...],
    mean: jax.Array,
    key: jax.Array,
    num: int,
    covariates: tuple[Any, ...] | None = None,
) -> tuple[jax.Array, ...]:
    """``num`` records simulated from the model with the latents at ``mean`` (unconstrained), in the
    data's dtypes; ``data`` is read for its shapes and dtypes only. An argument whose site is None takes
    ``num`` rows of its public sample in ``covariates``, drawn with replacement (the rows of every such
    argument drawn together, so that a record keeps its covariates side by side)."""
    values = layout.constrain(mean)
    given = [c for c in (covariates or ()) if c is not None]
    rows, k_model = None, key  # without a sample: the key as before, so a release's terms are reproducible
    if given:
        k_rows, k_model = jax.random.split(key)
        rows = jax.random.randint(k_rows, (num,), 0, int(np.shape(given[0])[0]))
    args = []
    for i, (site, a) in enumerate(zip(sites, data)):
        if site is None:
            assert covariates is not None and covariates[i] is not None and rows is not None
            args.append(jnp.asarray(covariates[i]).astype(a.dtype)[rows])
        else:
            args.append(jnp.zeros((num,) + tuple(a.shape[1:]), a.dtype))
    sim = handlers.seed(handlers.condition(handlers.uncondition(model), values), k_model)
    tr = handlers.trace(sim).get_trace(*args, **model_kwargs)
    return tuple(
        arg if site is None else jnp.asarray(tr[site]["value"]).astype(a.dtype)
        for site, arg, a in zip(sites, args, data)
    )


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
    covariates: tuple[Any, ...] | None = None,
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
      covariates: None, or per data argument None (simulated from the model) or a public sample of that
        argument's records (checked by :func:`dpposterior.vi.public_covariates.check_public_covariates`).
    """
    given = None if covariates is None else tuple(c is not None for c in covariates)
    sites = simulated_sites(model, data, model_kwargs, given)
    if sites is None or np.shape(phi)[1] > MAX_PARAMS:
        return None
    phi = np.asarray(phi, np.float64)
    point = phi[burn_in_start(phi.shape[0], BURN_IN) :].mean(axis=0)
    d = point.shape[0]
    n = d // 2
    k_sim, k_mc = jax.random.split(key)
    try:
        records = simulate_records(
            model,
            layout,
            data,
            model_kwargs,
            sites,
            jnp.asarray(point[:n], jnp.float32),
            k_sim,
            NUM_RECORDS,
            covariates,
        )
    except Exception:  # noqa: BLE001 - a model whose observed sites cannot be sampled (an improper likelihood)
        return None
    if not all(bool(jnp.all(jnp.isfinite(r))) for r in records):
        return None
    keys = jax.random.split(k_mc, NUM_KEYS)
    h_records = tuple(r[:NUM_HESSIAN_RECORDS] for r in records)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = _terms_fn(loss, d)(
                jnp.asarray(point, jnp.float32),
                records,
                h_records,
                keys,
                jnp.asarray(beta, jnp.float32),
                float(clip),
                float(dataset_size),
            )
        except Exception:  # noqa: BLE001 - e.g. a reverse-mode-only function (jax.custom_vjp, odeint) has no
            # forward-over-reverse derivative: the terms are optional post-processing, the release is kept
            return None
    slope, clipped, plain, h, dh, h_means = (np.asarray(v, np.float64) for v in out)
    h_means = 0.5 * (h_means + h_means.T)  # the rows of Hessian-vector products agree to rounding
    if not (np.all(np.isfinite(slope)) and np.all(slope > 0)):
        return None
    safe = np.where(h > 0, h, 1.0)
    shift = np.where(h > 0, -(plain - clipped) / safe, 0.0)
    if not all(np.all(np.isfinite(v)) for v in (h, dh, shift, h_means)):
        return None
    return check_model_curvature(
        ModelCurvature(
            point=point,
            curvature=slope,
            hessian_diag=h,
            hessian_diag_slope=dh,
            clip_shift=shift,
            num_records=NUM_RECORDS,
            covariates="public sample" if given and any(given) else "none",
            hessian_means=h_means,
        ),
        d,
    )


@functools.lru_cache(maxsize=16)
def _terms_fn(loss: Callable, d: int) -> Callable:
    """The compiled terms for dpvi's cached loss object (one per model and settings), so that repeated
    releases of a model compile once: (A_j of the mean coordinates, the clipped and the unclipped
    gradient of N records, H_jj, dH_jj / dphi_k, the Hessian's block over the means), each averaged over
    the keys and records."""
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
        h_means = jax.lax.map(lambda e: jax.jvp(jax.grad(total), (point,), (e,))[1][:n], basis[:n])
        return slope, clipped[0], plain[0], h[0], slope_h.T, h_means

    return terms
