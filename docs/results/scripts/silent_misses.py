"""Why a silent release of the calibration suite misses: each release against the unclipped VI optimum of
its own data (a non-private reference, computed from the simulated records the release saw).

Per release of a suite cell (the same keys as ``calibration_suite.py``, so the same releases), per latent
mean coordinate j:

- z: (phi_ref_j - E[phi*_j | release]) / sd[phi*_j | release], where phi_ref is the optimum of the full-data
  negative ELBO without clipping (Adam on the exact gradient sum, 16 common Monte Carlo draws);
- m/A: the release's fitted slope m_j (the identifiability rule's, the location of NA-DPVI's h prior) over
  the curvature A_j of the clipped full-data gradient sum at phi_ref (central differences): how far the
  trace's restoring force is from the one that DP-SGD actually felt;
- shift/sd: where the clipped gradient sum's zero lies relative to phi_ref (-g_clipped_j / A_j), in
  posterior sds: the clipping bias.

    PYTHONPATH=src python docs/results/scripts/silent_misses.py --model beta-and-gamma --epsilon 0.3 --replicates 60

``--model-curvature`` adds A_model / A per latent: the curvature that the model itself implies at the
trace mean (as ``--curvature-prior`` below computes it, from public quantities only) over the curvature
A that the release's own records give the clipped gradient at phi_ref.

``--curvature-prior`` instead measures, with this script's own implementation (one Monte Carlo draw
per key), the route that the default post-processing now takes for models without covariates
(``noise_aware_posterior(priors="auto")`` with the release's ``model_curvature``): the h prior of each
latent mean coordinate centred on the curvature that the model itself implies at the trace mean phibar (N times the
expected per-record curvature of the clipped loss gradient, over records simulated from the model at
theta = phibar's means, with the release's public clip and beta: no private data), with a relative sd
of 5%, in place of the trace's own slope. It prints the 90%
coverage of the truth and the mean posterior sd, default against this prior, over all, silent and
warned releases. Models without covariates only (the curvature of a regression depends on the covariates).
With ``--wander`` as well, two more variants take H and its derivatives from records simulated the same
way (no private data), so that each is one a release could compute: "curv+wander" moves that posterior
by the second-order wander shift of ``--wander`` below; "curv+forcing" takes from each step's gradient
the other coordinates' second-order push, (q/2) sum_{j != k} dH_jj/dphi_k (phi_j,t - phibar_j)^2, and
then post-processes with the model-curvature h prior.

``--h-prior-scale 1,2,3`` instead measures the default h prior with its sd times each factor (its
location unchanged): the same 90% coverage and mean sd, over the same groups.

``--kendall`` instead measures the default h prior with its location moved down by Kendall's bias of the
least-squares slope over a window of n steps, (1 + 3 r) / (eta_j q n) with r = 1 - eta_j q m_j (Kendall,
"Note on bias in the estimation of autocorrelation", 1954): public settings and the release's own slope
only. The same 90% coverage and mean sd, over the same groups.

``--wander`` instead measures how much of each latent's error the second-order term of the gradient
explains. DP-SGD's iterates wander around the fixed point, and where the curvature H_jj of one
coordinate depends on another coordinate k (a scale parameter and the weights whose curvature it sets),
the mean gradient of k carries (1/2) sum_j dH_jj/dphi_k Var_j, which the linear gradient model
attributes to phi*_k. Per release: z = (truth - posterior mean) / posterior sd per latent, before and
after moving the posterior by delta_k = -(1/2) sum_j dH_jj/dphi_k Var_j / H_kk, with H and its
derivatives those of the full-data negative ELBO on the release's own records at the trace mean
(autodiff, 8 common Monte Carlo draws) and Var_j the trace's variance over the modelled window. It reads
the records: a non-private measurement of the cause, not a correction a release could make.

``--norms`` instead prints, per release, what sets the clip: the 99th percentile of the beta-scaled
per-record gradient norms on the release's own records, over the mean coordinates, over the rho
(variational scale) coordinates and over both, at the start, at the pilot's last iterate (where
``clip="auto"`` searches) and at the final iterate, with the mean variational sd of the latents there.

``--draws`` instead prints, per release, how the 99th percentile of the same norms (the run's ``num_mc``)
at the pilot's last iterate depends on the ELBO's Monte Carlo draw, which a DP-SGD step shares among its
records: at the one public key the clip search used to count at (``PRNGKey(MC_SEED)``), at each of 32
other keys (min, median, max), and over those 32 pooled (a typical step).

A non-private experiment on simulated data: the truth is known, nothing here is released.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import calibration_suite as cs  # noqa: E402

from dpposterior.vi.dpvi import make_elbo_loss  # noqa: E402

NUM_RECORDS = 5000
MC_DRAWS = 16
ADAM_STEPS = 1500


def _records(simulate, k: int):
    """The records replicate k of a cell saw (the suite's data key, seed 0)."""
    k_data = jax.random.split(jax.random.fold_in(jax.random.PRNGKey(0), k), 4)[0]
    return simulate(k_data, NUM_RECORDS)[1]


def diagnose(
    name: str, epsilon: float, k: int, with_model: bool = False
) -> tuple[bool, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """(silent, z, m/A, shift/sd, A_model/A) of replicate k, each per latent mean coordinate; A_model
    (:func:`model_curvature` at the trace mean) only ``with_model``, else None."""
    model, simulate = cs.MODELS[name]
    _, trace, post, caught, _ = cs.release(name, epsilon, NUM_RECORDS, 0, k)
    data = _records(simulate, k)
    loss = make_elbo_loss(model, trace.layout, NUM_RECORDS, 1)
    beta, clip = jnp.asarray(trace.beta), float(trace.clip)
    d = beta.shape[0]
    n = d // 2
    draws = jax.random.split(jax.random.PRNGKey(7), MC_DRAWS)
    per_record = jax.vmap(jax.grad(loss), in_axes=(None, 0, None))

    @jax.jit
    def sums(phi):
        def one(key):
            g = per_record(phi, data, key) * beta
            scale = jnp.minimum(1.0, clip / jnp.linalg.norm(g, axis=1))
            return g.sum(0) / beta, (g * scale[:, None]).sum(0) / beta

        unclipped, clipped = jax.vmap(one)(draws)
        return unclipped.mean(0), clipped.mean(0)

    phi = jnp.asarray(np.asarray(trace.phi)[trace.phi.shape[0] // 5 :].mean(0))
    opt = optax.adam(3e-3)
    state = opt.init(phi)
    for _ in range(ADAM_STEPS):
        grad, _ = sums(phi)
        update, state = opt.update(grad / NUM_RECORDS, state)
        phi = optax.apply_updates(phi, update)
    _, clipped = sums(phi)
    h = 1e-3
    curvature = np.array(
        [float(sums(phi + h * jnp.eye(d)[j])[1][j] - sums(phi - h * jnp.eye(d)[j])[1][j]) / (2 * h) for j in range(n)]
    )
    mean, sd = post.diagnostics["phi_star_mean"][:n], post.diagnostics["phi_star_sd"][:n]
    slope = np.asarray(post.diagnostics["identifiability"].slope)[:n]
    z = (np.asarray(phi[:n]) - mean) / sd
    shift = -np.asarray(clipped[:n]) / curvature
    ratio = None
    if with_model:
        phibar = np.asarray(trace.phi)[trace.phi.shape[0] // 5 :].mean(0)
        ratio = model_curvature(name, trace, phibar, jax.random.PRNGKey(100 + k)) / curvature
    return not caught, z, slope / curvature, shift / sd, ratio


def _model_records(name: str, trace, phibar: np.ndarray, key, num_sim: int) -> tuple:
    """``num_sim`` records simulated from the model at theta = phibar's means (public: no private data)."""
    from numpyro import handlers

    model, _ = cs.MODELS[name]
    n = phibar.shape[0] // 2
    values = trace.layout.constrain(jnp.asarray(phibar[:n]))
    observed = ("z", "y") if name == "beta-and-gamma" else ("y",)
    placeholders = [jnp.zeros(num_sim) for _ in observed]
    tr = handlers.trace(handlers.seed(handlers.condition(handlers.uncondition(model), values), key)).get_trace(*placeholders)
    return tuple(tr[o]["value"] for o in observed)


def model_curvature(name: str, trace, phibar: np.ndarray, key, num_sim: int = 4000) -> np.ndarray:
    """N E[d^2 loss_i / d mu_j^2] at phibar for records simulated from the model at theta = phibar's means."""
    model, _ = cs.MODELS[name]
    records = _model_records(name, trace, phibar, key, num_sim)
    loss = make_elbo_loss(model, trace.layout, NUM_RECORDS, 1)
    draws = jax.random.split(jax.random.PRNGKey(11), MC_DRAWS)
    per_record = jax.vmap(jax.grad(loss), in_axes=(None, 0, None))

    beta, clip = jnp.asarray(trace.beta), float(trace.clip)

    @jax.jit
    def total(phi):  # the clipped gradient, as DP-SGD feels it (the clip and beta are public)
        def one(key):
            g = per_record(phi, records, key) * beta
            return (g * jnp.minimum(1.0, clip / jnp.linalg.norm(g, axis=1))[:, None]).sum(0) / beta

        return jax.vmap(one)(draws).mean(0) * (NUM_RECORDS / num_sim)

    h, d, n = 1e-3, phibar.shape[0], phibar.shape[0] // 2
    point = jnp.asarray(phibar)
    return np.array([float(total(point + h * jnp.eye(d)[j])[j] - total(point - h * jnp.eye(d)[j])[j]) / (2 * h)
                     for j in range(n)])


def _covers(post, truth: np.ndarray, key, shift: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(whether the 90% central interval holds the truth, the posterior sd), per latent coordinate; with
    ``shift``, of the posterior's draws less ``shift``."""
    d = np.asarray(post.sample_unconstrained(key, cs.NUM_DRAWS))
    if shift is not None:
        d = d - shift
    lo, hi = np.quantile(d, [0.05, 0.95], axis=0)
    return (truth >= lo) & (truth <= hi), d.std(0)


def _print_groups(name: str, epsilon: float, names: list[str], silent: list[bool], found: dict) -> None:
    """90% coverage and mean sd per latent for each variant in ``found``, over all, silent and warned releases."""
    silent_ = np.array(silent)
    print(f"{name} at epsilon {epsilon:g}: {len(silent)} releases, {int(silent_.sum())} silent; coordinates {names}")
    for label, rows in found.items():
        inside, sd = np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
        for group, sel in (("all", np.ones_like(silent_)), ("silent", silent_), ("warned", ~silent_)):
            if sel.any():
                print(f"  {label:12s} {group:6s} ({int(sel.sum()):3d}): 90% coverage {np.round(inside[sel].mean(0), 3)}, "
                      f"mean sd {np.round(sd[sel].mean(0), 4)}")


def _release_with_priors(name: str, epsilon: float, k: int):
    """Replicate k of a cell: (truth in the unconstrained space, trace, the posterior with the trace-slope
    h prior (``priors="paper"``, the default before releases carried the model's curvature), silent? (as
    the default release), the posterior's key, the statistics after the default burn-in, the trace priors)."""
    from dpposterior.noise_aware import model as M
    from dpposterior.noise_aware.stats import sufficient_statistics

    from dpposterior import noise_aware_posterior

    theta, trace, _, caught, (k_post, _) = cs.release(name, epsilon, NUM_RECORDS, 0, k)
    post = noise_aware_posterior(trace, rng_key=k_post, priors="paper")  # the trace-slope h prior, as measured
    layout = trace.layout
    truth = np.asarray(layout.unconstrain({s: jnp.asarray(theta[s]) for s in layout.names}))
    stats = sufficient_statistics(np.asarray(trace.phi), np.asarray(trace.grads), 0.2)
    noise = float(trace.noise_multiplier) * float(trace.clip) / np.asarray(trace.beta, np.float64)
    priors = M.trace_priors(stats, noise, float(trace.sampling_rate))
    return truth, trace, post, not caught, k_post, stats, priors


def _hessian_terms(model, layout, records: tuple, phibar: np.ndarray, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """(H_jj, dH_jj / dphi_k) at phibar of the negative ELBO summed over ``records`` times ``scale``
    (autodiff, 8 common Monte Carlo draws)."""
    loss = make_elbo_loss(model, layout, NUM_RECORDS, 1)
    draws = jax.random.split(jax.random.PRNGKey(7), 8)

    def total(phi):
        per = jax.vmap(lambda rec: jnp.mean(jax.vmap(lambda k: loss(phi, rec, k))(draws)))
        return jnp.sum(per(records)) * scale

    def hess_diag(phi):
        return jnp.diag(jax.hessian(total)(phi))

    point = jnp.asarray(phibar, jnp.float32)
    h = np.asarray(hess_diag(point), np.float64)
    return h, np.asarray(jax.jacfwd(hess_diag)(point), np.float64)  # dh[j, k] = d H_jj / d phi_k


def _model_hessian_terms(name: str, trace, stats, key, num_sim: int = 4000) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_hessian_terms` at the trace mean over records simulated from the model there
    (:func:`_model_records`; public), scaled to N records."""
    phibar = np.asarray(stats.phi_mean)
    records = _model_records(name, trace, phibar, key, num_sim)
    return _hessian_terms(cs.MODELS[name][0], trace.layout, records, phibar, NUM_RECORDS / num_sim)


def model_wander_shift(h: np.ndarray, dh: np.ndarray, stats) -> np.ndarray:
    """The second-order wander shift of ``--wander`` with H and its derivatives from the model
    (:func:`_model_hessian_terms`), per latent mean coordinate: what the posterior mean of phi* moves
    by, -delta, with delta = -(1/2) sum_j dH_jj/dphi_k Var_j / H_kk."""
    var = np.asarray(stats.phi_ss, np.float64) / np.asarray(stats.count, np.float64)
    return (-0.5 * (dh.T @ var) / h)[: h.shape[0] // 2]


def without_forcing(trace, stats, dh: np.ndarray):
    """The trace with each step's gradient less the other coordinates' second-order forcing,
    q (1/2) sum_{j != k} dH_jj/dphi_k (phi_j,t - phibar_j)^2, with dH from the model
    (:func:`_model_hessian_terms`): the wander's time-varying push, not only its mean."""
    import dataclasses

    dh = dh.copy()
    np.fill_diagonal(dh, 0.0)  # a coordinate's own curvature change stays with the linear model
    phi = np.asarray(trace.phi, np.float64)
    forcing = float(trace.sampling_rate) * 0.5 * ((phi - np.asarray(stats.phi_mean)) ** 2) @ dh
    grads = np.asarray(trace.grads)
    return dataclasses.replace(trace, grads=(grads.astype(np.float64) - forcing).astype(grads.dtype))


def _with_curvature(priors, curvature: np.ndarray):
    """``priors`` with the h prior of each latent mean coordinate centred on ``curvature``, sd 5% of it."""
    from dpposterior.noise_aware import model as M

    n = curvature.shape[0]
    h_loc, h_scale = np.array(priors.h_loc, np.float64), np.array(priors.h_scale, np.float64)
    h_loc[:n], h_scale[:n] = np.asarray(M.softplus_inverse(jnp.asarray(curvature))), 0.05 * curvature
    return priors._replace(h_loc=h_loc, h_scale=h_scale)


def curvature_prior(name: str, replicates: int, epsilon: float, wander: bool = False) -> None:
    from dpposterior import noise_aware_posterior
    from dpposterior.noise_aware import model as M

    from dpposterior.noise_aware.stats import sufficient_statistics

    found: dict[str, list] = {"default": [], "curvature": []}  # "default": the trace slope (priors="paper")
    if wander:
        found["curv+wander"] = []
        found["curv+forcing"] = []
    silent = []
    for k in range(replicates):
        truth, trace, post, quiet, k_post, stats, priors = _release_with_priors(name, epsilon, k)
        curvature = model_curvature(name, trace, np.asarray(stats.phi_mean), jax.random.PRNGKey(100 + k))
        other = noise_aware_posterior(trace, rng_key=k_post, priors=_with_curvature(priors, curvature))
        silent.append(quiet)
        for label, p in (("default", post), ("curvature", other)):
            found[label].append(_covers(p, truth, k_post))
        if wander:
            h, dh = _model_hessian_terms(name, trace, stats, jax.random.PRNGKey(200 + k))
            found["curv+wander"].append(_covers(other, truth, k_post, shift=model_wander_shift(h, dh, stats)))
            unforced = without_forcing(trace, stats, dh)
            base = M.trace_priors(
                sufficient_statistics(np.asarray(unforced.phi), np.asarray(unforced.grads), 0.2),
                M.noise_sd_of(float(trace.noise_multiplier), float(trace.clip), np.asarray(trace.beta, np.float64)),
                float(trace.sampling_rate),
            )
            forced = noise_aware_posterior(unforced, rng_key=k_post, priors=_with_curvature(base, curvature))
            found["curv+forcing"].append(_covers(forced, truth, k_post))
    _print_groups(name, epsilon, trace.layout.coordinate_names(), silent, found)


def h_prior_scales(name: str, replicates: int, epsilon: float, factors: list[float]) -> None:
    """90% coverage and mean posterior sd per latent with the default h prior's sd times each factor
    (location unchanged), over all, silent and warned releases (silent/warned as the default release)."""
    from dpposterior import noise_aware_posterior

    found: dict[str, list] = {f"h sd x{f:g}": [] for f in factors}
    silent = []
    for k in range(replicates):
        truth, trace, _, quiet, k_post, _, priors = _release_with_priors(name, epsilon, k)
        silent.append(quiet)
        for f in factors:
            p = noise_aware_posterior(trace, rng_key=k_post, priors=priors._replace(h_scale=np.asarray(priors.h_scale) * f))
            found[f"h sd x{f:g}"].append(_covers(p, truth, k_post))
    _print_groups(name, epsilon, trace.layout.coordinate_names(), silent, found)


def kendall_prior(name: str, replicates: int, epsilon: float) -> None:
    """90% coverage and mean posterior sd per latent, the default h prior against the same prior with its
    location less Kendall's window bias of the slope, over all, silent and warned releases."""
    from dpposterior import noise_aware_posterior

    found: dict[str, list] = {"default": [], "kendall": []}
    silent = []
    for k in range(replicates):
        truth, trace, post, quiet, k_post, stats, priors = _release_with_priors(name, epsilon, k)
        q = float(trace.sampling_rate)
        lr, slope = np.asarray(trace.learning_rate, np.float64), np.asarray(priors.h_loc, np.float64)
        r = np.clip(1.0 - lr * q * slope, -1.0, 1.0)
        bias = (1.0 + 3.0 * r) / (lr * q * np.asarray(stats.count, np.float64))
        other = noise_aware_posterior(trace, rng_key=k_post, priors=priors._replace(h_loc=slope - bias))
        silent.append(quiet)
        for label, p in (("default", post), ("kendall", other)):
            found[label].append(_covers(p, truth, k_post))
    _print_groups(name, epsilon, trace.layout.coordinate_names(), silent, found)


def wander_shift(name: str, replicates: int, epsilon: float) -> None:
    """Per release and latent, z before and after removing the second-order wander shift (module docstring)."""
    model, simulate = cs.MODELS[name]
    rows = []
    for k in range(replicates):
        truth, trace, post, quiet, k_post, stats, _ = _release_with_priors(name, epsilon, k)
        h, dh = _hessian_terms(model, trace.layout, _records(simulate, k), np.asarray(stats.phi_mean))
        var = np.asarray(stats.phi_ss, np.float64) / np.asarray(stats.count, np.float64)
        n = truth.shape[0]
        delta = (-0.5 * (dh.T @ var) / h)[:n]
        d = np.asarray(post.sample_unconstrained(k_post, cs.NUM_DRAWS))
        mean, sd = d.mean(0), d.std(0)
        rows.append(((truth - mean) / sd, (truth - mean + delta) / sd, delta / sd, quiet))
        print(k, "silent" if quiet else "warned", "z", np.round(rows[-1][0], 2), "corrected",
              np.round(rows[-1][1], 2), "shift/sd", np.round(rows[-1][2], 2), flush=True)
    z, zc, shift = (np.array([r[i] for r in rows]) for i in range(3))
    silent = np.array([r[3] for r in rows])
    print(f"{name} at epsilon {epsilon:g}: {len(rows)} releases, {int(silent.sum())} silent; "
          f"coordinates {trace.layout.coordinate_names()}")
    for group, sel in (("all", np.ones_like(silent)), ("silent", silent)):
        if sel.any():
            print(f"  {group:6s} ({int(sel.sum()):3d}): 90% coverage {np.round((np.abs(z[sel]) < 1.645).mean(0), 2)} -> "
                  f"{np.round((np.abs(zc[sel]) < 1.645).mean(0), 2)}; mean z {np.round(z[sel].mean(0), 2)} -> "
                  f"{np.round(zc[sel].mean(0), 2)}; median |shift|/sd {np.round(np.median(np.abs(shift[sel]), 0), 2)}")


def norms(name: str, replicates: int, epsilon: float) -> None:
    """Per release, the 99th percentiles of the per-record gradient norms by half, at three iterates."""
    from dpposterior.releases import family

    model, simulate = cs.MODELS[name]
    for k in range(replicates):
        _, trace, *_ = cs.release(name, epsilon, NUM_RECORDS, 0, k)
        data = _records(simulate, k)
        per_record = jax.jit(jax.vmap(jax.grad(make_elbo_loss(model, trace.layout, NUM_RECORDS, 1)), (None, 0, None)))
        beta = np.asarray(trace.beta)
        n = beta.size // 2
        pilot = int(trace.privacy.detail("pilot_steps"))
        for label, phi in (("start", trace.phi[0]), ("pilot end", trace.phi[pilot]), ("final", trace.final_phi)):
            g = np.asarray(per_record(jnp.asarray(phi), data, jax.random.PRNGKey(3))) * beta
            q99 = [np.quantile(np.linalg.norm(x, axis=1), 0.99) for x in (g[:, :n], g[:, n:], g)]
            sd = float(np.mean(np.asarray(family.scale(jnp.asarray(phi[n:])))))
            print(f"{k} {label:9s} 99th percentile norm: mean half {q99[0]:9.3g}, rho half {q99[1]:9.3g}, "
                  f"both {q99[2]:9.3g}; mean variational sd {sd:.3g}", flush=True)
        print(f"{k} clip {float(trace.clip):.4g} (pilot clip {float(trace.privacy.detail('pilot_clip')):.4g})", flush=True)


def draws(name: str, replicates: int, epsilon: float) -> None:
    """Per release, the 99th percentile of the per-record norms at the pilot's end: one draw against 32."""
    from dpposterior.vi.record_norms import MC_SEED, norms_fn

    model, simulate = cs.MODELS[name]
    for k in range(replicates):
        _, trace, *_ = cs.release(name, epsilon, NUM_RECORDS, 0, k)
        data = _records(simulate, k)
        loss = make_elbo_loss(model, trace.layout, NUM_RECORDS, int(trace.num_mc))
        norms_at = norms_fn(loss, tuple(float(b) for b in np.asarray(trace.beta)))  # the search's own norms
        phi = jnp.asarray(trace.phi[int(trace.privacy.detail("pilot_steps"))])
        one = float(np.quantile(np.asarray(norms_at(phi, data, jax.random.PRNGKey(MC_SEED))), 0.99))
        many = np.stack([np.asarray(norms_at(phi, data, jax.random.PRNGKey(s))) for s in range(32)])
        per = np.quantile(many, 0.99, axis=1)
        print(f"{k} 99th percentile at the pilot's end: one draw {one:.3g}; per draw min {per.min():.3g}, "
              f"median {np.median(per):.3g}, max {per.max():.3g}; 32 draws pooled {np.quantile(many, 0.99):.3g}; "
              f"clip {float(trace.clip):.4g}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--epsilon", type=float, required=True)
    ap.add_argument("--replicates", type=int, default=60)
    ap.add_argument("--curvature-prior", action="store_true", help="measure the model-curvature h prior instead")
    ap.add_argument("--h-prior-scale", default="", help="comma-separated factors on the h prior's sd, e.g. 1,2,3")
    ap.add_argument("--kendall", action="store_true", help="measure the Kendall-corrected h prior location instead")
    ap.add_argument("--wander", action="store_true", help="measure the second-order wander shift instead (with "
                    "--curvature-prior: also that prior with the shift taken from records simulated from the model)")
    ap.add_argument("--model-curvature", action="store_true",
                    help="also compare the model's curvature at the trace mean with A (models without covariates)")
    ap.add_argument("--norms", action="store_true", help="print what sets the clip instead")
    ap.add_argument("--draws", action="store_true", help="print how the norms' quantile moves with the draw instead")
    a = ap.parse_args()
    if a.curvature_prior:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            curvature_prior(a.model, a.replicates, a.epsilon, wander=a.wander)
        return
    for flag, measure in ((a.kendall, kendall_prior), (a.wander, wander_shift), (a.norms, norms), (a.draws, draws)):
        if flag:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                measure(a.model, a.replicates, a.epsilon)
            return
    if a.h_prior_scale:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            h_prior_scales(a.model, a.replicates, a.epsilon, [float(x) for x in a.h_prior_scale.split(",")])
        return
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in range(a.replicates):
            rows.append(diagnose(a.model, a.epsilon, k, with_model=a.model_curvature))
            silent, z, ratio, shift, model_ratio = rows[-1]
            print(k, "silent" if silent else "warned", "z", np.round(z, 2), "m/A", np.round(ratio, 2),
                  "shift/sd", np.round(shift, 2), *(() if model_ratio is None else ("A_model/A", np.round(model_ratio, 3))),
                  flush=True)
    silent = np.array([r[0] for r in rows])
    z, ratio, shift = (np.array([r[i] for r in rows]) for i in (1, 2, 3))
    if a.model_curvature:
        model_ratios = np.array([r[4] for r in rows])
        print(f"A_model/A per latent: median {np.round(np.median(model_ratios, 0), 3)}, "
              f"min {np.round(model_ratios.min(0), 3)}, max {np.round(model_ratios.max(0), 3)}")
    for label, sel in (("silent", silent), ("warned", ~silent)):
        for miss in (True, False):
            s = sel[:, None] & ((np.abs(z) > 1.645) == miss)
            if s.any():
                print(f"{label} {'misses' if miss else 'covers'} (coordinates {int(s.sum())}): median m/A "
                      f"{np.median(ratio[s]):.2f}, median |shift|/sd {np.median(np.abs(shift[s])):.2f}")


if __name__ == "__main__":
    main()
