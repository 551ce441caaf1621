"""DP-SGLD / DP dropout: stochastic gradient Langevin dynamics whose noise is the privacy mechanism.

Reference: Ermis & Cemgil, "Differentially private dropout" (2017); SGLD as in Welling & Teh (2011). One step
t, from theta_t with step size eta_t:

    B_t      Poisson sample: every record independently with probability q
    g~_t     = sum_{i in B_t} clip(grad log p(x_i | theta_t), C) + 2 C sigma xi_t,  xi_t ~ N(0, I)
    theta'   = theta_t + (eta_t / 2) (grad log p(theta_t) + g~_t / q) + sqrt(v_t) zeta_t

with clip(v, C) = v min(1, C / ||v||). The sum is divided by the EXPECTED batch size fraction q,
never by the realised batch size (a data-dependent count). The privacy noise enters the parameters
with variance v_dp = (eta_t C sigma / q)^2 per coordinate. The Langevin noise v_t is

- ``langevin="top_up"`` (default, the paper's idea): v_t = max(eta_t - v_dp, 0), so the privacy
  noise doubles as SGLD's injected noise and the total injected variance is max(eta_t, v_dp);
- ``langevin="add"``: v_t = eta_t on top of the privacy noise.

With sigma = 0 both are SGLD (clipped per-example gradients, Poisson minibatches) exactly. When
v_dp > eta_t the injected noise exceeds SGLD's, so the chain explores a flatter (tempered, by about
v_dp / eta_t) version of the posterior: the price of privacy at that step size, which a smaller
eta_t lowers (v_dp falls as eta_t^2, SGLD's noise as eta_t). Clipping also changes the target
whenever a record's gradient norm exceeds C: the chain no longer samples the posterior. For a
one-dimensional parameter the clipped gradient is that of a Huber-type log-likelihood (quadratic
within C of the record, linear beyond), so the chain samples that robust posterior, which is shifted
and wider (a Gaussian mean, N = 100, prior N(0, 0.5^2), C = 0.5: mean moved by 0.44 posterior sd,
variance 2.0 times the posterior's; ``tests/mcmc/test_dp_sgld.py``); in more dimensions the clipped
field need not be a gradient at all. Choose C above the per-record gradient norms near the posterior
mode (public knowledge of the model and the data's range) when the posterior itself is wanted. A
record whose gradient is not finite contributes zero (as in the DP-SGD engine, whose step this
reuses).

Dropout reading (Ermis & Cemgil 2017): additive noise N(0, alpha diag(theta^2)) on the weights is
Gaussian dropout with rate alpha; matching it to the noise actually injected gives the per-weight
dropout variance alpha_t = (v_dp + v_t) / theta_t^2, reported in :class:`DPSGLDInfo`. alpha is not a
free parameter: the privacy level (sigma) and the step size fix it.

Privacy: the released chain theta_1..theta_T is a post-processing of g~_1..g~_T (the Langevin noise
is data-independent and is not counted). Replace-one adjacency: clipping bounds the L2 sensitivity of
the gradient sum by 2C, and the noise std is 2 C sigma, so sigma is the noise multiplier (as the
paper states it). Poisson sampling with rate q; accounted over T steps by
:func:`dpposterior.privacy.dpd_epsilon` with the accountant of the user's choice: ``"ac"`` (DPD-AC,
advanced composition), ``"zcdp"`` (DPD-zCDP), ``"pld"`` (tight; default) or, under add/remove-one
adjacency, ``"rdp"``. The paper's experiments used fixed-size batches; this sampler uses Poisson
sampling, which is what the accountants assume.

Randomness: each step splits its key four ways, ``k_samp, k_lik, k_noise, k_lang =
jax.random.split(key, 4)`` (Poisson sample, the model's own dropout noise, privacy noise, Langevin
noise). :func:`run` seeds from the operating system by default; ``secure=True`` gives every step
keys of :func:`dpposterior.privacy.secure.os_key`, so every draw reads the OS CSPRNG.

Public: :func:`init`, :func:`step` (pure, jit from outside), :func:`run` (scan + accounting),
:func:`make_run` (the pure core for audits), :func:`config`, :func:`noise_multiplier_for`
(sigma for a total (epsilon, delta) under the chosen accountant), :func:`epsilons_for` (what each
accountant certifies for a sigma), the models :func:`logistic_regression` and :func:`mlp`, the
step-size schedules :func:`polynomial_step_size` and :func:`constant_step_size`, and the posterior
predictive :func:`posterior_predictive` / :func:`predictive_scores` (averages over the chain's
samples, Ermis & Cemgil 2017, first paragraph).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Callable, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import (
    FLOAT32_MAX,
    check_delta,
    check_float32_array,
    check_float32_positive,
    check_positive,
    check_positive_int,
    check_real,
    check_sampling_rate,
    check_trace_memory,
)
from ..dpsgd.core import EngineConfig, check_data_shapes, noisy_gradient
from ..dpsgd.engine import _check_data
from ..dpsgd.sampling import MIN_CAPACITY, default_capacity
from ..privacy import PrivacySpent, not_private
from ..privacy.noise import float32_at_least, with_noise_tail
from ..privacy.dp_dropout import DPD_ACCOUNTANTS, calibrate_dpd_noise_multiplier, dpd_epsilon
from ..privacy.secure import os_key, resolve_noise_source
from ..privacy.spent import NEIGHBOURING_RELATIONS, Neighbouring

Array = Any

__all__ = [
    "DPSGLDConfig",
    "DPSGLDInfo",
    "DPSGLDModel",
    "DPSGLDResult",
    "DPSGLDState",
    "LANGEVIN_MODES",
    "StepSize",
    "config",
    "constant_step_size",
    "epsilons_for",
    "init",
    "logistic_regression",
    "make_run",
    "mlp",
    "noise_multiplier_for",
    "polynomial_step_size",
    "posterior_predictive",
    "predictive_scores",
    "run",
    "step",
]

LANGEVIN_MODES = ("top_up", "add")
#: mlp's dropout_alpha must lie below this: above it the float32 noise 1 + sqrt(alpha) xi loses its mean 1
MAX_DROPOUT_ALPHA = 2.0**48
#: the posterior predictive computes the logits of at most 256 samples x this many inputs at a time
PREDICT_ROWS = 65536
MECHANISM = "dp_sgld"


# ------------------------------------------------------------------------------------------------
# models


class DPSGLDModel(NamedTuple):
    """A Bayesian binary classifier given as JAX functions of a flat parameter vector theta (d,).

    Attributes:
      log_likelihood: ``log_likelihood(theta, record)`` -> scalar log p(y | x, theta) for one record
        ``(x, y)``, or ``log_likelihood(theta, record, key)`` when ``needs_key`` (the key, one per
        step shared by the step's records, drives the model's own dropout noise).
      log_prior: ``log_prior(theta)`` -> scalar.
      logit: ``logit(theta, x)`` -> (n,) logits of P(y = 1 | x) for a batch x of n inputs, no dropout: x (n, p)
        for the built-in models; for a custom model the inputs stacked on a leading axis, as its records
        hold them (e.g. (n,) for a scalar feature, (n, 28, 28) for images).
      init: ``init(key)`` -> (d,) a data-independent starting point.
      num_params: d.
      needs_key: whether ``log_likelihood`` takes a key.
      name: a short description.
      num_features: p, for models whose records are ``(x (p,), y in {0, 1})`` (the built-in
        :func:`logistic_regression` and :func:`mlp`): :func:`run` and the predictive functions then
        check the data's shapes and labels. None (the default, for a custom model): records unchecked.

    theta ranges over all of R^d: SGLD moves it by gradients and Gaussian noise with no regard to any
    constraint, and never evaluates the densities themselves. A constrained parameter (a rate, a
    scale, a probability) must be given through an unconstrained one (e.g. theta = log rate, with the
    log-Jacobian theta added to ``log_prior``). :func:`run` refuses a start or a chain at which
    ``log_prior`` is not finite (outside the prior's support); a ``log_likelihood`` that is undefined
    where ``log_prior`` is finite (a normal prior on a rate used as ``log(rate)``) cannot be detected
    without reading the data, and its gradient there (``x / rate`` for ``x log(rate)``) is often
    finite, so such a chain runs on silently.
    """

    log_likelihood: Callable[..., Array]
    log_prior: Callable[[Array], Array]
    logit: Callable[[Array, Array], Array]
    init: Callable[[Any], Array]
    num_params: int
    needs_key: bool
    name: str
    num_features: int | None = None


def _gaussian_log_prior(scale: float) -> Callable[[Array], Array]:
    inv_var = 1.0 / (scale * scale) if scale * scale > 0 else math.inf  # Python floats: no overflow error
    # the log prior runs in float32: a precision that overflows (NaN chain) or underflows (a flat prior) there
    # is an error naming prior_scale
    check_float32_positive(inv_var, f"the prior precision 1 / prior_scale^2 (prior_scale={scale!r})")

    def log_prior(theta):
        return -0.5 * inv_var * jnp.sum(jnp.square(theta))

    return log_prior


def _bernoulli_logit_loglik(z, y):
    # log p(y | z) = y z - log(1 + e^z), stable for large |z|
    return y * z - jax.nn.softplus(z)


def logistic_regression(num_features: int, prior_scale: float = 1.0) -> DPSGLDModel:
    """Bayesian logistic regression: y ~ Bernoulli(sigmoid(x . theta)), theta ~ N(0, prior_scale^2 I).

    Records are ``(x, y)`` with x (num_features,) (include a column of ones for a bias) and y in {0, 1}.
    Starts at theta = 0.
    """
    p = check_positive_int(num_features, "num_features")
    s = check_positive(prior_scale, "prior_scale")

    def log_likelihood(theta, record):
        x, y = record
        return _bernoulli_logit_loglik(jnp.dot(x, theta), y)

    def logit(theta, x):
        return x @ theta

    def init(key):
        return jnp.zeros((p,), jnp.float32)

    return DPSGLDModel(
        log_likelihood=log_likelihood,
        log_prior=_gaussian_log_prior(s),
        logit=logit,
        init=init,
        num_params=p,
        needs_key=False,
        name=f"logistic regression (d={p}, prior N(0, {s:g}^2))",
        num_features=p,
    )


def mlp(num_features: int, hidden: int = 16, prior_scale: float = 1.0, dropout_alpha: float = 0.0) -> DPSGLDModel:
    """A one-hidden-layer tanh network for binary classification, with optional Gaussian dropout.

    theta = (W1 (p, h), b1 (h,), w2 (h,), b2) flattened in that order; logit = w2 . (u * tanh(x W1 + b1))
    + b2 with u = 1 at prediction and, in training when ``dropout_alpha > 0``, u ~ N(1, alpha I)
    (Gaussian dropout of the hidden units, Srivastava et al. 2014; one draw per step, shared by the
    step's records, so each record's clipped gradient is still a function of that record alone).
    Prior N(0, prior_scale^2 I) on every weight. Starts at small random weights (scale 1/sqrt(fan-in))
    drawn from the given key (data-independent).

    Args:
      num_features: p.
      hidden: h >= 1 hidden units.
      prior_scale: the prior standard deviation, > 0.
      dropout_alpha: alpha in [0, 2**48), the variance of the multiplicative dropout noise (0: none);
        Bernoulli dropout of rate p matches alpha = p / (1 - p).
    """
    p = check_positive_int(num_features, "num_features")
    h = check_positive_int(hidden, "hidden")
    s = check_positive(prior_scale, "prior_scale")
    alpha = check_positive(dropout_alpha, "dropout_alpha", allow_zero=True)
    if alpha >= MAX_DROPOUT_ALPHA:
        raise ValueError(
            f"dropout_alpha must be below 2**48 = {MAX_DROPOUT_ALPHA:.4g} (a dropout rate alpha / (1 + alpha) below "
            f"1 - 3.6e-15), got {dropout_alpha!r}: the float32 noise u = 1 + sqrt(alpha) xi loses its mean 1 above it, "
            "and from about 1e70 the logits overflow, every record's gradient is non-finite and contributes zero, and "
            "the chain samples the prior"
        )
    d = p * h + h + h + 1

    def unpack(theta):
        w1 = theta[: p * h].reshape(p, h)
        b1 = theta[p * h : p * h + h]
        w2 = theta[p * h + h : p * h + 2 * h]
        return w1, b1, w2, theta[-1]

    def forward(theta, x, u):
        w1, b1, w2, b2 = unpack(theta)
        return (jnp.tanh(x @ w1 + b1) * u) @ w2 + b2

    def logit(theta, x):
        return forward(theta, x, 1.0)

    log_likelihood: Callable[..., Any]  # (theta, record, key) with dropout, (theta, record) without
    if alpha > 0:

        def log_likelihood(theta, record, key):
            x, y = record
            u = 1.0 + math.sqrt(alpha) * jax.random.normal(key, (h,), jnp.float32)
            return _bernoulli_logit_loglik(forward(theta, x, u), y)
    else:

        def log_likelihood(theta, record):
            x, y = record
            return _bernoulli_logit_loglik(forward(theta, x, 1.0), y)

    @jax.jit
    def init(key):
        k1, k2 = jax.random.split(key)
        w1 = jax.random.normal(k1, (p * h,), jnp.float32) / math.sqrt(p)
        w2 = jax.random.normal(k2, (h,), jnp.float32) / math.sqrt(h)
        return jnp.concatenate([w1, jnp.zeros((h,), jnp.float32), w2, jnp.zeros((1,), jnp.float32)])

    return DPSGLDModel(
        log_likelihood=log_likelihood,
        log_prior=_gaussian_log_prior(s),
        logit=logit,
        init=init,
        num_params=d,
        needs_key=alpha > 0,
        name=f"MLP {p}-{h}-1 tanh (d={d}, prior N(0, {s:g}^2), dropout alpha {alpha:g})",
        num_features=p,
    )


# ------------------------------------------------------------------------------------------------
# step sizes


class StepSize(NamedTuple):
    """SGLD's polynomial step-size schedule eta_t = a (b + t)^(-gamma), t = 0, 1, ...

    gamma in (0.5, 1] satisfies Welling & Teh's conditions (sum eta_t = inf, sum eta_t^2 < inf);
    gamma = 0 is a constant step size a b^0 = a.
    """

    a: float
    b: float
    gamma: float

    def __call__(self, t: Any) -> Array:
        t = jnp.asarray(t, jnp.float32)
        if self.gamma == 0.0:
            return jnp.full(jnp.shape(t), self.a, jnp.float32)
        return jnp.float32(self.a) * (jnp.float32(self.b) + t) ** jnp.float32(-self.gamma)


def polynomial_step_size(a: float, b: float = 1.0, gamma: float = 0.55) -> StepSize:
    """eta_t = a (b + t)^(-gamma) with a > 0, b >= 1 and gamma in [0, 1] (Welling & Teh 2011).

    Raises:
      ValueError: a <= 0, b < 1 or gamma outside [0, 1].
    """
    a = check_float32_positive(check_positive(a, "a"), "a")
    b = check_real("b", b)
    g = check_real("gamma", gamma)
    if not (math.isfinite(b) and b >= 1.0):
        raise ValueError(f"b must be a finite number >= 1 (eta_0 = a b^-gamma), got {b!r}")
    if b > FLOAT32_MAX:
        raise ValueError(f"b must be <= {FLOAT32_MAX:.4g} (the step size is computed in float32), got {b!r}")
    if not (0.0 <= g <= 1.0):
        raise ValueError(f"gamma must lie in [0, 1] (0: constant; (0.5, 1]: Welling & Teh's decay), got {gamma!r}")
    return StepSize(a, b, g)


def constant_step_size(eta: float) -> StepSize:
    """A constant step size eta > 0."""
    return StepSize(check_float32_positive(check_positive(eta, "step_size"), "step_size"), 1.0, 0.0)


def _check_step_size(step_size: Any) -> StepSize:
    if isinstance(step_size, StepSize):
        return polynomial_step_size(*step_size)  # re-checked: a StepSize may be built directly
    if isinstance(step_size, bool):
        raise TypeError(f"step_size must be a number > 0 or a StepSize, got {step_size!r}")
    try:
        return constant_step_size(step_size)
    except TypeError:
        raise TypeError(
            "step_size must be a number > 0 or a StepSize (polynomial_step_size / "
            f"constant_step_size), got {type(step_size).__name__}"
        ) from None


# ------------------------------------------------------------------------------------------------
# the kernel


class DPSGLDConfig(NamedTuple):
    """The settings of a DP-SGLD chain (build it with :func:`config`, which checks them).

    Attributes:
      num_records: N, the number of records (public).
      sampling_rate: q in (0, 1], the Poisson sampling rate.
      clip: C > 0, the L2 bound on each per-example log-likelihood gradient.
      noise_multiplier: sigma >= 0; the noise std on the gradient sum is 2 C sigma (0: not private).
      step_size: the :class:`StepSize` schedule.
      langevin: ``"top_up"`` or ``"add"`` (module docstring).
      capacity: records per packed Poisson buffer chunk (exactness does not depend on it).
    """

    num_records: int
    sampling_rate: float
    clip: float
    noise_multiplier: Any
    step_size: StepSize
    langevin: Literal["top_up", "add"] = "top_up"
    capacity: int = 16


def config(
    *,
    num_records: int,
    sampling_rate: float,
    clip: float,
    noise_multiplier: float,
    step_size: Any,
    langevin: Literal["top_up", "add"] = "top_up",
    capacity: int | None = None,
) -> DPSGLDConfig:
    """A checked :class:`DPSGLDConfig`.

    Args:
      num_records, sampling_rate, clip, noise_multiplier, step_size, langevin: as in :class:`DPSGLDConfig`.
      capacity: records per packed Poisson buffer chunk, an int from 1 to max(N, 16); default about
        qN + 5 sd (a larger sample continues in further chunks).

    Raises:
      ValueError / TypeError: an argument outside its range (the message says which and the range).
    """
    n = check_positive_int(num_records, "num_records")
    # the step runs in float32: values that become 0 or inf there are errors, not silent NaN chains
    q = check_float32_positive(check_sampling_rate(sampling_rate), "sampling_rate")
    c = check_float32_positive(check_positive(clip, "clip"), "clip")
    sigma = check_positive(noise_multiplier, "noise_multiplier", allow_zero=True)
    if sigma > 0:
        check_float32_positive(sigma, "noise_multiplier")
    if langevin not in LANGEVIN_MODES:
        raise ValueError(f"langevin must be one of {LANGEVIN_MODES}, got {langevin!r}")
    cap = default_capacity(n, q) if capacity is None else check_positive_int(capacity, "capacity")
    if cap > max(n, MIN_CAPACITY):  # DPSGLDConfig's own default (16) may exceed a small N: harmless
        raise ValueError(
            f"capacity must be at most max(N, {MIN_CAPACITY}) = {max(n, MIN_CAPACITY)} (N={n} records; a "
            "buffer of records per chunk, whose per-example gradients every step allocates), got "
            f"{capacity!r}"
        )
    return DPSGLDConfig(n, q, c, sigma, _check_step_size(step_size), langevin, cap)


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


def _check_step_args(state: Any, model: DPSGLDModel, cfg: Any) -> None:
    """The static parts of :func:`step`'s arguments (shapes and settings are known even under jit): a
    configuration built by hand is re-checked as :func:`config` checks it, a concrete noise multiplier must be
    finite and >= 0 (a traced one, as in :func:`make_run`, cannot be checked), the position must be (d,)."""
    if not isinstance(cfg, DPSGLDConfig):
        raise TypeError(f"cfg must be a DPSGLDConfig (build it with dp_sgld.config), got {type(cfg).__name__}")
    if not isinstance(cfg.step_size, StepSize):
        raise TypeError(
            "cfg.step_size must be a StepSize (dp_sgld.config makes one from a number), got "
            f"{type(cfg.step_size).__name__}"
        )
    config(
        num_records=cfg.num_records,
        sampling_rate=cfg.sampling_rate,
        clip=cfg.clip,
        noise_multiplier=0.0,
        step_size=cfg.step_size,
        langevin=cfg.langevin,
        capacity=cfg.capacity,
    )
    sigma = cfg.noise_multiplier
    if not isinstance(sigma, jax.core.Tracer):
        s = np.asarray(sigma)
        if s.shape != () or s.dtype.kind not in "iuf" or not (np.isfinite(s) and s >= 0):
            raise ValueError(f"cfg.noise_multiplier must be a finite number >= 0, got {sigma!r}")
    if not isinstance(state, DPSGLDState):
        raise TypeError(f"state must be a DPSGLDState (dp_sgld.init(position)), got {type(state).__name__}")
    if jnp.shape(state.position) != (model.num_params,):
        raise ValueError(
            f"state.position must have shape ({model.num_params},) for this model (model.num_params), "
            f"got {jnp.shape(state.position)}"
        )


def step(
    key: Any, state: DPSGLDState, data: Any, model: DPSGLDModel, cfg: DPSGLDConfig
) -> tuple[DPSGLDState, DPSGLDInfo]:
    """One DP-SGLD step (pure; jit, scan or vmap it from outside).

    Privacy: Poisson sampling with rate ``cfg.sampling_rate``; per-example log-likelihood gradients
    clipped to L2 norm ``cfg.clip``; Gaussian noise N(0, 4 C^2 sigma^2 I) added to their sum
    (replace-one adjacency, sensitivity 2C; Ermis & Cemgil 2017). One step is one use of that
    mechanism; account T steps with :func:`dpposterior.privacy.dpd_epsilon`.

    Args:
      key: this step's key (split into sampling, model-dropout, privacy-noise and Langevin keys).
      state: the current :class:`DPSGLDState`.
      data: the records, a tuple of arrays with leading axis ``cfg.num_records`` (e.g. ``(X, y)``).
      model: the :class:`DPSGLDModel`.
      cfg: the :class:`DPSGLDConfig` (``noise_multiplier`` may be a traced scalar).

    Returns:
      ``(new_state, info)``.

    Raises:
      ValueError / TypeError: a ``cfg`` that is not a :class:`DPSGLDConfig` with settings in the ranges
        :func:`config` allows (a hand-built one is re-checked; a concrete ``noise_multiplier`` must be finite
        and >= 0), a ``state`` that is not a :class:`DPSGLDState` whose position has shape
        (``model.num_params``,), data without ``cfg.num_records`` records, a model as in :func:`run`. All are
        static checks: they hold under jit and scan.
    """
    _check_step_args(state, _check_model(model), cfg)
    check_data_shapes(data, cfg.num_records)
    _check_model_functions(model, data)
    k_samp, k_lik, k_noise, k_lang = jax.random.split(key, 4)
    theta = state.position
    d = model.num_params
    eta = cfg.step_size(state.step)
    sigma = jnp.asarray(cfg.noise_multiplier, jnp.float32)
    q = jnp.float32(cfg.sampling_rate)
    g_sum = noisy_gradient(
        _engine_config(model, cfg),
        (k_samp, k_lik, k_noise),
        theta,
        data,
        2.0 * sigma,
        jnp.float32(cfg.clip),
        jnp.ones((d,), jnp.float32),
    )
    drift = jax.grad(model.log_prior)(theta) + g_sum / q
    v_dp = jnp.square(eta * jnp.float32(cfg.clip) * sigma / q)
    v_lang = eta if cfg.langevin == "add" else jnp.maximum(eta - v_dp, 0.0)
    zeta = jax.random.normal(k_lang, (d,), jnp.float32)
    new = theta + 0.5 * eta * drift + jnp.sqrt(v_lang) * zeta
    alpha = (v_dp + v_lang) / jnp.square(theta)
    info = DPSGLDInfo(
        step_size=eta, noisy_gradient_sum=g_sum, dp_noise_variance=v_dp, langevin_variance=v_lang, dropout_alpha=alpha
    )
    return DPSGLDState(new, state.step + 1), info


def make_run(model: DPSGLDModel, cfg: DPSGLDConfig, num_steps: int) -> Callable[..., tuple[Array, DPSGLDInfo]]:
    """The pure core of :func:`run`: ``run_fn(key, position0, data, noise_multiplier) -> (samples, info)``.

    T = ``num_steps`` steps from ``init(position0)``, one key per step (``jax.random.split(key, T)``);
    ``samples`` (T, d) are the positions after every step. ``noise_multiplier`` is traced (one
    compilation serves every sigma) and overrides ``cfg.noise_multiplier``. No accounting: the
    privacy of the output is :func:`dpposterior.privacy.dpd_epsilon` of (sigma, q, T). jit/vmap it.
    """
    t = check_positive_int(num_steps, "num_steps")

    def run_fn(key, position0, data, noise_multiplier):
        c = cfg._replace(noise_multiplier=noise_multiplier)

        def body(state, k):
            new, info = step(k, state, data, model, c)
            return new, (new.position, info)

        _, (samples, info) = jax.lax.scan(body, init(position0), jax.random.split(key, t))
        return samples, info

    return run_fn


@functools.lru_cache(maxsize=32)
def _log_prior_of_samples(log_prior: Callable[[Array], Array]):
    return jax.jit(jax.vmap(log_prior))


@functools.lru_cache(maxsize=32)
def _jitted_run(model: DPSGLDModel, cfg: DPSGLDConfig, num_steps: int):
    return jax.jit(make_run(model, cfg, num_steps))


# ------------------------------------------------------------------------------------------------
# accounting


def noise_multiplier_for(
    epsilon: float,
    delta: float,
    sampling_rate: float,
    num_steps: int,
    accountant: Literal["ac", "zcdp", "pld", "rdp"] = "pld",
    *,
    neighbouring: Literal["replace_one", "add_remove"] = "replace_one",
) -> float:
    """The smallest sigma (noise std / 2C) whose T-step DP-SGLD run is (epsilon, delta)-DP.

    Under the accountant of the user's choice: ``"ac"`` (DPD-AC), ``"zcdp"`` (DPD-zCDP),
    ``"pld"`` (tight, default), ``"rdp"`` (add/remove-one only). Conservative (never less noise than
    the target needs): :func:`dpposterior.privacy.calibrate_dpd_noise_multiplier`.
    """
    return calibrate_dpd_noise_multiplier(
        epsilon, delta, sampling_rate, num_steps, accountant, neighbouring=neighbouring
    )


def epsilons_for(
    noise_multiplier: float,
    delta: float,
    sampling_rate: float,
    num_steps: int,
    *,
    neighbouring: Literal["replace_one", "add_remove"] = "replace_one",
) -> dict[str, float | None]:
    """The epsilon each accountant certifies for the same sigma: {"ac", "zcdp", "pld"[, "rdp"]}.

    None where an accountant gives no bound for these (valid) arguments: DPD-AC when the
    per-iteration epsilon reaches 1, PLD below its noise or delta resolution (e.g. delta < 1e-15),
    zCDP when its epsilon overflows. RDP under replace-one adjacency is left out.

    Raises:
      ValueError / TypeError: an argument outside its range (checked before any accountant runs).
    """
    return _epsilons_by_accountant(noise_multiplier, delta, sampling_rate, num_steps, neighbouring, {})


def _epsilons_by_accountant(
    noise_multiplier: float,
    delta: float,
    sampling_rate: float,
    num_steps: int,
    neighbouring: Neighbouring,
    known: dict[str, float],
) -> dict[str, float | None]:
    """:func:`epsilons_for`, taking the accountants in ``known`` as already computed."""
    check_positive(noise_multiplier, "noise_multiplier")
    check_delta(delta)
    check_sampling_rate(sampling_rate)
    check_positive_int(num_steps, "num_steps")
    if neighbouring not in NEIGHBOURING_RELATIONS:
        raise ValueError(f"neighbouring must be one of {NEIGHBOURING_RELATIONS}, got {neighbouring!r}")
    out: dict[str, float | None] = {}
    for acc in DPD_ACCOUNTANTS:
        if acc == "rdp" and neighbouring != "add_remove":
            continue
        if acc in known:
            out[acc] = known[acc]
            continue
        try:
            out[acc] = dpd_epsilon(
                noise_multiplier, delta, sampling_rate, num_steps, acc, neighbouring=neighbouring
            ).epsilon
        except ValueError:  # the arguments are valid (checked above): this accountant gives no bound
            out[acc] = None
    return out


# ------------------------------------------------------------------------------------------------
# a whole run


@dataclasses.dataclass(frozen=True)
class DPSGLDResult:
    """The release of a DP-SGLD run, with its privacy.

    Attributes:
      samples: (T, d) float32, theta after every step (the release).
      info: :class:`DPSGLDInfo` of numpy arrays with a leading (T,) axis.
      privacy: the :class:`~dpposterior.privacy.PrivacySpent` of releasing every sample.
      noise_multiplier: sigma (noise std / 2C).
      config: the :class:`DPSGLDConfig` used.
      model_name: the model's description.
    """

    samples: np.ndarray
    info: DPSGLDInfo
    privacy: PrivacySpent
    noise_multiplier: float
    config: DPSGLDConfig
    model_name: str


def _check_model(model: Any) -> DPSGLDModel:
    """A :class:`DPSGLDModel` whose fields have the documented types (a model may be built directly)."""
    if not isinstance(model, DPSGLDModel):
        raise TypeError(
            f"model must be a DPSGLDModel (logistic_regression, mlp or your own), got {type(model).__name__}"
        )
    for name in ("log_likelihood", "log_prior", "logit", "init"):
        if not callable(getattr(model, name)):
            raise TypeError(f"model.{name} must be callable, got {getattr(model, name)!r}")
    check_positive_int(model.num_params, "model.num_params")
    if not isinstance(model.needs_key, (bool, np.bool_)):
        raise TypeError(
            f"model.needs_key must be True or False (whether log_likelihood takes a key), got {model.needs_key!r}"
        )
    if model.num_features is not None:
        check_positive_int(model.num_features, "model.num_features")
    return model


def _check_model_functions(model: DPSGLDModel, data: Any) -> None:
    """Refuses a ``log_prior`` or ``log_likelihood`` that fails on, or does not return a real scalar for, a
    position (d,) and one record of ``data``. Only shapes are traced (``jax.eval_shape``): a vector
    would otherwise be a JAX error from inside the compiled chain (``grad`` of a non-scalar) or a
    message about the DP-SGD engine's "loss"."""
    theta = jax.ShapeDtypeStruct((model.num_params,), jnp.float32)
    record = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(jnp.shape(a)[1:], jnp.result_type(a)), data)
    calls = (
        ("log_prior(theta)", model.log_prior, (theta,)),
        (
            "log_likelihood(theta, record, key)" if model.needs_key else "log_likelihood(theta, record)",
            model.log_likelihood,
            (theta, record) + ((jax.random.key(0),) if model.needs_key else ()),
        ),
    )
    for what, fn, args in calls:
        try:
            out = jax.eval_shape(fn, *args)
        except Exception as e:  # noqa: BLE001 - the user's function failed on arguments of these shapes
            shapes = jax.tree_util.tree_map(lambda a: tuple(a.shape), args[:2])
            raise ValueError(
                f"model.{what} failed for theta and one record of shapes {shapes}: {type(e).__name__}: {e}"
            ) from e
        shape = getattr(out, "shape", None)
        dtype: Any = getattr(out, "dtype", None)  # a shape-() output has one (jax.eval_shape's ShapeDtypeStruct)
        if shape != () or not jnp.issubdtype(dtype, jnp.floating):
            raise ValueError(
                f"model.{what} must return a real scalar (one value for the position"
                f"{'' if fn is model.log_prior else ' and the record'}; e.g. sum a per-coordinate log "
                f"density), got shape {shape} and dtype {dtype}"
            )


