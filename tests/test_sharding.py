"""Data sharding over several devices and chunked per-example gradients (issue 11, "Scale beyond one
machine"): the same DP-SGD run gives the same trace.

Several devices are simulated on the CPU with XLA_FLAGS=--xla_force_host_platform_device_count=4, which
must be set before JAX starts, so the check runs in a fresh interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import json, os
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    import jax, jax.numpy as jnp, numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    from dpposterior.dpsgd import core, dpsgd
    from dpposterior.dpsgd.sampling import default_capacity

    rng = np.random.default_rng(0)
    n, d = 4000, 12
    x = rng.normal(size=(n, d)).astype(np.float32)
    y = (rng.uniform(size=n) < 0.5).astype(np.float32)

    def loss(w, rec):
        xi, yi = rec
        z = xi @ w
        return jnp.logaddexp(0.0, z) - yi * z

    kw = dict(noise_multiplier=1.0, clip=1.0, sampling_rate=0.05, num_steps=60, learning_rate=0.01,
              delta=1e-5, rng_key=3, progress=False)
    w0 = np.zeros(d, np.float32)
    one = dpsgd(loss, w0, (jnp.asarray(x), jnp.asarray(y)), **kw)
    mesh = Mesh(np.array(jax.devices()), ("records",))
    sh = NamedSharding(mesh, P("records"))
    xs, ys = jax.device_put(x, sh), jax.device_put(y, sh)
    sharded = dpsgd(loss, w0, (xs, ys), **kw)
    # the gather of a batch from records sharded over the devices: each device gathers its own rows
    # and the rows are summed across devices (all-reduce of the batch), the data are never all-gathered
    hlo = jax.jit(lambda a, i: jnp.take(a, i, axis=0, mode="clip")).lower(xs, jnp.arange(64)).compile().as_text()
    # chunked per-example gradients: tiles of 128 records instead of one tile for the whole buffer
    # (a new loss object: the engine caches its compiled program per loss function)
    core.TILE_FLOATS = 128 * d
    tiled = dpsgd(lambda w, rec: loss(w, rec), w0, (jnp.asarray(x), jnp.asarray(y)), **kw)
    print(json.dumps(dict(
        devices=len(jax.devices()), shard_count=len(xs.sharding.device_set),
        sharded_equal=bool(np.array_equal(np.asarray(one.params), np.asarray(sharded.params))
                           and np.array_equal(np.asarray(one.grads), np.asarray(sharded.grads))),
        all_gather="all-gather" in hlo, all_reduce="all-reduce" in hlo,
        tiles=core.tiling(d, default_capacity(n, 0.05))[0],
        tiled_max_rel=float(np.max(np.abs(np.asarray(tiled.params) - np.asarray(one.params)))
                            / np.max(np.abs(np.asarray(one.params)))))))
""")


def test_sharded_data_and_tiled_gradients_give_the_same_trace():
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["devices"] == 4 and r["shard_count"] == 4
    assert r["sharded_equal"]  # bit for bit
    assert r["all_reduce"] and not r["all_gather"]  # data stay sharded
    assert r["tiles"] > 1  # the run really was chunked
    assert 0 < r["tiled_max_rel"] < 1e-5  # same sums, another float32 summation order


CPU_KERNELS_SCRIPT = textwrap.dedent("""
    import json, os, time
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    import jax, jax.numpy as jnp, numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    from dpposterior.dpsgd import dpsgd

    D, n = 12, 4000
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, D)).astype(np.float32)
    w = rng.uniform(0.5, 1.5, size=n).astype(np.float32)

    def mvn(mu, rec):   # one covariance per record: a batched Cholesky factorisation in every step
        xi, wi = rec
        chol = jnp.linalg.cholesky(0.5 * jnp.eye(D) + 0.5 + wi * jnp.eye(D))
        z = jax.scipy.linalg.solve_triangular(chol, xi - mu, lower=True)
        return 0.5 * z @ z + jnp.sum(jnp.log(jnp.diag(chol)))

    def plain(mu, rec):
        return 0.5 * jnp.sum(jnp.square(rec[0] - mu))

    kw = dict(noise_multiplier=1.0, clip=1.0, sampling_rate=0.1, num_steps=20, learning_rate=0.01, delta=1e-5,
              rng_key=3, progress=False)
    mu0 = np.zeros(D, np.float32)
    sh = NamedSharding(Mesh(np.array(jax.devices()), ("records",)), P("records"))
    xs, ws = jax.device_put(x, sh), jax.device_put(w, sh)
    out = {"shards": len(xs.sharding.device_set)}
    plain_sharded = dpsgd(plain, mu0, (xs, ws), **kw)   # no custom kernel: runs on both devices, no note
    out["plain_equal"] = bool(np.array_equal(plain_sharded.grads, dpsgd(plain, mu0, (jnp.asarray(x), jnp.asarray(w)), **kw).grads))
    t = time.time()
    sharded = dpsgd(mvn, mu0, (xs, ws), **kw)            # must finish (not hang)
    out["sharded_s"] = time.time() - t
    one = dpsgd(mvn, mu0, (jnp.asarray(x), jnp.asarray(w)), **kw)
    out["equal"] = bool(np.array_equal(one.params, sharded.params) and np.array_equal(one.grads, sharded.grads)
                        and np.array_equal(one.final_params, sharded.final_params))
    out["caller_data_still_sharded"] = len(xs.sharding.device_set)
    print(json.dumps(out))
""")


def test_sharded_data_with_a_loss_calling_cpu_lapack_kernels_runs_on_one_device_without_hanging():
    """A per-record Cholesky factorisation (jaxlib's ``lapack_spotrf_ffi``) on data sharded over 2 XLA CPU
    devices hung the process for ever at 0% CPU (the kernel waits on XLA's intra-op pool, whose threads
    all run a device's program); now the data are gathered onto one device with a note on stderr, and the
    trace is the unsharded run's, bit for bit. A loss without such kernels keeps its sharded run."""
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    try:
        out = subprocess.run(
            [sys.executable, "-c", CPU_KERNELS_SCRIPT], capture_output=True, text=True, env=env, timeout=120
        )
    except subprocess.TimeoutExpired as e:
        raise AssertionError(
            "dpsgd on data sharded over 2 CPU devices with a Cholesky loss hung (killed after 120 s)"
        ) from e
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["shards"] == 2 and r["caller_data_still_sharded"] == 2
    assert r["equal"] and r["plain_equal"]
    assert out.stderr.count("dpposterior: dpsgd's step program calls jaxlib CPU kernels") == 1  # mvn only
    assert "(lapack_spotrf_ffi, lapack_strsm_ffi)" in out.stderr
    assert "running on one device (cpu:0) instead of 2" in out.stderr
    assert "0.2 MiB more host memory" in out.stderr  # x and w: 4000 x 13 float32
