"""Entropy-SGLD and Entropy-SGD over a JAX classifier, as a BlackJAX-style kernel with pure init/step.

Reference: Dziugaite & Roy, "Data-dependent PAC-Bayes priors via differential privacy" (2018); Algorithm 2 of
Dziugaite, "Revisiting generalization for deep learning: PAC-Bayes, flat minima, and generative models" (PhD
thesis, 2019). The weights are one flat float vector ``w`` (``jax.flatten_util.ravel_pytree`` of a
network's parameters); the loss is the bounded cross-entropy, whose range has length ``loss_max``.

One outer step:

    inner loop, l = 1..L (L = 20), on minibatches of B = 128 records:
        w' <- w' + eta' (-grad R_batch(w') - gamma (w' - w)) + sqrt(2 eta' / tau) N(0, I)
        mu <- (1 - a) mu + a w'                                    (a = 0.75)
    outer:
        w  <- w - (eta / 2) tau gamma (w - mu) + sqrt(eta / beta) N(0, I)     (Entropy-SGLD)
        w  <- w - (eta / 2) tau gamma (w - mu)                                 (Entropy-SGD)

tau gamma (w - mu) estimates -grad_w F_{gamma,tau}(w; S), the local entropy's gradient, so the
outer chain targets exp(beta F_{gamma,tau}(w; S)): a sample from it is the exponential mechanism
with epsilon = 2 beta L_max tau / m (``entropy_sgld_privacy``). The prior of the certificate is then
N(w, (tau gamma)^{-1} I), a post-processing of the released w.

Privacy caveat: the guarantee is the one of ONE EXACT sample from the local-entropy Gibbs
distribution. SGLD with the biased inner estimate of the gradient, run for finitely many steps, only
approximates it; the text ignores the bias and interprets the bounds as optimistic. Minibatches are
drawn uniformly with replacement; the privacy argument does not use them (no amplification by
subsampling is claimed). Replace-one neighbouring relation (the sensitivity of F compares data sets
that differ in one record).

Entropy-SGD (``beta=None``) adds no outer noise and is not private.

The sampler has BlackJAX's shape: :func:`kernel` closes over the data, the hyperparameters and the
loss and returns pure ``init(position)`` and ``step(key, state)``; :func:`run` scans ``step``:

    sampler = entropy_sgld.kernel((X, y), params, classifier_loss(mlp_apply, unravel))
    state = sampler.init(w0)
    state, info = jax.jit(sampler.step)(key, state)
"""

from __future__ import annotations

import functools
import math
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import FLOAT32_MAX
from .._checks import check_epsilon
from .._checks import check_float32_array
from .._checks import check_positive
from .._checks import check_positive_int
from ..privacy.spent import PrivacySpent
from ..privacy.spent import not_private
from .bounds import local_entropy_gibbs_epsilon
from .certificate import _check_key

__all__ = [
    "EntropySGLDInfo",
    "EntropySGLDKernel",
    "EntropySGLDParams",
    "EntropySGLDState",
    "GIBBS_SAMPLE_CAVEAT",
    "beta_for_epsilon",
    "bounded_cross_entropy",
    "check_labels",
    "classifier_error",
    "classifier_loss",
    "entropy_sgld_privacy",
    "init",
    "init_mlp",
    "kernel",
    "mlp_apply",
    "run",
    "zero_one_error",
]

GIBBS_SAMPLE_CAVEAT = (
    "epsilon = 2 beta L_max tau / m holds for one EXACT sample from the local-entropy Gibbs "
    "distribution (exponential mechanism); Entropy-SGLD only approximates that sample (finite run, "
    "biased inner-loop gradient), so the guarantee and any bound built on it are optimistic"
)

Array = jax.Array


# --------------------------------------------------------------------------------------------------
# The classifier and its losses


