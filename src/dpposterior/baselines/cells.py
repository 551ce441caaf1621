"""The baselines as coverage-cell methods: K replicates' data sets in, posterior draws out.

Each function takes the K simulated data sets of a cell (synthetic data: these functions run the
baselines' public mechanisms on them, with keys derived from ``key``), releases each one as the
baseline's mechanism does, runs the baseline's post-processing vectorised over the replicates, and
returns a :class:`BaselineCellOutput` whose first three fields match the coverage engine's
``MethodOutput`` (``draws`` (K, M, n) float32 in the model's unconstrained space, ``posterior_sd``
(K, n), ``diagnostics``), plus the per-replicate ``privacy`` record. The Gibbs baselines' diagnostics
include their chains' effective sample sizes (:func:`._mixing.ess_summary`). :func:`simulate_replicates`
draws (theta, data) from the models' simulators for tests and for callers without their own.

The unconstrained spaces are the NumPyro models' (:func:`dpposterior.releases.model_inspect.inspect_model`):
logit (Beta-Bernoulli), softplus (Gamma-Exponential), stick-breaking (Dirichlet), (log sigma2, w) for the
linear regression, so draws are comparable with NA-DPVI's.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._batching import map_in_chunks
from .._checks import check_epsilon, check_positive_int
from ..privacy.noise import float32_at_least, with_noise_tail
from ..privacy.dpsgd_accounting import Accountant
from ..privacy.spent import Neighbouring, PrivacySpent
from ..vi._dpvim import DEFAULT_NUM_WINDOWS
from ..releases.statistics import FAMILIES, ExpFamModel, SufficientStatisticsRelease
from . import expfam_gibbs as EF
from . import regression_gibbs as RG
from .expfam_release import release_sufficient_statistics
from .regression_params import RegressionGibbsParams, sampler_params
from .regression_release import release_regression_statistics
from ._mixing import ess_summary

#: default sweeps kept per draw (Gamma-Exponential mixes slowest: about 30 sweeps per effective draw
#: at epsilon = 0.1, N = 5,000; the others about 1.5).
DEFAULT_THIN = {"beta-bernoulli": 2, "dirichlet-categorical": 2, "gamma-exponential": 10}
#: clipping bounds fixed in advance for the papers' Gamma(8, 2)-Exponential model: the expected clipped
#: fraction under the prior is E[exp(-5 theta)] = (2/7)^8 = 4.5e-5.
DEFAULT_EXPONENTIAL_BOUNDS = (0.0, 5.0)
#: clipping bounds fixed in advance for the papers' 10-D linear regression (x ~ N(0, 1): 0.27% of
#: coordinates clipped; y has sd about 1.1 under the prior).
DEFAULT_X_BOUND = 3.0
DEFAULT_Y_BOUND = 5.0
#: the fewest steps of a DPVIm run: its reading averages the iterates after convergence, judged over
#: ``dpvim.DEFAULT_NUM_WINDOWS`` windows of at least 2 steps each.
DPVIM_MIN_STEPS = 2 * DEFAULT_NUM_WINDOWS


class BaselineCellOutput(NamedTuple):
    """Posterior draws of a cell's replicates from a baseline.

    Attributes:
      draws: (K, M, n) float32 draws of theta in the unconstrained space.
      posterior_sd: (K, n) float64 posterior sd per replicate and coordinate (the TARP reference scale).
      diagnostics: a JSON-ready dict.
      privacy: the PrivacySpent of each replicate's release (the same mechanism and budget for all).
    """

    draws: np.ndarray
    posterior_sd: np.ndarray
    diagnostics: dict[str, Any]
    privacy: PrivacySpent

    @property
    def sharpness(self) -> float:
        """Mean posterior sd over replicates and coordinates (unconstrained space)."""
        return float(np.mean(self.posterior_sd))


def model_layout(model_name: str):
    """The unconstrained layout of one of the papers' models (as NA-DPVI uses it)."""
    if model_name in FAMILIES:
        return EF.family_layout(model_name, 3)
    if model_name == "linear-regression":
        return RG.regression_layout(10)
    from ..models.registry import get_model
    from ..vi.model_inspect import inspect_model

    spec = get_model(model_name)
    shapes = jax.eval_shape(lambda k: spec.simulate(k, 3), jax.random.PRNGKey(0))[1]
    return inspect_model(spec.model, tuple(jnp.zeros(s.shape, s.dtype) for s in shapes), {})


