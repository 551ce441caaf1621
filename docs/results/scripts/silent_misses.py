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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--epsilon", type=float, required=True)
    ap.add_argument("--replicates", type=int, default=60)
    a = ap.parse_args()
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