def init_mlp(key: Array, sizes: tuple[int, ...]) -> list[tuple[Array, Array]]:
    """A fully connected ReLU network's parameters: [(W, b), ...] for the layer sizes given.

    Weights ~ N(0, 1/fan_in) (He-style scaled by 1/sqrt(2)), biases 0; ``sizes`` = (inputs, hidden...,
    classes).
    """
    if not isinstance(sizes, (tuple, list)) or len(sizes) < 2:
        raise ValueError(f"sizes must be >= 2 positive integers (inputs, ..., classes), got {sizes!r}")
    sizes = tuple(check_positive_int(s, "each of sizes") for s in sizes)
    params = []
    keys = jax.random.split(key, len(sizes) - 1)
    for k, (n_in, n_out) in zip(keys, zip(sizes[:-1], sizes[1:])):
        params.append((jax.random.normal(k, (n_in, n_out)) / jnp.sqrt(n_in), jnp.zeros(n_out)))
    return params


def mlp_apply(params, x: Array) -> Array:
    """Logits of the network from ``init_mlp`` for inputs x of shape (batch, inputs)."""
    h = x
    for w, b in params[:-1]:
        h = jax.nn.relu(h @ w + b)
    w, b = params[-1]
    return h @ w + b


def _concrete(a) -> np.ndarray | None:
    """``a`` as a numpy array, or None when it is traced (inside jit / vmap / grad)."""
    if isinstance(a, jax.core.Tracer):
        return None
    return np.asarray(a)


def check_labels(labels, num_classes: int, name: str = "y") -> None:
    """Refuses class labels that are not integers in {0, ..., num_classes - 1}.

    The losses index the logits by the label: a label -1 would silently pick the last class (labels
    {-1, 1} of a two-class problem all become class 1), a label >= num_classes gives a NaN loss whose
    gradient is 0 (the record is silently dropped from training) and counts as an error in the 0-1
    loss, and a fractional label is truncated. Integer-valued floats and bools are accepted.

    Raises:
      TypeError: labels that are not numbers.
      ValueError: labels of the wrong shape, or values outside {0, ..., num_classes - 1}; the message
        quotes neither the offending values nor their count (the labels are private data).
    """
    num_classes = check_positive_int(num_classes, "num_classes")
    lab = np.asarray(labels)
    if lab.dtype.kind not in "biuf":
        raise TypeError(f"{name} (class labels) must hold numbers, got dtype {lab.dtype}")
    if lab.ndim != 1:
        raise ValueError(f"{name} (class labels) must be 1-d, one integer label per record, got shape {lab.shape}")
    if lab.dtype.kind == "b":
        bad = np.zeros(lab.shape, bool) if num_classes >= 2 else lab
    else:
        bad = ~np.isfinite(lab) | (lab < 0) | (lab > num_classes - 1) | (lab != np.round(lab))
    if np.any(bad):  # neither the values nor their count is quoted: a count of bad labels is a class count
        raise ValueError(
            f"{name} (class labels) must be integers in {{0, ..., {num_classes - 1}}} for a classifier with "
            f"{num_classes} outputs; some labels are not (negative, too large, fractional or not finite). Map "
            "other label sets first, e.g. {-1, 1} to {0, 1} with (y + 1) // 2"
        )


_LN2 = math.log(2.0)


def _check_loss_max(loss_max, name: str = "loss_max") -> float:
    """Refuses a bound of the bounded cross-entropy outside (ln 2, float32 max].

    Below ln 2, 1 - 2 e^{-Lmax} < 0 and the loss is NaN; at ln 2 it is the constant ln 2 (nothing is
    learnt); above the float32 range, -Lmax is -inf in the float32 the loss is computed in, and the
    loss is unbounded.

    Raises:
      TypeError: not a real number.
      ValueError: NaN, inf, or outside (ln 2, 3.4e38].
    """
    v = check_positive(loss_max, name)
    if not _LN2 < v <= FLOAT32_MAX:
        raise ValueError(
            f"{name} (the bounded cross-entropy's upper end L_max) must lie in (ln 2 = 0.6931..., "
            f"{FLOAT32_MAX:.4g}] (float32 max), got {loss_max!r}: -log(e^-L + (1 - 2 e^-L) p) is NaN for "
            "L < ln 2, the constant ln 2 at L = ln 2, and unbounded for L beyond float32"
        )
    return v


