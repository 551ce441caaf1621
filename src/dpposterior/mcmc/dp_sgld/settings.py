"""DP-SGLD's settings: the checked, public configuration of one chain.

A :class:`DPSGLDConfig` fixes the number of records N, the Poisson sampling rate q, the clip C, the
noise multiplier sigma (the noise std on the clipped gradient sum is 2 C sigma: replace-one
adjacency, sensitivity 2C; Ermis & Cemgil, "Differentially private dropout", 2017), the step-size
schedule and how the Langevin noise is added. :func:`config` builds one and checks every field;
:func:`_check_config` re-checks one built by hand (the kernel does, before any step).
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

import jax
import numpy as np

from ..._checks import (
    check_float32_positive,
    check_positive,
    check_positive_int,
    check_sampling_rate,
)
from ...dpsgd.sampling import MIN_CAPACITY, default_capacity
from .schedules import StepSize, _check_step_size

__all__ = ["LANGEVIN_MODES", "DPSGLDConfig", "config"]

#: how the Langevin noise joins the privacy noise (the package docstring explains both)
LANGEVIN_MODES = ("top_up", "add")


class DPSGLDConfig(NamedTuple):
    """The settings of a DP-SGLD chain (build it with :func:`config`, which checks them).

    Attributes:
      num_records: N, the number of records (public).
      sampling_rate: q in (0, 1], the Poisson sampling rate.
      clip: C > 0, the L2 bound on each per-example log-likelihood gradient.
      noise_multiplier: sigma >= 0; the noise std on the gradient sum is 2 C sigma (0: not private).
      step_size: the :class:`StepSize` schedule.
      langevin: ``"top_up"`` or ``"add"`` (the package docstring of ``dpposterior.mcmc.dp_sgld``).
      capacity: records per packed Poisson buffer chunk (exactness does not depend on it).
    """

    num_records: int
    sampling_rate: float
    clip: float
    noise_multiplier: Any
    step_size: StepSize
    langevin: Literal["top_up", "add"] = "top_up"
    capacity: int = 16


def config(
    *,
    num_records: int,
    sampling_rate: float,
    clip: float,
    noise_multiplier: float,
    step_size: Any,
    langevin: Literal["top_up", "add"] = "top_up",
    capacity: int | None = None,
) -> DPSGLDConfig:
    """A checked :class:`DPSGLDConfig`.

    Args:
      num_records, sampling_rate, clip, noise_multiplier, step_size, langevin: as in :class:`DPSGLDConfig`.
      capacity: records per packed Poisson buffer chunk, an int from 1 to max(N, 16); default about
        qN + 5 sd (a larger sample continues in further chunks).

    Raises:
      ValueError / TypeError: an argument outside its range (the message says which and the range).
    """
    n = check_positive_int(num_records, "num_records")
    # the step runs in float32: values that become 0 or inf there are errors, not silent NaN chains
    q = check_float32_positive(check_sampling_rate(sampling_rate), "sampling_rate")
    c = check_float32_positive(check_positive(clip, "clip"), "clip")
    sigma = check_positive(noise_multiplier, "noise_multiplier", allow_zero=True)
    if sigma > 0:
        check_float32_positive(sigma, "noise_multiplier")
    if langevin not in LANGEVIN_MODES:
        raise ValueError(f"langevin must be one of {LANGEVIN_MODES}, got {langevin!r}")
    cap = default_capacity(n, q) if capacity is None else check_positive_int(capacity, "capacity")
    if cap > max(n, MIN_CAPACITY):  # DPSGLDConfig's own default (16) may exceed a small N: harmless
        raise ValueError(
            f"capacity must be at most max(N, {MIN_CAPACITY}) = {max(n, MIN_CAPACITY)} (N={n} records; a "
            "buffer of records per chunk, whose per-example gradients every step allocates), got "
            f"{capacity!r}"
        )
    return DPSGLDConfig(n, q, c, sigma, _check_step_size(step_size), langevin, cap)


def _check_config(cfg: Any) -> DPSGLDConfig:
    """Refuses a ``cfg`` that :func:`config` would not build.

    A configuration built by hand is re-checked field by field; a concrete noise multiplier must be
    finite and >= 0 (a traced one, as in :func:`~dpposterior.mcmc.dp_sgld.make_run`, cannot be
    checked). Only static values are read, so the check also holds under jit.

    Raises:
      TypeError: ``cfg`` is not a :class:`DPSGLDConfig`, or its step size is not a :class:`StepSize`.
      ValueError: a field outside the range :func:`config` allows.
    """
    if not isinstance(cfg, DPSGLDConfig):
        raise TypeError(f"cfg must be a DPSGLDConfig (build it with dp_sgld.config), got {type(cfg).__name__}")
    if not isinstance(cfg.step_size, StepSize):
        raise TypeError(
            "cfg.step_size must be a StepSize (dp_sgld.config makes one from a number), got "
            f"{type(cfg.step_size).__name__}"
        )
    config(
        num_records=cfg.num_records,
        sampling_rate=cfg.sampling_rate,
        clip=cfg.clip,
        noise_multiplier=0.0,
        step_size=cfg.step_size,
        langevin=cfg.langevin,
        capacity=cfg.capacity,
    )
    sigma = cfg.noise_multiplier
    if not isinstance(sigma, jax.core.Tracer):
        s = np.asarray(sigma)
        if s.shape != () or s.dtype.kind not in "iuf" or not (np.isfinite(s) and s >= 0):
            raise ValueError(f"cfg.noise_multiplier must be a finite number >= 0, got {sigma!r}")
    return cfg
