"""DP-SGLD's posterior predictive: averages over the released samples (post-processing).

The Monte Carlo posterior predictive of Ermis & Cemgil, "Differentially private dropout" (2017,
first paragraph): P(y = 1 | x, D) ~ (1/S) sum_s sigmoid(logit(theta_s, x)). It reads the released
samples and the model's ``logit`` only; it never imports the mechanism, so it adds no privacy cost
to the samples (the scores of :func:`predictive_scores` also read labelled data: see there).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..._checks import check_float32_array, check_positive_int
from .models import DPSGLDModel, _check_model

__all__ = ["PREDICT_ROWS", "posterior_predictive", "predictive_scores"]

#: the posterior predictive computes the logits of at most 256 samples x this many inputs at a time
PREDICT_ROWS = 65536


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
