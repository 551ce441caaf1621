"""DPVIm: DPVI with aligned gradients and iterate averaging (a baseline of Räisä et al. 2024;
Jalko, Prediger, Honkela & Kaski, "DPVIm: Differentially private variational inference improved",
TMLR 2023).

The variational family is the library's q(theta) = N(mu, diag(s^2)), s = softplus(rho)
(:mod:`dpposterior.releases.family`), in the model's unconstrained space.

Aligned gradients: each step draws ONE standard-normal eta (shared by every record of the step) and
evaluates the per-record loss f_i(theta) = -log p(x_i | theta) - (log p(theta) + log|det J|) / N at
theta = mu + s * eta. Only the loc gradient g_i = grad f_i(theta) (which is also the gradient with
respect to mu) is privatised: DP-SGD with exact Poisson sampling, per-record clipping to L2 norm C
and Gaussian noise sigma C on the sum, g~_mu = sum_i clip(g_i, C) + sigma C xi. The scale gradient
is rebuilt from it,

    g~_rho = T'(rho) * eta * g~_mu - q T'(rho) / s,            T = softplus, T' = sigmoid,

which is the reparametrisation gradient of the per-record ELBO summed over an expected batch of qN
records (the entropy term E_q[log q] / N contributes -T'(rho) / (s N) per record; the realised batch
size is data-dependent, so the expected size qN is used). It is a post-processing of g~_mu: no extra
privacy cost. Natural-gradient variant: g~_mu * s^2 and g~_rho * (s / T'(rho))^2 / 2, each damped
by 1 / (1 + lr sigma C s / kappa) (kappa = ``NATURAL_DAMPING``, lr that parameter's learning rate).

Why the damping: the preconditioner multiplies the NOISE by s^2 too, so one noise draw of sd sigma C
moves mu by lr s^2 sigma C, i.e. lr sigma C s widths of q, and changes s by a relative amount of about
lr sigma C s / 2 (in the other direction as often as not). With the undamped default step and strong
noise (Beta-Bernoulli at epsilon 0.1; a two-parameter Normal model at epsilon 1 and N = 100) that
product reaches 1, s does a multiplicative random walk, and the run either overflows float32 or the
scale collapses (softplus(rho) about 1e-16: mu stops moving, and the entropy drift of lr q / 2 per
step takes tens of thousands of steps to bring rho back). Damped, one noise sd moves mu by less than
kappa s and s by less than a relative kappa / 2, whatever s is. The factor is positive, so the
stationary points of the update (where the expected gradient vanishes) are those of the undamped
one; where lr sigma C s << kappa (weak noise or a small scale) the step is the natural one. It reads
only public settings and the current iterate: post-processing, no privacy cost.

Update: mu <- mu - lr_mu g~_mu, rho <- rho - lr_rho g~_rho.

Iterate averaging after convergence and the readings of the trace (averaged, noise-aware, last
iterate): :mod:`dpposterior.releases.dpvim_trace`, with :class:`DPVImTrace`.

Privacy: the engine's DP-SGD step (:func:`dpposterior.dpsgd.make_dpsgd_run`) is run once per step on
a per-record loss whose only non-zero gradient is the loc part (rho enters through a stop-gradient),
so the clipped, noised vector is exactly (g_mu, 0); the noise drawn for the rho half is discarded.
Add/remove-one adjacency, Poisson sampling, accounted by :func:`dpposterior.privacy.dpsgd_epsilon`
over ``num_steps`` compositions, with sigma from :func:`calibrate_noise_multiplier`.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import (
    FLOAT32_MAX,
    check_delta,
    check_epsilon,
    check_float32_positive,
    check_positive,
    check_positive_int,
    check_sampling_rate,
    check_trace_memory,
    warn_if_delta_large,
)
from ..privacy import PrivacySpent, calibrate_noise_multiplier, dpsgd_epsilon
from ..privacy.randomness import os_seeded_key
from ..privacy.dpsgd_accounting import Accountant
from ..privacy.noise import float32_at_least, mechanism_delta, with_noise_tail
from ..privacy.secure import check_secure, resolve_noise_source
from ..releases import family
from ..releases.dpvim_trace import DEFAULT_NUM_WINDOWS as DEFAULT_NUM_WINDOWS
from ..releases.dpvim_trace import DEFAULT_SLOPE_THRESHOLD as DEFAULT_SLOPE_THRESHOLD
from ..releases.dpvim_trace import DPVImTrace as DPVImTrace
from ..releases.dpvim_trace import averaged_phi as averaged_phi
from ..releases.dpvim_trace import check_scale as check_scale
from ..releases.dpvim_trace import noise_aware_phi as noise_aware_phi
from ..releases.dpvim_trace import trace_summary as trace_summary
from ..releases.layout import ParamLayout
from . import auto_clip
from .circular import warn_if_near_seam
from .data_support import check_indices, check_observed_support
from .model_inspect import check_data, check_setting_names, inspect_model, prior_median_unconstrained, record_log_joint
from .record_norms import record_norms

MECHANISM = "poisson_subsampled_gaussian"
DEFAULT_INIT_SCALE = 0.1
#: kappa of the natural-gradient damping (module docstring): one noise sd moves mu by < kappa s
NATURAL_DAMPING = 0.05


def make_loc_loss(
    model: Callable, layout: ParamLayout, dataset_size: int, model_kwargs: dict[str, Any] | None = None
) -> Callable:
    """The per-record loss ``loss(phi, record, key)`` whose gradient is (grad_theta f_i(theta), 0) at
    theta = mu + softplus(rho) * eta, eta ~ N(0, I) from ``key`` (one draw, shared by the step's
    records), f_i = -log p(x_i | theta) - (log p(theta) + log|det J|) / N. rho enters through a
    stop-gradient, so per-record clipping acts on the loc gradient alone."""
    model_kwargs = dict(model_kwargs or {})
    n_inv = 1.0 / float(dataset_size)

    def loss(phi: jax.Array, record: tuple[jax.Array, ...], key: jax.Array) -> jax.Array:
        mu, rho = family.split_phi(phi)
        eta = jax.random.normal(key, mu.shape, dtype=mu.dtype)
        theta = mu + family.scale(jax.lax.stop_gradient(rho)) * eta
        values, log_det = layout.constrain_with_log_det(theta)
        log_prior, log_lik = record_log_joint(model, record, model_kwargs, values)
        return -log_lik - (log_prior + log_det) * n_inv

    return loss


def _eta(step_key: jax.Array, n: int) -> jax.Array:
    """The eta the loss drew in the engine's single step with base key ``step_key``."""
    from ..dpsgd import step_keys

    _, k_loss, _ = step_keys(step_key, 0)
    return jax.random.normal(k_loss, (n,), dtype=jnp.float32)


