"""Coverage-cell speed: one cell of K replicates run vmapped against the same replicates one by one.

The cell (issue 4's target): Beta-Bernoulli, epsilon 0.1, K = 500 replicates of N = 5,000 records,
T = 10,000 DP-SGD steps at q = 0.1, delta 1e-5, NA-DPVI grid and the naive last iterate, M = 20,000
posterior draws, R = 20 reference draws.

- vmapped: ``dpposterior.experiments.runner.compute_group`` on the two cells: simulation and DP-SGD of all K
  replicates as one compiled program (split over the XLA CPU devices), the grid and naive posteriors
  vmapped, TARP with 20 reference draws. Wall time from a cold start of the computation (sigma
  calibration, model inspection and compilation included), as a user waits for it.
- one by one: the same replicates (same data, same DP-SGD keys) through the public API, one after the
  other: ``dpvi`` (its compiled chunks are reused after the first replicate), then
  ``noise_aware_posterior(trace, "grid")`` and ``trace.last_iterate_posterior()``, 20,000 draws each.
  Run on a SUBSET of the replicates and EXTRAPOLATED to K: first replicate (with compilation) +
  (K - 1) x the mean of the others, plus the vmapped run's TARP time (the same computation).

The process sets the XLA CPU flags of :mod:`dpposterior.experiments.xla` before JAX starts
(``--devices``, default 2, and the YNN reduce fix); both columns run under the same flags.

Usage:
  .venv/bin/python benchmarks/coverage_cell.py            # the recorded benchmark (several minutes)
  .venv/bin/python benchmarks/coverage_cell.py --quick    # tiny sizes, seconds (smoke test)
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes (a smoke test of the script)")
    p.add_argument("--replicates", type=int, default=None, help="K (default 500; quick: 6)")
    p.add_argument("--subset", type=int, default=None, help="replicates run one by one (default 4; quick: 2)")
    p.add_argument("--epsilon", type=float, default=0.1)
    p.add_argument("--devices", type=int, default=2, help="XLA CPU devices (default 2)")
    p.add_argument("--no-ynn-fix", action="store_true", help="leave XLA's YNN reduce fusions on (for comparison)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse(argv)
    from dpposterior.experiments.xla import configure_xla_cpu

    xla = configure_xla_cpu(args.devices, ynn_reduce_fix=not args.no_ynn_fix)  # before JAX starts

    import jax
    import numpy as np

    from dpposterior.experiments import CellConfig
    from dpposterior.experiments.runner import compute_group
    from dpposterior.experiments.replicates import dpvi_setup, replicate_data
    from dpposterior.experiments.report import marginal_text
    from dpposterior.noise_aware import noise_aware_posterior
    from dpposterior.vi.dpvi import dpvi

    if args.quick:
        # the sizes of the tests' tiny cells (tests/experiments/conftest.py), so a test can run this in-process
        # on programs it has already compiled
        sizes = dict(replicates=args.replicates or 6, num_steps=60, num_records=200, num_draws=400, repeats=4)
        subset = args.subset or 2
    else:
        sizes = dict(replicates=args.replicates or 500, num_steps=10_000, num_records=5_000, num_draws=20_000,
                     repeats=20)
        subset = args.subset or 4
    k = sizes["replicates"]
    subset = min(subset, k)
    cells = [CellConfig("beta-bernoulli", args.epsilon, m, **sizes) for m in ("grid", "naive")]
    devices = min(args.devices, jax.device_count())
    print(f"coverage cell benchmark: beta-bernoulli eps={args.epsilon:g} K={k} T={sizes['num_steps']} "
          f"N={sizes['num_records']} q=0.1 M={sizes['num_draws']} R={sizes['repeats']}, methods grid + naive")
    print(f"machine: {platform.processor() or platform.machine()}, {len(os.sched_getaffinity(0))} cores, "
          f"{devices} XLA device(s); jax {jax.__version__}; XLA_FLAGS={xla['xla_flags']!r}")

    # ---- vmapped: one compiled program for the replicates, vmapped posteriors, TARP
    t0, c0 = time.perf_counter(), time.process_time()
    records = compute_group(cells, devices=devices, progress=sys.stderr.isatty())
    vm_wall, vm_cpu = time.perf_counter() - t0, time.process_time() - c0
    timing = {r["config"]["method"]: r["timing"] for r in records}
    rep_s = timing["grid"]["replicates_seconds"]
    tarp_s = sum(t["coverage_seconds"] for t in timing.values())
    print(f"\nvmapped cell: {vm_wall:8.1f} s wall ({vm_cpu:.0f} s CPU, {vm_cpu / vm_wall:.2f} cores busy)")
    print(f"  set-up + simulation + DP-SGD of {k} replicates (compilation included): {rep_s:.1f} s")
    for m, t in timing.items():
        print(f"  {m:6s} posterior {t['method_seconds']:6.1f} s, TARP (joint and per coordinate) x "
              f"{sizes['repeats']} references {t['coverage_seconds']:5.1f} s")
    for r in records:
        print(f"  {r['config']['method']:6s} RMSE {r['rmse']:.4f} (single draw {r['single_draw_rmse_mean']:.4f} "
              f"± {r['single_draw_rmse_sd']:.4f}), {marginal_text(r)}, sharpness {r['sharpness']:.4f}")

    # ---- one by one through the public API, on a subset
    cfg = cells[0]
    setup = dpvi_setup(cfg)
    kwargs = setup.dpvi_kwargs(cfg)
    times, cpus = [], []
    for i in range(subset):
        theta, data, key = replicate_data(cfg, i)
        t, c = time.perf_counter(), time.process_time()
        trace = dpvi(setup.spec.model, *data, rng_key=key, **kwargs)
        grid = noise_aware_posterior(trace, "grid", rng_key=i)
        d1 = grid.sample_unconstrained(jax.random.PRNGKey(i), cfg.num_draws)
        d2 = trace.last_iterate_posterior().sample_unconstrained(jax.random.PRNGKey(i), cfg.num_draws)
        np.asarray(d1), np.asarray(d2)
        times.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    first, first_cpu = times[0], cpus[0]
    per = float(np.mean(times[1:])) if len(times) > 1 else first
    per_cpu = float(np.mean(cpus[1:])) if len(cpus) > 1 else first_cpu
    extrapolated = first + (k - 1) * per + tarp_s
    extrapolated_cpu = first_cpu + (k - 1) * per_cpu + tarp_s
    print(f"\none by one (public dpvi + noise_aware_posterior per replicate), measured on {subset} of {k} "
          f"replicates: first {first:.2f} s (compiles), then {per:.2f} s each")
    print(f"  EXTRAPOLATED to {k} replicates: {first:.1f} + {k - 1} x {per:.2f} + TARP {tarp_s:.1f} = "
          f"{extrapolated:.1f} s")
    print(f"  CPU time: first {first_cpu:.2f} s, then {per_cpu:.2f} s each ({per_cpu / per:.2f} cores busy); "
          f"EXTRAPOLATED {extrapolated_cpu:.0f} CPU-s")
    print(f"\nspeed-up of the vmapped cell: {extrapolated / vm_wall:.1f}x in wall time "
          f"({vm_wall:.1f} s against an extrapolated {extrapolated:.1f} s), "
          f"{extrapolated_cpu / vm_cpu:.1f}x in CPU time ({vm_cpu:.0f} against {extrapolated_cpu:.0f} CPU-s)")
    load = os.getloadavg()
    print(f"load average at the end (other processes included): {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