def bounded_cross_entropy(logits: Array, labels: Array, loss_max: float = 4.0) -> Array:
    """Per-example -log(e^{-Lmax} + (1 - 2 e^{-Lmax}) p_y), p_y = softmax(logits)[label].

    Its values lie in [-log(1 - e^{-Lmax}), Lmax], an interval of length < Lmax, which bounds the
    sensitivity of the local entropy (also where e^{-Lmax} underflows in float32, Lmax > 87: log e^{-Lmax}
    is taken as -Lmax). ``loss_max`` must lie in (ln 2, float32 max] (``_check_loss_max``; checked
    when it is not traced). ``labels`` must be integers in {0, ..., classes - 1}; called
    outside jit, they are checked (:func:`check_labels`); traced labels cannot be, so check the data
    first (:func:`run` and ``certify_gaussian`` do, for losses from :func:`classifier_loss` /
    :func:`classifier_error`).
    """
    if not isinstance(loss_max, jax.core.Tracer):
        _check_loss_max(loss_max)
    concrete = _concrete(labels)
    if concrete is not None:
        check_labels(concrete, jnp.shape(logits)[-1], name="labels")
    log_p = jax.nn.log_softmax(logits, axis=-1)
    log_py = jnp.take_along_axis(log_p, labels[:, None].astype(jnp.int32), axis=-1)[:, 0]
    a = jnp.exp(-loss_max)
    # log(a + (1 - 2a) p) computed as logaddexp(log a, log(1 - 2a) + log p): stable for p -> 0. log a is
    # -loss_max itself, not jnp.log(a): a underflows to 0 in float32 for loss_max > 87, and log(0) = -inf
    # would leave the loss unbounded (-log p), breaking the sensitivity L_max tau / m the privacy uses
    log_a = -jnp.asarray(loss_max, log_p.dtype)
    return -jnp.logaddexp(log_a, jnp.log1p(-2.0 * a) + log_py)


def zero_one_error(logits: Array, labels: Array) -> Array:
    """Per-example 0-1 error (1.0 where argmax(logits) differs from the label).

    ``labels`` must be integers in {0, ..., classes - 1} (checked when not traced, as in
    :func:`bounded_cross_entropy`): any other label would count as an error whatever the network says.
    """
    concrete = _concrete(labels)
    if concrete is not None:
        check_labels(concrete, jnp.shape(logits)[-1], name="labels")
    return (jnp.argmax(logits, axis=-1) != labels).astype(jnp.float32)


def classifier_loss(apply_fn: Callable, unravel: Callable, loss_max: float = 4.0) -> Callable:
    """loss(w, X, y): the mean bounded cross-entropy of the network with flat weights w.

    The returned function carries its range as ``loss.loss_max``; :func:`kernel` and :func:`run`
    refuse it with an ``EntropySGLDParams.loss_max`` smaller than that (the privacy of the release
    is computed from ``params.loss_max``, so a wider loss would be under-accounted).

    Raises:
      ValueError / TypeError: loss_max not a number in (ln 2, float32 max] (``_check_loss_max``).
    """
    loss_max = _check_loss_max(loss_max)

    def loss(w, x, y):
        return jnp.mean(bounded_cross_entropy(apply_fn(unravel(w), x), y, loss_max))

    # the loss carries its range and its data check as attributes (documented above)
    loss.loss_max = loss_max  # type: ignore[attr-defined]
    loss.check_data = _label_checker(apply_fn, unravel)  # type: ignore[attr-defined]
    return loss


def classifier_error(apply_fn: Callable, unravel: Callable) -> Callable:
    """error(w, X, y): the mean 0-1 error of the network with flat weights w (an ``error_fn`` for
    :func:`~dpposterior.pacbayes.certify_gaussian`).

    Like :func:`classifier_loss`, it carries ``check_data(w, X, y)``, which ``certify_gaussian`` and
    :func:`run` call on the concrete data: labels outside {0, ..., classes - 1} are refused.
    """
    if not callable(apply_fn) or not callable(unravel):
        raise TypeError("apply_fn and unravel must be callable")

    def error(w, x, y):
        return jnp.mean(zero_one_error(apply_fn(unravel(w), x), y))

    error.check_data = _label_checker(apply_fn, unravel)  # type: ignore[attr-defined]  # documented above
    return error


