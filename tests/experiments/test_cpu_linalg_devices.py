"""A model whose DP-SGD program calls jaxlib's CPU LAPACK kernels runs its coverage replicates on one
device: on several XLA CPU devices those kernels hung the process (their batch
loop waits on XLA's intra-op thread pool, whose threads all run the devices' programs)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

MODEL = textwrap.dedent("""
    import jax, jax.numpy as jnp, numpyro, numpyro.distributions as dist
    from dpposterior.models import ModelSpec, register_model

    D = 12

    def mvn(x, w):   # one covariance per record: batched Cholesky factorisations in every step
        mu = numpyro.sample("mu", dist.Normal(0.0, 1.0).expand([D]).to_event(1))
        s = numpyro.sample("s", dist.LogNormal(0.0, 0.3))
        cov = (0.5 * jnp.eye(D) + 0.5) * s + jnp.eye(D) * w[:, None, None]
        with numpyro.plate("records", x.shape[0]):
            numpyro.sample("x", dist.MultivariateNormal(mu, covariance_matrix=cov), obs=x)

    def simulate(key, n):
        k1, k2, k3 = jax.random.split(key, 3)
        mu, s = jax.random.normal(k1, (D,)), jnp.exp(0.3 * jax.random.normal(k2))
        chol = jnp.linalg.cholesky((0.5 * jnp.eye(D) + 0.5) * s)
        return {"mu": mu, "s": s}, (mu + jax.random.normal(k3, (n, D)) @ chol.T, jnp.zeros((n,)))

    register_model(ModelSpec("test-mvn-per-record", mvn, simulate, clip=3.0, beta_rho=100.0), replace=True)
""")

SCRIPT = (
    textwrap.dedent("""
    import json, os, sys
    os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
    import jax
    from dpposterior.experiments import CellConfig, run_coverage
""")
    + MODEL
    + textwrap.dedent("""
    sizes = dict(replicates=4, repeats=1, num_steps=100, num_records=100, num_draws=100)
    cells = [CellConfig("test-mvn-per-record", 1.0, "naive", **sizes), CellConfig("beta-bernoulli", 1.0, "naive", **sizes)]
    summary = run_coverage(cells, sys.argv[1], progress=False, devices=2, batch_size=4)
    out = {"devices": {r["config"]["model"]: r["execution"]["devices"] for r in summary.results},
           "method_devices": sorted({r["execution"]["method_devices"] for r in summary.results})}

    # the method programs: split over both devices unless they call a custom kernel
    import jax.numpy as jnp
    import numpy as np
    from dpposterior._batching import map_in_chunks, spread_over_devices
    x = np.arange(10 * 3 * 3, dtype=np.float32).reshape(10, 3, 3) * 0.01 + 2 * np.eye(3, dtype=np.float32)
    plain = jax.jit(jax.vmap(lambda a: jnp.sum(a * a)))
    chol = jax.jit(jax.vmap(lambda a: jnp.linalg.cholesky(a @ a.T)))
    out["used"] = [spread_over_devices(f, (x,), 2)[1] for f in (plain, chol)]
    out["equal"] = [bool(np.allclose(map_in_chunks(f, (x,), 3, devices=2), map_in_chunks(f, (x,), 3), rtol=1e-6))
                    for f in (plain, chol)]
    try:
        map_in_chunks(plain, (x,), 3, devices=3)
    except ValueError as e:
        out["error"] = str(e)
    # a baseline cell (DPVIm, no custom kernel) and Gibbs-SS-Noisy (LAPACK: one device) on both devices
    from dpposterior.baselines import cells as BC
    from dpposterior.experiments.replicates import simulate_data
    lin = CellConfig("linear-regression", 1.0, "dpvim", replicates=4, num_steps=40, num_records=50)
    _, arrays = simulate_data(lin)
    d1, d2 = (BC.dpvim_cell("linear-regression", arrays, 1.0, 0, 20, num_steps=40, devices=d) for d in (1, 2))
    out["dpvim_close"] = bool(np.allclose(d1.draws, d2.draws, rtol=1e-4, atol=1e-5))
    g = BC.gibbs_ss_noisy_cell(arrays, 1.0, 0, 20, num_warmup=10, thin=1, devices=2)
    out["gibbs_finite"] = bool(np.all(np.isfinite(g.draws)))
    print(json.dumps(out))
""")
)


def test_programs_with_cpu_lapack_kernels_run_on_one_device_and_the_others_on_two(tmp_path):
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["devices"] == {"test-mvn-per-record": 1, "beta-bernoulli": 2}
    # the methods' vmapped programs are split over the devices (faster for DPVIm and NUTS) unless they
    # call a custom kernel
    assert out["method_devices"] == [2]
    assert out["used"] == [2, 1] and out["equal"] == [True, True]
    assert "devices must be an integer in [1, 2]" in out["error"]
    assert out["dpvim_close"] and out["gibbs_finite"]
    assert "its DP-SGD program calls custom CPU kernels (lapack_spotrf_ffi" in proc.stderr
    assert "running this group's replicates on one device instead of 2" in proc.stderr


def test_cpu_linalg_kernels_names_the_kernels_and_none_for_the_papers_models():
    from dpposterior.experiments import CellConfig
    from dpposterior.experiments.replicates import dpvi_setup
    from dpposterior.experiments.replicates import cpu_linalg_kernels
    from dpposterior.models.registry import MODELS

    namespace: dict = {}
    exec(MODEL, namespace)
    try:
        mvn = CellConfig("test-mvn-per-record", 1.0, "naive", replicates=2, num_steps=40, num_records=40)
        assert "lapack_spotrf_ffi" in cpu_linalg_kernels(mvn, dpvi_setup(mvn))
        for model in ("beta-bernoulli", "linear-regression"):
            cfg = CellConfig(model, 1.0, "naive", replicates=2, num_steps=40, num_records=40)
            assert cpu_linalg_kernels(cfg, dpvi_setup(cfg)) == ()
    finally:
        MODELS.pop("test-mvn-per-record", None)