def make_dpvim_run(
    loss: Callable,
    *,
    num_records: int,
    num_latent: int,
    clip: float,
    sampling_rate: float,
    num_steps: int,
    natural_gradient: bool = False,
    capacity: int | None = None,
    secure: bool = False,
) -> Callable:
    """A pure DPVIm run for jit and vmap (many replicates at once).

    ``run(key, phi0, data, noise_multiplier, lr_mu, lr_rho)`` returns ``(mu_trace (T, n), rho_trace
    (T, n), loc_grads (T, n), final_phi (2n,))`` (traces hold the values BEFORE each update). No
    accounting: the caller attaches the PrivacySpent. ``loss`` is :func:`make_loc_loss`'s. With
    ``secure`` the sampling bits and noise come from the OS CSPRNG inside each step (``key`` then
    seeds only the aligned draws eta, which are not part of the mechanism).
    """
    from ..dpsgd import make_dpsgd_run
    from ..dpsgd.sampling import as_key

    n = int(num_latent)
    q = float(sampling_rate)
    one_step = make_dpsgd_run(
        loss,
        num_records=num_records,
        num_params=2 * n,
        clip=clip,
        sampling_rate=sampling_rate,
        num_steps=1,
        capacity=capacity,
        loss_needs_key=True,
        secure=check_secure(secure),
    )

    def run(key, phi0, data, noise_multiplier, lr_mu, lr_rho):
        base = as_key(key)
        lr_mu = jnp.broadcast_to(jnp.asarray(lr_mu, jnp.float32), (n,))
        lr_rho = jnp.broadcast_to(jnp.asarray(lr_rho, jnp.float32), (n,))
        noise_c = jnp.asarray(noise_multiplier, jnp.float32) * jnp.float32(clip)  # the noise's sd, sigma C

        def step(phi, t):
            k_t = jax.random.fold_in(base, t)
            _, gs, _ = one_step(k_t, phi, data, noise_multiplier, 0.0, 1.0)
            g_mu = gs[0, :n]
            mu, rho = family.split_phi(phi)
            s = family.scale(rho)
            tp = jax.nn.sigmoid(rho)
            eta = _eta(k_t, n)
            g_rho = tp * eta * g_mu - q * tp / s
            if natural_gradient:
                d_mu, d_rho = s * s * g_mu, 0.5 * jnp.square(s / tp) * g_rho
                # damping (module docstring): a noise step moves mu by at most about NATURAL_DAMPING s
                d_mu = d_mu / (1.0 + lr_mu * noise_c * s / NATURAL_DAMPING)
                d_rho = d_rho / (1.0 + lr_rho * noise_c * s / NATURAL_DAMPING)
            else:
                d_mu, d_rho = g_mu, g_rho
            new = jnp.concatenate([mu - lr_mu * d_mu, rho - lr_rho * d_rho])
            return new, (mu, rho, g_mu)

        final, (mus, rhos, gmus) = jax.lax.scan(
            step, jnp.asarray(phi0, jnp.float32), jnp.arange(num_steps, dtype=jnp.int32)
        )
        return mus, rhos, gmus, final

    return run


