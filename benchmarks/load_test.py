"""Load test: DP-SGD on 1,000,000 records with 1,000 parameters, peak memory against the data size.

The packed engine works on a sampled batch (about qN records, in tiles of at most 2^22 floats of
per-example gradients), so the memory it needs beyond the data should be bounded by the batch, not by
N. This script builds the data (float32, N x d), measures the process's resident memory with the
data loaded, runs ``dpsgd`` for a few steps (logistic regression, d parameters, q = 0.1), and prints
the peak resident memory (VmHWM) and what the run added on top of the data, beside the size of one
step's batch of per-example gradients and the N x d array the full-N masked approach materialises.

Usage:
  .venv/bin/python benchmarks/load_test.py                 # N = 1,000,000, d = 1,000 (about 4 GB of data)
  .venv/bin/python benchmarks/load_test.py --quick         # N = 20,000, d = 50 (seconds)
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_peak() -> bool:
    """Resets VmHWM to the current RSS (Linux >= 4.0: write 5 to clear_refs); False if not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke test of the script)")
    ap.add_argument("--records", type=int, default=None)
    ap.add_argument("--params", type=int, default=None)
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--sampling-rate", type=float, default=0.1)
    ap.add_argument("--numpy", action="store_true",
                    help="pass numpy arrays (the engine then makes its own device copy of the data)")
    args = ap.parse_args(argv)
    n = args.records or (20_000 if args.quick else 1_000_000)
    d = args.params or (50 if args.quick else 1_000)
    steps = args.steps or (5 if args.quick else 10)
    q = args.sampling_rate

    import jax
    import jax.numpy as jnp
    import numpy as np

    from dpposterior.dpsgd import default_capacity, dpsgd
    from dpposterior.dpsgd.core import tiling

    def loss(w, record):
        x, y = record
        z = jnp.dot(x, w)
        return jax.nn.softplus(z) - y * z

    rss0 = _status_kb("VmRSS")
    rng = np.random.default_rng(0)
    x = np.empty((n, d), np.float32)
    for lo in range(0, n, 100_000):  # chunked generation: no float64 temporary of the whole array
        hi = min(lo + 100_000, n)
        x[lo:hi] = rng.standard_normal((hi - lo, d), dtype=np.float32) / np.float32(np.sqrt(d))
    y = (rng.random(n) < 0.5).astype(np.float32)
    data_bytes = x.nbytes + y.nbytes
    if not args.numpy:
        # the data as JAX arrays (the engine uses them as they are); the numpy copies are freed
        x, y = jax.device_put(x), jax.device_put(y)
        jax.block_until_ready((x, y))
        import gc

        gc.collect()
    rss_data = _status_kb("VmRSS")
    reset = _reset_peak()
    cap = default_capacity(n, q)
    n_tiles, tile = tiling(d, cap)
    t0 = time.perf_counter()
    trace = dpsgd(loss, np.zeros(d, np.float32), (x, y), noise_multiplier=1.0, clip=1.0, sampling_rate=q,
                  num_steps=steps, learning_rate=1e-3, delta=1e-6, rng_key=0, progress=False)
    wall = time.perf_counter() - t0
    peak = _status_kb("VmHWM")
    mb = 1024.0
    print(f"load test: N = {n:,} records, d = {d:,} parameters, q = {q:g}, {steps} steps; jax {jax.__version__} "
          f"on {jax.devices()[0].platform}, {os.cpu_count()} CPUs")
    print(f"data (x float32 N x d, y) as {'numpy' if args.numpy else 'JAX'} arrays: {data_bytes / 2**20:,.0f} MiB; resident before: {rss0 / mb:,.0f} MiB, "
          f"with the data: {rss_data / mb:,.0f} MiB")
    print(f"packed buffer: {cap:,} records per chunk in {n_tiles} tile(s) of {tile:,}; per-example gradients "
          f"of one tile: {tile * d * 4 / 2**20:,.1f} MiB (of the whole buffer: {cap * d * 4 / 2**20:,.1f} MiB); "
          f"the masked approach's N x d gradients: {n * d * 4 / 2**20:,.0f} MiB")
    peak_note = "since the data were loaded" if reset else "of the whole process (peak reset not allowed)"
    print(f"dpsgd: {wall:.1f} s ({wall / steps * 1e3:,.0f} ms per step, compilation included); peak resident "
          f"{peak_note}: {peak / mb:,.0f} MiB, i.e. {(peak - rss_data) / mb:,.0f} MiB above the data "
          f"({(peak - rss_data) * 1024 / max(1, data_bytes):.2f} x the data size)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
