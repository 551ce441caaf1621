"""Post-processing speed: full-trace NUTS vs sufficient-statistics NUTS vs grid (and Laplace).

    python benchmarks/postprocess.py                  # Adult logistic regression trace (dpposterior.dpvi)
    python benchmarks/postprocess.py --trace T.npz    # a trace saved by DPVITrace.save
    python benchmarks/postprocess.py --quick          # a small simulated trace, seconds

Without ``--trace`` the script makes a DPVI trace of Bayesian logistic regression on the vendored UCI
Adult data (epsilon 1, T = 10,000, q = 0.1, C = 11, beta_rho = 550, lambda_c = sqrt(57), as the demo);
if ``dpposterior.dpvi`` or the Adult loader is not available it simulates a trace with d = 2 x 100 from
the linear-Gaussian trace model instead, and says so.

Every method runs the same post-processing model (papers/na-dpvi.txt eq. 10 / 59 with the trace-based
priors) on the same trace. "full-trace NUTS" evaluates the likelihood from the whole trace after burn-in
(O(T d) per gradient, as the reference implementation does); "stats NUTS" is
``noise_aware_posterior(method="nuts")`` (six statistics per coordinate, O(d) per gradient); both run
NumPyro NUTS with the same chain length and seed. Times are wall-clock seconds of one call each,
compilation included; "compiled seconds" is the call without compilation: for grid and Laplace a
repeated call, for NUTS (which NumPyro compiles on every call) the call minus a 1 + 4-draw call. The agreement columns compare each
method's per-coordinate posterior of phi* with the grid's (exact up to its grid): the largest mean
difference in grid posterior sds and in Monte Carlo standard errors (grid sd / sqrt(ESS)), the largest
relative sd difference, and the largest difference of the 5% and 95% quantiles.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import dpposterior.noise_aware as na
from dpposterior.noise_aware.grid import grid_phi_star_quantiles, phi_star_moments
from dpposterior.noise_aware.simulate import simulate_trace
from dpposterior.noise_aware.stats import burn_in_start
from dpposterior.noise_aware import model as M
from dpposterior.noise_aware.nuts import nuts_posterior
from dpposterior.releases.trace import DPVITrace


def simulated_trace(num_latent: int, num_steps: int, seed: int) -> DPVITrace:
    """A DPVI-like trace from the trace model: mu curvatures logU[50, 5000], rho curvatures U[0.8, 2.5],
    sigma 1, C 2, beta = (1, 100), the paper's learning-rate heuristic."""
    rng = np.random.default_rng(seed)
    n = num_latent
    a = np.r_[np.exp(rng.uniform(np.log(50.0), np.log(5000.0), n)), rng.uniform(0.8, 2.5, n)]
    phi_star = np.r_[rng.normal(0.0, 1.0, n), rng.normal(-1.0, 1.0, n)]
    beta = np.r_[np.ones(n), 100.0 * np.ones(n)]
    return simulate_trace(jax.random.PRNGKey(seed), phi_star, a, num_steps=num_steps, noise_multiplier=1.0,
                             clip=2.0, beta=beta, phi_init=np.r_[np.zeros(n), 0.5413 * np.ones(n)])


def adult_trace(seed: int, num_steps: int, log) -> DPVITrace | None:
    """The demo's DPVI release on Adult, or None when dpvi / the data loader is not available."""
    try:
        from dpposterior import datasets, models
        from dpposterior.vi import RunOptions
        from dpposterior.vi.dpvi import dpvi
    except ImportError as e:  # pragma: no cover - depends on what is installed
        log(f"(dpposterior.dpvi or the Adult loader is not available: {e})")
        return None
    X, y, _ = datasets.adult_design("train", reference_levels=False)
    t0 = time.perf_counter()
    trace = dpvi(models.logistic_regression, X, y, epsilon=1.0, delta=1e-5, num_steps=num_steps, sampling_rate=0.1,
                 clip=11.0, beta_rho=550.0, lr_scale=math.sqrt(X.shape[1]), rng_key=jax.random.PRNGKey(seed),
                 run_options=RunOptions(progress=False), model_name="adult-logistic-regression")
    log(f"DPVI on Adult ({X.shape[0]} records, {X.shape[1]} features, T={num_steps}): "
        f"{time.perf_counter() - t0:.1f} s; {trace.privacy.summary()}")
    return trace


