"""Samplers of phi* that a :class:`~dpposterior.releases.Posterior` keeps, as picklable callables.

Each is a frozen dataclass called as ``sampler(key, m) -> (m, 2n)``: a posterior saved with
:mod:`pickle` (or sent to another process) keeps its exact sampler. All are post-processing of the
release: they hold the solver's result, never data.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from . import grid as G
from . import identify as I
from . import laplace as L

_laplace_draws = jax.jit(L.laplace_sample, static_argnames=("num_samples",))


def as_key(key: Any) -> jax.Array:
    """A JAX key from a key or an int seed."""
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        return jax.random.PRNGKey(int(key))
    return key


def prior_latents(prior: Any, key: jax.Array, phi: jax.Array | np.ndarray, mask: jax.Array, n: int) -> jax.Array:
    """phi* draws whose latents in ``mask`` carry draws of the user's ``prior`` sampler (checked shape)."""
    m = int(phi.shape[0])
    draws = jnp.asarray(prior(key, m))
    if draws.shape != (m, n) or not bool(jnp.all(jnp.isfinite(draws))):
        raise ValueError(
            f"prior(key, {m}) must return {m} finite draws of the {n} unconstrained latent coordinates, "
            f"shape ({m}, {n}); got shape {tuple(draws.shape)}"
            + ("" if draws.shape != (m, n) else " with NaN or inf values")
        )
    return I.with_prior_latents(phi, draws.astype(phi.dtype), mask)


@dataclasses.dataclass(frozen=True, eq=False)
class GridSampler:
    """Exact draws from the grid solver's posterior of phi*."""

    grid: Any

    def __call__(self, key: Any, m: int) -> jax.Array:
        return G.grid_sample_phi_star(self.grid, as_key(key), int(m))


@dataclasses.dataclass(frozen=True, eq=False)
class LaplaceSampler:
    """Draws from the Laplace solver's Gaussian of phi*."""

    result: Any

    def __call__(self, key: Any, m: int) -> jax.Array:
        return _laplace_draws(self.result, as_key(key), int(m))


@dataclasses.dataclass(frozen=True, eq=False)
class ShiftedSampler:
    """An inner sampler's draws moved by a fixed ``shift`` (the clip's shift of the fixed point)."""

    inner: Callable[[Any, int], Any]
    shift: jax.Array

    def __call__(self, key: Any, m: int) -> jax.Array:
        return self.inner(key, m) + self.shift


@dataclasses.dataclass(frozen=True, eq=False)
class PriorLatentsSampler:
    """Draws of phi* whose unidentified latents (``mask``) carry the user's ``prior`` draws.

    The other coordinates come from ``inner`` or, without one, from resampling ``phi_draws``. Picklable
    when ``prior`` is (a module-level function or a picklable object).
    """

    inner: Callable[[Any, int], Any] | None
    prior: Any
    mask: jax.Array
    num_latent: int
    phi_draws: jax.Array

    def __call__(self, key: Any, m: int) -> jax.Array:
        k1, k2 = jax.random.split(as_key(key))
        if self.inner is not None:
            phis = self.inner(k1, m)
        else:
            phis = self.phi_draws[jax.random.randint(k1, (int(m),), 0, self.phi_draws.shape[0])]
        return prior_latents(self.prior, k2, phis, self.mask, self.num_latent)
