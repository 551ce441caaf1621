"""The "nuts" solver: NumPyro NUTS on the post-processing model, all coordinates jointly.

The model is the same density as :mod:`.model` (the d coordinates are independent, so one d-coordinate
model with 2d (or 3d) latent variables is sampled at once, the standard way). It is written in
standardised variables, phi* = phi_loc + phi_scale z_phi and h = h_loc + h_scale z_h (a linear change
of variables: the same posterior), and s ~ HalfNormal(s_scale). The likelihood comes from the
sufficient statistics (O(d) per gradient) or, for tests and the benchmark, from the full trace (O(T d)).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.diagnostics import effective_sample_size, split_gelman_rubin
from numpyro.infer import MCMC, NUTS

from . import model as M
from .model import TracePriors
from .stats import TraceStats

NUTS_OPTIONS = (
    "num_warmup",
    "num_samples",
    "num_chains",
    "target_accept_prob",
    "max_tree_depth",
    "dense_mass",
    "thinning",
    "progress_bar",
    "chain_method",
    "marginalize_phi_star",
)


def _post_processing_model(stats, priors, noise_sd, sampling_rate, subsampling_noise, full_trace):
    d = stats.phi_mean.shape[-1]
    z_phi = numpyro.sample("z_phi_star", dist.Normal(jnp.zeros(d), 1.0).to_event(1))
    z_h = numpyro.sample("z_h", dist.Normal(jnp.zeros(d), 1.0).to_event(1))
    s = numpyro.sample("s", dist.HalfNormal(priors.s_scale * jnp.ones(d)).to_event(1)) if subsampling_noise else None
    h = priors.h_loc + priors.h_scale * z_h
    if full_trace is None:
        offset = (priors.phi_loc - stats.phi_mean) + priors.phi_scale * z_phi
        loglik, _ = M.log_likelihood_parts(stats, noise_sd, sampling_rate, offset, h, s)
    else:
        phi, grads = full_trace
        phi_star = priors.phi_loc + priors.phi_scale * z_phi
        loglik = M.log_likelihood_full(phi, grads, noise_sd, sampling_rate, phi_star, h, s)
    numpyro.factor("log_likelihood", jnp.sum(loglik))


def _chain_diagnostics(x) -> tuple[np.ndarray, np.ndarray]:
    """Split R-hat and effective sample size per coordinate of draws (chains, draws, d); NaN when a
    chain is too short (numpyro needs at least 4 draws)."""
    x = np.asarray(x)
    if x.shape[1] < 4:
        nan = np.full(x.shape[2:], np.nan)
        return nan, nan
    with np.errstate(invalid="ignore", divide="ignore"):  # constant draws in very short chains
        return np.asarray(split_gelman_rubin(x)), np.asarray(effective_sample_size(x))


def _stuck(x) -> np.ndarray:
    """(chains, d) True where a chain's draws (chains, draws, d) of a coordinate never change (a chain of
    one draw cannot tell, and is not flagged)."""
    x = np.asarray(x)
    if x.shape[1] < 2:
        return np.zeros((x.shape[0],) + x.shape[2:], bool)
    return np.all(x == x[:, :1], axis=1)


def _collapsed_model(stats, priors, noise_sd, sampling_rate, subsampling_noise):
    """The same posterior with phi* integrated out exactly: NUTS samples (h[, s]) only."""
    d = stats.phi_mean.shape[-1]
    z_h = numpyro.sample("z_h", dist.Normal(jnp.zeros(d), 1.0).to_event(1))
    s = numpyro.sample("s", dist.HalfNormal(priors.s_scale * jnp.ones(d)).to_event(1)) if subsampling_noise else None
    h = priors.h_loc + priors.h_scale * z_h
    numpyro.factor(
        "marginal_log_likelihood",
        jnp.sum(M.marginal_log_likelihood_varying(stats, priors, noise_sd, sampling_rate, h, s)),
    )


def nuts_posterior(
    stats: TraceStats,
    priors: TracePriors,
    noise_sd,
    sampling_rate,
    key: jax.Array,
    *,
    subsampling_noise: bool = False,
    full_trace: tuple[Any, Any] | None = None,
    num_warmup: int = 1000,
    num_samples: int = 4000,
    num_chains: int = 1,
    target_accept_prob: float = 0.8,
    max_tree_depth: int = 10,
    dense_mass: bool = False,
    thinning: int = 1,
    progress_bar: bool = False,
    chain_method: str = "sequential",
    marginalize_phi_star: bool = False,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Runs NUTS on p(phi*, h[, s] | trace); returns (phi* draws (M, d), diagnostics).

    Args:
      stats, priors, noise_sd, sampling_rate: the problem (see :mod:`.model`).
      key: JAX PRNG key.
      subsampling_noise: sample s too.
      full_trace: optional (phi, grads) (T - T*, d) after burn-in: use the O(T d) full-trace likelihood
        instead of the statistics (tests and benchmark only; the posterior is the same).
      num_warmup, num_samples, num_chains, target_accept_prob, max_tree_depth, dense_mass, thinning,
        progress_bar, chain_method: passed to NumPyro's NUTS / MCMC.
      marginalize_phi_star: sample (h[, s]) from their marginal with phi* integrated out exactly, then
        draw phi* from its exact Gaussian given each draw (the same posterior; no funnel for NUTS to
        get stuck in when A is poorly identified). Default False: NUTS on the joint (phi*, h[, s]), as
        in the paper.

    Returns:
      phi_star: (num_chains * num_samples / thinning, d) float32 draws.
      diagnostics: split R-hat and effective sample size (numpyro.diagnostics) of phi* and h, as
        arrays per coordinate and their worst values, the number of divergent transitions, the
        draws of h (and s), and "stuck" (chains, d): True where a chain's draws of a coordinate never
        changed (the sampler did not move: e.g. ``num_warmup=0`` leaves the step size unadapted).
    """
    dtype = jnp.float32
    stats = stats.astype(dtype)
    priors = TracePriors(*(jnp.asarray(x, dtype=dtype) for x in priors))
    noise_sd = jnp.asarray(noise_sd, dtype=dtype)
    if marginalize_phi_star and full_trace is not None:
        raise ValueError("marginalize_phi_star works from the statistics; it cannot be combined with full_trace")
    if full_trace is not None:
        full_trace = (jnp.asarray(full_trace[0], dtype), jnp.asarray(full_trace[1], dtype))
    model = _collapsed_model if marginalize_phi_star else _post_processing_model
    kernel = NUTS(model, target_accept_prob=target_accept_prob, max_tree_depth=max_tree_depth, dense_mass=dense_mass)
    mcmc = MCMC(
        kernel,
        num_warmup=num_warmup,
        num_samples=num_samples,
        num_chains=num_chains,
        thinning=thinning,
        progress_bar=progress_bar,
        chain_method=chain_method,
    )
    k_run, k_phi = jax.random.split(key)
    args = (stats, priors, noise_sd, float(sampling_rate), subsampling_noise)
    mcmc.run(k_run, *(args if marginalize_phi_star else args + (full_trace,)), extra_fields=("diverging",))
    samples = mcmc.get_samples(group_by_chain=True)
    z_h = np.asarray(samples["z_h"])  # (chains, draws, d)
    h_loc, h_scale = (np.asarray(x, np.float64) for x in (priors.h_loc, priors.h_scale))
    h = (h_loc + h_scale * z_h.astype(np.float64)).astype(np.float32)
    if marginalize_phi_star:
        s_draws = samples["s"] if subsampling_noise else None
        offset, var = M.conditional_phi_star(stats, priors, noise_sd, float(sampling_rate), jnp.asarray(h), s_draws)
        z = jax.random.normal(k_phi, offset.shape, dtype)
        phi = np.asarray(stats.phi_mean + offset + jnp.sqrt(var) * z, np.float32)
        z_phi = (phi - np.asarray(priors.phi_loc)) / np.asarray(priors.phi_scale)
    else:
        z_phi = np.asarray(samples["z_phi_star"])
        phi_loc, phi_scale = (np.asarray(x, np.float64) for x in (priors.phi_loc, priors.phi_scale))
        phi = (phi_loc + phi_scale * z_phi.astype(np.float64)).astype(np.float32)
    diverging = np.asarray(mcmc.get_extra_fields()["diverging"])
    rhat_phi, ess_phi = _chain_diagnostics(z_phi)
    rhat_h, ess_h = _chain_diagnostics(z_h)
    diagnostics: dict[str, Any] = {
        "num_divergences": int(diverging.sum()),
        "r_hat_phi_star": rhat_phi,
        "r_hat_h": rhat_h,
        "ess_phi_star": ess_phi,
        "ess_h": ess_h,
        "max_r_hat": float(max(rhat_phi.max(), rhat_h.max())),
        "min_ess": float(min(ess_phi.min(), ess_h.min())),
        "h_draws": h.reshape(-1, h.shape[-1]),
    }
    stuck = _stuck(z_h) if marginalize_phi_star else _stuck(z_h) | _stuck(z_phi)
    if subsampling_noise:
        s = np.asarray(samples["s"])
        diagnostics["s_draws"] = s.reshape(-1, s.shape[-1])
        diagnostics["r_hat_s"], diagnostics["ess_s"] = _chain_diagnostics(s)
        diagnostics["max_r_hat"] = float(max(diagnostics["max_r_hat"], diagnostics["r_hat_s"].max()))
        diagnostics["min_ess"] = float(min(diagnostics["min_ess"], diagnostics["ess_s"].min()))
        stuck = stuck | _stuck(s)
    diagnostics["stuck"] = stuck
    return phi.reshape(-1, phi.shape[-1]), diagnostics