def _label_checker(apply_fn: Callable, unravel: Callable) -> Callable:
    def check_data(w, x, y) -> None:
        """Refuses labels y that the network's outputs cannot index (see :func:`check_labels`)."""
        logits = jax.eval_shape(lambda w_, x_: apply_fn(unravel(w_), x_), w, x[:1])
        check_labels(y, logits.shape[-1])

    return check_data


# --------------------------------------------------------------------------------------------------
# The sampler


class EntropySGLDParams(NamedTuple):
    """Hyperparameters (Python floats / ints: they are closed over when the step is jitted).

    Attributes:
      tau: the inverse temperature of the inner (local) Gibbs measure; the text uses sqrt(m).
      gamma: the coupling of w' to w; the prior is N(w, (tau gamma)^{-1} I).
      eta: the outer step size.
      eta_inner: the inner SGLD step size eta'.
      beta: the inverse temperature of the outer chain (Entropy-SGLD); None for Entropy-SGD.
      inner_steps: L, the inner-loop length (20).
      batch_size: the inner minibatch size (128).
      alpha: the averaging weight of mu (0.75).
      loss_max: L_max, the length of the loss's range (4).
    """

    tau: float
    gamma: float
    eta: float
    eta_inner: float
    beta: float | None = 1.0
    inner_steps: int = 20
    batch_size: int = 128
    alpha: float = 0.75
    loss_max: float = 4.0


class EntropySGLDState(NamedTuple):
    position: Array  # w, flat weights (the mean of the prior)
    num_steps: Array  # outer steps taken


class EntropySGLDInfo(NamedTuple):
    mu: Array  # the inner chain's running average (data-dependent: not for release)
    batch_loss: Array  # mean minibatch loss over the inner loop (data-dependent: debug only)


def init(position: Array) -> EntropySGLDState:
    """The state at flat weights ``position``.

    Raises:
      ValueError / TypeError: a position that is not a 1-d array of finite real numbers.
    """
    position = jnp.asarray(position)
    if position.ndim != 1:
        raise ValueError(f"position must be a flat weight vector (1-d), got shape {position.shape}")
    if not jnp.issubdtype(position.dtype, jnp.floating):
        raise TypeError(f"position must hold floating-point weights, got dtype {position.dtype}")
    concrete = _concrete(position)
    if concrete is not None and not np.all(np.isfinite(concrete)):  # the weights are public (w0): say which
        bad = np.flatnonzero(~np.isfinite(concrete))
        raise ValueError(
            f"position must be finite, got {bad.size} NaN or inf weights (first at index {bad[0]}): the "
            "chain would run on NaN and release NaN"
        )
    return EntropySGLDState(position=position, num_steps=jnp.zeros((), jnp.int32))


def _check_params(params: EntropySGLDParams) -> None:
    """Every field in range (bools and strings refused: TypeError); raises ValueError otherwise."""
    if not isinstance(params, EntropySGLDParams):
        raise TypeError(f"params must be an EntropySGLDParams, got {type(params).__name__}")
    for name in ("tau", "gamma", "eta", "eta_inner", "loss_max"):
        check_positive(getattr(params, name), f"EntropySGLDParams.{name}")
    if params.beta is not None:
        check_positive(params.beta, "EntropySGLDParams.beta (or None)")
    alpha = check_positive(params.alpha, "EntropySGLDParams.alpha")
    if alpha > 1:
        raise ValueError(f"EntropySGLDParams.alpha must lie in (0, 1], got {params.alpha!r}")
    for name in ("inner_steps", "batch_size"):
        check_positive_int(getattr(params, name), f"EntropySGLDParams.{name}")


def _check_loss(loss_fn: Callable, params: EntropySGLDParams) -> None:
    if not callable(loss_fn):
        raise TypeError(f"loss_fn must be callable, got {loss_fn!r}")
    own = getattr(loss_fn, "loss_max", None)
    if own is not None and own > params.loss_max:
        raise ValueError(
            f"loss_fn has range loss_max={own!r} but EntropySGLDParams.loss_max={params.loss_max!r}: "
            "the privacy (epsilon = 2 beta L_max tau / m) would be computed from the smaller range; "
            "give params the loss's loss_max"
        )


