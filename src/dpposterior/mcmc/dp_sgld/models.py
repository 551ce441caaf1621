"""DP-SGLD's models: Bayesian binary classifiers as JAX functions of a flat parameter vector.

A :class:`DPSGLDModel` holds the per-record log-likelihood, the log prior, the logit used by the
posterior predictive, and a data-independent starting point. :func:`logistic_regression` and
:func:`mlp` (a one-hidden-layer tanh network with optional Gaussian dropout, the dropout reading of
Ermis & Cemgil, "Differentially private dropout", 2017) are built in; any model of the same shape
can be given. Nothing here reads data or adds noise: the checks below trace shapes only.
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..._checks import check_float32_positive, check_positive, check_positive_int

Array = Any

__all__ = ["MAX_DROPOUT_ALPHA", "DPSGLDModel", "logistic_regression", "mlp"]

#: mlp's dropout_alpha must lie below this: above it the float32 noise 1 + sqrt(alpha) xi loses its mean 1
MAX_DROPOUT_ALPHA = 2.0**48


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
        :func:`logistic_regression` and :func:`mlp`): :func:`~dpposterior.mcmc.dp_sgld.run` and the
        predictive functions then check the data's shapes and labels. None (the default, for a custom
        model): records unchecked.

    theta ranges over all of R^d: SGLD moves it by gradients and Gaussian noise with no regard to any
    constraint, and never evaluates the densities themselves. A constrained parameter (a rate, a
    scale, a probability) must be given through an unconstrained one (e.g. theta = log rate, with the
    log-Jacobian theta added to ``log_prior``). :func:`~dpposterior.mcmc.dp_sgld.run` refuses a start
    or a chain at which ``log_prior`` is not finite (outside the prior's support); a
    ``log_likelihood`` that is undefined where ``log_prior`` is finite (a normal prior on a rate used
    as ``log(rate)``) cannot be detected without reading the data, and its gradient there (``x /
    rate`` for ``x log(rate)``) is often finite, so such a chain runs on silently.
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
