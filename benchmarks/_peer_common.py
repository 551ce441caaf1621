"""Shared by the peer benchmark's workers (benchmarks/peers.py): data, timing, memory, the JSON protocol.

Only numpy and the standard library: every worker imports this module, each under its own virtual
environment (ours: the project's .venv; Opacus: benchmarks/.venvs/opacus; d3p: benchmarks/.venvs/d3p).

Protocol: a worker is run as ``python _peer_<name>.py '<json config>'`` and prints one line
``PEER_RESULT <json>`` on stdout (anything else it prints is ignored by peers.py).
"""

from __future__ import annotations

import json
import os
import sys
import time

RESULT_TAG = "PEER_RESULT "


def config_from_argv() -> dict:
    """The worker's config; with ``"pin": true`` the process is first pinned to one CPU (see pin_cpu)."""
    cfg = json.loads(sys.argv[1])
    if cfg.get("pin"):
        pin_cpu()
    return cfg


def pin_cpu() -> int:
    """Pins this process to one CPU (the last one it may use), before any framework starts.

    XLA and torch size their thread pools from the CPUs a process may use, so a pinned worker runs
    single-threaded without waiting on pool threads that other jobs' processes have descheduled.
    """
    cpu = max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return cpu


def emit(result: dict) -> None:
    sys.stdout.write(RESULT_TAG + json.dumps(result) + "\n")
    sys.stdout.flush()


def vm_kb(field: str) -> int:
    """A field of /proc/self/status in kB (VmRSS, VmHWM); falls back to ru_maxrss for VmHWM."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    import resource
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def reset_peak() -> int | None:
    """Resets VmHWM to the current RSS (Linux: write 5 to clear_refs); returns that RSS in kB, or None.

    Called once the data is loaded, so the final VmHWM minus this is what the run itself added on
    top of the resident data (compiled programs, batches, per-example gradients, copies made then).
    """
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return None
    return vm_kb("VmRSS")


def make_data(n: int, d: int, seed: int = 0):
    """The benchmark's logistic regression data, float32, identical in every worker.

    Drawn directly in float32 in blocks (no float64 N x d temporary, so the worker's peak memory is
    not inflated by the data generation); labels from a logistic model with a fixed weight vector.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    w = rng.standard_normal(d, dtype=np.float32)
    x = np.empty((n, d), np.float32)
    y = np.empty(n, np.float32)
    block = max(1, (1 << 22) // d)
    scale = np.float32(1.0 / np.sqrt(d))
    for s in range(0, n, block):
        e = min(n, s + block)
        xb = rng.standard_normal((e - s, d), dtype=np.float32)
        xb *= scale
        x[s:e] = xb
        p = 1.0 / (1.0 + np.exp(-3.0 * (xb @ w)))
        y[s:e] = (rng.random(e - s) < p).astype(np.float32)
    return x, y


def marginal_step_time(run, short: int, long: int, repeats: int, clock=time.perf_counter) -> dict:
    """Marginal seconds per step: (best long run - best short run) / (long - short).

    ``run(steps)`` runs ``steps`` steps and returns when they are done (results on the host or
    ``block_until_ready``). Both run lengths are called once first (compilation, caches), then
    ``repeats`` times interleaved, keeping the best of each; differencing removes each call's fixed
    costs from the per-step figure.
    """
    run(short)
    run(long)
    best_short = best_long = float("inf")
    for _ in range(repeats):
        t = clock()
        run(short)
        best_short = min(best_short, clock() - t)
        t = clock()
        run(long)
        best_long = min(best_long, clock() - t)
    per_step = max(best_long - best_short, 1e-9) / (long - short)
    return dict(per_step=per_step, short_s=best_short, long_s=best_long,
                fixed_s=max(best_short - short * per_step, 0.0))


def threads() -> int:
    return int(os.environ.get("PEER_THREADS", os.cpu_count() or 1))