def _check_data(data, concrete: bool) -> tuple:
    """(X, y) with one shared, non-empty record axis; finite X when ``concrete`` (not traced)."""
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        raise TypeError(
            "data must be a pair (X, y) of arrays sharing the record axis, got "
            f"{type(data).__name__}" + (f" of length {len(data)}" if isinstance(data, (tuple, list)) else "")
        )
    x, y = data
    if jnp.ndim(x) < 1 or jnp.ndim(y) < 1 or jnp.shape(x)[0] != jnp.shape(y)[0]:
        raise ValueError(f"X and y must share their first axis (records): got shapes {jnp.shape(x)} and {jnp.shape(y)}")
    if jnp.shape(x)[0] == 0:
        raise ValueError("data must hold at least one record, got 0")
    if concrete:
        xa = np.asarray(x)
        if xa.dtype.kind not in "biuf" or np.asarray(y).dtype.kind not in "biuf":
            raise TypeError("X and y must hold numbers")
        if xa.dtype.kind == "f" and not np.all(np.isfinite(xa)):
            raise ValueError("X must be finite: it contains NaN or inf")
        check_float32_array("X", xa, private=True)
    return jnp.asarray(x), jnp.asarray(y)


class EntropySGLDKernel(NamedTuple):
    """An Entropy-SGLD (or Entropy-SGD) sampler closed over its data, hyperparameters and loss (the
    shape of BlackJAX's ``SamplingAlgorithm`` and of :class:`~dpposterior.mcmc.Kernel`).

    Attributes:
      init: ``init(position) -> EntropySGLDState``: the state at flat weights ``position`` (:func:`init`).
      step: ``step(key, state) -> (EntropySGLDState, EntropySGLDInfo)``: one outer step, pure; jit or
        scan it.
    """

    init: Callable[[Array], EntropySGLDState]
    step: Callable[[Array, EntropySGLDState], tuple[EntropySGLDState, EntropySGLDInfo]]


