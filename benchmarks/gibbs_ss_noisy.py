"""Gibbs-SS-Noisy speed: the linear-regression coverage cell's baseline, timed as the cell runs it.

The cell (the reproduction's, ``dpposterior.reproduce.na_dpvi``): 10-D linear regression with an
intercept, N = 5,000 records per replicate, K = 500 replicates, 1,000 warm-up sweeps, 20,000 kept
draws thinned by 2 (41,000 sweeps per replicate), interweaving on, ``fourth_moments="normal"``. The
coverage engine calls :func:`dpposterior.baselines.cells.gibbs_ss_noisy_cell`, which releases every
replicate's statistics and runs the chains vmapped in compiled calls of 50 replicates (one compiled
program shared by the calls, on one XLA device).

This script calls that same function on a SUBSET of K replicates (default 50: one call) twice: the first call includes compilation, the second is warm. It prints:

- per sweep: the warm call's wall time / sweeps (all K chains advance together), and per
  replicate-sweep (that divided by K);
- per replicate: warm wall time / K (release, chain and ESS diagnostics included);
- the cell EXTRAPOLATED to K = 500: compilation (first call minus warm call) + 500 / K times the warm
  call, scaled from the sweeps run here to the cell's 41,000 (``--num-draws`` below the cell's 20,000);
- the ratio against the RECORDED baseline figures of benchmarks/README.md ("Gibbs-SS-Noisy"): numbers
  measured before the speed-up on this machine type, not re-run by this script.

The process sets the coverage engine's XLA CPU flags (:mod:`dpposterior.experiments.xla`, 2 devices)
before JAX starts, as the ``coverage`` command does.

Usage:
  .venv/bin/python benchmarks/gibbs_ss_noisy.py                    # K = 50, 1,000 + 4,000 x 2 sweeps
  .venv/bin/python benchmarks/gibbs_ss_noisy.py --num-draws 20000  # the cell's full chain length
  .venv/bin/python benchmarks/gibbs_ss_noisy.py --quick            # tiny sizes (a smoke test)
"""

from __future__ import annotations

import argparse
import os
import platform
import time

#: the cell of the reproduction (dpposterior.reproduce.na_dpvi: REGRESSION_METHOD_OPTIONS, plan()).
CELL = {"replicates": 500, "num_records": 5_000, "num_warmup": 1_000, "num_draws": 20_000, "thin": 2}

#: recorded before the speed-up (benchmarks/README.md, "Gibbs-SS-Noisy"): microseconds per
#: replicate-sweep (warm), and the extrapolated K = 500 cell in seconds.
RECORDED_BASELINE = {"us_per_replicate_sweep": 164.7, "cell_seconds": 3403.0}


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--replicates", type=int, default=50,
                   help="K replicates timed (default 50: one compiled call of the cell, which runs 50 at a time)")
    p.add_argument("--num-draws", type=int, default=4_000, help="kept draws per replicate (the cell: 20,000)")
    p.add_argument("--num-warmup", type=int, default=CELL["num_warmup"])
    p.add_argument("--thin", type=int, default=CELL["thin"])
    p.add_argument("--epsilon", type=float, default=0.3)
    p.add_argument("--repeats", type=int, default=1, help="warm calls (the fastest is reported)")
    p.add_argument("--devices", type=int, default=2, help="XLA CPU devices (default 2, as the coverage command)")
    p.add_argument("--quick", action="store_true", help="tiny sizes (a smoke test of the script)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse(argv)
    if args.quick:
        args.replicates, args.num_draws, args.num_warmup = 4, 50, 20
    from dpposterior.experiments.xla import configure_xla_cpu

    xla = configure_xla_cpu(devices=args.devices)
    import jax
    import numpy as np

    from dpposterior.baselines import cells as BC

    k = args.replicates
    n_rec = 200 if args.quick else CELL["num_records"]
    _, data = BC.simulate_replicates("linear-regression", 0, k, n_rec)

    def call():
        t0, c0 = time.perf_counter(), time.process_time()
        out = BC.gibbs_ss_noisy_cell(data, args.epsilon, 1, args.num_draws, num_warmup=args.num_warmup,
                                     thin=args.thin, interweave=True, fourth_moments="normal")
        return time.perf_counter() - t0, time.process_time() - c0, out

    first, _, out = call()
    warm, warm_cpu, _ = min((call() for _ in range(max(1, args.repeats))), key=lambda r: r[0])
    sweeps = args.num_warmup + args.num_draws * args.thin
    per_rep_sweep = warm / k / sweeps
    cell_sweeps = CELL["num_warmup"] + CELL["num_draws"] * CELL["thin"]
    compile_s = max(first - warm, 0.0)
    cell = compile_s + warm * (CELL["replicates"] / k) * (cell_sweeps / sweeps)
    print(f"Gibbs-SS-Noisy coverage-cell benchmark ({platform.node()}, {os.cpu_count()} CPUs, jax {jax.__version__}, "
          f"{len(jax.devices())} XLA devices; XLA_FLAGS={xla['xla_flags']!r})")
    print(f"K = {k} replicates timed, N = {n_rec}, epsilon = {args.epsilon}, {args.num_warmup} warm-up + "
          f"{args.num_draws} x {args.thin} sweeps = {sweeps} sweeps per replicate")
    print(f"first call (with compilation): {first:8.2f} s;  warm call: {warm:8.2f} s")
    print(f"per sweep of all K chains:        {warm / sweeps * 1e3:9.3f} ms")
    print(f"per replicate-sweep:              {per_rep_sweep * 1e6:9.2f} us  (process CPU time, all threads: "
          f"{warm_cpu / k / sweeps * 1e6:.2f} us)")
    print(f"per replicate (warm, {sweeps} sweeps): {warm / k:8.3f} s  ->  at the cell's {cell_sweeps} sweeps: "
          f"{warm / k * cell_sweeps / sweeps:8.3f} s")
    print(f"EXTRAPOLATED K = {CELL['replicates']} cell ({cell_sweeps} sweeps each, + compilation {compile_s:.1f} s): "
          f"{cell:9.1f} s")
    base = RECORDED_BASELINE
    print(f"RECORDED baseline (benchmarks/README.md, measured before the speed-up, not re-run here): "
          f"{base['us_per_replicate_sweep']:.1f} us per replicate-sweep, cell {base['cell_seconds']:.0f} s")
    print(f"speed-up against the recorded baseline: per replicate-sweep {base['us_per_replicate_sweep'] / (per_rep_sweep * 1e6):.2f}x, "
          f"extrapolated cell {base['cell_seconds'] / cell:.2f}x")
    acc = out.diagnostics
    print(f"diagnostics: latent acceptance mean {acc['latent_acceptance_mean']:.4f}, ESS min {acc['ess_min']}, "
          f"median {acc['ess_median']}")
    try:
        print(f"load average: {os.getloadavg()[0]:.2f} (1 min)")
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