def default_learning_rates(
    num_steps: int,
    num_latent: int,
    noise_multiplier: float,
    clip: float,
    *,
    natural_gradient: bool,
    dataset_size: int,
    sampling_rate: float,
    lr_scale: float = 1.0,
) -> tuple[float, float]:
    """(lr_mu, lr_rho) defaults (heuristics; pass ``learning_rate`` to set them).

    Plain gradients: the paper's heuristic sqrt(2) lambda / (max(sigma, 10) C sqrt(T n)) for mu and
    100 times it for rho (rho's gradient is smaller; NA-DPVI's beta_rho = 100 has the same effect).
    sigma is floored at 10 because the heuristic, made for noise-dominated runs, gives unstable steps
    when the noise is weak (at epsilon = 300 on Beta-Bernoulli the scale collapsed to 5e-5).
    Natural gradients: lr = 20 lambda / (q T) for both, so that a step moves mu by the fraction
    lr q = 20 lambda / T of a full Newton step (converged after about a fifth of the run). The
    natural steps multiply the noise by s^2 too; undamped, with strong noise (lr sigma C s of order
    1) they overflowed or collapsed the scale (Beta-Bernoulli at epsilon = 0.1); the run damps them
    (module docstring), so where the noise dominates they are smaller than this lr.
    """
    if natural_gradient:
        lr = lr_scale * 20.0 / (sampling_rate * num_steps)
        return lr, lr
    lr = math.sqrt(2.0) * lr_scale / (max(noise_multiplier, 10.0) * clip * math.sqrt(num_steps * num_latent))
    return lr, 100.0 * lr


@functools.lru_cache(maxsize=64)
def _cached_run(
    model: Callable,
    layout_json: str,
    dataset_size: int,
    num_records: int,
    clip: float,
    sampling_rate: float,
    num_steps: int,
    natural_gradient: bool,
    kwargs_key: tuple,
    secure: bool = False,
):
    import json

    layout = ParamLayout.from_dict(json.loads(layout_json))
    loss = make_loc_loss(model, layout, dataset_size, dict(kwargs_key))
    run = make_dpvim_run(
        loss,
        num_records=num_records,
        num_latent=layout.num_latent,
        clip=clip,
        sampling_rate=sampling_rate,
        num_steps=num_steps,
        natural_gradient=natural_gradient,
        secure=secure,
    )
    return jax.jit(run)


