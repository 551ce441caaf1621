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

``--curvature-prior`` instead measures a route that is not built: the h prior of each latent mean
coordinate centred on the curvature that the model itself implies at the trace mean phibar (N times the
expected per-record curvature of the clipped loss gradient, over records simulated from the model at
theta = phibar's means, with the release's public clip and beta: no private data), with a relative sd
of 5%, in place of the trace's own slope. It prints the 90%
coverage of the truth and the mean posterior sd, default against this prior, over all, silent and
warned releases. Models without covariates only (the curvature of a regression depends on the covariates).

``--h-prior-scale 1,2,3`` instead measures the default h prior with its sd times each factor (its
location unchanged): the same 90% coverage and mean sd, over the same groups.

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


def diagnose(name: str, epsilon: float, k: int) -> tuple[bool, np.ndarray, np.ndarray, np.ndarray]:
    """(silent, z, m/A, shift/sd) of replicate k, each per latent mean coordinate."""
    model, simulate = cs.MODELS[name]
    _, trace, post, caught, _ = cs.release(name, epsilon, NUM_RECORDS, 0, k)
    k_data = jax.random.split(jax.random.fold_in(jax.random.PRNGKey(0), k), 4)[0]
    _, data = simulate(k_data, NUM_RECORDS)  # the records the release saw (the same key)
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
    return not caught, z, slope / curvature, shift / sd


def model_curvature(name: str, trace, phibar: np.ndarray, key, num_sim: int = 4000) -> np.ndarray:
    """N E[d^2 loss_i / d mu_j^2] at phibar for records simulated from the model at theta = phibar's means."""
    from numpyro import handlers

    model, simulate = cs.MODELS[name]
    layout = trace.layout
    n = phibar.shape[0] // 2
    values = layout.constrain(jnp.asarray(phibar[:n]))
    observed = ("z", "y") if name == "beta-and-gamma" else ("y",)
    placeholders = [jnp.zeros(num_sim) for _ in observed]
    tr = handlers.trace(handlers.seed(handlers.condition(handlers.uncondition(model), values), key)).get_trace(*placeholders)
    records = tuple(tr[o]["value"] for o in observed)
    loss = make_elbo_loss(model, layout, NUM_RECORDS, 1)
    draws = jax.random.split(jax.random.PRNGKey(11), MC_DRAWS)
    per_record = jax.vmap(jax.grad(loss), in_axes=(None, 0, None))

    beta, clip = jnp.asarray(trace.beta), float(trace.clip)

    @jax.jit
    def total(phi):  # the clipped gradient, as DP-SGD feels it (the clip and beta are public)
        def one(key):
            g = per_record(phi, records, key) * beta
            return (g * jnp.minimum(1.0, clip / jnp.linalg.norm(g, axis=1))[:, None]).sum(0) / beta

        return jax.vmap(one)(draws).mean(0) * (NUM_RECORDS / num_sim)

    h, d = 1e-3, phibar.shape[0]
    point = jnp.asarray(phibar)
    return np.array([float(total(point + h * jnp.eye(d)[j])[j] - total(point - h * jnp.eye(d)[j])[j]) / (2 * h)
                     for j in range(n)])


def _covers(post, truth: np.ndarray, key) -> tuple[np.ndarray, np.ndarray]:
    """(whether the 90% central interval holds the truth, the posterior sd), per latent coordinate."""
    d = np.asarray(post.sample_unconstrained(key, cs.NUM_DRAWS))
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
                print(f"  {label:9s} {group:6s} ({int(sel.sum()):3d}): 90% coverage {np.round(inside[sel].mean(0), 3)}, "
                      f"mean sd {np.round(sd[sel].mean(0), 4)}")


