"""The Ray backend on a local multi-process cluster: do coverage cells run in parallel, and do they
give the in-process backend's numbers bit for bit? (issue 11, "Scale beyond one machine")

The same grid of coverage cells runs twice into fresh result folders: with the in-process backend
(groups one after the other) and with ``backend="ray"`` on a local Ray cluster started here with
``--workers`` CPUs (each group one Ray task in its own worker process). Printed: both wall times and
their ratio, each Ray group's start and end (from the records' ``execution`` fields) and the largest
number of groups that ran at the same moment, the worker processes used, and whether every cell's
numbers (``experiments.cell.comparable``: curves, RMSEs, diagnostics; timing and host fields excluded)
are identical.

On several machines the same code runs unchanged against a cluster (``ray start --head`` on one
machine, ``ray start --address HEAD:6379`` on the others, then ``--address auto``); see docs/scale.md.

Usage:
  .venv/bin/python benchmarks/ray_parallel.py             # 4 groups of 40 replicates, T = 2,000
  .venv/bin/python benchmarks/ray_parallel.py --quick     # 1 tiny group (smoke test)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings


def _max_overlap(intervals: list[tuple[float, float]]) -> int:
    events = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals], key=lambda e: (e[0], e[1]))
    best = cur = 0
    for _, step in events:
        cur += step
        best = max(best, cur)
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one tiny group (a smoke test of the script)")
    ap.add_argument("--workers", type=int, default=2, help="CPUs of the local Ray cluster (default 2)")
    args = ap.parse_args(argv)
    try:
        import ray
    except ImportError:
        print("Ray is not installed (pip install 'dpposterior[distributed]'): nothing to measure")
        return 0
    from dpposterior.experiments import CellConfig, run_coverage
    from dpposterior.experiments.cell import comparable

    if args.quick:
        sizes = dict(replicates=6, repeats=4, num_steps=60, num_records=200, num_draws=400)
        epsilons = (0.5,)
    else:
        sizes = dict(replicates=40, repeats=10, num_steps=2000, num_records=1000, num_draws=1000)
        epsilons = (0.3, 0.5, 1.0, 2.0)
    cells = [CellConfig("beta-bernoulli", e, m, **sizes) for e in epsilons for m in ("naive", "grid")]
    print(f"{len(cells)} cells in {len(epsilons)} groups (Beta-Bernoulli, K={sizes['replicates']}, "
          f"T={sizes['num_steps']}, N={sizes['num_records']}); {os.cpu_count()} CPUs here")
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        local = run_coverage(cells, os.path.join(tmp, "local"), progress=False)
        t_local = time.perf_counter() - t
        own_cluster = not ray.is_initialized()   # a caller's running cluster (e.g. a test fixture) is reused
        if own_cluster:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
                ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False,
                         configure_logging=False)
        try:
            t = time.perf_counter()
            remote = run_coverage(cells, os.path.join(tmp, "ray"), backend="ray", progress=False)
            t_ray = time.perf_counter() - t
        finally:
            if own_cluster:
                ray.shutdown()
    groups: dict[tuple, tuple[float, float, int]] = {}
    for r in remote.results:
        exe = r["execution"]
        key = (r["config"]["epsilon"],) if isinstance(r.get("config"), dict) else (exe["group_started_at"],)
        a, b, pid = groups.get(key, (exe["group_started_at"], exe["finished_at"], exe["pid"]))
        groups[key] = (min(a, exe["group_started_at"]), max(b, exe["finished_at"]), pid)
    t0 = min(a for a, _, _ in groups.values())
    same = [comparable(x) for x in remote.results] == [comparable(x) for x in local.results]
    print(f"{'backend':>10} {'wall s':>8}")
    print(f"{'local':>10} {t_local:>8.1f}")
    print(f"{'ray':>10} {t_ray:>8.1f}   local/ray = {t_local / t_ray:.2f}x")
    print("Ray groups (seconds from the first start):")
    for key, (a, b, pid) in sorted(groups.items(), key=lambda kv: kv[1][0]):
        print(f"  group {key}: {a - t0:7.1f} -> {b - t0:7.1f}  worker pid {pid}")
    print(f"most groups running at the same moment: {_max_overlap([(a, b) for a, b, _ in groups.values()])}; "
          f"worker processes: {len({p for _, _, p in groups.values()})} (driver pid {os.getpid()})")
    print(f"every cell identical to the in-process backend (bit for bit): {same}")
    try:
        print(f"load average during the run: {os.getloadavg()[0]:.2f} (1 min)")
    except OSError:
        pass
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