def dpvim(
    model: Callable,
    *data: Any,
    epsilon: float,
    delta: float,
    num_steps: int = 10_000,
    sampling_rate: float = 0.1,
    clip: float | str = "auto",
    learning_rate: Any = None,
    natural_gradient: bool = False,
    lr_scale: float = 1.0,
    rng_key: Any = None,
    dataset_size: int | None = None,
    init_scale: float = DEFAULT_INIT_SCALE,
    accountant: Accountant = "pld",
    model_name: str = "",
    secure: bool = False,
    check_clip: bool = True,
    **model_kwargs: Any,
) -> DPVImTrace:
    """DPVIm: aligned-gradient DPVI (module docstring) on a NumPyro model.

    Privacy: DP-SGD on the loc gradient only: Poisson sampling at rate ``sampling_rate`` (exact, via
    the engine), per-record loc gradients clipped to L2 norm ``clip`` (the sensitivity of the sum under
    add/remove-one adjacency), Gaussian noise of std sigma*clip with sigma calibrated by
    :func:`~dpposterior.privacy.calibrate_noise_multiplier` so that the ``num_steps``-fold composition
    is (epsilon, delta)-DP (``accountant``, PLD by default). The scale update is a post-processing of
    the noisy loc gradient. N (``dataset_size``) is treated as public. Noise seeded from the OS unless
    ``rng_key`` is given; with ``secure=True`` the sampling bits and noise are read from the OS
    CSPRNG in every step (threat model: docs/user-guide.md).

    Args:
      model: a NumPyro model ``model(*data, **model_kwargs)`` with a plate over the records.
      *data: the private data arrays.
      epsilon, delta: the privacy target.
      num_steps, sampling_rate: T, q.
      clip: C, a number > 0, or ``"auto"`` (the default): chosen privately before the run, about the
        99th percentile of the per-record loc-gradient norms at the starting point
        (:mod:`dpposterior.vi.auto_clip`; a Gaussian mechanism composed with the run).
      learning_rate: None (defaults of :func:`default_learning_rates`), a number (both), or a pair
        (lr_mu, lr_rho).
      natural_gradient: use the natural-gradient variant.
      lr_scale: multiplies the default learning rates.
      rng_key: None (OS seed) or an int / key (reproduction only).
      dataset_size: the public N (default: the number of records).
      init_scale: initial sd of q; the initial mean is the prior median (data-independent).
      accountant: "pld" or "rdp".
      model_name: a label.
      secure: draw all privacy randomness from the OS CSPRNG; ``rng_key`` must then be None.
      check_clip: after the run, release a noisy count of the records whose loc-gradient norm at the
        final iterate is at least C (:func:`dpposterior.vi.auto_clip.check_clip_share`, composed with
        the run); warns :class:`~dpposterior.privacy.ClipBindsWarning` when the clip binds for
        more than 5% of them.
      **model_kwargs: the model's keyword arguments (public values). A model keyword named like a
        setting of dpvim (e.g. ``init_scale``) would be read as the setting: bind it with
        ``functools.partial(model, name=value)`` instead (given both ways, it is refused).

    Returns:
      A :class:`DPVImTrace` with its PrivacySpent (whose ``details`` record ``("dataset_size", "public")``:
      N is not privatised); ``.noise_aware_posterior()`` gives the baseline.

    Raises:
      ValueError: among the input checks: a record whose observed value lies outside its
        distribution's support (:func:`dpposterior.vi.data_support.check_observed_support`; it reads the
        data before any release, as the NaN check does).
    """
    settings = {k: v for k, v in locals().items() if k not in ("model", "data", "model_kwargs")}
    if callable(model):
        check_setting_names(model, len(data), dpvim, settings)
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    num_steps = check_positive_int(num_steps, "num_steps")
    sampling_rate = check_sampling_rate(sampling_rate)
    clip_auto = auto_clip.check_clip_arg(clip)
    if not isinstance(check_clip, bool):
        raise TypeError(f"check_clip must be True or False, got {check_clip!r}")
    lr_scale = check_positive(lr_scale, "lr_scale")
    init_scale = check_float32_positive(check_positive(init_scale, "init_scale"), "init_scale")
    if not isinstance(natural_gradient, bool):
        raise TypeError(f"natural_gradient must be True or False, got {natural_gradient!r}")
    if accountant not in ("pld", "rdp"):
        raise ValueError(f"accountant must be 'pld' or 'rdp', got {accountant!r}")
    if not callable(model):
        raise TypeError(f"model must be a NumPyro model (a callable), got {type(model).__name__}")
    if not isinstance(model_name, str):
        raise TypeError(f"model_name must be a string, got {type(model_name).__name__}")
    arrays = check_data(data, model_kwargs)
    n_records = int(arrays[0].shape[0])
    dataset_size = check_positive_int(n_records if dataset_size is None else dataset_size, "dataset_size")
    warn_if_delta_large(check_delta(delta), n_records)
    layout = inspect_model(model, arrays, model_kwargs)
    check_observed_support(model, arrays, model_kwargs, fitter="dpvim")
    check_indices(model, arrays, model_kwargs, fitter="dpvim")
    n = layout.num_latent
    check_trace_memory(num_steps, 3 * n, "the trace (mu_t, rho_t and the location gradients)")
    # every normal the release draws (the run, the auto clip's queries, the clip check), before any is drawn
    # and calibrated at delta less their tail term, so that the record states at most the delta asked for
    delta = mechanism_delta(epsilon, delta, num_steps * 2 * n + auto_clip.NUM_NORMALS + 1, "dpvim")

    # the private looks at the clip (vi.auto_clip) are Gaussian mechanisms composed with the run
    sigma_h = auto_clip.auto_clip_noise_multiplier(epsilon, delta) if clip_auto else None
    sigma_c = auto_clip.clip_check_noise_multiplier(epsilon, delta) if check_clip else None
    extra = auto_clip.combined_noise_multiplier(sigma_h, sigma_c)
    sigma = calibrate_noise_multiplier(epsilon, delta, sampling_rate, num_steps, accountant, extra_gaussian=extra)
    mu0 = prior_median_unconstrained(model, arrays, model_kwargs, layout)
    phi0 = jnp.concatenate([mu0, jnp.full(n, family.inverse_scale(init_scale))]).astype(jnp.float32)
    loc_loss = make_loc_loss(model, layout, dataset_size, model_kwargs)
    choice = None
    if clip_auto:
        assert sigma_h is not None  # clip_auto
        auto_clip.check_resolvable(dataset_size, sigma_h)
        # DPVIm (a baseline) has no pilot: both searches look at phi_0
        normals, _ = auto_clip.privacy_normals(rng_key, secure, auto_clip.AUTO_CLIP_KEY_INDEX, auto_clip.NUM_NORMALS)
        norms0 = record_norms(loc_loss, np.ones(2 * n), phi0, arrays)
        start = auto_clip.search_median(norms0, dataset_size, sigma_h, normals)
        choice = auto_clip.search_clip(norms0, dataset_size, sigma_h, normals, start)
        auto_clip.warn_tail(choice, "dpvim")
        clip = choice.clip
    clip = float(clip)
    if learning_rate is None:
        lr_mu, lr_rho = default_learning_rates(
            num_steps,
            n,
            sigma,
            clip,
            natural_gradient=natural_gradient,
            dataset_size=dataset_size,
            sampling_rate=sampling_rate,
            lr_scale=lr_scale,
        )
    else:
        try:
            lr = np.asarray(learning_rate)
        except (ValueError, TypeError):  # ragged and the like: reported below
            lr = np.asarray(None)
        if lr.dtype.kind not in "iuf":  # bools and strings are refused, not converted
            raise TypeError(
                f"learning_rate must be a number >= 0 or a pair (lr_mu, lr_rho) of numbers, got {learning_rate!r}"
            )
        lr = lr.astype(np.float64).reshape(-1)
        if lr.shape not in ((1,), (2,)) or not np.all(np.isfinite(lr) & (lr >= 0) & (lr <= FLOAT32_MAX)):
            raise ValueError(
                f"learning_rate must be a number in [0, {FLOAT32_MAX:.4g}] (float32) or a pair "
                f"(lr_mu, lr_rho) of such numbers, got {learning_rate!r}"
            )
        lr_mu, lr_rho = float(lr[0]), float(lr[-1])

    raw, seeded_by = resolve_noise_source(rng_key, secure)
    secure = seeded_by == "secure"
    if secure:  # seeds only the aligned draws eta; sampling bits and noise come from the OS CSPRNG
        raw = jax.random.key_data(os_seeded_key())
    import json

    try:
        kwargs_key = tuple(sorted(model_kwargs.items()))
        hash(kwargs_key)
        run = _cached_run(
            model,
            json.dumps(layout.to_dict(), sort_keys=True),
            dataset_size,
            n_records,
            clip,
            sampling_rate,
            num_steps,
            natural_gradient,
            kwargs_key,
            secure,
        )
    except TypeError:  # unhashable model kwargs
        loss = make_loc_loss(model, layout, dataset_size, model_kwargs)
        run = jax.jit(
            make_dpvim_run(
                loss,
                num_records=n_records,
                num_latent=n,
                clip=clip,
                sampling_rate=sampling_rate,
                num_steps=num_steps,
                natural_gradient=natural_gradient,
                secure=secure,
            )
        )
    mus, rhos, gmus, final = run(raw, phi0, arrays, float32_at_least(sigma), jnp.float32(lr_mu), jnp.float32(lr_rho))
    if not all(bool(jnp.all(jnp.isfinite(a))) for a in (mus, rhos, gmus, final)):
        # post-processing of the release: refusing it reveals nothing more than returning it
        raise ValueError(
            "the DPVIm run overflowed float32: its parameters became NaN or inf; lower learning_rate "
            "or lr_scale (or clip, init_scale) so that the iterates stay within float32"
        )
    eps = dpsgd_epsilon(sigma, delta, sampling_rate, num_steps, accountant)
    privacy = PrivacySpent(
        epsilon=eps,
        delta=delta,
        neighbouring="add_remove",
        accountant=accountant,
        mechanism=MECHANISM,
        noise_multiplier=sigma,
        sampling_rate=sampling_rate,
        num_steps=num_steps,
        seeded_by=seeded_by,
        details=(
            ("clip", clip),
            ("sampling", "poisson"),
            ("clipped", "loc gradient only"),
            ("algorithm", "dpvim_natural" if natural_gradient else "dpvim"),
            ("dataset_size", "public"),
        ),
    )  # N, stored with the trace: not privatised
    privacy = with_noise_tail(privacy, num_steps * 2 * n)  # one normal per parameter (2n) and step
    warn_if_near_seam(layout, final, "dpvim")
    check = None
    if check_clip:
        assert sigma_c is not None  # check_clip
        z, _ = auto_clip.privacy_normals(rng_key, secure, auto_clip.CLIP_CHECK_KEY_INDEX, 1)
        check = auto_clip.check_clip_share(
            record_norms(loc_loss, np.ones(2 * n), final, arrays), clip, dataset_size, sigma_c, float(z[0])
        )
        auto_clip.warn_if_binds(check, clip, "dpvim", clip_auto)
    privacy = auto_clip.composed_privacy(
        privacy,
        delta=delta,
        accountant=accountant,
        num_normals=num_steps * 2 * n + (auto_clip.NUM_NORMALS if clip_auto else 0) + (1 if check_clip else 0),
        choice=choice,
        check=check,
        check_noise_multiplier=sigma_c,
    )
    return DPVImTrace(
        mu=np.asarray(mus),
        rho=np.asarray(rhos),
        loc_grads=np.asarray(gmus),
        final_phi=np.asarray(final),
        layout=layout,
        privacy=privacy,
        clip=clip,
        noise_multiplier=sigma,
        sampling_rate=sampling_rate,
        num_steps=num_steps,
        dataset_size=dataset_size,
        learning_rate=np.array([lr_mu] * n + [lr_rho] * n, np.float32),
        natural_gradient=natural_gradient,
        model_name=model_name or getattr(model, "__name__", ""),
    )