def _check_classifier_data(model: DPSGLDModel, data: tuple) -> None:
    """For a model with ``num_features`` (records ``(x (p,), y in {0, 1})``): data must be ``(X (N, p), y (N,))``."""
    p = model.num_features
    if p is None:
        return
    if len(data) != 2:
        raise ValueError(f"data for {model.name} must be a pair (X, y), got {len(data)} arrays")
    x, y = (np.asarray(a) for a in data)
    if x.ndim != 2 or x.shape[1] != p:
        raise ValueError(f"X must have shape (num_records, {p}) for {model.name}, got {x.shape}")
    if y.ndim != 1:
        raise ValueError(f"y must have shape (num_records,) (one label per record), got {y.shape}")
    if not np.all((y == 0) | (y == 1)):
        raise ValueError("y must hold labels 0 or 1 (e.g. not -1/+1: the likelihood is y z - log(1 + e^z))")


def run(
    model: DPSGLDModel,
    data: Any,
    *,
    num_steps: int,
    sampling_rate: float,
    clip: float,
    step_size: Any,
    delta: float,
    noise_multiplier: float | None = None,
    epsilon: float | None = None,
    accountant: Literal["ac", "zcdp", "pld", "rdp"] = "pld",
    neighbouring: Literal["replace_one", "add_remove"] = "replace_one",
    langevin: Literal["top_up", "add"] = "top_up",
    initial_position: Any = None,
    rng_key: Any = None,
    secure: bool = False,
) -> DPSGLDResult:
    """Runs a DP-SGLD / DP dropout chain for ``num_steps`` steps and accounts the release.

    Privacy: each step includes every record independently with probability ``sampling_rate``
    (Poisson sampling), clips each record's log-likelihood gradient to L2 norm ``clip`` and adds
    Gaussian noise N(0, 4 C^2 sigma^2 I) to their sum; sensitivity 2C under replace-one adjacency
    (the paper's relation; C under add/remove-one). All T samples are released and accounted by
    :func:`dpposterior.privacy.dpd_epsilon` under ``accountant``. Reference: Ermis & Cemgil,
    "Differentially private dropout" (2017); SGLD: Welling & Teh 2011.

    Give exactly one of ``noise_multiplier`` (sigma) and ``epsilon`` (the total target: sigma is then
    the smallest that reaches it under ``accountant``, :func:`noise_multiplier_for`).

    Args:
      model: a :class:`DPSGLDModel`.
      data: a tuple of arrays with a shared leading record axis N >= 1 (e.g. ``(X, y)``), finite.
      num_steps: T >= 1.
      sampling_rate: q in (0, 1].
      clip: C > 0. Where a record's log-likelihood gradient is longer than C the chain targets a
        clipped (shifted, wider) distribution instead of the posterior (module docstring).
      step_size: a number > 0 (constant) or a :class:`StepSize`.
      delta: the total delta in (0, 1).
      noise_multiplier: sigma >= 0 (0: SGLD, not private; the record says so).
      epsilon: the total epsilon, > 0.
      accountant: ``"pld"`` (default), ``"ac"``, ``"zcdp"`` or ``"rdp"`` (add/remove only).
      neighbouring: ``"replace_one"`` (default) or ``"add_remove"``.
      langevin: ``"top_up"`` (default) or ``"add"`` (module docstring).
      initial_position: (d,), data-independent; default ``model.init(jax.random.key(0))``.
      rng_key: None (seed from the operating system, recorded ``seeded_by="os"``) or an int / JAX key
        (reproduction only: whoever knows it can remove the noise).
      secure: every draw from the OS CSPRNG (:func:`dpposterior.privacy.secure.os_key`); ``rng_key``
        must then be None.

    Returns:
      A :class:`DPSGLDResult`; ``privacy.details`` also lists the epsilon of every accountant for the
      same sigma (``epsilon_by_accountant``, :func:`epsilons_for`; None where one gives no bound: only
      ``accountant`` decides whether the run is allowed).

    Raises:
      ValueError / TypeError: invalid arguments (the message says what is allowed), both or neither
        of ``noise_multiplier`` and ``epsilon``, a key with ``secure=True``; a model whose fields are
        not of the documented types, or whose ``log_prior`` / ``log_likelihood`` fails on, or does
        not return a real scalar for, a position (d,) and one record (checked before the run); for
        a model with ``num_features`` (the built-in ones), data other than ``(X (N, p), y (N,))``
        with labels 0/1; a ``model.log_prior`` that is not finite at ``initial_position`` (before the
        run) or at a sample (after it: the chain left the prior's support, see :class:`DPSGLDModel`);
        non-finite samples. After the run nothing is released, and the message gives the (epsilon, delta)
        the run spent all the same.
    """
    model = _check_model(model)
    if not isinstance(data, (tuple, list)):
        raise TypeError(
            f"data must be a tuple of arrays sharing the record axis, e.g. (X, y), got {type(data).__name__}"
        )
    data_j, n = _check_data(tuple(data))
    _check_classifier_data(model, tuple(data))
    _check_model_functions(model, data_j)
    t = check_positive_int(num_steps, "num_steps")
    # before the accountant; per step the run keeps the position, the noisy gradient sum and the dropout alpha
    # (d each) and three scalars of DPSGLDInfo
    check_trace_memory(
        t, 3 * model.num_params + 3, "the chain and its info (position, noisy gradient sum and dropout alpha per step)"
    )
    q = check_sampling_rate(sampling_rate)
    d = check_delta(delta)
    if accountant not in DPD_ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {DPD_ACCOUNTANTS}, got {accountant!r}")
    if neighbouring not in NEIGHBOURING_RELATIONS:
        raise ValueError(f"neighbouring must be one of {NEIGHBOURING_RELATIONS}, got {neighbouring!r}")
    if (noise_multiplier is None) == (epsilon is None):
        raise ValueError(
            "give exactly one of noise_multiplier (sigma) and epsilon (the total target), got "
            f"noise_multiplier={noise_multiplier!r}, epsilon={epsilon!r}"
        )
    sigma = (
        noise_multiplier_for(epsilon, d, q, t, accountant, neighbouring=neighbouring)
        if epsilon is not None
        else check_positive(noise_multiplier, "noise_multiplier", allow_zero=True)
    )
    if sigma > 0:
        check_float32_positive(sigma, "noise_multiplier")
    cfg = config(
        num_records=n, sampling_rate=q, clip=clip, noise_multiplier=0.0, step_size=step_size, langevin=langevin
    )
    pos0 = np.asarray(model.init(jax.random.key(0)) if initial_position is None else initial_position)
    if pos0.dtype.kind not in "iuf":
        raise TypeError(f"initial_position must hold real numbers (not strings or bools), got dtype {pos0.dtype}")
    check_float32_array("initial_position", pos0)
    pos0 = pos0.astype(np.float32)
    if pos0.shape != (model.num_params,):
        raise ValueError(f"initial_position must have shape ({model.num_params},) for this model, got {pos0.shape}")
    if not np.all(np.isfinite(pos0)):
        raise ValueError("initial_position must be finite")
    if not np.isfinite(float(model.log_prior(jnp.asarray(pos0)))):
        raise ValueError(
            "model.log_prior is not finite at initial_position (outside the prior's support): start "
            "inside it; DP-SGLD moves theta over all of R^d, so give constrained parameters through "
            "an unconstrained transform (e.g. theta = log rate, adding the log-Jacobian to log_prior)"
        )
    raw_key, seeded_by = resolve_noise_source(rng_key, secure)
    key = os_key() if seeded_by == "secure" else jax.random.wrap_key_data(raw_key)

    if sigma == 0.0:
        privacy = not_private(MECHANISM, reason="noise_multiplier=0: SGLD without privacy noise")
    else:
        rec = dpd_epsilon(sigma, d, q, t, accountant, neighbouring=neighbouring, seeded_by=seeded_by)
        extra = (
            ("clip", cfg.clip),
            ("step_size", tuple(cfg.step_size)),
            ("langevin", cfg.langevin),
            (
                "epsilon_by_accountant",
                tuple(_epsilons_by_accountant(sigma, d, q, t, neighbouring, {accountant: rec.epsilon}).items()),
            ),
            ("reference", "Ermis & Cemgil 2017"),
        )
        privacy = with_noise_tail(
            dataclasses.replace(rec, mechanism=MECHANISM, details=rec.details + extra), t * int(np.size(pos0))
        )

    samples, info = _jitted_run(model, cfg, t)(key, jnp.asarray(pos0), data_j, float32_at_least(sigma))
    samples = np.asarray(samples)
    info = DPSGLDInfo(*(np.asarray(x) for x in info))
    # the run's privacy is spent even when nothing is released: the refusals below say how much
    spent = (
        "no privacy was spent (noise_multiplier=0)"
        if not privacy.is_private
        else f"the run still spent epsilon={privacy.epsilon:.6g}, delta={privacy.delta:g} ({privacy.accountant}, "
        f"{privacy.neighbouring})"
    )
    if not np.all(np.isfinite(samples)):
        raise ValueError(
            "the chain left the float32 range (non-finite samples): lower step_size, or raise the "
            f"prior precision; nothing was released; {spent}"
        )
    # post-processing of the (privatised) chain: the log prior never reads the data
    outside = ~np.isfinite(np.asarray(_log_prior_of_samples(model.log_prior)(jnp.asarray(samples))))
    if np.any(outside):
        raise ValueError(
            f"model.log_prior is not finite at {int(outside.sum())} of the {t} samples (first after step "
            f"{int(np.argmax(outside)) + 1}): the chain left the prior's support (or diverged until the log "
            "prior overflowed: then lower step_size). DP-SGLD moves theta over all of "
            "R^d with no regard to constraints: give constrained parameters through an unconstrained transform "
            f"(e.g. theta = log rate, adding the log-Jacobian to log_prior); nothing was released; {spent}"
        )
    return DPSGLDResult(
        samples=samples,
        info=info,
        privacy=privacy,
        noise_multiplier=float(sigma),
        config=cfg._replace(noise_multiplier=float(sigma)),
        model_name=model.name,
    )


