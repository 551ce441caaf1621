"""Worker of benchmarks/peers.py: our engine, ``dpposterior.dpsgd.dpsgd(..., sampling="packed")``.

Run by peers.py with the project's own Python in a fresh process per row (so the process's peak
resident memory belongs to this row alone). Prints ``PEER_RESULT <json>``; see _peer_common.py.
"""

from __future__ import annotations

import os
import platform
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _peer_common import config_from_argv, emit, make_data, marginal_step_time, reset_peak, vm_kb  # noqa: E402


def run_row(cfg: dict) -> dict:
    """Times one row; returns the result dict (also used in-process by ``peers.py --quick``)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from dpposterior.dpsgd import default_capacity, dpsgd

    jnp.ones(8).block_until_ready()  # the runtime is up: the idle baseline
    idle_kb = vm_kb("VmHWM")

    n, d = cfg["n"], cfg["d"]
    x, y = make_data(n, d, cfg["seed"])
    # the documented way for large data: on the device once, the numpy copy dropped
    xj, yj = jax.device_put(x), jax.device_put(y)
    del x, y
    data_kb = vm_kb("VmHWM")  # peak up to here: idle + data (+ any transient copy while loading)
    loaded_kb = reset_peak()

    def loss(w, record):
        xi, yi = record
        z = jnp.dot(xi, w)
        return jax.nn.softplus(z) - yi * z

    w0 = np.zeros(d, np.float32)
    long = cfg["long"]

    # chunk_steps = the long run: each run is one compiled scan (the short run's is its own program,
    # compiled in the warm-up); a "chunk" in the config (the quick smoke test) caps it, so both
    # runs share one program and only one compilation is paid
    chunk = cfg.get("chunk", long)

    def run(steps):
        tr = dpsgd(loss, w0, (xj, yj), noise_multiplier=cfg["sigma"], clip=cfg["clip"],
                   sampling_rate=cfg["q"], num_steps=steps, learning_rate=cfg["lr"], delta=1e-5,
                   rng_key=0, progress=False, sampling="packed", chunk_steps=chunk)
        return tr.final_params

    t = marginal_step_time(run, cfg["short"], long, cfg["repeats"])
    return dict(t, idle_kb=idle_kb, peak_kb=max(data_kb, vm_kb("VmHWM")),
                loaded_kb=loaded_kb, run_peak_kb=vm_kb("VmHWM"),
                version=f"dpposterior (jax {jax.__version__}, {platform.python_version()})",
                detail=("pinned to 1 CPU, " if cfg.get("pin") else "all CPUs, ")
                + f"packed, capacity {default_capacity(n, cfg['q'])}")


def main() -> None:
    emit(run_row(config_from_argv()))


if __name__ == "__main__":
    main()
