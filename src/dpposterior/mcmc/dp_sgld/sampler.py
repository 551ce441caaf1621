"""The DP-SGLD sampler as a BlackJAX-style kernel: ``kernel(data, model, cfg)`` -> ``init`` / ``step``.

One step t, from theta_t with step size eta_t (Ermis & Cemgil, "Differentially private dropout",
2017; Welling & Teh, "Bayesian learning via stochastic gradient Langevin dynamics", 2011):

    B_t      Poisson sample: every record independently with probability q
    g~_t     = sum_{i in B_t} clip(grad log p(x_i | theta_t), C) + 2 C sigma xi_t,  xi_t ~ N(0, I)
    theta'   = theta_t + (eta_t / 2) (grad log p(theta_t) + g~_t / q) + sqrt(v_t) zeta_t

Privacy: replace-one adjacency; clipping bounds the L2 sensitivity of the gradient sum by 2C and the
noise std is 2 C sigma, so each step is one use of a subsampled Gaussian mechanism with noise
multiplier sigma. The Langevin noise zeta_t is data-independent and not counted. No accounting
happens here: :func:`~dpposterior.mcmc.dp_sgld.run` accounts a whole chain.

Randomness: each step splits its key four ways, ``k_samp, k_lik, k_noise, k_lang =
jax.random.split(key, 4)`` (Poisson sample, the model's own dropout noise, privacy noise, Langevin noise).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..._checks import check_float32_array, check_positive_int
from ...dpsgd.core import EngineConfig, check_data_shapes, noisy_gradient
from .settings import DPSGLDConfig, _check_config
from .models import DPSGLDModel, _check_model, _check_model_functions

Array = Any

__all__ = ["DPSGLDInfo", "DPSGLDKernel", "DPSGLDState", "init", "kernel", "make_run"]


class DPSGLDState(NamedTuple):
    """The chain's state: the position theta (d,) float32 and the step counter t (int32)."""

    position: Array
    step: Array


class DPSGLDInfo(NamedTuple):
    """What one step did (every field is a function of the privatised release; none is private data).

    Attributes:
      step_size: eta_t.
      noisy_gradient_sum: g~_t (d,), the privatised sum of clipped log-likelihood gradients.
      dp_noise_variance: (eta_t C sigma / q)^2, the privacy noise's variance per coordinate of theta.
      langevin_variance: v_t, the variance of the extra Langevin noise per coordinate.
      dropout_alpha: (d,) (dp_noise_variance + langevin_variance) / theta_t^2, the Gaussian dropout
        variance that the injected noise amounts to (inf where theta_t = 0).
    """

    step_size: Array
    noisy_gradient_sum: Array
    dp_noise_variance: Array
    langevin_variance: Array
    dropout_alpha: Array


def init(position: Any) -> DPSGLDState:
    """The state at ``position`` (d,) (data-independent: it is not accounted), with t = 0.

    Raises:
      TypeError: a position that does not hold real numbers (strings, bools, complex).
      ValueError: a position that is not 1-D, not finite or beyond the float32 range.
    """
    if isinstance(position, jax.Array):  # also a traced position (make_run): its values are not known here
        if jnp.dtype(position.dtype).kind not in "iuf":
            raise TypeError(f"position must hold real numbers (not strings or bools), got dtype {position.dtype}")
        pos = position.astype(jnp.float32)
    else:
        raw = np.asarray(position)
        if raw.dtype.kind not in "iuf":
            raise TypeError(f"position must hold real numbers (not strings or bools), got dtype {raw.dtype}")
        check_float32_array("position", raw)
        if not np.all(np.isfinite(raw)):
            raise ValueError("position must be finite: it contains NaN or inf")
        pos = jnp.asarray(raw, jnp.float32)
    if pos.ndim != 1:
        raise ValueError(f"position must be a 1-D parameter vector (d,), got shape {pos.shape}")
    return DPSGLDState(pos, jnp.int32(0))