# ------------------------------------------------------------------------------------------------
# posterior predictive (post-processing of the released samples)


def _kept_samples(samples: Any, burn_in: int, thin: int, model: DPSGLDModel) -> np.ndarray:
    s = np.asarray(samples)
    if s.dtype.kind not in "iuf":
        raise TypeError(f"samples must hold real numbers, got dtype {s.dtype}")
    if s.ndim != 2 or s.shape[1] != model.num_params:
        raise ValueError(f"samples must have shape (T, {model.num_params}) for this model, got {s.shape}")
    check_float32_array("samples", s)
    s = s.astype(np.float32)
    if not np.all(np.isfinite(s)):
        raise ValueError("samples must be finite: they contain NaN or inf")
    b = check_positive_int(burn_in, "burn_in", minimum=0)
    th = check_positive_int(thin, "thin")
    if b >= s.shape[0]:
        raise ValueError(f"burn_in must be smaller than the number of samples {s.shape[0]}, got {b}")
    return s[b::th]


@functools.lru_cache(maxsize=32)
def _logits_fn(model: DPSGLDModel):
    return jax.jit(jax.vmap(model.logit, in_axes=(0, None)))


def _log_predictive(
    model: DPSGLDModel, samples: np.ndarray, x: Any, chunk: int = 256, rows: int = PREDICT_ROWS
) -> tuple[np.ndarray, np.ndarray]:
    """(log p(y=1|x), log p(y=0|x)) averaged over ``samples`` (float64, stable), ``chunk`` samples by ``rows``
    inputs at a time (the logits of all samples and all inputs at once took 6.3 GB for 1e6 inputs)."""
    x = np.asarray(x)
    if x.dtype.kind not in "iuf":
        raise TypeError(f"x must hold real numbers, got dtype {x.dtype}")
    if model.num_features is not None and (x.ndim != 2 or x.shape[1] != model.num_features):
        raise ValueError(f"x must have shape (n, {model.num_features}), got {x.shape}")
    if x.ndim == 0:  # a custom model: any input shape, stacked on a leading axis of n inputs
        raise ValueError("x must hold the n inputs on a leading axis (e.g. (n, p)), got a 0-d array")
    check_float32_array("x", x, private=True)
    if not np.all(np.isfinite(x)):
        raise ValueError("x must be finite: it contains NaN or inf")
    x = jnp.asarray(x, jnp.float32)
    try:
        out = jax.eval_shape(
            model.logit,
            jax.ShapeDtypeStruct((model.num_params,), jnp.float32),
            jax.ShapeDtypeStruct(x.shape, jnp.float32),
        )
    except Exception as e:  # noqa: BLE001 - the user's function failed on arguments of these shapes
        raise ValueError(
            f"model.logit(theta, x) failed for theta of shape ({model.num_params},) and x of shape "
            f"{x.shape}: {type(e).__name__}: {e}"
        ) from e
    if getattr(out, "shape", None) != (x.shape[0],) or not jnp.issubdtype(out.dtype, jnp.floating):
        raise ValueError(
            f"model.logit(theta, x) must return the ({x.shape[0]},) real logits of the rows of x, got "
            f"shape {getattr(out, 'shape', None)} and dtype {getattr(out, 'dtype', None)}"
        )
    logits_of = _logits_fn(model)
    log_s = math.log(samples.shape[0])
    out1, out0 = [], []
    # blocks of rows: each row's sum over the samples is the same whatever the block (the logits are per row)
    for r in range(0, max(x.shape[0], 1), rows):
        xb = x[r : r + rows]
        lse1 = lse0 = None
        for i in range(0, samples.shape[0], chunk):
            z = np.asarray(logits_of(jnp.asarray(samples[i : i + chunk]), xb), np.float64)  # (s, rows)
            l1 = np.logaddexp.reduce(-np.logaddexp(0.0, -z), axis=0)  # log sigmoid(z)
            l0 = np.logaddexp.reduce(-np.logaddexp(0.0, z), axis=0)  # log sigmoid(-z)
            lse1 = l1 if lse1 is None else np.logaddexp(lse1, l1)
            lse0 = l0 if lse0 is None else np.logaddexp(lse0, l0)
        if lse1 is None or lse0 is None:  # samples holds at least one draw (log_s above)
            raise ValueError("samples must hold at least one draw")
        out1.append(lse1 - log_s)
        out0.append(lse0 - log_s)
    return np.concatenate(out1), np.concatenate(out0)


