"""Why NA-DPVI misses on the normal hierarchy of other_models_coverage.py, and which priors help.

    .venv/bin/python docs/results/scripts/hierarchy_priors.py 12   # 12 releases, about 3 minutes on 2 cores

Releases of the hierarchy (5 groups, N = 2,000, epsilon 1, T = 2,000, q = 0.1, C = 5, keys 1000 + k)
read by the grid solver under four choices of the post-processing priors (``TracePriors``); for each
the z-score (truth - posterior mean) / posterior sd of every coordinate of theta (common mean first,
then the five group means, unconstrained), the RMS of z over releases (about 1 when calibrated) and the
share of |z| > 1.645 (0.10 when the 90% intervals are calibrated):

* ``paper``: the default trace-based priors (phi* ~ N(phibar, 1), h ~ N(m, sd) from the same steps);
* ``wide``: phi* ~ N(phibar, 3^2) (a wider phi* prior only: the common mean then follows that prior);
* ``model``: the means' phi* prior from the model's own prior of theta (its mean and sd over 400 prior
  draws, sd at least 1; data-independent);
* ``curvature``: the means' h prior centred at 1 / sd_q^2, the curvature that the mean-field fixed
  point ties to q's sd (sd_q = softplus of the trace mean of rho), with sd half of it.
Non-private analysis of simulated data with fixed keys.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np
from other_models_coverage import SPECS

import dpposterior as dpp
from dpposterior.noise_aware import model as M
from dpposterior.noise_aware.stats import sufficient_statistics


def main(reps: int) -> None:
    spec = [s for s in SPECS if s.name == "hierarchy"][0]
    draws = [spec.simulate(jax.random.PRNGKey(10_000 + i), 2)[0] for i in range(400)]
    z = {name: [] for name in ("paper", "wide", "model", "curvature")}
    for k in range(reps):
        theta, data = spec.simulate(jax.random.PRNGKey(1000 + k), 2000)
        tr = dpp.dpvi(spec.model, *data, epsilon=1.0, delta=1e-5, num_steps=2000, sampling_rate=0.1,
                      clip=spec.clip, beta_rho=spec.beta_rho, rng_key=k)
        unc = np.array([np.asarray(tr.layout.unconstrain({s: jnp.asarray(v) for s, v in t.items()})) for t in draws])
        truth = np.asarray(tr.layout.unconstrain({s: jnp.asarray(v) for s, v in theta.items()}))
        n = truth.size
        stats = sufficient_statistics(tr.phi, tr.grads, 0.2)
        paper = M.trace_priors(stats, tr.noise_multiplier * tr.clip / np.asarray(tr.beta), tr.sampling_rate)
        loc, scale = np.asarray(paper.phi_loc).copy(), np.asarray(paper.phi_scale).copy()
        loc[:n], scale[:n] = unc.mean(0), np.maximum(unc.std(0), 1.0)
        sd_q = np.log1p(np.exp(np.asarray(stats.phi_mean)[n:]))
        h_loc, h_scale = np.asarray(paper.h_loc).copy(), np.asarray(paper.h_scale).copy()
        h_loc[:n], h_scale[:n] = 1.0 / sd_q**2, 0.5 / sd_q**2
        choices = {"paper": paper, "wide": paper._replace(phi_scale=np.full_like(scale, 3.0)),
                   "model": paper._replace(phi_loc=loc, phi_scale=scale),
                   "curvature": paper._replace(h_loc=h_loc, h_scale=h_scale)}
        row = []
        for name, priors in choices.items():
            post = dpp.noise_aware_posterior(tr, method="grid", priors=priors)
            zk = (truth - np.asarray(post.mean_unconstrained())) / np.asarray(post.sd_unconstrained())
            z[name].append(zk)
            row.append(f"{name} {zk[0]:+.2f}")
        print(k, "z of the common mean:", ", ".join(row), flush=True)
    for name, zs in z.items():
        zs = np.array(zs)
        print(f"{name:9s} RMS z {np.round(np.sqrt((zs**2).mean(0)), 2)}  share |z| > 1.645: "
              f"{(np.abs(zs) > 1.645).mean():.3f} (common mean {(np.abs(zs[:, 0]) > 1.645).mean():.2f})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if sys.argv[1:] else 12)
