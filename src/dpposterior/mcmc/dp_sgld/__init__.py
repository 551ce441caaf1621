"""DP-SGLD / DP dropout: stochastic gradient Langevin dynamics whose noise is the privacy mechanism.

Reference: Ermis & Cemgil, "Differentially private dropout" (2017); SGLD as in Welling & Teh,
"Bayesian learning via stochastic gradient Langevin dynamics" (2011). One step
t, from theta_t with step size eta_t:

    B_t      Poisson sample: every record independently with probability q
    g~_t     = sum_{i in B_t} clip(grad log p(x_i | theta_t), C) + 2 C sigma xi_t,  xi_t ~ N(0, I)
    theta'   = theta_t + (eta_t / 2) (grad log p(theta_t) + g~_t / q) + sqrt(v_t) zeta_t

with clip(v, C) = v min(1, C / ||v||). The sum is divided by the EXPECTED batch size fraction q,
never by the realised batch size (a data-dependent count). The privacy noise enters the parameters
with variance v_dp = (eta_t C sigma / q)^2 per coordinate. The Langevin noise v_t is

- ``langevin="top_up"`` (default, the paper's idea): v_t = max(eta_t - v_dp, 0), so the privacy
  noise doubles as SGLD's injected noise and the total injected variance is max(eta_t, v_dp);
- ``langevin="add"``: v_t = eta_t on top of the privacy noise.

With sigma = 0 both are SGLD (clipped per-example gradients, Poisson minibatches) exactly. When
v_dp > eta_t the injected noise exceeds SGLD's, so the chain explores a flatter (tempered, by about
v_dp / eta_t) version of the posterior: the price of privacy at that step size, which a smaller
eta_t lowers (v_dp falls as eta_t^2, SGLD's noise as eta_t). Clipping also changes the target
whenever a record's gradient norm exceeds C: the chain no longer samples the posterior. For a
one-dimensional parameter the clipped gradient is that of a Huber-type log-likelihood (quadratic
within C of the record, linear beyond), so the chain samples that robust posterior, which is shifted
and wider (a Gaussian mean, N = 100, prior N(0, 0.5^2), C = 0.5: mean moved by 0.44 posterior sd,
variance 2.0 times the posterior's; ``tests/mcmc/test_dp_sgld.py``); in more dimensions the clipped
field need not be a gradient at all. Choose C above the per-record gradient norms near the posterior
mode (public knowledge of the model and the data's range) when the posterior itself is wanted. A
record whose gradient is not finite contributes zero (as in the DP-SGD engine, whose step this
reuses).

Dropout reading (Ermis & Cemgil 2017): additive noise N(0, alpha diag(theta^2)) on the weights is
Gaussian dropout with rate alpha; matching it to the noise actually injected gives the per-weight
dropout variance alpha_t = (v_dp + v_t) / theta_t^2, reported in :class:`DPSGLDInfo`. alpha is not a
free parameter: the privacy level (sigma) and the step size fix it.

Privacy: the released chain theta_1..theta_T is a post-processing of g~_1..g~_T (the Langevin noise
is data-independent and is not counted). Replace-one adjacency: clipping bounds the L2 sensitivity of
the gradient sum by 2C, and the noise std is 2 C sigma, so sigma is the noise multiplier (as the
paper states it). Poisson sampling with rate q; accounted over T steps by
:func:`dpposterior.privacy.dpd_epsilon` with the accountant of the user's choice: ``"ac"`` (DPD-AC,
advanced composition), ``"zcdp"`` (DPD-zCDP), ``"pld"`` (tight; default) or, under add/remove-one
adjacency, ``"rdp"``. The paper's experiments used fixed-size batches; this sampler uses Poisson
sampling, which is what the accountants assume.

Randomness: each step splits its key four ways, ``k_samp, k_lik, k_noise, k_lang =
jax.random.split(key, 4)`` (Poisson sample, the model's own dropout noise, privacy noise, Langevin
noise). :func:`run` seeds from the operating system by default; ``secure=True`` gives every step
keys of :func:`dpposterior.privacy.secure.os_key`, so every draw reads the OS CSPRNG.

Layout, one role per module: :mod:`.models` (:class:`DPSGLDModel`, :func:`logistic_regression`,
:func:`mlp`), :mod:`.schedules` (:class:`StepSize`, :func:`polynomial_step_size`,
:func:`constant_step_size`), :mod:`.settings` (:class:`DPSGLDConfig`, :func:`config`), :mod:`.sampler`
(the sampler: :func:`kernel` returns a :class:`DPSGLDKernel` of pure ``init(position)`` and
``step(key, state)``, as BlackJAX's samplers do; :func:`make_run`, the pure scanned core for
audits), :mod:`.accounting` (:func:`noise_multiplier_for`, sigma for a total (epsilon, delta) under
the chosen accountant; :func:`epsilons_for`, what each accountant certifies for a sigma),
:mod:`.chain` (:func:`run`: checks, scan and accounting, returning a :class:`DPSGLDResult`) and
:mod:`.predictive` (:func:`posterior_predictive` / :func:`predictive_scores`, averages over the
released samples, Ermis & Cemgil 2017, first paragraph; post-processing, which imports no part of
the mechanism).

    from dpposterior.mcmc import dp_sgld
    model = dp_sgld.logistic_regression(3)
    cfg = dp_sgld.config(num_records=N, sampling_rate=0.05, clip=1.0, noise_multiplier=1.0, step_size=1e-3)
    sampler = dp_sgld.kernel((X, y), model, cfg)
    state = sampler.init(model.init(jax.random.key(0)))
    state, info = jax.jit(sampler.step)(key, state)
"""

from .accounting import epsilons_for, noise_multiplier_for
from .chain import DPSGLDResult, run
from .settings import LANGEVIN_MODES, DPSGLDConfig, config
from .sampler import DPSGLDInfo, DPSGLDKernel, DPSGLDState, init, kernel, make_run
from .models import DPSGLDModel, logistic_regression, mlp
from .predictive import posterior_predictive, predictive_scores
from .schedules import StepSize, constant_step_size, polynomial_step_size

__all__ = [
    "DPSGLDConfig",
    "DPSGLDInfo",
    "DPSGLDKernel",
    "DPSGLDModel",
    "DPSGLDResult",
    "DPSGLDState",
    "LANGEVIN_MODES",
    "StepSize",
    "config",
    "constant_step_size",
    "epsilons_for",
    "init",
    "kernel",
    "logistic_regression",
    "make_run",
    "mlp",
    "noise_multiplier_for",
    "polynomial_step_size",
    "posterior_predictive",
    "predictive_scores",
    "run",
]