def posterior_predictive(model: DPSGLDModel, samples: Any, x: Any, *, burn_in: int = 0, thin: int = 1) -> np.ndarray:
    """P(y = 1 | x, D) ~ (1/S) sum_s sigmoid(logit(theta_s, x)) over the kept samples.

    The Monte Carlo posterior predictive of Ermis & Cemgil 2017 (first paragraph). Post-processing
    of the released samples: no privacy cost. Keeps ``samples[burn_in::thin]``. Computed for at most 256
    samples by 65,536 inputs at a time (about 130 MB per array, whatever the size of x), so
    ``model.logit`` must give each row's logit from that row alone.

    Args:
      model: the model the chain ran.
      samples: (T, d) from :class:`DPSGLDResult`.
      x: the n inputs, (n, num_features) for the built-in models; for a custom model any array whose
        leading axis is the n inputs (each shaped as in the records ``run`` sampled from).
      burn_in: samples dropped from the start, 0 <= burn_in < T.
      thin: keep every ``thin``-th sample after burn-in, >= 1.

    Returns:
      (n,) float64 probabilities.

    Raises:
      ValueError / TypeError: samples not of shape (T, num_params) or not finite, x not a finite
        array of n inputs ((n, num_features) for the built-in models, whose width is checked; at least
        1-D for a custom model), a bad burn_in/thin, a ``model.logit`` that fails on x or does not
        return (n,) real logits.
    """
    model = _check_model(model)
    kept = _kept_samples(samples, burn_in, thin, model)
    lp1, _ = _log_predictive(model, kept, x)
    return np.exp(lp1)


