"""Sufficient statistics of a DPVI trace for the noise-aware post-processing model.

Per coordinate j the gradient model of Räisä, Jälkö & Honkela, "Noise-aware differentially private variational
inference" (2024), eq. 10 / 59,

    g~_t,j ~ N(q * a_j * (phi_t,j - phi*_j), s_j^2 + (sigma C / beta_j)^2),   t = T*, ..., T - 1,

depends on the trace only through six numbers: the count n, the means phibar and gbar, and the centred
sums of squares and products

    Sxx = sum (phi_t - phibar)^2,   Sxy = sum (phi_t - phibar)(g~_t - gbar),   Syy = sum (g~_t - gbar)^2.

These carry the same information as the six raw sums (count, sum phi, sum phi^2, sum g, sum g^2,
sum g*phi) but are accurate: uncentred float32 sums of phi^2 lose up to 4e-3 relative accuracy on a real
trace. Two versions:

* :func:`sufficient_statistics` - numpy, float64, two-pass centred, from the float32 trace. Use this
  at the public boundary (``noise_aware_posterior`` does).
* :func:`sufficient_statistics_jnp` - pure ``jax.numpy``, usable inside ``jit``/``vmap`` (the coverage
  engine). Two-pass centred in the dtype of the input (float32 unless x64 is enabled). Measured against
  the float64 version on 20 simulated DPVI-like traces with T = 10,000 (d = 6): relative errors below
  2e-7 on phibar, Sxx, Sxy and Syy (XLA sums pairwise); gbar, which is close to zero, to 7e-5 of
  itself, i.e. far below its standard error. The grid posterior of phi* computed from them moves by
  at most 1e-3 of its standard deviation in the mean (one float32 ulp of phibar) and 5e-7 in the sd.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..releases.window import burn_in_start as burn_in_start  # the window rule, shared with the pilot

MIN_STEPS_AFTER_BURN_IN = 10


class TraceStats(NamedTuple):
    """Per-coordinate sufficient statistics of the trace after burn-in (each field has shape (..., d)).

    Attributes:
      count: n, the number of steps used (T - T*).
      phi_mean: phibar, the mean of phi_t over the steps used.
      grad_mean: gbar, the mean of g~_t over the steps used.
      phi_ss: Sxx = sum (phi_t - phibar)^2.
      cross_ss: Sxy = sum (phi_t - phibar)(g~_t - gbar).
      grad_ss: Syy = sum (g~_t - gbar)^2.
    """

    count: jax.Array  # type: ignore[assignment]  # shadows tuple.count: a released field name, kept
    phi_mean: jax.Array
    grad_mean: jax.Array
    phi_ss: jax.Array
    cross_ss: jax.Array
    grad_ss: jax.Array

    def astype(self, dtype) -> "TraceStats":
        """The same statistics as ``jnp`` arrays of ``dtype``."""
        return TraceStats(*(jnp.asarray(x, dtype=dtype) for x in self))

    def raw_sums(self) -> dict[str, np.ndarray]:
        """The six uncentred sums (count, sum phi, sum phi^2, sum g, sum g^2, sum g*phi), in float64.

        Informative only: the centred fields are what the solvers use.
        """
        n, xb, yb, sxx, sxy, syy = (np.asarray(x, dtype=np.float64) for x in self)
        return {
            "count": n,
            "sum_phi": n * xb,
            "sum_phi2": sxx + n * xb**2,
            "sum_grad": n * yb,
            "sum_grad2": syy + n * yb**2,
            "sum_grad_phi": sxy + n * xb * yb,
        }


def sufficient_statistics(phi, grads, burn_in: float = 0.2) -> TraceStats:
    """Centred float64 statistics of ``phi``, ``grads`` (T, d) from step floor(burn_in * T) on.

    Args:
      phi: (T, d) phi_t, the parameters before update t (a DPVITrace's ``phi``).
      grads: (T, d) the noisy gradients g~_t used in update t.
      burn_in: the share of the trace dropped at its start, in [0, 1).

    Returns:
      TraceStats of numpy float64 arrays of shape (d,).

    Raises:
      ValueError: ``phi`` and ``grads`` not of one shape (T, d); ``burn_in`` outside [0, 1).
    """
    phi = np.asarray(phi)
    grads = np.asarray(grads)
    if phi.ndim != 2 or phi.shape != grads.shape:
        raise ValueError(f"phi and grads must both have shape (T, d); got {phi.shape} and {grads.shape}")
    start = burn_in_start(phi.shape[0], burn_in)
    n = phi.shape[0] - start
    if n < 1:
        raise ValueError(f"no steps left after burn-in: T={phi.shape[0]}, burn_in={burn_in}")
    xc = phi[start:].astype(np.float64)
    yc = grads[start:].astype(np.float64)
    xbar = xc.mean(axis=0)
    ybar = yc.mean(axis=0)
    xc -= xbar
    yc -= ybar
    return TraceStats(
        count=np.full(xc.shape[1], float(n)),  # type: ignore[arg-type]  # NumPy float64 fields (see Returns)
        phi_mean=xbar,
        grad_mean=ybar,
        phi_ss=np.einsum("td,td->d", xc, xc),
        cross_ss=np.einsum("td,td->d", xc, yc),
        grad_ss=np.einsum("td,td->d", yc, yc),
    )


def sufficient_statistics_jnp(phi: jax.Array, grads: jax.Array, start: int = 0) -> TraceStats:
    """Pure-jnp two-pass centred statistics of ``phi[start:]``, ``grads[start:]`` (T, d) -> (d,) each.

    ``start`` must be a static Python int (use :func:`burn_in_start`); the function may be ``jit``-ed
    and ``vmap``-ped over a leading replicate axis (vmap over the trace arrays, not over ``start``).
    Accuracy in float32: see the module docstring.
    """
    x = phi[start:]
    y = grads[start:]
    n = x.shape[0]
    xbar = jnp.mean(x, axis=0)
    ybar = jnp.mean(y, axis=0)
    xc = x - xbar
    yc = y - ybar
    return TraceStats(
        count=jnp.full(xbar.shape, n, dtype=xbar.dtype),
        phi_mean=xbar,
        grad_mean=ybar,
        phi_ss=jnp.sum(xc * xc, axis=0),
        cross_ss=jnp.sum(xc * yc, axis=0),
        grad_ss=jnp.sum(yc * yc, axis=0),
    )
