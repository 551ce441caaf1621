"""NA-DPVI on a Student-t model: a coordinate whose likelihood is flat on one side (docs/user-guide.md).

One simulated data set (2,000 draws of 2 + 1.5 t_5), the model t(nu, mu, s) with priors mu ~ N(0, 5),
nu ~ Gamma(2, 0.1), s ~ HalfNormal(3). The reference is the variational optimum under the same clip:
full-batch DP-SGD at epsilon 1000 with a small fixed learning rate (its last 2,000 of 8,000 steps,
drift below 0.02). Each release at epsilon 1 is read by NA-DPVI (grid, and Laplace with ``laplace``),
and the script prints the z-score (reference - posterior mean) / posterior sd of each coordinate of
phi* = (means of mu, log nu, log s; their log-sd parameters) and the trace's mean after burn-in minus
the reference. Calibrated: |z| mostly below 2. Used in the user guide:

    .venv/bin/python docs/results/scripts/student_t_probe.py 2000 6 1.0 laplace   # default learning rate
    .venv/bin/python docs/results/scripts/student_t_probe.py 8000 3 0.25          # a quarter of it

Arguments: num_steps, number of releases (keys 100, 101, ...), lr_scale, and "laplace" to add that
solver. Non-private analysis with fixed keys: never use fixed keys for a real release.
"""

import sys

import numpy as np
from student_t_coverage import student  # the same model as the coverage cells

import dpposterior as dpp

CLIP = 5.0


def main(num_steps: int, releases: int, lr_scale: float, solvers: tuple[str, ...]) -> None:
    rng = np.random.default_rng(0)
    y = (2.0 + 1.5 * rng.standard_t(5, size=2000)).astype("float32")
    ref = dpp.dpvi(student, y, epsilon=1e3, delta=1e-5, num_steps=8000, sampling_rate=1.0, clip=CLIP, rng_key=0,
                   learning_rate=np.array([3e-4] * 3 + [3e-2] * 3, np.float32))
    phi = np.asarray(ref.phi)
    ref_phi = phi[-2000:].mean(0)
    print("reference phi", np.round(ref_phi, 3), "drift", np.round(phi[-4000:-2000].mean(0) - ref_phi, 3))
    for r in range(releases):
        tr = dpp.dpvi(student, y, epsilon=1.0, delta=1e-5, num_steps=num_steps, sampling_rate=0.1, clip=CLIP,
                      rng_key=100 + r, lr_scale=lr_scale)
        off = np.asarray(tr.phi)[num_steps // 5:].mean(0) - ref_phi
        for solver in solvers:
            post = dpp.noise_aware_posterior(tr, method=solver)
            m, s = (np.asarray(post.diagnostics[k]) for k in ("phi_star_mean", "phi_star_sd"))
            print(r, solver, "z", np.round((ref_phi - m) / s, 2), "trace mean - reference", np.round(off, 3))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), ("grid",) + tuple(sys.argv[4:5]))
