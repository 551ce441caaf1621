"""Student-t coverage cells under other DP-SGD settings (register_model; K = 50, epsilon 1, N = 2,000): the
user guide's "no setting we tried fixes it". About 2 minutes on 2 cores; cells in /tmp/stcov/out2.

    .venv/bin/python docs/results/scripts/student_t_settings.py

Non-private experiment on simulated data.
"""
import sys, time, jax, jax.numpy as jnp, numpyro, numpyro.distributions as dist
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

for tag, clip, beta_rho, lr, T in [("lr0.25-T8000", 5.0, 100.0, 0.25, 8000), ("beta20", 5.0, 20.0, 1.0, 2000),
                                   ("clip2", 2.0, 100.0, 1.0, 2000), ("eps-lr0.25-T2000", 5.0, 100.0, 0.25, 2000)]:
    t = time.time()
    name = f"student-t-{tag}".replace(".", "p")
    register_model(ModelSpec(name, student, simulate, clip=clip, beta_rho=beta_rho, lr_scale=lr))
    cells = [CellConfig(name, 1.0, m, replicates=50, num_steps=T, num_records=2000) for m in ("grid",)]
    cells.append(CellConfig(name, 1.0, "grid", method_options=(("priors", "burn_in"),), replicates=50, num_steps=T, num_records=2000))
    summary = run_coverage(cells, "/tmp/stcov/out2", progress=False)
    for r in summary.results:
        print(tag, r["label"], "rmse", round(r["rmse"], 3), "sharpness", round(r["sharpness"], 3), flush=True)
    print(tag, "time", round(time.time() - t), flush=True)