class DPSGLDKernel(NamedTuple):
    """A DP-SGLD sampler closed over its data, model and settings (the shape of BlackJAX's
    ``SamplingAlgorithm`` and of :class:`~dpposterior.mcmc.Kernel`).

    Attributes:
      init: ``init(position) -> DPSGLDState``: the state at a data-independent position (d,), t = 0.
      step: ``step(key, state) -> (DPSGLDState, DPSGLDInfo)``: one step, pure; jit, scan or vmap it.
    """

    init: Callable[[Any], DPSGLDState]
    step: Callable[[Any, DPSGLDState], tuple[DPSGLDState, DPSGLDInfo]]


def _engine_config(model: DPSGLDModel, cfg: DPSGLDConfig) -> EngineConfig:
    # The DP-SGD engine's step computes sum_i clip(grad f(theta, x_i), C) + s C xi over an exact
    # Poisson sample; here f is the log-likelihood and s = 2 sigma (noise std 2 C sigma).
    return EngineConfig(
        loss=model.log_likelihood,
        loss_needs_key=model.needs_key,
        num_records=cfg.num_records,
        num_params=model.num_params,
        sampling_rate=cfg.sampling_rate,
        capacity=cfg.capacity,
        sampling="packed",
    )


def _check_state(state: Any, model: DPSGLDModel) -> None:
    """Refuses a state that is not a :class:`DPSGLDState` at a position of shape (``model.num_params``,)
    (static: the check holds under jit)."""
    if not isinstance(state, DPSGLDState):
        raise TypeError(f"state must be a DPSGLDState (dp_sgld.init(position)), got {type(state).__name__}")
    if jnp.shape(state.position) != (model.num_params,):
        raise ValueError(
            f"state.position must have shape ({model.num_params},) for this model (model.num_params), "
            f"got {jnp.shape(state.position)}"
        )


