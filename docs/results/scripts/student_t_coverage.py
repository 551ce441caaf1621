"""Coverage cells of NA-DPVI on a Student-t model of your own (register_model), as the user guide reports.

    .venv/bin/python docs/results/scripts/student_t_coverage.py   # about 3 minutes on 2 cores, K = 50

Writes its cells to /tmp/stcov/out (resumable). Non-private experiment on simulated data.
"""
import time, jax, jax.numpy as jnp, numpyro, numpyro.distributions as dist
from dpposterior.experiments import CellConfig, run_coverage
from dpposterior.models import ModelSpec, register_model

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

register_model(ModelSpec("student-t", student, simulate, clip=5.0, beta_rho=100.0))
t = time.time()
settings = dict(replicates=50, num_steps=2000, num_records=2000)
cells = [CellConfig("student-t", 1.0, m, **settings) for m in ("grid", "laplace", "naive", "nuts")]
cells.append(CellConfig("student-t", 1.0, "grid", method_options=(("priors", "burn_in"),), **settings))
summary = run_coverage(cells, "/tmp/stcov/out", progress=False)
for r in summary.results:
    print(r["label"], "rmse", round(r["rmse"], 3), "sharpness", round(r["sharpness"], 3))
print("time", round(time.time() - t))
