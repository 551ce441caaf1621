"""DPVI: DP-SGD on the ELBO of a NumPyro model, releasing the whole trace (Räisä, Jälkö & Honkela,
"Noise-aware differentially private variational inference", 2024)."""

from __future__ import annotations

import math
import warnings
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import (
    LargeDeltaWarning,
    check_delta,
    check_epsilon,
    check_float32_array,
    check_float32_positive,
    check_positive,
    check_positive_int,
    check_sampling_rate,
    check_trace_memory,
    warn_if_delta_large,
)
from ..privacy.dpsgd_accounting import Accountant, calibrate_noise_multiplier
from ..privacy.randomness import resolve_key
from ..privacy.noise import mechanism_delta
from ..releases import family
from . import auto_clip
from .circular import warn_if_near_seam
from ..releases.layout import ParamLayout
from .data_support import check_indices, check_observed_support
from .model_inspect import check_data, check_setting_names, inspect_model, prior_median_unconstrained, record_log_joint
from .model_curvature import model_curvature
from .public_covariates import check_public_covariates
from .record_norms import record_norms
from .run_options import RunOptions, check_run_options, refuse_moved_settings
from ..releases.trace import DPVITrace

#: default preconditioning of the rho (scale) gradients; beta_mu is always 1 (as in the reference implementation).
DEFAULT_BETA_RHO = 100.0
#: default initial standard deviation of the variational family.
DEFAULT_INIT_SCALE = 0.1


def make_elbo_loss(
    model: Callable, layout: ParamLayout, dataset_size: int, num_mc: int, model_kwargs: dict[str, Any] | None = None
) -> Callable:
    """The per-record negative-ELBO loss ``loss(phi, record, key)`` of Räisä et al. 2024, eq. 57.

    loss = E_q[log q(theta)]/N - E_q[log p(x_i | theta)] - E_q[log p(theta) + log|det J(theta)|]/N,
    estimated with ``num_mc`` reparametrised draws from ``key``; the key is shared by every record of a
    DP-SGD step, so the records of a step use the same draws. theta lives in the unconstrained space;
    ``layout`` maps it to the model's supports with the log-determinant of the Jacobian.
    """
    model_kwargs = dict(model_kwargs or {})
    n_inv = 1.0 / float(dataset_size)

    def loss(phi: jax.Array, record: tuple[jax.Array, ...], key: jax.Array) -> jax.Array:
        mu, rho = family.split_phi(phi)
        eps = jax.random.normal(key, (num_mc,) + mu.shape, dtype=mu.dtype)
        thetas = mu + family.scale(rho) * eps

        def one(theta):
            values, log_det = layout.constrain_with_log_det(theta)
            log_prior, log_lik = record_log_joint(model, record, model_kwargs, values)
            log_q = family.log_prob(theta, phi)
            return log_q * n_inv - log_lik - (log_prior + log_det) * n_inv

        return jnp.mean(jax.vmap(one)(thetas))

    # named after the model (DP-SGD checkpoints compare it: a checkpoint of another model is refused)
    loss.__qualname__ = (
        f"elbo[{getattr(model, '__module__', '')}.{getattr(model, '__qualname__', type(model).__name__)}"
        f", N={dataset_size}, num_mc={num_mc}]"
    )
    return loss


def heuristic_learning_rate(
    num_steps: int, num_params: int, noise_multiplier: float, clip: float, beta: jax.Array, lr_scale: float = 1.0
) -> jax.Array:
    """The paper's learning-rate heuristic times beta: sqrt(2) lambda_c beta / (sigma C sqrt(T d)).

    Räisä et al. 2024, appendix 13.1-13.2 (lambda_c = ``lr_scale``).
    """
    return math.sqrt(2.0) * lr_scale * beta / (noise_multiplier * clip * math.sqrt(num_steps * num_params))


