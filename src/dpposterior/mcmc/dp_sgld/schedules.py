"""DP-SGLD's step-size schedules eta_t = a (b + t)^(-gamma).

Welling & Teh, "Bayesian learning via stochastic gradient Langevin dynamics" (2011): a decay with
gamma in (0.5, 1] meets their conditions (sum eta_t = inf, sum eta_t^2 < inf); gamma = 0 is a
constant step size. The schedule is public (data-independent) and computed in float32, as the step is.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax.numpy as jnp

from ..._checks import FLOAT32_MAX, check_float32_positive, check_positive, check_real

Array = Any

__all__ = ["StepSize", "constant_step_size", "polynomial_step_size"]


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
