"""Regression models of Räisä, Jälkö & Honkela, "Noise-aware differentially private variational inference"
(2024), sections 4.3-4.4,
with the priors of its reference implementation."""

from __future__ import annotations

import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist


def linear_regression(
    X,
    y=None,
    *,
    prior_shape: float = 20.0,
    prior_scale: float = 0.5,
    weight_scale: float = 4.0,
    fit_intercept: bool = True,
):
    """sigma2 ~ InvGamma(20, 0.5); w ~ N(0, 4 sigma2 I); y_i ~ N(w . [x_i, 1], sigma2).

    The 10-D experiment of the paper: X (N, 10) with x ~ N(0, I), 11 weights (10 + bias).
    """
    p = X.shape[1] + (1 if fit_intercept else 0)
    sigma2 = numpyro.sample("sigma2", dist.InverseGamma(prior_shape, prior_scale))
    w = numpyro.sample("w", dist.Normal(jnp.zeros(p), jnp.sqrt(weight_scale * sigma2)).to_event(1))
    with numpyro.plate("records", X.shape[0]):
        feats = jnp.concatenate([X, jnp.ones(X.shape[:1] + (1,), X.dtype)], axis=-1) if fit_intercept else X
        numpyro.sample("y", dist.Normal(feats @ w, jnp.sqrt(sigma2)), obs=y)


def logistic_regression(X, y=None, *, prior_scale: float = 1.0):
    """w ~ N(0, prior_scale^2 I); y_i ~ Bernoulli(sigmoid(x_i . w)). Include an intercept column in X."""
    p = X.shape[1]
    w = numpyro.sample("w", dist.Normal(jnp.zeros(p), prior_scale).to_event(1))
    with numpyro.plate("records", X.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=X @ w), obs=y)
