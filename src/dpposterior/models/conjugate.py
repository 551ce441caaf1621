"""The exponential-family models of papers/na-dpvi.txt section 4.2 (priors as in NOTES.md section 1).

Each model is an ordinary NumPyro model with a plate over the records (axis 0 of ``x``). Pass
``x=None`` with ``num_records`` to sample synthetic data from the prior predictive.

Unconstrained maps are NumPyro's ``biject_to(support)``: exp for positive parameters (the paper used
softplus), logit for (0, 1), stick-breaking for the simplex (the paper used softmax with the last
logit fixed at 0). Any smooth bijection gives a valid unconstrained space; calibration is checked in
the space we use.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist


def _num(x, num_records):
    if x is not None:
        return x.shape[0]
    if num_records is None:
        raise ValueError("pass the data x, or num_records to sample synthetic data")
    return num_records


def gamma_exponential(x=None, *, num_records: int | None = None, prior_shape: float = 8.0,
                      prior_rate: float = 2.0):
    """theta ~ Gamma(8, rate 2); x_i | theta ~ Exponential(rate theta)."""
    theta = numpyro.sample("theta", dist.Gamma(prior_shape, prior_rate))
    with numpyro.plate("records", _num(x, num_records)):
        numpyro.sample("x", dist.Exponential(theta), obs=x)


def beta_bernoulli(x=None, *, num_records: int | None = None, prior_a: float = 10.0, prior_b: float = 10.0):
    """theta ~ Beta(10, 10); x_i | theta ~ Bernoulli(theta)."""
    theta = numpyro.sample("theta", dist.Beta(prior_a, prior_b))
    with numpyro.plate("records", _num(x, num_records)):
        numpyro.sample("x", dist.Bernoulli(probs=theta), obs=x)


def dirichlet_categorical(x=None, *, num_records: int | None = None, concentration=(5.0, 5.0, 5.0)):
    """theta ~ Dirichlet(5, 5, 5); x_i | theta ~ Categorical(theta) (x_i an integer category)."""
    theta = numpyro.sample("theta", dist.Dirichlet(jnp.asarray(concentration)))
    with numpyro.plate("records", _num(x, num_records)):
        numpyro.sample("x", dist.Categorical(probs=theta), obs=x)