def dpvi(
    model: Callable,
    *data: Any,
    epsilon: float,
    delta: float,
    num_steps: int = 10_000,
    sampling_rate: float = 0.1,
    clip: float | str = "auto",
    beta: Any = None,
    beta_rho: float = DEFAULT_BETA_RHO,
    lr_scale: float = 1.0,
    learning_rate: Any = None,
    num_mc: int = 10,
    rng_key: Any = None,
    dataset_size: int | None = None,
    init_scale: float = DEFAULT_INIT_SCALE,
    accountant: Accountant = "pld",
    model_name: str = "",
    secure: bool = False,
    check_clip: bool = True,
    public_covariates: Sequence[Any] | None = None,
    run_options: RunOptions | None = None,
    **model_kwargs: Any,
) -> DPVITrace:
    """Differentially private variational inference on a NumPyro model; releases the whole trace.

    Privacy: DP-SGD (``dpposterior.dpsgd.dpsgd``) with Poisson subsampling at rate ``sampling_rate``:
    every record enters each step independently; its per-record ELBO gradient, scaled by ``beta``, is
    clipped to L2 norm ``clip`` (the sensitivity of the gradient sum under add/remove-one adjacency);
    Gaussian noise of std sigma*clip is added, with sigma calibrated so that the T-step composition is
    (epsilon, delta)-DP by the ``accountant`` (PLD by default). Every released phi_t and g~_t is a
    post-processing of those noisy sums. Reference: Räisä et al. 2024 (DPVI, sections 2.4 and 13).
    With ``secure=True`` the Poisson sampling bits and the Gaussian noise come from the operating
    system's CSPRNG (see :func:`dpposterior.dpsgd.dpsgd` and the threat model in docs/user-guide.md);
    the ELBO's Monte Carlo draws stay on an OS-seeded JAX key.

    Args:
      model: a NumPyro model called as ``model(*data, **model_kwargs)`` with a plate over the records
        (the leading axis of every data array); all latent sites continuous and global.
      *data: the private data arrays (sharing their leading record axis).
      epsilon, delta: the privacy target.
      num_steps: T; sampling_rate: q.
      clip: C, a number > 0, or ``"auto"`` (the default): chosen privately before the run, about the
        99th percentile of the per-record gradient norms at the starting point
        (:mod:`dpposterior.vi.auto_clip`; a Gaussian mechanism composed with the run, its share of the
        budget in the record's details).
      beta: preconditioning vector of length d = 2n; default beta_mu = 1, beta_rho = ``beta_rho``.
      lr_scale: lambda_c of the learning-rate heuristic (ignored when ``learning_rate`` is given).
      learning_rate: an explicit elementwise learning rate (scalar or length d), overriding the heuristic.
      num_mc: Monte Carlo draws of the ELBO per step (shared by the step's records).
      rng_key: None (privacy noise seeded from the OS; the default) or a key/int for reproduction.
      dataset_size: the N used in the loss. It is treated as PUBLIC (as in the papers); pass a public
        (approximate) size if the true size must stay private. Default: the true number of records.
      init_scale: initial std of q; the initial mean is the prior median (data-independent).
      accountant: "pld" or "rdp" for calibrating sigma.
      model_name: a label stored with the trace.
      secure: draw all privacy randomness from the OS CSPRNG; ``rng_key`` must then be None.
      check_clip: after the run, release a noisy count of the records whose gradient norm at the
        final iterate is at least C (:func:`dpposterior.vi.auto_clip.check_clip_share`, composed with
        the run); warns :class:`~dpposterior.privacy.ClipBindsWarning` when the clip binds for
        more than 5% of them.
      public_covariates: None (the default), or for a model with covariates (a regression: a data
        argument that is not the observed value of a sample site) one entry per data argument: None where
        the model observes the argument, else a PUBLIC sample of that covariate's records (a public survey
        of the same population, or a design drawn from a distribution the data holder can state), the
        samples sharing their rows. The release then carries the model's curvature terms, computed over
        records whose covariates are drawn from the sample and whose observed values are simulated from
        the model (:mod:`dpposterior.vi.public_covariates`); ``noise_aware_posterior`` uses them when
        asked (``priors="model"``), not by default (measured mixed on regressions). Those terms are
        released without noise: the sample must never be the private records or derived from them (a
        sample equal to a private argument is refused).
      run_options: how the run goes, apart from what it releases
        (:class:`~dpposterior.vi.RunOptions`: the progress bar, checkpoints, the engine's sampler);
        None for the defaults.
      **model_kwargs: the model's keyword arguments (public values). A model keyword named like a
        setting of dpvi (e.g. ``beta``) would be read as the setting: bind it with
        ``functools.partial(model, name=value)`` instead (given both ways, it is refused).

    Returns:
      A DPVITrace with the PrivacySpent of the run; its ``details`` record ``("dataset_size", "public")``:
      the trace's ``dataset_size`` (the number of records unless given) is not privatised. Where the model
      can simulate its records (every data argument the observed value of a sample site, or given by
      ``public_covariates``), the trace carries ``model_curvature``: the model's curvature terms at the
      trace mean over records simulated from the model (:mod:`dpposterior.vi.model_curvature`;
      post-processing of the release, the model and the public sample, never of the data), which
      ``noise_aware_posterior`` uses by default where the model simulated its records alone.

    Raises:
      ValueError: among the input checks (each message names the argument): a record whose observed
        value lies outside its distribution's support (a negative value under a LogNormal, 0.5 under a
        Bernoulli; :func:`dpposterior.vi.data_support.check_observed_support`), a likelihood whose support
        depends on the latent values, an index out of bounds on the data (a group id past the number of
        groups, which JAX would clamp: :func:`~dpposterior.vi.data_support.check_indices`), or a budget
        the noise sampler cannot certify (:func:`dpposterior.privacy.noise.check_noise_tail`). The data
        checks, like the NaN check, read the data before any release; their messages are for the data holder.
    """
    settings = {k: v for k, v in locals().items() if k not in ("model", "data", "model_kwargs")}
    if callable(model):
        check_setting_names(model, len(data), dpvi, settings)
    refuse_moved_settings(model_kwargs, "dpvi")
    options = check_run_options(run_options)
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    num_steps = check_positive_int(num_steps, "num_steps")
    sampling_rate = check_sampling_rate(sampling_rate)
    clip_auto = auto_clip.check_clip_arg(clip)
    if not isinstance(check_clip, bool):
        raise TypeError(f"check_clip must be True or False, got {check_clip!r}")
    num_mc = check_positive_int(num_mc, "num_mc")
    lr_scale = check_positive(lr_scale, "lr_scale")
    init_scale = check_float32_positive(check_positive(init_scale, "init_scale"), "init_scale")
    if not callable(model):
        raise TypeError(f"model must be a NumPyro model (a callable), got {type(model).__name__}")
    if not isinstance(model_name, str):
        raise TypeError(f"model_name must be a string, got {type(model_name).__name__}")
    arrays = check_data(data, model_kwargs)
    n_records = int(arrays[0].shape[0])
    if dataset_size is None:
        dataset_size = n_records
    dataset_size = check_positive_int(dataset_size, "dataset_size")
    warn_if_delta_large(delta, dataset_size)  # once, at the user's call (the DP-SGD runs below stay quiet)

    layout = inspect_model(model, arrays, model_kwargs)
    check_observed_support(model, arrays, model_kwargs, fitter="dpvi")
    check_indices(model, arrays, model_kwargs, fitter="dpvi")
    covariates = check_public_covariates(public_covariates, arrays, model, model_kwargs)
    n = layout.num_latent
    d = 2 * n
    if beta is None:
        beta_vec = jnp.concatenate([jnp.ones(n), jnp.full(n, check_positive(beta_rho, "beta_rho"))])
    else:
        beta_vec = _vector("beta", beta, d)
        if not bool(jnp.all(beta_vec > 0)):
            raise ValueError("beta must be > 0 elementwise")

    check_trace_memory(num_steps, 2 * d, "the trace (phi_t and g~_t)")  # before the accountant's search
    # every normal the release draws (the run, the auto clip's queries, the clip check), before any is drawn
    # and calibrated at delta less their tail term, so that the record states at most the delta asked for
    delta = mechanism_delta(epsilon, delta, num_steps * d + auto_clip.NUM_NORMALS + 1, "dpvi")
    # the private looks at the clip (vi.auto_clip) are Gaussian mechanisms composed with the run
    sigma_h = auto_clip.auto_clip_noise_multiplier(epsilon, delta) if clip_auto else None
    sigma_c = auto_clip.clip_check_noise_multiplier(epsilon, delta) if check_clip else None
    extra = auto_clip.combined_noise_multiplier(sigma_h, sigma_c)
    sigma = calibrate_noise_multiplier(epsilon, delta, sampling_rate, num_steps, accountant, extra_gaussian=extra)

    mu0 = prior_median_unconstrained(model, arrays, model_kwargs, layout)
    phi0 = jnp.concatenate([mu0, jnp.full(n, family.inverse_scale(init_scale))]).astype(jnp.float32)
    loss = _cached_loss(model, layout, dataset_size, num_mc, model_kwargs)

    def learning_rate_at(c: float) -> jax.Array:
        if learning_rate is None:
            return heuristic_learning_rate(num_steps, d, sigma, c, beta_vec, lr_scale)
        return _vector("learning_rate", learning_rate, d)

    from ..dpsgd import dpsgd  # local import keeps module import light

    def run_dpsgd(start: jax.Array, c: float, steps: int, key: Any, **more: Any) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LargeDeltaWarning)  # said once above, for the whole release
            return dpsgd(
                loss,
                start,
                arrays,
                noise_multiplier=sigma,
                clip=c,
                sampling_rate=sampling_rate,
                num_steps=steps,
                learning_rate=learning_rate_at(c),
                delta=delta,
                beta=beta_vec,
                rng_key=key,
                loss_needs_key=True,
                accountant=accountant,
                progress=options.progress,
                secure=secure,
                sampling=options.sampling,
                **more,
            )

    choice = pilot = None
    if clip_auto:
        # the pilot: the first steps, at a clip near the private median norm at phi_0, bring the iterate
        # near the fixed point; the clip of the other steps is chosen privately there (vi.auto_clip)
        if options.checkpoint is not None:
            raise ValueError(
                "checkpoint needs a given clip: clip='auto' chooses it privately in a pilot that a resumed run "
                "would have to repeat (and pay for again); pass clip= (e.g. the clip of an earlier release, "
                "trace.clip) to checkpoint a long run"
            )
        assert sigma_h is not None  # clip_auto
        auto_clip.check_resolvable(dataset_size, sigma_h)
        normals, _ = auto_clip.privacy_normals(rng_key, secure, auto_clip.AUTO_CLIP_KEY_INDEX, auto_clip.NUM_NORMALS)
        start = auto_clip.search_median(record_norms(loss, beta_vec, phi0, arrays), dataset_size, sigma_h, normals)
        pilot_steps = auto_clip.pilot_steps(num_steps)
        pilot = run_dpsgd(phi0, start.clip, pilot_steps, auto_clip.pilot_key(rng_key, secure))
        choice = auto_clip.search_clip(
            record_norms(loss, beta_vec, pilot.final_params, arrays), dataset_size, sigma_h, normals, start
        )
        auto_clip.warn_tail(choice, "dpvi")
        clip = choice.clip
    clip = float(clip)
    lr = learning_rate_at(clip)
    if pilot is None:
        run = run_dpsgd(
            phi0, clip, num_steps, rng_key, checkpoint=options.checkpoint, checkpoint_every=options.checkpoint_every
        )
        phi, grads, run_privacy = np.asarray(run.params), np.asarray(run.grads), run.privacy
    else:
        run = run_dpsgd(pilot.final_params, clip, num_steps - pilot.num_steps, rng_key)
        phi = np.concatenate([np.asarray(pilot.params), np.asarray(run.params)])
        grads = np.concatenate([np.asarray(pilot.grads), np.asarray(run.grads)])
        run_privacy = auto_clip.whole_run_record(run.privacy, num_steps, delta, accountant)
    warn_if_near_seam(layout, run.final_params, "dpvi")
    check = None
    if check_clip:
        assert sigma_c is not None  # check_clip
        z, _ = auto_clip.privacy_normals(rng_key, secure, auto_clip.CLIP_CHECK_KEY_INDEX, 1)
        norms = record_norms(loss, beta_vec, run.final_params, arrays)
        check = auto_clip.check_clip_share(norms, clip, dataset_size, sigma_c, float(z[0]))
        del norms
        auto_clip.warn_if_binds(check, clip, "dpvi", clip_auto)
    privacy = auto_clip.composed_privacy(
        run_privacy,
        delta=delta,
        accountant=accountant,
        num_normals=num_steps * d + (auto_clip.NUM_NORMALS if clip_auto else 0) + (1 if check_clip else 0),
        choice=choice,
        check=check,
        check_noise_multiplier=sigma_c,
        pilot_steps=None if pilot is None else pilot.num_steps,
    )
    # the model's own curvature terms at the trace mean, from simulated records (post-processing: public)
    curvature = model_curvature(
        model,
        layout,
        arrays,
        model_kwargs,
        loss,
        phi,
        np.asarray(beta_vec),
        clip,
        dataset_size,
        _simulation_key(rng_key),
        covariates,
    )
    return DPVITrace(
        phi=phi,
        grads=grads,
        final_phi=np.asarray(run.final_params),
        beta=np.asarray(beta_vec),
        learning_rate=np.asarray(lr),
        clip=clip,
        noise_multiplier=sigma,
        sampling_rate=sampling_rate,
        num_steps=num_steps,
        dataset_size=dataset_size,
        num_mc=num_mc,
        layout=layout,
        privacy=_public_size(privacy),
        model_name=model_name or getattr(model, "__name__", ""),
        model_curvature=curvature,
    )