def kernel(data: tuple[Array, Array], params: EntropySGLDParams, loss_fn: Callable) -> EntropySGLDKernel:
    """The Entropy-SGLD sampler over ``data``: ``kernel.init(position)`` and ``kernel.step(key, state)``.

    One step is one outer step of Entropy-SGLD (or Entropy-SGD when ``params.beta is None``).
    Privacy: a release of one exact sample from the local-entropy Gibbs distribution
    exp(beta F_{gamma,tau}(w; S)) is the exponential mechanism, replace-one neighbours, sensitivity of
    F at most L_max tau / m, epsilon = 2 beta L_max tau / m (:func:`entropy_sgld_privacy`); the chain
    only approximates that sample (module docstring). Reference: Dziugaite & Roy, "Data-dependent
    PAC-Bayes priors via differential privacy" (2018); Dziugaite's thesis (2019), Algorithm 2.

    Args:
      data: (X, y) with a shared first axis (records); traced arrays are fine (the checks read shapes).
      params: the hyperparameters.
      loss_fn: loss(w, X_batch, y_batch) -> mean loss with range of length <= params.loss_max
        (:func:`classifier_loss`).

    Returns:
      An :class:`EntropySGLDKernel`. Its ``step`` takes a JAX PRNG key (all randomness of the step
      comes from it; None is refused, since a seed drawn inside a jitted step would repeat on every
      call: :func:`run` takes None) and checks the labels when ``loss_fn`` carries ``check_data`` and
      the data and weights are concrete.

    Raises:
      ValueError / TypeError: params out of range, a loss whose range exceeds ``params.loss_max``,
        data that is not a non-empty pair sharing its first axis; from ``step``, a key that is not a
        JAX PRNG key or a state that is not an :class:`EntropySGLDState`.
    """
    _check_params(params)
    _check_loss(loss_fn, params)
    x, y = _check_data(data, concrete=False)
    check = getattr(loss_fn, "check_data", None)
    m = x.shape[0]
    grad = jax.grad(loss_fn)
    noise_inner = math.sqrt(2.0 * params.eta_inner / params.tau)

    def step_fn(key: Array, state: EntropySGLDState) -> tuple[EntropySGLDState, EntropySGLDInfo]:
        if key is None:  # the caller jits and scans step: a seed drawn here would be baked into the program
            raise TypeError(
                "key must be a JAX PRNG key: step draws all its noise from the key it is given; for noise "
                "seeded by the operating system call run(None, ...), or pass "
                "dpposterior.privacy.randomness.os_seeded_key() (recorded with seeded_by='os')"
            )
        _check_key(key)
        if not isinstance(state, EntropySGLDState):
            raise TypeError(f"state must be an EntropySGLDState (from init(position)), got {type(state).__name__}")
        if check is not None and _concrete(y) is not None and _concrete(state.position) is not None:
            check(state.position, x, y)  # not under jit: labels the network can index
        w = state.position
        key_inner, key_outer = jax.random.split(key)

        def inner(carry, k):
            wp, mu = carry
            k_batch, k_noise = jax.random.split(k)
            # minibatch drawn uniformly with replacement (no amplification by subsampling is claimed)
            idx = jax.random.randint(k_batch, (params.batch_size,), 0, m)
            xb, yb = x[idx], y[idx]
            g = grad(wp, xb, yb)
            wp = (
                wp
                - params.eta_inner * (g + params.gamma * (wp - w))
                + noise_inner * jax.random.normal(k_noise, wp.shape, wp.dtype)
            )
            mu = (1.0 - params.alpha) * mu + params.alpha * wp
            return (wp, mu), loss_fn(wp, xb, yb)

        (_, mu), losses = jax.lax.scan(inner, (w, w), jax.random.split(key_inner, params.inner_steps))
        # tau gamma (w - mu) estimates minus the local entropy's gradient
        w_new = w - 0.5 * params.eta * params.tau * params.gamma * (w - mu)
        if params.beta is not None:  # Entropy-SGLD's outer noise; Entropy-SGD adds none
            w_new = w_new + math.sqrt(params.eta / params.beta) * jax.random.normal(key_outer, w.shape, w.dtype)
        return (
            EntropySGLDState(position=w_new, num_steps=state.num_steps + 1),
            EntropySGLDInfo(mu=mu, batch_loss=jnp.mean(losses)),
        )

    return EntropySGLDKernel(init, step_fn)


def run(
    key: Array | None,
    state: EntropySGLDState,
    num_steps: int,
    *,
    data,
    params: EntropySGLDParams,
    loss_fn: Callable,
    secure: bool = False,
) -> tuple[EntropySGLDState, EntropySGLDInfo]:
    """``num_steps`` outer steps under one jitted ``lax.scan``; infos stacked along axis 0.

    ``key=None`` (and ``secure=False``): the noise is seeded from the operating system (a fresh
    64-bit seed, never shown); record the release with ``entropy_sgld_privacy(..., seeded_by="os")``
    (the default). A JAX key given here is for tests and reproduction only: record
    ``seeded_by="user"``, since whoever knows the key can recompute the noise.

    The infos (``mu``, ``batch_loss``) are computed from the data and are not private releases
    (debugging only); the released quantity is ``state.position``. Labels are checked when
    ``loss_fn`` carries ``check_data`` (:func:`classifier_loss`).

    ``secure=True``: ``key`` must be None; every minibatch index and noise value of every step is
    computed from fresh bits of the operating system's CSPRNG, read at the moment of the draw
    (:func:`~dpposterior.privacy.secure.os_key`; no seed exists to leak); record the release with
    ``entropy_sgld_privacy(..., seeded_by="secure")``.
    """
    from ..privacy.secure import check_secure, os_key

    num_steps = check_positive_int(num_steps, "num_steps")
    _check_params(params)
    _check_loss(loss_fn, params)
    if not isinstance(state, EntropySGLDState):
        raise TypeError(f"state must be an EntropySGLDState (from init(position)), got {type(state).__name__}")
    x, y = _check_data(data, concrete=True)
    check = getattr(loss_fn, "check_data", None)
    if check is not None:  # losses from classifier_loss: labels the network can index
        check(state.position, x, y)
    if check_secure(secure):
        if key is not None:
            raise ValueError("key must be None when secure=True: every step's key comes from the OS CSPRNG")
        step_keys = jax.random.split(os_key(), num_steps)
    else:
        if key is None:  # DESIGN: privacy noise with no key given is seeded from the operating system
            from ..privacy.randomness import os_seeded_key

            key = os_seeded_key()
        _check_key(key)
        step_keys = jax.random.split(key, num_steps)

    try:
        program = _compiled_run(params, loss_fn)
    except TypeError:  # unhashable params or loss: compile for this call only
        program = _compiled_run.__wrapped__(params, loss_fn)
    return program(step_keys, state, x, y)