def curvature_prior(name: str, replicates: int, epsilon: float) -> None:
    from dpposterior import noise_aware_posterior
    from dpposterior.noise_aware import model as M
    from dpposterior.noise_aware.stats import sufficient_statistics

    found: dict[str, list] = {"default": [], "curvature": []}
    silent = []
    for k in range(replicates):
        theta, trace, post, caught, (k_post, _) = cs.release(name, epsilon, NUM_RECORDS, 0, k)
        layout = trace.layout
        truth = np.asarray(layout.unconstrain({s: jnp.asarray(theta[s]) for s in layout.names}))
        n = truth.shape[0]
        stats = sufficient_statistics(np.asarray(trace.phi), np.asarray(trace.grads), 0.2)
        noise = float(trace.noise_multiplier) * float(trace.clip) / np.asarray(trace.beta, np.float64)
        priors = M.trace_priors(stats, noise, float(trace.sampling_rate))
        curvature = model_curvature(name, trace, np.asarray(stats.phi_mean), jax.random.PRNGKey(100 + k))
        h_loc, h_scale = np.array(priors.h_loc, np.float64), np.array(priors.h_scale, np.float64)
        h_loc[:n], h_scale[:n] = np.asarray(M.softplus_inverse(jnp.asarray(curvature))), 0.05 * curvature
        other = noise_aware_posterior(trace, rng_key=k_post, priors=priors._replace(h_loc=h_loc, h_scale=h_scale))
        silent.append(not caught)
        for label, p in (("default", post), ("curvature", other)):
            found[label].append(_covers(p, truth, k_post))
    _print_groups(name, epsilon, layout.coordinate_names(), silent, found)


def h_prior_scales(name: str, replicates: int, epsilon: float, factors: list[float]) -> None:
    """90% coverage and mean posterior sd per latent with the default h prior's sd times each factor
    (location unchanged), over all, silent and warned releases (silent/warned as the default release)."""
    from dpposterior import noise_aware_posterior
    from dpposterior.noise_aware import model as M
    from dpposterior.noise_aware.stats import sufficient_statistics

    found: dict[str, list] = {f"h sd x{f:g}": [] for f in factors}
    silent = []
    for k in range(replicates):
        theta, trace, _, caught, (k_post, _) = cs.release(name, epsilon, NUM_RECORDS, 0, k)
        layout = trace.layout
        truth = np.asarray(layout.unconstrain({s: jnp.asarray(theta[s]) for s in layout.names}))
        stats = sufficient_statistics(np.asarray(trace.phi), np.asarray(trace.grads), 0.2)
        noise = float(trace.noise_multiplier) * float(trace.clip) / np.asarray(trace.beta, np.float64)
        priors = M.trace_priors(stats, noise, float(trace.sampling_rate))
        silent.append(not caught)
        for f in factors:
            p = noise_aware_posterior(trace, rng_key=k_post, priors=priors._replace(h_scale=np.asarray(priors.h_scale) * f))
            found[f"h sd x{f:g}"].append(_covers(p, truth, k_post))
    _print_groups(name, epsilon, layout.coordinate_names(), silent, found)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--epsilon", type=float, required=True)
    ap.add_argument("--replicates", type=int, default=60)
    ap.add_argument("--curvature-prior", action="store_true", help="measure the model-curvature h prior instead")
    ap.add_argument("--h-prior-scale", default="", help="comma-separated factors on the h prior's sd, e.g. 1,2,3")
    a = ap.parse_args()
    if a.h_prior_scale:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            h_prior_scales(a.model, a.replicates, a.epsilon, [float(x) for x in a.h_prior_scale.split(",")])
        return
    if a.curvature_prior:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            curvature_prior(a.model, a.replicates, a.epsilon)
        return
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in range(a.replicates):
            rows.append(diagnose(a.model, a.epsilon, k))
            silent, z, ratio, shift = rows[-1]
            print(k, "silent" if silent else "warned", "z", np.round(z, 2), "m/A", np.round(ratio, 2),
                  "shift/sd", np.round(shift, 2), flush=True)
    silent = np.array([r[0] for r in rows])
    z, ratio, shift = (np.array([r[i] for r in rows]) for i in (1, 2, 3))
    for label, sel in (("silent", silent), ("warned", ~silent)):
        for miss in (True, False):
            s = sel[:, None] & ((np.abs(z) > 1.645) == miss)
            if s.any():
                print(f"{label} {'misses' if miss else 'covers'} (coordinates {int(s.sum())}): median m/A "
                      f"{np.median(ratio[s]):.2f}, median |shift|/sd {np.median(np.abs(shift[s])):.2f}")


if __name__ == "__main__":
    main()
