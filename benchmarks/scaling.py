"""Scaling curves: time and peak memory against N, d, T and replicates per cell, with fitted exponents.

Four sweeps, each point measured in a FRESH subprocess (so its peak memory, ``ru_maxrss``, is its own):

- N (records, 1e3 to 1e6): ``dpsgd`` on logistic regression, d = 100, q = 0.01, packed sampling;
  per-step time (a long run minus a short run over the extra steps, compilation excluded).
- d (parameters, 10 to 1e5): the same, N = 2,000, q = 0.05 (about 100 records a step; the data
  are N x d floats, 800 MB at d = 1e5).
- T (steps, 1e2 to 1e5): the whole ``dpsgd`` call, N = 10,000, d = 100, q = 0.01, compilation
  excluded by a warm-up call of the same length.
- K (replicates of one coverage cell): ``experiments.runner.compute_group`` on a Beta-Bernoulli cell with
  N = 1,000, T = 1,000, naive + grid; wall time of the whole group, compilation included (a user's
  wait), and its per-replicate share.

The exponent of each sweep is the least-squares slope of log(time) on log(x) over the points at and
above the sweep's middle value (where fixed costs no longer dominate), and over all points. Memory is
the subprocess's peak resident set (JAX and the data included), in MiB. A PNG of the four log-log
curves is written next to the table (``--png``).

Usage:
  .venv/bin/python benchmarks/scaling.py                          # the recorded sweeps (~10 minutes)
  .venv/bin/python benchmarks/scaling.py --png benchmarks/scaling.png
  .venv/bin/python benchmarks/scaling.py --quick                  # two tiny points per sweep (smoke test)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time

FULL = {
    "N": [1_000, 10_000, 100_000, 1_000_000],
    "d": [10, 100, 1_000, 10_000, 100_000],
    "T": [100, 1_000, 10_000, 100_000],
    "K": [25, 100, 400],
}
QUICK = {"N": [1_000, 4_000], "d": [10, 100], "T": [50, 200], "K": [2, 4]}
UNITS = {"N": "ms/step", "d": "ms/step", "T": "s/call", "K": "s/cell"}


def _dpsgd_point(n: int, d: int, q: float, steps: int, per_step: bool) -> float:
    import jax.numpy as jnp
    import numpy as np

    from dpposterior.dpsgd import dpsgd

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _common import logistic_loss

    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(n, d)).astype(np.float32) / math.sqrt(d))
    y = jnp.asarray((rng.uniform(size=n) < 0.5).astype(np.float32))
    w0 = np.zeros(d, np.float32)

    def call(t: int) -> float:
        t0 = time.perf_counter()
        tr = dpsgd(logistic_loss, w0, (x, y), noise_multiplier=1.0, clip=1.0, sampling_rate=q, num_steps=t,
                   learning_rate=0.01, delta=1e-5, rng_key=0, progress=False, chunk_steps=steps)
        np.asarray(tr.params[-1])
        return time.perf_counter() - t0

    short = max(1, steps // 10)
    call(short), call(steps)   # compile (one program: chunk_steps fixed) and warm the accountant's cache
    best_s, best_l = min(call(short) for _ in range(3)), min(call(steps) for _ in range(3))
    if per_step:
        return max(best_l - best_s, 1e-9) / (steps - short) * 1e3   # ms per step
    return best_l                                                      # s per call


def _cell_point(k: int, quick: bool) -> float:
    from dpposterior.experiments import CellConfig
    from dpposterior.experiments.runner import compute_group

    sizes = (dict(num_steps=60, num_records=200, num_draws=400, repeats=4) if quick
             else dict(num_steps=1000, num_records=1000, num_draws=2000, repeats=10))
    cells = [CellConfig("beta-bernoulli", 0.5, m, replicates=k, **sizes) for m in ("naive", "grid")]
    t0 = time.perf_counter()
    compute_group(cells, progress=False)
    return time.perf_counter() - t0


def point(kind: str, value: int, quick: bool) -> dict:
    """One point, in this process: its time and this process's peak memory."""
    # marginal per-step times need a long run that takes well over the call's fixed cost: 4,000 steps
    # where a step takes microseconds, 400 where it takes milliseconds
    if kind == "N":
        steps = 40 if quick else (4000 if value <= 100_000 else 400)
        t = _dpsgd_point(value, 100 if not quick else 10, 0.01 if not quick else 0.05, steps, True)
    elif kind == "d":
        steps = 40 if quick else (4000 if value <= 1_000 else 400)
        t = _dpsgd_point(2_000 if not quick else 500, value, 0.05, steps, True)
    elif kind == "T":
        t = _dpsgd_point(10_000 if not quick else 500, 100 if not quick else 10, 0.01 if not quick else 0.05, value,
                         False)
    elif kind == "K":
        t = _cell_point(value, quick)
    else:
        raise ValueError(f"kind must be one of N, d, T, K, got {kind!r}")
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0   # Linux: KiB
    return dict(kind=kind, value=value, time=t, peak_mib=peak_mib)