def _timed(fn):
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn())
    return out, time.perf_counter() - t0


def samples_for_floor(nuts_opts: dict) -> int:
    return int(nuts_opts["num_samples"])


def quadrature_moments(trace: DPVITrace, grid, burn_in: float, full: bool, num_h: int = 256,
                       num_phi: int = 64, width: float = 12.0, widen: float = 0.5) -> dict:
    """Posterior mean and sd of phi* per coordinate by a 2-D midpoint quadrature over (h, phi*), float64.

    The integrand is the unnormalised posterior density of the post-processing model (trace-based
    priors), from the FULL trace (``full=True``: ``model.log_likelihood_full`` summed over the T - T*
    kept steps, O(T) per node, what the full-trace NUTS samples) or from the six statistics
    (``model.log_likelihood_stats``). No Monte Carlo: the two posteriors are compared exactly, up to
    the quadrature.

    Nodes: ``num_h`` cells over the grid solver's final h box widened by ``widen`` of its width on each
    side; for each h node, ``num_phi`` cells over +-``width`` sds around the conditional mode of phi*,
    which is found from the integrand itself (it is exactly quadratic in phi*, so three evaluations give
    the mode and curvature). Returns mean, sd and the mass in the outermost h cells and phi* cells.
    """
    with jax.enable_x64(True):
        f64 = jnp.float64
        start = burn_in_start(trace.phi.shape[0], burn_in)
        phi_t = jnp.asarray(trace.phi[start:], f64)
        g_t = jnp.asarray(trace.grads[start:], f64)
        st = na.sufficient_statistics(trace.phi, trace.grads, burn_in).astype(f64)
        ns = jnp.asarray(M.noise_sd_of(trace.noise_multiplier, trace.clip, trace.beta), f64)
        q = jnp.asarray(trace.sampling_rate, f64)
        priors = M.TracePriors(*(jnp.asarray(x, f64) for x in M.trace_priors(st, ns, trace.sampling_rate)))
        g = grid.diagnostics["grid"]
        h_lo = jnp.asarray(g.h_lo, f64)
        h_w = jnp.asarray(g.h_width, f64)
        gh = g.log_weights.shape[-2]
        lo, span = h_lo - widen * gh * h_w, (1 + 2 * widen) * gh * h_w
        dh = span / num_h
        phibar = st.phi_mean

        def log_density(phi_star, h):            # (d,) each -> (d,)
            prior = M.log_prior(priors, phi_star, h)
            if full:
                return prior + M.log_likelihood_full(phi_t, g_t, ns, q, phi_star, h)
            return prior + M.log_likelihood_stats(st, ns, q, phi_star, h)

        def per_h(i):
            h = lo + (i + 0.5) * dh
            # the density is Gaussian in phi*: mode and curvature from three exact evaluations
            f0, fp, fm = (log_density(phibar + o, h) for o in (0.0, 1.0, -1.0))
            curv = -(fp + fm - 2 * f0)                  # = 1 / conditional variance
            mode = phibar + (fp - fm) / (2 * curv)
            sd = 1 / jnp.sqrt(curv)
            dphi = 2 * width * sd / num_phi
            xs = mode + (jnp.arange(num_phi, dtype=f64)[:, None] + 0.5 - num_phi / 2) * dphi   # (num_phi, d)
            lws = jax.lax.map(lambda x: log_density(x, h), xs) + jnp.log(dphi) + jnp.log(dh)
            return lws, xs                              # (num_phi, d)

        lws, xs = jax.lax.map(per_h, jnp.arange(num_h))  # (num_h, num_phi, d)
        lws = lws - jax.scipy.special.logsumexp(lws, axis=(0, 1))
        w = jnp.exp(lws)
        mean = jnp.sum(w * xs, axis=(0, 1))
        sd = jnp.sqrt(jnp.sum(w * jnp.square(xs - mean), axis=(0, 1)))
        edge_h = jnp.max(jnp.sum(w[0] + w[-1], axis=0))
        edge_phi = jnp.max(jnp.sum(w[:, 0] + w[:, -1], axis=0))
        return {"mean": np.asarray(mean), "sd": np.asarray(sd), "edge_h": float(edge_h),
                "edge_phi": float(edge_phi)}