#: the fold of the user's key that seeds the simulation of :func:`model_curvature` (no DP-SGD step reaches it).
SIMULATION_KEY_INDEX = 2**32 - 5


def _simulation_key(rng_key: Any) -> jax.Array:
    """The key of the records simulated for the model's curvature: the user's key folded with
    :data:`SIMULATION_KEY_INDEX`, or an OS seed (post-processing randomness, not privacy noise)."""
    raw, _ = resolve_key(rng_key)
    key = jnp.asarray(raw, jnp.uint32)
    return key if rng_key is None else jax.random.fold_in(key, SIMULATION_KEY_INDEX)


def _public_size(privacy: Any) -> Any:
    """``privacy`` with ``("dataset_size", "public")`` in its details: the trace stores N, read from the
    data without noise (or given), and whatever file or ledger carries the trace says it is not privatised."""
    import dataclasses

    return dataclasses.replace(privacy, details=tuple(privacy.details) + (("dataset_size", "public"),))


_LOSS_CACHE: dict[Any, Callable] = {}


def _cached_loss(
    model: Callable, layout: ParamLayout, dataset_size: int, num_mc: int, model_kwargs: dict[str, Any]
) -> Callable:
    """The same ELBO loss object for the same model and settings, so DP-SGD's compiled program is reused."""
    return cached_model_loss(make_elbo_loss, model, layout, dataset_size, model_kwargs, num_mc)


