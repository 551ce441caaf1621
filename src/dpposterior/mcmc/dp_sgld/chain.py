"""A whole DP-SGLD chain: checks, the compiled run, the accounting of the release and its result.

:func:`run` checks the model, the data and the settings, runs T steps of
:func:`~dpposterior.mcmc.dp_sgld.kernel` under one compiled ``lax.scan``, and returns every sample
with the :class:`~dpposterior.privacy.PrivacySpent` of releasing them: T uses of the
Poisson-subsampled Gaussian mechanism on the clipped gradient sum (replace-one adjacency,
sensitivity 2C; Ermis & Cemgil, "Differentially private dropout", 2017), accounted by
:func:`dpposterior.privacy.dpd_epsilon`.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Literal

import jax
import jax.numpy as jnp
import numpy as np

from ..._checks import (
    check_delta,
    check_float32_array,
    check_float32_positive,
    check_positive,
    check_positive_int,
    check_sampling_rate,
    check_trace_memory,
)
from ...dpsgd.engine import _check_data
from ...privacy import PrivacySpent
from ...privacy.dp_dropout import DPD_ACCOUNTANTS, dpd_epsilon
from ...privacy.noise import float32_at_least, with_noise_tail
from ...privacy.secure import os_key, resolve_noise_source
from ...privacy.spent import NEIGHBOURING_RELATIONS, not_private
from .accounting import _epsilons_by_accountant, noise_multiplier_for
from .settings import DPSGLDConfig, config
from .sampler import DPSGLDInfo, make_run
from .models import DPSGLDModel, _check_model, _check_model_functions

Array = Any

__all__ = ["MECHANISM", "DPSGLDResult", "run"]

#: the mechanism's name in its privacy record (and in a Ledger)
MECHANISM = "dp_sgld"


@dataclasses.dataclass(frozen=True)
class DPSGLDResult:
    """The release of a DP-SGLD run, with its privacy.

    Attributes:
      samples: (T, d) float32, theta after every step (the release).
      info: :class:`DPSGLDInfo` of numpy arrays with a leading (T,) axis.
      privacy: the :class:`~dpposterior.privacy.PrivacySpent` of releasing every sample.
      noise_multiplier: sigma (noise std / 2C).
      config: the :class:`DPSGLDConfig` used.
      model_name: the model's description.
    """

    samples: np.ndarray
    info: DPSGLDInfo
    privacy: PrivacySpent
    noise_multiplier: float
    config: DPSGLDConfig
    model_name: str


@functools.lru_cache(maxsize=32)
def _log_prior_of_samples(log_prior: Callable[[Array], Array]):
    return jax.jit(jax.vmap(log_prior))


@functools.lru_cache(maxsize=32)
def _jitted_run(model: DPSGLDModel, cfg: DPSGLDConfig, num_steps: int):
    return jax.jit(make_run(model, cfg, num_steps))


def _check_classifier_data(model: DPSGLDModel, data: tuple) -> None:
    """For a model with ``num_features`` (records ``(x (p,), y in {0, 1})``): data must be ``(X (N, p), y (N,))``."""
    p = model.num_features
    if p is None:
        return
    if len(data) != 2:
        raise ValueError(f"data for {model.name} must be a pair (X, y), got {len(data)} arrays")
    x, y = (np.asarray(a) for a in data)
    if x.ndim != 2 or x.shape[1] != p:
        raise ValueError(f"X must have shape (num_records, {p}) for {model.name}, got {x.shape}")
    if y.ndim != 1:
        raise ValueError(f"y must have shape (num_records,) (one label per record), got {y.shape}")
    if not np.all((y == 0) | (y == 1)):
        raise ValueError("y must hold labels 0 or 1 (e.g. not -1/+1: the likelihood is y z - log(1 + e^z))")


def run(
    model: DPSGLDModel,
    data: Any,
    *,
    num_steps: int,
    sampling_rate: float,
    clip: float,
    step_size: Any,
    delta: float,
    noise_multiplier: float | None = None,
    epsilon: float | None = None,
    accountant: Literal["ac", "zcdp", "pld", "rdp"] = "pld",
    neighbouring: Literal["replace_one", "add_remove"] = "replace_one",
    langevin: Literal["top_up", "add"] = "top_up",
    initial_position: Any = None,
    rng_key: Any = None,
    secure: bool = False,
) -> DPSGLDResult:
    """Runs a DP-SGLD / DP dropout chain for ``num_steps`` steps and accounts the release.

    Privacy: each step includes every record independently with probability ``sampling_rate``
    (Poisson sampling), clips each record's log-likelihood gradient to L2 norm ``clip`` and adds
    Gaussian noise N(0, 4 C^2 sigma^2 I) to their sum; sensitivity 2C under replace-one adjacency
    (the paper's relation; C under add/remove-one). All T samples are released and accounted by
    :func:`dpposterior.privacy.dpd_epsilon` under ``accountant``. Reference: Ermis & Cemgil,
    "Differentially private dropout" (2017); SGLD: Welling & Teh 2011.

    Give exactly one of ``noise_multiplier`` (sigma) and ``epsilon`` (the total target: sigma is then
    the smallest that reaches it under ``accountant``, :func:`noise_multiplier_for`).

    Args:
      model: a :class:`DPSGLDModel`.
      data: a tuple of arrays with a shared leading record axis N >= 1 (e.g. ``(X, y)``), finite.
      num_steps: T >= 1.
      sampling_rate: q in (0, 1].
      clip: C > 0. Where a record's log-likelihood gradient is longer than C the chain targets a
        clipped (shifted, wider) distribution instead of the posterior (the package docstring of ``dpposterior.mcmc.dp_sgld``).
      step_size: a number > 0 (constant) or a :class:`StepSize`.
      delta: the total delta in (0, 1).
      noise_multiplier: sigma >= 0 (0: SGLD, not private; the record says so).
      epsilon: the total epsilon, > 0.
      accountant: ``"pld"`` (default), ``"ac"``, ``"zcdp"`` or ``"rdp"`` (add/remove only).
      neighbouring: ``"replace_one"`` (default) or ``"add_remove"``.
      langevin: ``"top_up"`` (default) or ``"add"`` (the package docstring of ``dpposterior.mcmc.dp_sgld``).
      initial_position: (d,), data-independent; default ``model.init(jax.random.key(0))``.
      rng_key: None (seed from the operating system, recorded ``seeded_by="os"``) or an int / JAX key
        (reproduction only: whoever knows it can remove the noise).
      secure: every draw from the OS CSPRNG (:func:`dpposterior.privacy.secure.os_key`); ``rng_key``
        must then be None.

    Returns:
      A :class:`DPSGLDResult`; ``privacy.details`` also lists the epsilon of every accountant for the
      same sigma (``epsilon_by_accountant``, :func:`epsilons_for`; None where one gives no bound: only
      ``accountant`` decides whether the run is allowed).

    Raises:
      ValueError / TypeError: invalid arguments (the message says what is allowed), both or neither
        of ``noise_multiplier`` and ``epsilon``, a key with ``secure=True``; a model whose fields are
        not of the documented types, or whose ``log_prior`` / ``log_likelihood`` fails on, or does
        not return a real scalar for, a position (d,) and one record (checked before the run); for
        a model with ``num_features`` (the built-in ones), data other than ``(X (N, p), y (N,))``
        with labels 0/1; a ``model.log_prior`` that is not finite at ``initial_position`` (before the
        run) or at a sample (after it: the chain left the prior's support, see :class:`DPSGLDModel`);
        non-finite samples. After the run nothing is released, and the message gives the (epsilon, delta)
        the run spent all the same.
    """
    model = _check_model(model)
    if not isinstance(data, (tuple, list)):
        raise TypeError(
            f"data must be a tuple of arrays sharing the record axis, e.g. (X, y), got {type(data).__name__}"
        )
    data_j, n = _check_data(tuple(data))
    _check_classifier_data(model, tuple(data))
    _check_model_functions(model, data_j)
    t = check_positive_int(num_steps, "num_steps")
    # before the accountant; per step the run keeps the position, the noisy gradient sum and the dropout alpha
    # (d each) and three scalars of DPSGLDInfo
    check_trace_memory(
        t, 3 * model.num_params + 3, "the chain and its info (position, noisy gradient sum and dropout alpha per step)"
    )
    q = check_sampling_rate(sampling_rate)
    d = check_delta(delta)
    if accountant not in DPD_ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {DPD_ACCOUNTANTS}, got {accountant!r}")
    if neighbouring not in NEIGHBOURING_RELATIONS:
        raise ValueError(f"neighbouring must be one of {NEIGHBOURING_RELATIONS}, got {neighbouring!r}")
    if (noise_multiplier is None) == (epsilon is None):
        raise ValueError(
            "give exactly one of noise_multiplier (sigma) and epsilon (the total target), got "
            f"noise_multiplier={noise_multiplier!r}, epsilon={epsilon!r}"
        )
    sigma = (
        noise_multiplier_for(epsilon, d, q, t, accountant, neighbouring=neighbouring)
        if epsilon is not None
        else check_positive(noise_multiplier, "noise_multiplier", allow_zero=True)
    )
    if sigma > 0:
        check_float32_positive(sigma, "noise_multiplier")
    cfg = config(
        num_records=n, sampling_rate=q, clip=clip, noise_multiplier=0.0, step_size=step_size, langevin=langevin
    )
    pos0 = np.asarray(model.init(jax.random.key(0)) if initial_position is None else initial_position)
    if pos0.dtype.kind not in "iuf":
        raise TypeError(f"initial_position must hold real numbers (not strings or bools), got dtype {pos0.dtype}")
    check_float32_array("initial_position", pos0)
    pos0 = pos0.astype(np.float32)
    if pos0.shape != (model.num_params,):
        raise ValueError(f"initial_position must have shape ({model.num_params},) for this model, got {pos0.shape}")
    if not np.all(np.isfinite(pos0)):
        raise ValueError("initial_position must be finite")
    if not np.isfinite(float(model.log_prior(jnp.asarray(pos0)))):
        raise ValueError(
            "model.log_prior is not finite at initial_position (outside the prior's support): start "
            "inside it; DP-SGLD moves theta over all of R^d, so give constrained parameters through "
            "an unconstrained transform (e.g. theta = log rate, adding the log-Jacobian to log_prior)"
        )
    raw_key, seeded_by = resolve_noise_source(rng_key, secure)
    key = os_key() if seeded_by == "secure" else jax.random.wrap_key_data(raw_key)

    if sigma == 0.0:
        privacy = not_private(MECHANISM, reason="noise_multiplier=0: SGLD without privacy noise")
    else:
        rec = dpd_epsilon(sigma, d, q, t, accountant, neighbouring=neighbouring, seeded_by=seeded_by)
        extra = (
            ("clip", cfg.clip),
            ("step_size", tuple(cfg.step_size)),
            ("langevin", cfg.langevin),
            (
                "epsilon_by_accountant",
                tuple(_epsilons_by_accountant(sigma, d, q, t, neighbouring, {accountant: rec.epsilon}).items()),
            ),
            ("reference", "Ermis & Cemgil 2017"),
        )
        privacy = with_noise_tail(
            dataclasses.replace(rec, mechanism=MECHANISM, details=rec.details + extra), t * int(np.size(pos0))
        )

    samples, info = _jitted_run(model, cfg, t)(key, jnp.asarray(pos0), data_j, float32_at_least(sigma))
    samples = np.asarray(samples)
    info = DPSGLDInfo(*(np.asarray(x) for x in info))
    # the run's privacy is spent even when nothing is released: the refusals below say how much
    spent = (
        "no privacy was spent (noise_multiplier=0)"
        if not privacy.is_private
        else f"the run still spent epsilon={privacy.epsilon:.6g}, delta={privacy.delta:g} ({privacy.accountant}, "
        f"{privacy.neighbouring})"
    )
    if not np.all(np.isfinite(samples)):
        raise ValueError(
            "the chain left the float32 range (non-finite samples): lower step_size, or raise the "
            f"prior precision; nothing was released; {spent}"
        )
    # post-processing of the (privatised) chain: the log prior never reads the data
    outside = ~np.isfinite(np.asarray(_log_prior_of_samples(model.log_prior)(jnp.asarray(samples))))
    if np.any(outside):
        raise ValueError(
            f"model.log_prior is not finite at {int(outside.sum())} of the {t} samples (first after step "
            f"{int(np.argmax(outside)) + 1}): the chain left the prior's support (or diverged until the log "
            "prior overflowed: then lower step_size). DP-SGLD moves theta over all of "
            "R^d with no regard to constraints: give constrained parameters through an unconstrained transform "
            f"(e.g. theta = log rate, adding the log-Jacobian to log_prior); nothing was released; {spent}"
        )
    return DPSGLDResult(
        samples=samples,
        info=info,
        privacy=privacy,
        noise_multiplier=float(sigma),
        config=cfg._replace(noise_multiplier=float(sigma)),
        model_name=model.name,
    )