def slope(xs: list[float], ys: list[float]) -> float:
    lx, ly = [math.log(v) for v in xs], [math.log(v) for v in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    sxx = sum((a - mx) ** 2 for a in lx)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sxx if sxx > 0 else float("nan")


def run_sweeps(plan: dict[str, list[int]], quick: bool) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for kind, values in plan.items():
        out[kind] = []
        for v in values:
            cmd = [sys.executable, os.path.abspath(__file__), "--point", kind, str(v)] + (["--quick"] if quick else [])
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
            if res.returncode != 0:
                raise RuntimeError(f"point {kind}={v} failed:\n{res.stderr[-3000:]}")
            out[kind].append(json.loads(res.stdout.strip().splitlines()[-1]))
            print(f"  {kind} = {v:>9,}: {out[kind][-1]['time']:.4g} {UNITS[kind]}, "
                  f"peak {out[kind][-1]['peak_mib']:.0f} MiB", flush=True)
    return out


def report(results: dict[str, list[dict]]) -> None:
    print()
    print(f"{'sweep':>6} {'x':>10} {'time':>12} {'unit':>8} {'peak MiB':>9}")
    print("-" * 50)
    for kind, rows in results.items():
        for r in rows:
            print(f"{kind:>6} {r['value']:>10,} {r['time']:>12.4g} {UNITS[kind]:>8} {r['peak_mib']:>9.0f}")
    print()
    print(f"{'sweep':>6} {'time exponent (upper half)':>27} {'(all points)':>13} {'memory exponent (upper half)':>29}")
    print("-" * 80)
    for kind, rows in results.items():
        xs, ts, ms = [r["value"] for r in rows], [r["time"] for r in rows], [r["peak_mib"] for r in rows]
        h = len(xs) // 2 if len(xs) > 2 else 0
        print(f"{kind:>6} {slope(xs[h:], ts[h:]):>27.2f} {slope(xs, ts):>13.2f} {slope(xs[h:], ms[h:]):>29.2f}")


def plot(results: dict[str, list[dict]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(16, 3.6))
    for ax, (kind, rows) in zip(axes, results.items()):
        xs = [r["value"] for r in rows]
        ax.loglog(xs, [r["time"] for r in rows], "o-", color="C0", label=f"time ({UNITS[kind]})")
        ax.set_xlabel(kind)
        ax.set_ylabel(UNITS[kind], color="C0")
        ax2 = ax.twinx()
        ax2.loglog(xs, [r["peak_mib"] for r in rows], "s--", color="C1")
        ax2.set_ylabel("peak MiB", color="C1")
        ax.set_title(f"{kind}: time exponent {slope(xs[len(xs) // 2:], [r['time'] for r in rows][len(xs) // 2:]):.2f}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="two tiny points per sweep (smoke test)")
    ap.add_argument("--sweeps", nargs="+", choices=tuple(FULL), default=None, help="run only these sweeps")
    ap.add_argument("--png", default=None, help="write the curves to this PNG")
    ap.add_argument("--point", nargs=2, metavar=("KIND", "VALUE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.point:
        print(json.dumps(point(args.point[0], int(args.point[1]), args.quick)))
        return 0
    plan = {k: v for k, v in (QUICK if args.quick else FULL).items() if args.sweeps is None or k in args.sweeps}
    print(f"scaling sweeps ({'quick' if args.quick else 'full'}), {os.cpu_count()} CPUs, "
          f"each point in a fresh process")
    results = run_sweeps(plan, args.quick)
    report(results)
    if args.png:
        plot(results, args.png)
    try:
        print(f"load average at the end: {os.getloadavg()[0]:.2f} (1 min)")
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
