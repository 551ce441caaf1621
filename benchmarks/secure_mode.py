"""Secure mode's cost: per-step time of ``dpsgd`` in the default mode against ``secure=True``.

Default mode draws the Poisson sampling bits and the Gaussian noise from JAX's threefry generator
(OS-seeded); secure mode reads them from ``os.urandom`` inside each compiled step (one host
callback per step: the packed sampler's bits for one buffer and d standard normals by Box-Muller in
float64). Two workloads:

- logistic regression, d = 100, q = 0.1, N = 30,000 (buffer about 3,520 records per step);
- a small model: logistic regression with d = 2, q = 0.1, N = 1,000 (a step costs microseconds, so
  the fixed host cost of secure mode shows at its largest).

Times are marginal per-step times (a long run minus a short run, over the extra steps; compilation
excluded by a warm-up run; best of several interleaved repeats), as in dpsgd_throughput.py. Beside
them, per step, the cost of the draws alone: ``threefry draws`` = the default mode's in-graph
``jax.random.bits(capacity)`` + ``jax.random.normal(d)`` from a step key (jitted, vmapped over the
steps), ``host draws`` = secure mode's ``host_secure_draws`` for a chunk of steps (os.urandom +
Box-Muller in numpy), divided by the number of steps.

Usage:
  .venv/bin/python benchmarks/secure_mode.py                  # the recorded benchmark
  .venv/bin/python benchmarks/secure_mode.py --single-thread  # XLA on one thread, process CPU time
  .venv/bin/python benchmarks/secure_mode.py --quick          # tiny sizes, seconds (smoke test)
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import clock, logistic_loss, single_thread_restart  # noqa: E402

single_thread_restart(__file__)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from dpposterior.dpsgd import default_capacity, dpsgd, step_keys  # noqa: E402
from dpposterior.dpsgd.core import EngineConfig, host_secure_draws  # noqa: E402

#: the clock: wall time, or process CPU time with --single-thread
CLOCK = clock()

Q = 0.1
SIGMA = 1.0
CLIP = 1.0
LR = 1e-3



def make_data(n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)).astype(np.float32) / np.sqrt(d)
    w = rng.normal(size=d).astype(np.float32)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-x @ w * 3.0))).astype(np.float32)
    return x, y


def draw_times(n: int, d: int, capacity: int, steps: int, repeats: int) -> tuple[float, float]:
    """Seconds per step of the draws alone: (default mode's threefry in-graph, secure mode's host)."""
    @jax.jit
    def threefry(key):
        def one(t):
            k_samp, _, k_noise = step_keys(key, t)
            return (jnp.sum(jax.random.bits(k_samp, (capacity,), jnp.uint32) >> 31)
                    + jnp.sum(jax.random.normal(k_noise, (d,), jnp.float32)))
        return jnp.sum(jax.vmap(one)(jnp.arange(steps)))

    cfg = EngineConfig(loss=logistic_loss, loss_needs_key=False, num_records=n, num_params=d, sampling_rate=Q,
                       capacity=capacity, sampling="packed", secure=True)
    key = jax.random.key(0)
    threefry(key).block_until_ready()
    best_tf = best_host = float("inf")
    for _ in range(repeats):
        t = CLOCK()
        threefry(key).block_until_ready()
        best_tf = min(best_tf, CLOCK() - t)
        t = CLOCK()
        host_secure_draws(cfg, steps)
        best_host = min(best_host, CLOCK() - t)
    return best_tf / steps, best_host / steps


def bench(name: str, n: int, d: int, steps: int, repeats: int) -> dict:
    x, y = make_data(n, d)
    w0 = np.zeros(d, np.float32)
    cap = default_capacity(n, Q)
    short = max(1, steps // 10)

    def call(secure: bool, t_steps: int):
        # chunk_steps fixed: the short and the long run share one compiled program
        return lambda: dpsgd(logistic_loss, w0, (x, y), noise_multiplier=SIGMA, clip=CLIP, sampling_rate=Q,
                             num_steps=t_steps, learning_rate=LR, delta=1e-5, chunk_steps=steps,
                             progress=False, secure=secure)

    calls = {mode: (call(mode == "secure", short), call(mode == "secure", steps)) for mode in ("default", "secure")}
    for s, long in calls.values():
        s(), long()  # warm-up: compile, fill the accountant's cache
    best = {(mode, which): float("inf") for mode in calls for which in (0, 1)}
    for _ in range(repeats):  # interleaved, so load from other processes hits both alike
        for mode, fns in calls.items():
            for which, fn in enumerate(fns):
                t = CLOCK()
                fn()
                best[mode, which] = min(best[mode, which], CLOCK() - t)
    per_step = {mode: max(best[mode, 1] - best[mode, 0], 1e-9) / (steps - short) for mode in calls}
    threefry, host = draw_times(n, d, cap, steps, repeats)
    return dict(name=name, n=n, d=d, capacity=cap, default=per_step["default"], secure=per_step["secure"],
                threefry=threefry, host=host)


def chain_rows(quick: bool, repeats: int) -> list[tuple[str, int, float, float]]:
    """Per-iteration time of mcmc.run_chain and pacbayes.entropy_sgld.run, keyed vs secure=True.

    Whole-call times (compile excluded by a warm-up call of the same length) divided by the
    iterations; best of ``repeats`` interleaved calls.
    """
    from jax.flatten_util import ravel_pytree

    from dpposterior import mcmc
    from dpposterior.pacbayes import entropy_sgld as es

    n, t = (200, 100) if quick else (10_000, 2_000)
    rng = np.random.default_rng(0)
    x = rng.normal(1.0, 1.0, n).astype(np.float32)
    model = mcmc.energy_model(lambda th, r: 0.5 * (r - th[0]) ** 2, x,
                              log_prior_fn=lambda th: -0.5 * jnp.sum(th**2),
                              bound_constants=np.abs(x).astype(np.float64) + 3.0, box=(-3.0, 3.0))
    prop = mcmc.random_walk(0.5 / np.sqrt(n))
    kernels = {"DP-Fast MH (N={:,})".format(n): mcmc.dp_fast_mh_kernel(model, prop, epsilon=0.5, delta=1e-5,
                                                                       batch_cap=50.0),
               "penalty (N={:,})".format(n): mcmc.penalty_kernel(model, prop, epsilon=0.5, delta=1e-5)}
    start = np.zeros((1, 1))
    calls = {name: (lambda k=k: mcmc.run_chain(k, start, t, rng_key=1),
                    lambda k=k: mcmc.run_chain(k, start, t, secure=True)) for name, k in kernels.items()}

    xs = rng.normal(size=(512, 5)).astype(np.float32)
    ys = (xs[:, 0] > 0).astype(np.int32)
    flat, unravel = ravel_pytree(es.init_mlp(jax.random.PRNGKey(4), (5, 16, 2)))
    loss = es.classifier_loss(es.mlp_apply, unravel)
    params = es.EntropySGLDParams(tau=100.0, gamma=0.03, eta=0.1, eta_inner=0.1, beta=1e4, batch_size=32,
                                  inner_steps=5)
    t_es = max(10, t // 20)
    calls[f"Entropy-SGLD (5 inner steps)"] = (
        lambda: es.run(jax.random.PRNGKey(0), es.init(flat), t_es, data=(xs, ys), params=params,
                       loss_fn=loss)[0].position.block_until_ready(),
        lambda: es.run(None, es.init(flat), t_es, data=(xs, ys), params=params, loss_fn=loss,
                       secure=True)[0].position.block_until_ready())
    for fns in calls.values():
        for fn in fns:
            fn()  # warm-up (compile)
    best = {(name, i): float("inf") for name in calls for i in (0, 1)}
    for _ in range(repeats):
        for name, fns in calls.items():
            for i, fn in enumerate(fns):
                t0 = CLOCK()
                fn()
                best[name, i] = min(best[name, i], CLOCK() - t0)
    rows = []
    for name in calls:
        iters = t_es if name.startswith("Entropy") else t
        rows.append((name, iters, best[name, 0] / iters * 1e3, best[name, 1] / iters * 1e3))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes, a few seconds (smoke test)")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--single-thread", action="store_true",
                    help="XLA on one thread, timed by process CPU time (steadier on a shared machine)")
    args = ap.parse_args(argv)
    if args.quick:
        plan = [("logistic d=100", 1_000, 100, 100), ("small d=2", 200, 2, 200)]
        repeats = args.repeats or 1
    else:
        plan = [("logistic d=100", 30_000, 100, 1000), ("small d=2", 1_000, 2, 4000)]
        repeats = args.repeats or 5

    print(f"secure mode vs default: dpsgd per-step time, q={Q}, sigma={SIGMA}, C={CLIP}")
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}, {os.cpu_count()} CPUs, "
          f"{platform.processor() or platform.machine()}; "
          f"{'process CPU time, XLA single-threaded' if CLOCK is time.process_time else 'wall time'}; "
          f"best of {repeats} repeats, compile excluded")
    rows = [bench(name, n, d, steps, repeats) for name, n, d, steps in plan]
    head = (f"{'workload':>15} {'N':>8} {'capacity':>9} {'default ms':>11} {'secure ms':>10} "
            f"{'secure/default':>15} {'threefry draws ms':>18} {'host draws ms':>14}")
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['name']:>15} {r['n']:>8,} {r['capacity']:>9,} {r['default'] * 1e3:>11.4f} "
              f"{r['secure'] * 1e3:>10.4f} {r['secure'] / r['default']:>14.2f}x {r['threefry'] * 1e3:>18.4f} "
              f"{r['host'] * 1e3:>14.4f}")
    print()
    print("secure mode vs default: DP MH chains and Entropy-SGLD, per-iteration time "
          "(every draw from os.urandom through privacy.secure.os_key)")
    chains = chain_rows(quick=args.quick, repeats=repeats)
    head = f"{'sampler':>28} {'iterations':>11} {'default ms':>11} {'secure ms':>10} {'secure/default':>15}"
    print(head)
    print("-" * len(head))
    for name, t, d_ms, s_ms in chains:
        print(f"{name:>28} {t:>11,} {d_ms:>11.4f} {s_ms:>10.4f} {s_ms / d_ms:>14.2f}x")
    try:
        print(f"load average during the run: {os.getloadavg()[0]:.2f} (1 min)")
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