def cached_model_loss(
    make: Callable,
    model: Callable,
    layout: ParamLayout,
    dataset_size: int,
    model_kwargs: dict[str, Any],
    *settings: Any,
) -> Callable:
    """``make(model, layout, dataset_size, *settings, model_kwargs)``, the same object for the same
    arguments (so the programs compiled for it are reused); uncached for unhashable model kwargs."""
    import json

    try:
        key = (
            make,
            model,
            json.dumps(layout.to_dict(), sort_keys=True),
            dataset_size,
            settings,
            tuple(sorted(model_kwargs.items())),
        )
        hash(key)
    except TypeError:  # unhashable model kwargs (arrays): no caching
        return make(model, layout, dataset_size, *settings, model_kwargs)
    if key not in _LOSS_CACHE:
        if len(_LOSS_CACHE) > 64:
            _LOSS_CACHE.clear()
        _LOSS_CACHE[key] = make(model, layout, dataset_size, *settings, model_kwargs)
    return _LOSS_CACHE[key]


def _vector(name: str, value: Any, d: int) -> jax.Array:
    try:
        raw = np.asarray(value)
    except (ValueError, TypeError):  # ragged and the like
        raw = np.asarray(None)
    if raw.dtype.kind not in "iuf":  # bools, strings, complex and objects are refused, not converted
        raise TypeError(f"{name} must be a real number or a vector of length d={d} of real numbers, got {value!r}")
    check_float32_array(name, raw)
    v = jnp.asarray(raw, dtype=jnp.float32)
    if v.ndim == 0:
        v = jnp.full((d,), v)
    if v.shape != (d,):
        raise ValueError(f"{name} must be a scalar or a vector of length d={d} (2 x latent size), got shape {v.shape}")
    if not bool(jnp.all(jnp.isfinite(v))):
        raise ValueError(f"{name} must be finite")
    return v