def simulate_replicates(
    model_name: str, key: Any, num_replicates: int, num_records: int
) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """(theta (K, n) unconstrained, data arrays each (K, N, ...)) from the model's prior predictive."""
    from ..models.registry import get_model

    spec = get_model(model_name)
    k = check_positive_int(num_replicates, "num_replicates")
    n = check_positive_int(num_records, "num_records")
    keys = jax.random.split(_key(key), k)
    theta, data = jax.jit(jax.vmap(lambda kk: spec.simulate(kk, n)))(keys)
    layout = model_layout(model_name)
    return np.asarray(layout.unconstrain(theta)), tuple(np.asarray(a) for a in data)


def _key(key: Any) -> jax.Array:
    if key is None:
        raise TypeError("key must be an int seed or a JAX key (cells use fixed keys for reproduction)")
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        return jax.random.PRNGKey(int(key))
    key = jnp.asarray(key)
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        return jax.random.key_data(key)
    return key.astype(jnp.uint32)


def _as_tuple(datasets: Any) -> tuple[np.ndarray, ...]:
    if isinstance(datasets, (tuple, list)):
        return tuple(np.asarray(a) for a in datasets)
    return (np.asarray(datasets),)


# ---------------------------------------------------------------------------------------------
# Bernstein-Sheldon (exponential families)


@functools.lru_cache(maxsize=32)
def _bs_program(model: ExpFamModel, num_warmup: int, num_draws: int, thin: int):
    """The vmapped chain; ``interval`` is None (plain release) or the (lo, hi) rounding intervals."""

    def one(key, z, interval, scale):
        return EF.sample_chain(
            key, z, scale, model=model, num_warmup=num_warmup, num_draws=num_draws, thin=thin, interval=interval
        )

    return jax.jit(jax.vmap(one, in_axes=(0, 0, 0, None)))


def bernstein_sheldon_cell(
    model_name: str,
    datasets: Any,
    epsilon: float,
    key: Any,
    num_draws: int,
    *,
    bounds: Any = None,
    num_warmup: int = 1000,
    thin: int | None = None,
    neighbouring: Neighbouring = "add_remove",
    snapping: bool = False,
    chunk_size: int = 250,
    devices: int = 1,
) -> BaselineCellOutput:
    """Bernstein & Sheldon noise-aware Gibbs on K replicates of an exponential-family cell.

    Each replicate's data set is released by :func:`~dpposterior.baselines.release_sufficient_statistics`
    (pure epsilon-DP, Laplace noise on the sufficient statistic, key derived from ``key``) and its
    Gibbs chain runs vmapped with the others.

    Args:
      model_name: "beta-bernoulli", "dirichlet-categorical" or "gamma-exponential" (default priors).
      datasets: the records, an array (K, N) or a 1-tuple holding it (as the models' simulators give).
      epsilon: the budget of each release.
      key: an int seed or JAX key; split into per-replicate release and chain keys.
      num_draws: M draws per replicate.
      bounds: clipping bounds for gamma-exponential (default :data:`DEFAULT_EXPONENTIAL_BOUNDS`).
      num_warmup: sweeps discarded.
      thin: sweeps per kept draw (default :data:`DEFAULT_THIN`).
      neighbouring: "add_remove" (default) or "replace_one".
      snapping: release by Mironov's snapping mechanism (the chain then conditions on the rounding
        intervals); default False, the plain Laplace mechanism of the papers.
      chunk_size: replicates per compiled call (default 250: wider calls amortise the per-call
        overhead; benchmarks/README.md).
      devices: XLA devices to split each compiled call over (:func:`dpposterior._batching.map_in_chunks`).
    """
    if model_name not in FAMILIES:
        raise ValueError(f"bernstein_sheldon_cell supports {FAMILIES}, got {model_name!r}")
    epsilon = check_epsilon(epsilon)
    num_draws = check_positive_int(num_draws, "num_draws")
    num_warmup = check_positive_int(num_warmup, "num_warmup", minimum=0)
    thin = check_positive_int(DEFAULT_THIN[model_name] if thin is None else thin, "thin")
    (x,) = _as_tuple(datasets)
    if x.ndim != 2:
        raise ValueError(f"datasets must hold records of shape (K, N), got {x.shape}")
    if model_name == "gamma-exponential" and bounds is None:
        bounds = DEFAULT_EXPONENTIAL_BOUNDS
    k = x.shape[0]
    k_rel, k_chain = jax.random.split(_key(key))
    rel_keys = np.asarray(jax.random.split(k_rel, k))
    releases = [
        release_sufficient_statistics(
            model_name,
            x[i],
            epsilon=epsilon,
            bounds=bounds,
            neighbouring=neighbouring,
            rng_key=rel_keys[i],
            snapping=snapping,
        )
        for i in range(k)
    ]
    z = np.stack([r.noisy_statistic for r in releases]).astype(np.float32)
    model = releases[0].model()
    scale = jnp.float32(releases[0].noise_scale)
    interval = None
    if snapping:
        ivs = [_rounding_interval(r) for r in releases]
        interval = tuple(np.stack([iv[j] for iv in ivs]).astype(np.float32) for j in (0, 1))
    prog = _bs_program(model, num_warmup, num_draws, thin)
    thetas = map_in_chunks(
        lambda kk, zz, iv: prog(kk, zz, iv, scale),
        (np.asarray(jax.random.split(k_chain, k)), z, interval),
        chunk_size,
        devices=devices,
    )
    EF.check_finite_draws(thetas, float(releases[0].noise_scale), "bernstein_sheldon_cell")
    draws = np.asarray(EF.to_unconstrained(model_name, jnp.asarray(thetas)), np.float32)
    diag = {
        "method": "bernstein_sheldon",
        "num_warmup": num_warmup,
        "thin": thin,
        **EF.clipping_check(np.asarray(thetas)[..., 0] if model.bounds else thetas, model.bounds, None),
        "noise_scale": float(releases[0].noise_scale),
        "sensitivity": float(releases[0].sensitivity),
        "bounds": list(bounds) if bounds is not None else None,
        "neighbouring": neighbouring,
        "snapping": bool(snapping),
        **ess_summary(draws),
    }
    return BaselineCellOutput(
        draws=draws,
        posterior_sd=np.std(draws.astype(np.float64), axis=1),
        diagnostics=diag,
        privacy=releases[0].privacy,
    )