def kernel(data: Any, model: DPSGLDModel, cfg: DPSGLDConfig) -> DPSGLDKernel:
    """The DP-SGLD sampler over ``data``: ``kernel.init(position)`` and ``kernel.step(key, state)``.

    Privacy: each step includes every record independently with probability ``cfg.sampling_rate``
    (Poisson sampling), clips each record's log-likelihood gradient to L2 norm ``cfg.clip`` and adds
    Gaussian noise N(0, 4 C^2 sigma^2 I) to their sum: replace-one adjacency, sensitivity 2C (C
    under add/remove-one). One step is one use of that mechanism; account T steps with
    :func:`dpposterior.privacy.dpd_epsilon` (or use :func:`~dpposterior.mcmc.dp_sgld.run`, which
    does). Reference: Ermis & Cemgil, "Differentially private dropout" (2017).

    Args:
      data: the records, a tuple of arrays with leading axis ``cfg.num_records`` (e.g. ``(X, y)``);
        traced arrays are fine (the checks read shapes only).
      model: the :class:`~dpposterior.mcmc.dp_sgld.DPSGLDModel`.
      cfg: the :class:`~dpposterior.mcmc.dp_sgld.DPSGLDConfig` (``noise_multiplier`` may be a traced scalar).

    Returns:
      A :class:`DPSGLDKernel`. ``step`` splits its key into sampling, model-dropout, privacy-noise
      and Langevin keys and returns ``(new_state, info)``.

    Raises:
      ValueError / TypeError: a ``cfg`` that is not a :class:`DPSGLDConfig` with settings in the ranges
        :func:`~dpposterior.mcmc.dp_sgld.config` allows (a hand-built one is re-checked; a concrete
        ``noise_multiplier`` must be finite and >= 0), data without ``cfg.num_records`` records, a
        model as in :func:`~dpposterior.mcmc.dp_sgld.run`; from ``step``, a ``state`` that is not a
        :class:`DPSGLDState` whose position has shape (``model.num_params``,). All are static checks:
        they hold under jit and scan.
    """
    model = _check_model(model)
    cfg = _check_config(cfg)
    check_data_shapes(data, cfg.num_records)
    _check_model_functions(model, data)
    engine = _engine_config(model, cfg)
    d = model.num_params

    def init_fn(position: Any) -> DPSGLDState:
        state = init(position)
        _check_state(state, model)
        return state

    def step_fn(key: Any, state: DPSGLDState) -> tuple[DPSGLDState, DPSGLDInfo]:
        _check_state(state, model)
        k_samp, k_lik, k_noise, k_lang = jax.random.split(key, 4)
        theta = state.position
        eta = cfg.step_size(state.step)
        sigma = jnp.asarray(cfg.noise_multiplier, jnp.float32)
        q = jnp.float32(cfg.sampling_rate)
        # the privatised sum of clipped per-record log-likelihood gradients (noise std 2 C sigma)
        g_sum = noisy_gradient(
            engine,
            (k_samp, k_lik, k_noise),
            theta,
            data,
            2.0 * sigma,
            jnp.float32(cfg.clip),
            jnp.ones((d,), jnp.float32),
        )
        # the sum divided by the expected batch fraction q, never by the realised (data-dependent) count
        drift = jax.grad(model.log_prior)(theta) + g_sum / q
        v_dp = jnp.square(eta * jnp.float32(cfg.clip) * sigma / q)
        # top_up: the privacy noise doubles as Langevin noise; add: SGLD's full noise on top of it
        v_lang = eta if cfg.langevin == "add" else jnp.maximum(eta - v_dp, 0.0)
        zeta = jax.random.normal(k_lang, (d,), jnp.float32)
        new = theta + 0.5 * eta * drift + jnp.sqrt(v_lang) * zeta
        alpha = (v_dp + v_lang) / jnp.square(theta)
        info = DPSGLDInfo(
            step_size=eta,
            noisy_gradient_sum=g_sum,
            dp_noise_variance=v_dp,
            langevin_variance=v_lang,
            dropout_alpha=alpha,
        )
        return DPSGLDState(new, state.step + 1), info

    return DPSGLDKernel(init_fn, step_fn)


def make_run(model: DPSGLDModel, cfg: DPSGLDConfig, num_steps: int) -> Callable[..., tuple[Array, DPSGLDInfo]]:
    """The pure core of :func:`~dpposterior.mcmc.dp_sgld.run`: ``run_fn(key, position0, data, noise_multiplier)
    -> (samples, info)``.

    T = ``num_steps`` steps of :func:`kernel` from ``position0``, one key per step
    (``jax.random.split(key, T)``); ``samples`` (T, d) are the positions after every step.
    ``noise_multiplier`` is traced (one compilation serves every sigma) and overrides
    ``cfg.noise_multiplier``. No accounting: the release is T uses of the subsampled Gaussian
    mechanism (replace-one adjacency, sensitivity 2C; Ermis & Cemgil, "Differentially private
    dropout", 2017), whose privacy is :func:`dpposterior.privacy.dpd_epsilon` of (sigma, q, T).
    jit/vmap it.

    Args:
      model: the :class:`~dpposterior.mcmc.dp_sgld.DPSGLDModel`.
      cfg: the :class:`~dpposterior.mcmc.dp_sgld.DPSGLDConfig`.
      num_steps: T >= 1.

    Returns:
      ``run_fn``.
    """
    t = check_positive_int(num_steps, "num_steps")

    def run_fn(key, position0, data, noise_multiplier):
        sampler = kernel(data, model, cfg._replace(noise_multiplier=noise_multiplier))

        def body(state, k):
            new, info = sampler.step(k, state)
            return new, (new.position, info)

        _, (samples, info) = jax.lax.scan(body, sampler.init(position0), jax.random.split(key, t))
        return samples, info

    return run_fn