def _potential_gen(stats, priors, noise_sd, sampling_rate, subsampling_noise):
    """The negative log posterior of one replicate in unconstrained standardised variables
    x = (z_phi (d,), z_h (d,)[, log s (d,)]) flattened, for numpyro's functional NUTS."""
    d = stats.phi_mean.shape[-1]

    def potential(x):
        z_phi, z_h = x[:d], x[d : 2 * d]
        h = priors.h_loc + priors.h_scale * z_h
        offset = (priors.phi_loc - stats.phi_mean) + priors.phi_scale * z_phi
        lp = -0.5 * (jnp.square(z_phi) + jnp.square(z_h))
        if subsampling_noise:
            u = x[2 * d :]
            s = jnp.exp(u)
            lp = lp - 0.5 * jnp.square(s / priors.s_scale) + u  # HalfNormal kernel + log-Jacobian
        else:
            s = None
        loglik, _ = M.log_likelihood_parts(stats, noise_sd, sampling_rate, offset, h, s)
        return -jnp.sum(lp + loglik)

    return potential


def nuts_posterior_batch(
    stats: TraceStats,
    priors: TracePriors,
    noise_sd,
    sampling_rate,
    key: jax.Array,
    *,
    subsampling_noise: bool = False,
    num_warmup: int = 1000,
    num_samples: int = 4000,
    target_accept_prob: float = 0.8,
    max_tree_depth: int = 10,
) -> tuple[jax.Array, dict]:
    """NUTS on many replicates at once: one chain per replicate, ``jax.vmap``-ed over a leading axis.

    Each replicate r is the joint model of :func:`nuts_posterior` on its own statistics ``stats[r]``
    (shape (R, d) fields; ``priors`` and ``noise_sd`` broadcast to (R, d); ``sampling_rate`` scalar),
    sampled with NumPyro's functional NUTS kernel (``numpyro.infer.hmc.hmc``) with step-size and
    diagonal mass-matrix adaptation. Under vmap every iteration costs the longest trajectory of the batch.
    For the coverage engine and the calibration tests.

    Returns:
      phi_star: (R, num_samples, d) draws.
      diagnostics: "r_hat_phi_star", "ess_phi_star" (R, d) (split R-hat and ESS of the single chain,
        numpyro.diagnostics), "num_divergences" (R,).
    """
    from numpyro.infer.hmc import hmc

    dtype = jnp.float32
    stats = stats.astype(dtype)
    r, d = stats.phi_mean.shape
    priors = TracePriors(*(jnp.broadcast_to(jnp.asarray(x, dtype), (r, d)) for x in priors))
    noise_sd = jnp.broadcast_to(jnp.asarray(noise_sd, dtype), (r, d))
    k = 3 if subsampling_noise else 2
    q = float(sampling_rate)

    def gen(st, pr, ns):
        return _potential_gen(st, pr, ns, q, subsampling_noise)

    init_kernel, sample_kernel = hmc(potential_fn_gen=gen, algo="NUTS")

    def one(key, st, pr, ns):
        k_init, k_run = jax.random.split(key)
        x0 = jax.random.uniform(k_init, (k * d,), dtype, -0.5, 0.5)  # near the prior centre
        state = init_kernel(
            x0,
            num_warmup,
            target_accept_prob=target_accept_prob,
            max_tree_depth=max_tree_depth,
            model_args=(st, pr, ns),
            rng_key=k_run,
        )

        def step(state, _):
            state = sample_kernel(state, model_args=(st, pr, ns))
            return state, (state.z[:d], state.diverging)

        state, _ = jax.lax.scan(step, state, None, length=num_warmup)
        _, (z_phi, div) = jax.lax.scan(step, state, None, length=num_samples)
        return pr.phi_loc + pr.phi_scale * z_phi, jnp.sum(div), z_phi

    keys = jax.random.split(key, r)
    phi, div, z_phi = jax.jit(jax.vmap(one))(keys, stats, priors, noise_sd)
    per_replicate = [_chain_diagnostics(zr) for zr in np.asarray(z_phi)[:, None]]  # (1 chain, draws, d) each
    diagnostics = {
        "num_divergences": np.asarray(div),
        "r_hat_phi_star": np.stack([r for r, _ in per_replicate]),
        "ess_phi_star": np.stack([e for _, e in per_replicate]),
    }
    return phi, diagnostics