# ---------------------------------------------------------------------------------------------
# Gibbs-SS-Noisy (linear regression)


@functools.lru_cache(maxsize=16)
def _ss_program(dims: RG.RegressionDims, num_warmup: int, num_draws: int, thin: int, interweave: bool):
    def one(key, params):
        return RG.sample_chain(
            key, params, dims=dims, num_warmup=num_warmup, num_draws=num_draws, thin=thin, interweave=interweave
        )

    return jax.jit(jax.vmap(one))


def gibbs_ss_noisy_cell(
    datasets: Any,
    epsilon: float,
    key: Any,
    num_draws: int,
    *,
    x_bound: Any = DEFAULT_X_BOUND,
    y_bound: float = DEFAULT_Y_BOUND,
    fourth_moments: Any = "normal",
    budget_split: dict[str, float] | None = None,
    num_warmup: int = 1000,
    thin: int = 5,
    interweave: bool = True,
    neighbouring: Neighbouring = "add_remove",
    snapping: bool = False,
    chunk_size: int = 125,
    devices: int = 1,
) -> BaselineCellOutput:
    """Gibbs-SS-Noisy on K replicates of the linear-regression cell.

    Args:
      datasets: (X (K, N, p), y (K, N)) as the model's simulator gives them (X without intercept).
      epsilon: the total budget of each release (split by ``budget_split``, default equal thirds).
      key: an int seed or JAX key.
      num_draws: M draws per replicate.
      x_bound, y_bound: clipping bounds fixed in advance (defaults 3 and 5).
      fourth_moments: "normal" (default), "released", or a public covariate model (mean, cov)
        (e.g. ``(np.zeros(10), np.eye(10))`` for the papers' x ~ N(0, I)); see
        :func:`~dpposterior.baselines.regression_params.sampler_params`.
      budget_split, neighbouring: as :func:`~dpposterior.baselines.release_regression_statistics`.
      num_warmup, thin, interweave: chain settings.
      snapping: release by Mironov's snapping mechanism (default False, the papers' plain Laplace).
      chunk_size: replicates per compiled call (default 125: the sweep's small matrix algebra runs
        better in wider batches, and gains little beyond about 128; benchmarks/README.md).
      devices: XLA devices to split each compiled call over (:func:`dpposterior._batching.map_in_chunks`;
        the sweep's Cholesky factorisations are LAPACK kernels, so it stays on one device).
    """
    epsilon = check_epsilon(epsilon)
    num_draws = check_positive_int(num_draws, "num_draws")
    X, y = _as_tuple(datasets)
    if X.ndim != 3 or y.shape != X.shape[:2]:
        raise ValueError(f"datasets must be (X (K, N, p), y (K, N)), got shapes {X.shape} and {y.shape}")
    k = X.shape[0]
    release_mode = "released" if (isinstance(fourth_moments, str) and fourth_moments == "released") else "normal"
    k_rel, k_chain = jax.random.split(_key(key))
    rel_keys = np.asarray(jax.random.split(k_rel, k))
    params = []
    privacy = None
    for i in range(k):
        rel = release_regression_statistics(
            X[i],
            y[i],
            epsilon=epsilon,
            x_bound=x_bound,
            y_bound=y_bound,
            budget_split=budget_split,
            fourth_moments=release_mode,
            neighbouring=neighbouring,
            rng_key=rel_keys[i],
            snapping=snapping,
        )
        privacy = rel.privacy
        params.append(sampler_params(rel, fourth_moments=fourth_moments))
    if privacy is None:
        raise ValueError("datasets hold no replicates (K = 0)")
    # the fields stacked as NumPy arrays: the compiled program reads them as jax Arrays
    stacked = RegressionGibbsParams._make(
        np.stack([np.asarray(getattr(p, f)) for p in params]) for f in RegressionGibbsParams._fields
    )
    dims = RG.RegressionDims(X.shape[2], X.shape[1], rounded=bool(snapping))
    prog = _ss_program(dims, num_warmup, num_draws, thin, bool(interweave))
    ws, s2s, acc = map_in_chunks(prog, (np.asarray(jax.random.split(k_chain, k)), stacked), chunk_size, devices=devices)
    draws = np.asarray(RG.to_unconstrained(jnp.asarray(ws), jnp.asarray(s2s)), np.float32)
    diag = {
        "method": "gibbs_ss_noisy",
        "num_warmup": num_warmup,
        "thin": thin,
        "interweave": bool(interweave),
        "snapping": bool(snapping),
        "fourth_moments": fourth_moments if isinstance(fourth_moments, str) else "public",
        "x_bound": float(np.max(x_bound)),
        "y_bound": float(y_bound),
        "latent_acceptance_min": float(np.min(acc)),
        "latent_acceptance_mean": float(np.mean(acc)),
        **ess_summary(draws),
    }
    return BaselineCellOutput(
        draws=draws, posterior_sd=np.std(draws.astype(np.float64), axis=1), diagnostics=diag, privacy=privacy
    )