def predictive_scores(
    model: DPSGLDModel, samples: Any, x: Any, y: Any, *, burn_in: int = 0, thin: int = 1
) -> dict[str, float]:
    """Accuracy and mean log predictive likelihood of the posterior predictive on labelled data.

    Privacy: the samples are a release, but these scores also read ``x`` and ``y`` and carry no guarantee
    for them: on the training records they are NOT private (a diagnostic for the data holder, not to be
    published); on held-out data they are as private as that data. x and y as in
    :func:`posterior_predictive` (y (n,) in {0, 1}).

    Returns:
      ``{"accuracy": share of argmax predictions equal to y, "log_likelihood": mean_i log p(y_i | x_i, D),
      "num_samples": S kept}``.
    """
    model = _check_model(model)
    kept = _kept_samples(samples, burn_in, thin, model)
    if np.ndim(x) >= 1 and np.shape(x)[0] == 0:
        raise ValueError("x must hold at least one row to score (the scores of no data are undefined)")
    lp1, lp0 = _log_predictive(model, kept, x)
    y = np.asarray(y)
    if y.shape != lp1.shape:
        raise ValueError(f"y must have shape {lp1.shape} (one label per row of x), got {y.shape}")
    if not np.all((y == 0) | (y == 1)):
        raise ValueError("y must hold labels 0 or 1")
    ll = np.where(y == 1, lp1, lp0)
    acc = np.mean((lp1 > lp0) == (y == 1))
    return {"accuracy": float(acc), "log_likelihood": float(np.mean(ll)), "num_samples": int(kept.shape[0])}
