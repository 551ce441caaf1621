"""Worker of benchmarks/peers.py: d3p (DPBayes' NumPyro DPVI library), run with benchmarks/.venvs/d3p/bin/python.

DP-SGD on logistic regression the d3p way: ``d3p.svi.DPSVI`` (per-example ELBO gradients by
``vmap(value_and_grad)``, each clipped to C, averaged, Gaussian noise of std sigma C / batch size from
d3p's default cryptographic ChaCha20 generator, an SGD step) on a NumPyro model whose weight vector is a
``numpyro.param`` (no latent variables, an empty guide: the ELBO is then the log-likelihood and DPSVI
is plain DP-SGD on the logistic loss, d parameters, as in the other two columns). The likelihood is
scaled by N / batch size; d3p undoes that scale before clipping (``clip_unscaled_observations``,
its default), so C bounds one record's logistic-loss gradient as in our engine and Opacus.

Sampling: d3p has no Poisson sampling; its standard batching ``d3p.minibatch.subsample_batchify_data``
draws a fixed-size batch of round(qN) records without replacement (a keyed Feistel permutation,
O(batch) work). The learning rate is multiplied by the batch size (d3p averages, the others sum).
The steps run in one jitted ``lax.fori_loop`` (compiled once; the step count is a traced argument).

Prints ``PEER_RESULT <json>``; see _peer_common.py.
"""

from __future__ import annotations

import os
import platform
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _peer_common import config_from_argv, emit, make_data, marginal_step_time, reset_peak, vm_kb  # noqa: E402


def d3p_version() -> str:
    from importlib.metadata import version

    return version("d3p")


def main() -> None:
    cfg = config_from_argv()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import jax
    import jax.numpy as jnp
    import numpy as np
    import numpyro
    import numpyro.distributions as dist
    from numpyro.infer import Trace_ELBO
    from numpyro.optim import SGD

    import d3p
    import d3p.random
    from d3p.minibatch import q_to_batch_size, subsample_batchify_data
    from d3p.svi import DPSVI

    jnp.ones(8).block_until_ready()
    idle_kb = vm_kb("VmHWM")

    n, d = cfg["n"], cfg["d"]
    x, y = make_data(n, d, cfg["seed"])
    xj, yj = jax.device_put(x), jax.device_put(y)
    del x, y
    data_kb = vm_kb("VmHWM")  # peak up to here: idle + data (+ any transient copy while loading)
    loaded_kb = reset_peak()
    batch = q_to_batch_size(cfg["q"], n)

    def model(xb, yb):
        w = numpyro.param("w", jnp.zeros(d, jnp.float32))
        with numpyro.handlers.scale(scale=n / xb.shape[0]):
            numpyro.sample("obs", dist.Bernoulli(logits=xb @ w).to_event(1), obs=yb)

    def guide(xb, yb):
        pass

    svi = DPSVI(model, guide, SGD(cfg["lr"] * batch), Trace_ELBO(),
                clipping_threshold=cfg["clip"], dp_scale=cfg["sigma"])
    batch_init, get_batch = subsample_batchify_data((xj, yj), batch_size=batch)
    key = d3p.random.PRNGKey(0)
    key_batch, key_svi = d3p.random.split(key, 2)
    _, batch_state = batch_init(key_batch)
    state0 = svi.init(key_svi, *get_batch(0, batch_state))

    @jax.jit
    def steps_fn(state, steps):
        def body(i, st):
            xb, yb = get_batch(i, batch_state)
            st, _ = svi.update(st, xb, yb)
            return st

        return jax.lax.fori_loop(0, steps, body, state)

    holder = [state0]

    def run(steps):
        holder[0] = jax.block_until_ready(steps_fn(holder[0], jnp.int32(steps)))
        return holder[0]

    t = marginal_step_time(run, cfg["short"], cfg["long"], cfg["repeats"])
    w = np.asarray(svi.get_params(holder[0])["w"])
    emit(dict(t, idle_kb=idle_kb, peak_kb=max(data_kb, vm_kb("VmHWM")),
              loaded_kb=loaded_kb, run_peak_kb=vm_kb("VmHWM"), finite=bool(np.isfinite(w).all()),
              version=f"d3p {d3p_version()} (jax {jax.__version__}, "
                      f"numpyro {numpyro.__version__}, {platform.python_version()})",
              detail=("pinned to 1 CPU, " if cfg.get("pin") else "all CPUs, ")
              + f"fixed batch {batch} without replacement, ChaCha20 noise"))


if __name__ == "__main__":
    main()