def _rounding_interval(release: SufficientStatisticsRelease) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) of a snapped release (which always has them)."""
    interval = release.observation_interval()
    if interval is None:
        raise ValueError("the release is not snapped: it has no rounding intervals")
    return interval


# ---------------------------------------------------------------------------------------------
# DPVIm


def dpvim_cell(
    model_name: str,
    datasets: Any,
    epsilon: float,
    key: Any,
    num_draws: int,
    *,
    delta: float = 1e-5,
    num_steps: int = 10_000,
    sampling_rate: float = 0.1,
    clip: float | None = None,
    natural_gradient: bool = False,
    learning_rate: Any = None,
    reading: str = "noise_aware",
    accountant: Accountant = "pld",
    chunk_size: int = 25,
    devices: int = 1,
) -> BaselineCellOutput:
    """DPVIm on K replicates of a cell: one DPVIm run per replicate (vmapped), then its reading.

    Args:
      model_name: one of the papers' models (:data:`dpposterior.models.MODELS`).
      datasets: the model simulator's data arrays with a leading K axis.
      epsilon, delta: the budget of each run (sigma calibrated by the PLD accountant by default).
      key: int seed or JAX key.
      num_draws: M draws per replicate from the Gaussian reading.
      num_steps, sampling_rate: T and q (the papers': 10,000 and 0.1).
      clip: C (default: the model's reference clip, ``ModelSpec.clip``).
      natural_gradient: the natural-gradient variant (default False; its steps are damped where s^2
        amplifies strong noise: :mod:`dpposterior.vi._dpvim`).
      learning_rate: None (defaults of :func:`dpposterior.vi._dpvim.default_learning_rates`) or
        (lr_mu, lr_rho).
      reading: "noise_aware" (N(mean, sigma_q^2 + trace variance); the NA-DPVI paper's baseline) or
        "averaged" (N(mean, sigma_q^2)).
      chunk_size: replicates per compiled call.
      devices: XLA devices to split each compiled call over (:func:`dpposterior._batching.map_in_chunks`).
    """
    from ..models.registry import get_model
    from ..privacy import calibrate_noise_multiplier, dpsgd_epsilon
    from ..vi import _dpvim as DV
    from ..releases import family
    from ..vi.model_inspect import inspect_model, prior_median_unconstrained

    if reading not in ("noise_aware", "averaged"):
        raise ValueError(f"reading must be 'noise_aware' or 'averaged', got {reading!r}")
    spec = get_model(model_name)
    epsilon = check_epsilon(epsilon)
    num_draws = check_positive_int(num_draws, "num_draws")
    num_steps = check_positive_int(num_steps, "num_steps", minimum=DPVIM_MIN_STEPS)
    if not isinstance(natural_gradient, bool):
        raise TypeError(f"natural_gradient must be True or False, got {natural_gradient!r}")
    data = _as_tuple(datasets)
    k, n_rec = data[0].shape[:2]
    clip = float(spec.clip if clip is None else clip)
    dummy = tuple(jnp.zeros((3,) + a.shape[2:], a.dtype) for a in data)
    layout = inspect_model(spec.model, dummy, {})
    n = layout.num_latent
    sigma = calibrate_noise_multiplier(epsilon, delta, sampling_rate, num_steps, accountant)
    if learning_rate is None:
        lr_mu, lr_rho = DV.default_learning_rates(
            num_steps,
            n,
            sigma,
            clip,
            natural_gradient=natural_gradient,
            dataset_size=n_rec,
            sampling_rate=sampling_rate,
        )
    else:
        lr = np.asarray(learning_rate)
        if lr.dtype.kind not in "iuf" or lr.shape not in ((), (2,)) or not np.all(np.isfinite(lr) & (lr > 0)):
            raise ValueError(
                f"learning_rate must be None, a finite number > 0 or a pair (lr_mu, lr_rho) of them, "
                f"got {learning_rate!r}"
            )
        lr_mu, lr_rho = (float(v) for v in np.broadcast_to(lr.astype(np.float64), (2,)))
    mu0 = prior_median_unconstrained(spec.model, dummy, {}, layout)
    phi0 = jnp.concatenate([mu0, jnp.full(n, family.inverse_scale(DV.DEFAULT_INIT_SCALE))]).astype(jnp.float32)
    loss = DV.make_loc_loss(spec.model, layout, n_rec)
    run = DV.make_dpvim_run(
        loss,
        num_records=n_rec,
        num_latent=n,
        clip=clip,
        sampling_rate=sampling_rate,
        num_steps=num_steps,
        natural_gradient=natural_gradient,
    )

    def one(run_key, draw_key, dat):
        mus, rhos, _, _ = run(run_key, phi0, dat, float32_at_least(sigma), jnp.float32(lr_mu), jnp.float32(lr_rho))
        summ = DV.trace_summary(mus, rhos)
        phi = DV.noise_aware_phi(summ) if reading == "noise_aware" else DV.averaged_phi(summ)
        mu, rho = family.split_phi(phi)
        sd = family.scale(rho)
        z = jax.random.normal(jax.random.wrap_key_data(draw_key), (num_draws, n), jnp.float32)
        return mu + sd * z, sd, summ["start"], summ["converged"]

    prog = jax.jit(jax.vmap(one))
    k_run, k_draw = jax.random.split(_key(key))
    draws, sd, start, conv = map_in_chunks(
        prog,
        (np.asarray(jax.random.split(k_run, k)), np.asarray(jax.random.split(k_draw, k)), data),
        chunk_size,
        devices=devices,
    )
    eps = dpsgd_epsilon(sigma, delta, sampling_rate, num_steps, accountant)
    privacy = PrivacySpent(
        epsilon=eps,
        delta=delta,
        neighbouring="add_remove",
        accountant=accountant,
        mechanism=DV.MECHANISM,
        noise_multiplier=sigma,
        sampling_rate=sampling_rate,
        num_steps=num_steps,
        seeded_by="user",
        details=(
            ("clip", clip),
            ("sampling", "poisson"),
            ("clipped", "loc gradient only"),
            ("algorithm", "dpvim_natural" if natural_gradient else "dpvim"),
            ("dataset_size", "public"),
        ),
    )  # as dpvim labels the N of its trace
    privacy = with_noise_tail(privacy, num_steps * 2 * n)  # one normal per parameter (2n) and step
    diag = {
        "method": "dpvim",
        "reading": reading,
        "natural_gradient": natural_gradient,
        "clip": clip,
        "noise_multiplier": sigma,
        "learning_rate": [lr_mu, lr_rho],
        "converged_share": float(np.mean(conv)),
        "mean_start": float(np.mean(start)),
    }
    return BaselineCellOutput(
        draws=np.asarray(draws, np.float32), posterior_sd=np.asarray(sd, np.float64), diagnostics=diag, privacy=privacy
    )
