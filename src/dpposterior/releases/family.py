"""The variational family: a diagonal Gaussian in the unconstrained space.

phi = (mu, rho) with d = 2n parameters; q(theta; phi) = N(mu, diag(softplus(rho)^2)). softplus(rho) is
the STANDARD DEVIATION (as in the reference implementation; Räisä et al. 2024, section 4.1, calls it
the variance: both are valid parametrisations, this is the one we use everywhere).
"""

from __future__ import annotations

from typing import TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

#: a JAX or a NumPy array: :func:`split_phi` returns halves of the kind it is given.
_A = TypeVar("_A", jax.Array, np.ndarray)


def split_phi(phi: _A) -> tuple[_A, _A]:
    """(..., 2n) -> (mu (..., n), rho (..., n))."""
    n = phi.shape[-1] // 2
    return phi[..., :n], phi[..., n:]


def scale(rho: ArrayLike) -> jax.Array:
    """The standard deviation softplus(rho)."""
    return jax.nn.softplus(rho)


def inverse_scale(sd: ArrayLike) -> jax.Array:
    """rho such that softplus(rho) = sd (sd > 0)."""
    sd = jnp.asarray(sd)
    return sd + jnp.log(-jnp.expm1(-sd))


def sample(key: jax.Array, phi: jax.Array, num: int) -> jax.Array:
    """``num`` draws (num, n) of theta ~ q(theta; phi) for one phi (2n,)."""
    mu, rho = split_phi(phi)
    eps = jax.random.normal(key, (num,) + mu.shape, dtype=mu.dtype)
    return mu + scale(rho) * eps


def sample_mixture(key: jax.Array, phis: jax.Array, shape: ArrayLike | None = None) -> jax.Array:
    """One draw of theta per row of phis (m, 2n): draws from the mixture over the rows.

    ``shape``: None (q's diagonal Gaussian), or an (n, n) lower-triangular L that gives q the covariance
    diag(sd) L L^T diag(sd): theta = mu + sd * (L eps) (the linear-response shape of
    :func:`dpposterior.noise_aware.model_terms.linear_response`).
    """
    mu, rho = split_phi(phis)
    eps = jax.random.normal(key, mu.shape, dtype=mu.dtype)
    if shape is not None:
        eps = eps @ jnp.asarray(shape, mu.dtype).T
    return mu + scale(rho) * eps


def log_prob(theta: jax.Array, phi: jax.Array) -> jax.Array:
    """log q(theta; phi) summed over coordinates (theta (..., n))."""
    mu, rho = split_phi(phi)
    sd = scale(rho)
    z = (theta - mu) / sd
    return jnp.sum(-0.5 * z**2 - jnp.log(sd) - 0.5 * jnp.log(2 * jnp.pi), axis=-1)