def run(trace: DPVITrace, num_warmup: int, num_samples: int, seed: int, log=print,
        measure_compile: bool = True) -> list[dict]:
    """Times each method on ``trace``; returns one row per method. ``measure_compile=False`` skips the
    extra short NUTS calls that estimate NumPyro's compile time (the compiled-seconds column is empty)."""
    rows = []
    key = jax.random.PRNGKey(seed)
    burn_in = 0.2
    start = burn_in_start(trace.phi.shape[0], burn_in)
    nuts_opts = {"num_warmup": num_warmup, "num_samples": num_samples}

    grid, t_grid = _timed(lambda: na.noise_aware_posterior(trace, "grid", rng_key=seed))
    _, t_grid_warm = _timed(lambda: na.noise_aware_posterior(trace, "grid", rng_key=seed))

    def solve_only():    # statistics + grid posterior + moments, no stored draws
        st = na.sufficient_statistics(trace.phi, trace.grads, burn_in).astype(jnp.float32)
        ns = jnp.asarray(M.noise_sd_of(trace.noise_multiplier, trace.clip, trace.beta), jnp.float32)
        return phi_star_moments(st, ns, trace.sampling_rate)

    _timed(solve_only)
    _, t_grid_solve = _timed(solve_only)
    ref_mean, ref_sd = grid.diagnostics["phi_star_mean"], grid.diagnostics["phi_star_sd"]
    ref_q = np.asarray(grid_phi_star_quantiles(grid.diagnostics["grid"], [0.05, 0.95]))

    def agreement(mean, sd, q, ess=None):
        out = {"mean_dev": float(np.max(np.abs(mean - ref_mean) / ref_sd)),
               "sd_dev": float(np.max(np.abs(sd / ref_sd - 1))),
               "q_dev": float(np.max(np.abs(q - ref_q) / ref_sd))}
        out["mc"] = (float(np.max(np.abs(mean - ref_mean) / (ref_sd / np.sqrt(ess)))) if ess is not None
                     else float("nan"))
        return out

    lap, t_lap = _timed(lambda: na.noise_aware_posterior(trace, "laplace", rng_key=seed))
    _, t_lap_warm = _timed(lambda: na.noise_aware_posterior(trace, "laplace", rng_key=seed))
    tiny = {"num_warmup": 1, "num_samples": 4}      # NumPyro compiles on every call: this measures that cost

    def compile_time(fn):
        return _timed(fn)[1] if measure_compile else float("nan")

    compile_time(lambda: na.noise_aware_posterior(trace, "nuts", rng_key=key, **tiny))   # one-time warm-up
    c_nuts = compile_time(lambda: na.noise_aware_posterior(trace, "nuts", rng_key=key, **tiny))
    nuts, t_nuts = _timed(lambda: na.noise_aware_posterior(trace, "nuts", rng_key=key, **nuts_opts))
    c_nuts_m = compile_time(lambda: na.noise_aware_posterior(trace, "nuts", rng_key=key, marginalize_phi_star=True,
                                                             **tiny))
    nuts_m, t_nuts_m = _timed(lambda: na.noise_aware_posterior(trace, "nuts", rng_key=key, marginalize_phi_star=True,
                                                               **nuts_opts))

    st = na.sufficient_statistics(trace.phi, trace.grads, burn_in)
    ns = np.asarray(M.noise_sd_of(trace.noise_multiplier, trace.clip, trace.beta))
    priors = M.trace_priors(st, ns, trace.sampling_rate)
    full = (trace.phi[start:], trace.grads[start:])
    c_full = compile_time(lambda: nuts_posterior(st.astype(jnp.float32), priors, ns, trace.sampling_rate, key,
                                                 full_trace=full, **tiny))
    (phi_full, diag_full), t_full = _timed(lambda: nuts_posterior(
        st.astype(jnp.float32), priors, ns, trace.sampling_rate, key, full_trace=full, **nuts_opts))

    def draws_q(x):
        return np.quantile(np.asarray(x, np.float64), [0.05, 0.95], axis=0)

    rows.append({"method": "full-trace NUTS", "seconds": t_full, "warm": t_full - c_full,
                 **agreement(phi_full.mean(0), phi_full.std(0), draws_q(phi_full), diag_full["ess_phi_star"]),
                 "note": f"O(T d) likelihood; max R-hat {diag_full['max_r_hat']:.3f}, "
                         f"min ESS {diag_full['min_ess']:.0f}"})
    nd = nuts.diagnostics
    rows.append({"method": "stats NUTS", "seconds": t_nuts, "warm": t_nuts - c_nuts,
                 **agreement(nd["phi_star_mean"], nd["phi_star_sd"], draws_q(nuts.phi_star), nd["ess_phi_star"]),
                 "note": f"max R-hat {nd['max_r_hat']:.3f}, min ESS {nd['min_ess']:.0f}, "
                         f"{nd['num_divergences']} divergences"})
    nd = nuts_m.diagnostics
    rows.append({"method": "stats NUTS, phi* marginalised", "seconds": t_nuts_m, "warm": t_nuts_m - c_nuts_m,
                 **agreement(nd["phi_star_mean"], nd["phi_star_sd"], draws_q(nuts_m.phi_star), nd["ess_phi_star"]),
                 "note": f"NUTS on h only, phi* given h exact; max R-hat {nd['max_r_hat']:.3f}, "
                         f"min ESS {nd['min_ess']:.0f}"})
    iid = np.asarray(grid.sample_phi(jax.random.PRNGKey(seed + 1), samples_for_floor(nuts_opts)), np.float64)
    rows.append({"method": f"exact iid draws ({iid.shape[0]})", "seconds": float("nan"), "warm": float("nan"),
                 **agreement(iid.mean(0), iid.std(0), draws_q(iid), np.full(iid.shape[1], iid.shape[0])),
                 "note": "Monte Carlo floor: as many independent exact draws as NUTS keeps"})
    for full, label in ((True, "full-trace quadrature"), (False, "stats quadrature")):
        quad, t_quad = _timed(lambda: quadrature_moments(trace, grid, burn_in, full))
        rows.append({"method": label, "seconds": t_quad, "warm": float("nan"),
                     **agreement(quad["mean"], quad["sd"], np.stack([ref_q[0], ref_q[1]])),
                     "note": ("O(T d) density" if full else "O(d) density") + ", 2-D midpoint rule in float64, "
                             f"no Monte Carlo; max edge mass h {quad['edge_h']:.0e}, phi* {quad['edge_phi']:.0e}"})
        rows[-1]["q_dev"] = float("nan")  # quantiles not computed by the quadrature
        if full:
            quad_full = quad
    rows.append({"method": "full-trace vs stats quadrature", "seconds": float("nan"), "warm": float("nan"),
                 "mean_dev": float(np.max(np.abs(quad_full["mean"] - quad["mean"]) / quad["sd"])),
                 "sd_dev": float(np.max(np.abs(quad_full["sd"] / quad["sd"] - 1))), "q_dev": float("nan"),
                 "mc": float("nan"), "note": "the two densities' posteriors on the same nodes"})
    lm, ls = lap.diagnostics["phi_star_mean"], lap.diagnostics["phi_star_sd"]
    rows.append({"method": "laplace", "seconds": t_lap, "warm": t_lap_warm,
                 **agreement(lm, ls, np.stack([lm - 1.6449 * ls, lm + 1.6449 * ls])),
                 "note": f"converged: {lap.diagnostics['converged']}"})
    rows.append({"method": "grid", "seconds": t_grid, "warm": t_grid_warm, "mean_dev": 0.0, "sd_dev": 0.0,
                 "q_dev": 0.0, "mc": float("nan"),
                 "note": f"exact reference; solve only (stats + grid + moments, warm): {t_grid_solve:.3f} s; "
                         f"max edge mass {grid.diagnostics['edge_mass']:.1e}"})
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trace", type=Path, help="a trace file written by DPVITrace.save")
    p.add_argument("--quick", action="store_true", help="a small simulated trace and short chains (seconds)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-warmup", type=int, default=None)
    p.add_argument("--num-samples", type=int, default=None)
    p.add_argument("--num-steps", type=int, default=10_000, help="T of the generated trace")
    p.add_argument("--save-trace", type=Path, help="write the trace used here (for --trace next time)")
    args = p.parse_args(argv)
    log = print
    if args.quick:
        trace = simulated_trace(num_latent=2, num_steps=1000, seed=args.seed)
        source = "simulated from the trace model (--quick): d = 2 x 2, T = 1000"
        warmup, samples = 50, 100
    else:
        warmup, samples = 1000, 4000
        if args.trace is not None:
            trace = DPVITrace.load(args.trace)
            source = f"{args.trace} ({trace.model_name or 'unnamed model'})"
        else:
            trace = adult_trace(args.seed, args.num_steps, log)
            if trace is not None:
                source = "Adult logistic regression, dpposterior.dpvi, epsilon 1"
            else:
                trace = simulated_trace(num_latent=100, num_steps=args.num_steps, seed=args.seed)
                source = (f"SIMULATED from the linear-Gaussian trace model (dpvi/Adult not available): "
                          f"d = 2 x 100, T = {args.num_steps}")
    if args.save_trace is not None:
        trace.save(args.save_trace)
    warmup = args.num_warmup if args.num_warmup is not None else warmup
    samples = args.num_samples if args.num_samples is not None else samples
    log(f"trace: {source}; T = {trace.phi.shape[0]}, d = {trace.num_params}, burn-in 0.2")
    log(f"NUTS: {warmup} warm-up + {samples} draws, one chain; jax {jax.__version__} on "
        f"{jax.devices()[0].platform}, {jax.device_count()} device(s)")
    rows = run(trace, warmup, samples, args.seed, log, measure_compile=not args.quick)
    t_full = rows[0]["seconds"]
    log("")
    t_full_warm = rows[0]["warm"]
    log("| method | seconds | compiled seconds | full-trace NUTS / this | same, compiled | max mean dev (grid sd) "
        "| same (MC s.e.) | max sd dev | max 5%/95% quantile dev (grid sd) | note |")
    log("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        if not r["warm"] > 0:          # NaN, or a compile-dominated --quick run
            r["warm"] = float("nan")
        warm = "" if math.isnan(r["warm"]) else f"{r['warm']:.3f}"
        mc = "" if math.isnan(r["mc"]) else f"{r['mc']:.1f}"
        qd = "" if math.isnan(r["q_dev"]) else f"{r['q_dev']:.3f}"
        if math.isnan(r["seconds"]):
            log(f"| {r['method']} |  |  |  |  | {r['mean_dev']:.2g} | {mc} | {r['sd_dev']:.2g} | {qd} "
                f"| {r['note']} |")
            continue
        ratio_warm = "" if math.isnan(r["warm"]) or not t_full_warm > 0 else f"{t_full_warm / r['warm']:.0f}x"
        log(f"| {r['method']} | {r['seconds']:.3f} | {warm} | {t_full / r['seconds']:.1f}x | {ratio_warm} "
            f"| {r['mean_dev']:.2g} | {mc} | {r['sd_dev']:.2g} | {qd} | {r['note']} |")
    ratio = rows[0]["seconds"] / rows[1]["seconds"]
    ratio_warm = rows[0]["warm"] / rows[1]["warm"] if rows[1]["warm"] > 0 else float("nan")
    grid_warm = [r for r in rows if r["method"] == "grid"][0]["warm"]
    log("")
    log(f"NUTS speed-up from the statistics: {ratio:.1f}x per call, {ratio_warm:.0f}x once compiled "
        f"(target >= 50x); grid (warm): {grid_warm:.3f} s "
        f"(target < 1 s)" + ("  [--quick: compilation dominates, these are not measurements]" if args.quick else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
