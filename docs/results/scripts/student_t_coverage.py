"""Coverage cells of NA-DPVI on a Student-t model of your own (register_model), as the user guide reports.

    .venv/bin/python docs/results/scripts/student_t_coverage.py            # about 3 minutes on 2 cores
    .venv/bin/python docs/results/scripts/student_t_coverage.py settings   # other DP-SGD settings, about 2 min

K = 50 replicates at epsilon 1, N = 2,000. The first runs grid, Laplace, naive, NUTS and grid with the
burn-in h prior at the default settings (T = 2,000, C = 5, beta_rho 100); ``settings`` runs grid and
grid with the burn-in prior under a quarter of the learning rate over 8,000 steps, beta_rho 20, C = 2
and a quarter of the learning rate over 2,000 steps. Cells go to /tmp/stcov/out and /tmp/stcov/out2
(resumable). Non-private experiment on simulated data. ``student`` is also the model of
``student_t_probe.py``.
"""

import sys
import time

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist

from dpposterior.experiments import CellConfig, run_coverage
from dpposterior.experiments.report import marginal_text
from dpposterior.models import ModelSpec, register_model

BURN_IN_PRIOR = (("priors", "burn_in"),)


def student(y):
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    nu = numpyro.sample("nu", dist.Gamma(2.0, 0.1))
    s = numpyro.sample("s", dist.HalfNormal(3.0))
    with numpyro.plate("records", y.shape[0]):
        numpyro.sample("y", dist.StudentT(nu, mu, s), obs=y)


def simulate(key, n):
    k1, k2, k3, k4 = jax.random.split(key, 4)
    mu = 5.0 * jax.random.normal(k1)
    nu = jax.random.gamma(k2, 2.0) / 0.1
    s = 3.0 * jnp.abs(jax.random.normal(k3))
    return {"mu": mu, "nu": nu, "s": s}, (mu + s * jax.random.t(k4, nu, (n,)),)


def run(name: str, cells: list[CellConfig], out: str) -> None:
    t = time.time()
    for r in run_coverage(cells, out, progress=False).results:
        print(name, r["label"], "rmse", round(r["rmse"], 3), "sharpness", round(r["sharpness"], 3), marginal_text(r),
              flush=True)
    print(name, "time", round(time.time() - t), flush=True)


def default_settings() -> None:
    register_model(ModelSpec("student-t", student, simulate, clip=5.0, beta_rho=100.0))
    size = dict(replicates=50, num_steps=2000, num_records=2000)
    cells = [CellConfig("student-t", 1.0, m, **size) for m in ("grid", "laplace", "naive", "nuts")]
    cells.append(CellConfig("student-t", 1.0, "grid", method_options=BURN_IN_PRIOR, **size))
    run("default", cells, "/tmp/stcov/out")


def other_settings() -> None:
    for tag, clip, beta_rho, lr, steps in [("lr0.25-T8000", 5.0, 100.0, 0.25, 8000), ("beta20", 5.0, 20.0, 1.0, 2000),
                                           ("clip2", 2.0, 100.0, 1.0, 2000),
                                           ("eps-lr0.25-T2000", 5.0, 100.0, 0.25, 2000)]:
        name = f"student-t-{tag}".replace(".", "p")
        register_model(ModelSpec(name, student, simulate, clip=clip, beta_rho=beta_rho, lr_scale=lr))
        size = dict(replicates=50, num_steps=steps, num_records=2000)
        cells = [CellConfig(name, 1.0, "grid", **size),
                 CellConfig(name, 1.0, "grid", method_options=BURN_IN_PRIOR, **size)]
        run(tag, cells, "/tmp/stcov/out2")


if __name__ == "__main__":
    other_settings() if sys.argv[1:] == ["settings"] else default_settings()
