"""A user's own NumPyro model, given to the command line as ``tabular_models:student_t_logistic``."""

import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist


def student_t_logistic(X, y=None):
    """Logistic regression with a heavier-tailed Student-t(4) prior on the weights."""
    w = numpyro.sample("w", dist.StudentT(4.0, jnp.zeros(X.shape[1]), 1.0).to_event(1))
    with numpyro.plate("records", X.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=X @ w), obs=y)