@functools.lru_cache(maxsize=16)
def _compiled_run(params: EntropySGLDParams, loss_fn: Callable) -> Callable:
    """The jitted scan of ``run``, one per (params, loss_fn): repeated runs reuse the program."""

    @jax.jit
    def _run(step_keys, state, x, y):
        sampler = kernel((x, y), params, loss_fn)
        return jax.lax.scan(lambda s, k: sampler.step(k, s), state, step_keys)

    return _run


# --------------------------------------------------------------------------------------------------
# Privacy of the released prior mean


def beta_for_epsilon(epsilon: float, loss_range: float, tau: float, m: int) -> float:
    """The outer inverse temperature beta = epsilon m / (2 L_max tau) that gives ``epsilon``."""
    # local_entropy_gibbs_epsilon validates loss_range, tau and m
    unit = local_entropy_gibbs_epsilon(1.0, loss_range, tau, m)
    beta = check_epsilon(epsilon) / unit
    if not math.isfinite(beta):
        raise ValueError(f"beta = epsilon m / (2 L_max tau) overflows for epsilon={epsilon!r}, m={m!r}")
    if not beta > 0:  # EntropySGLDParams needs beta > 0: an underflow is not returned as 0
        raise ValueError(
            f"beta = epsilon m / (2 L_max tau) underflows to 0 for epsilon={epsilon!r}, "
            f"loss_range={loss_range!r}, tau={tau!r}, m={m!r}"
        )
    return beta


def entropy_sgld_privacy(
    params: EntropySGLDParams, m: int, *, num_steps: int = 1, seeded_by: str = "os"
) -> PrivacySpent:
    """The PrivacySpent of the prior mean w released by Entropy-SGLD on m records.

    epsilon = 2 beta L_max tau / m, pure (delta = 0), replace-one neighbours, accountant
    ``"exponential_mechanism(exact_sample_assumed)"``. The guarantee is conditional: it holds for an
    exact sample from the local-entropy Gibbs distribution, which the run only approximates. The record
    says so: ``details`` carries the caveat (``GIBBS_SAMPLE_CAVEAT``, also ``record.caveat``), its
    ``summary()`` begins with ``CONDITIONAL``, and a :class:`~dpposterior.privacy.Ledger` total that
    composes it keeps the caveat. Entropy-SGD (``beta is None``) returns a not-private record.
    """
    _check_params(params)
    num_steps = check_positive_int(num_steps, "num_steps")
    if params.beta is None:
        return not_private("entropy_sgd", reason="Entropy-SGD has no outer noise")
    eps = local_entropy_gibbs_epsilon(params.beta, params.loss_max, params.tau, m)
    return PrivacySpent(
        epsilon=eps,
        delta=0.0,
        neighbouring="replace_one",
        accountant="exponential_mechanism(exact_sample_assumed)",
        mechanism="entropy_sgld_local_entropy_gibbs",
        noise_multiplier=None,
        sampling_rate=1.0,
        num_steps=int(num_steps),
        seeded_by=seeded_by,  # type: ignore[arg-type]
        details=(
            ("caveat", GIBBS_SAMPLE_CAVEAT),
            ("beta", float(params.beta)),
            ("tau", float(params.tau)),
            ("gamma", float(params.gamma)),
            ("loss_max", float(params.loss_max)),
            ("m", int(m)),
        ),
    )
