"""DP-SGD throughput: our packed O(qN) engine against the full-N masked approach of the reference code.

Logistic regression with d = 100 parameters, q = 0.1, at N = 30,000 and N = 300,000. For each N we
time the marginal cost of a step (a long run minus a short run, over the extra steps; compilation
excluded by a warm-up run; ``block_until_ready``/host copies included; best of several interleaved
repeats), so each call's fixed costs do not blur the per-step figure (the engine's are printed):

- ``packed``: ``dpposterior.dpsgd.dpsgd(..., sampling="packed")``, the whole public call;
- ``masked``: the same call with ``sampling="masked"`` (all N per-example gradients, Bernoulli mask);
- ``bare masked``: an independent minimal jitted ``lax.scan`` of the masked approach (vmap(grad) over
  all N records, clip, mask, sum, noise, update), to show the engine's masked option is not a straw
  man; the target is checked against the faster of the two masked implementations;
- ``bare packed``: a minimal packed step (jnp.cumsum of geometric gaps, gather, no overflow
  handling: not a correct engine), the floor under the engine's own overheads.

Usage:
  .venv/bin/python benchmarks/dpsgd_throughput.py                  # the recorded benchmark
  .venv/bin/python benchmarks/dpsgd_throughput.py --single-thread  # XLA on one thread, CPU time
  .venv/bin/python benchmarks/dpsgd_throughput.py --quick          # tiny sizes, seconds (smoke test)

``--single-thread`` restarts the script with XLA's intra-op parallelism off and times process CPU
time instead of wall time: on a machine shared with other jobs, wall-clock figures swing with the
load, CPU time of a single-threaded program much less.
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

from dpposterior.dpsgd import default_capacity, dpsgd  # noqa: E402

#: the clock: wall time, or process CPU time with --single-thread
CLOCK = clock()

D = 100
Q = 0.1
SIGMA = 1.0
CLIP = 1.0
LR = 1e-3
TARGETS = {30_000: 3.0, 300_000: 8.0}



def make_data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, D)).astype(np.float32) / np.sqrt(D)
    w = rng.normal(size=D).astype(np.float32)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-x @ w * 3.0))).astype(np.float32)
    return x, y


def _trace_loop(step, steps, w0, max_steps):
    """Runs ``steps`` (dynamic) steps, storing (w_t, g~_t) like the engine's trace: one compilation."""
    def body(t, carry):
        w, ws, gs = carry
        new, gt = step(w, t)
        return new, ws.at[t].set(w), gs.at[t].set(gt)

    zeros = jnp.zeros((max_steps, D), jnp.float32)
    return jax.lax.fori_loop(0, steps, body, (w0, zeros, zeros))


def bare_masked(n: int, max_steps: int):
    """A minimal, independent full-N masked DP-SGD loop (the reference approach), jitted."""
    per_ex = jax.vmap(jax.grad(logistic_loss), in_axes=(None, 0))

    @jax.jit
    def run(key, w0, x, y, steps):
        def step(w, t):
            k1, k2 = jax.random.split(jax.random.fold_in(key, t))
            g = per_ex(w, (x, y))                                   # (N, d)
            norms = jnp.sqrt(jnp.sum(g * g, axis=1))
            scale = jnp.minimum(1.0, CLIP / norms) * jax.random.bernoulli(k1, Q, (n,))
            s = jnp.sum(g * scale[:, None], axis=0)
            gt = s + SIGMA * CLIP * jax.random.normal(k2, (D,))
            return w - LR * gt, gt

        return _trace_loop(step, steps, w0, max_steps)

    return run


def bare_packed(n: int, max_steps: int, capacity: int):
    """A minimal packed step for scale: geometric gaps, jnp.cumsum, gather, vmap(grad), clip, sum.

    No overflow handling, no preconditioning: not a correct engine (it truncates samples larger
    than the buffer), only the floor that the engine's own overheads sit on.
    """
    per_ex = jax.vmap(jax.grad(logistic_loss), in_axes=(None, 0))

    @jax.jit
    def run(key, w0, x, y, steps):
        def step(w, t):
            k1, k2 = jax.random.split(jax.random.fold_in(key, t))
            idx = jnp.cumsum(jax.random.geometric(k1, Q, (capacity,))) - 1
            mask = idx < n
            idx = jnp.where(mask, idx, 0)
            g = per_ex(w, (x[idx], y[idx]))
            norms = jnp.sqrt(jnp.sum(g * g, axis=1))
            scale = jnp.minimum(1.0, CLIP / norms) * mask
            s = jnp.sum(g * scale[:, None], axis=0)
            gt = s + SIGMA * CLIP * jax.random.normal(k2, (D,))
            return w - LR * gt, gt

        return _trace_loop(step, steps, w0, max_steps)

    return run


def bench(n: int, steps_packed: int, steps_masked: int, repeats: int) -> dict:
    """Marginal per-step times: (time of a long run - time of a short run) / extra steps.

    Differencing removes each call's fixed costs (argument checks, moving the data to the device,
    accounting lookup) from the per-step figure; the engine's fixed cost is reported on its own.
    """
    x, y = make_data(n)
    w0 = np.zeros(D, np.float32)
    cap = default_capacity(n, Q)
    common = dict(noise_multiplier=SIGMA, clip=CLIP, sampling_rate=Q, learning_rate=LR, delta=1e-5,
                  rng_key=0, progress=False)
    xj, yj, wj = jnp.asarray(x), jnp.asarray(y), jnp.asarray(w0)
    key = jax.random.PRNGKey(0)

    def engine(sampling, steps, chunk):
        # chunk_steps fixed: the short and the long run share one compiled program
        return lambda: dpsgd(logistic_loss, w0, (x, y), num_steps=steps, sampling=sampling,
                             chunk_steps=chunk, **common)

    bm, bp = bare_masked(n, steps_masked), bare_packed(n, steps_packed, cap)

    def bare(fn, steps):
        return lambda: jax.block_until_ready(fn(key, wj, xj, yj, jnp.int32(steps)))

    short_p, short_m = max(1, steps_packed // 10), max(1, steps_masked // 5)
    calls = {  # name: (short run, long run, extra steps)
        "packed": (engine("packed", short_p, steps_packed), engine("packed", steps_packed, steps_packed)),
        "masked": (engine("masked", short_m, steps_masked), engine("masked", steps_masked, steps_masked)),
        "bare_masked": (bare(bm, short_m), bare(bm, steps_masked)),
        "bare_packed": (bare(bp, short_p), bare(bp, steps_packed)),
    }
    extra = {"packed": steps_packed - short_p, "masked": steps_masked - short_m,
             "bare_masked": steps_masked - short_m, "bare_packed": steps_packed - short_p}
    for short, long in calls.values():
        short(), long()  # warm-up: compile (and fill the accountant's cache)
    t_short = {name: float("inf") for name in calls}
    t_long = dict(t_short)
    for _ in range(repeats):  # interleaved, so load from other processes hits all alike
        for name, (short, long) in calls.items():
            for fn, best in ((short, t_short), (long, t_long)):
                t = CLOCK()
                fn()
                best[name] = min(best[name], CLOCK() - t)
    per_step = {name: max(t_long[name] - t_short[name], 1e-9) / extra[name] for name in calls}
    overhead = t_short["packed"] - short_p * per_step["packed"]
    return dict(n=n, capacity=cap, overhead=overhead, **per_step)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes, a few seconds (smoke test)")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--single-thread", action="store_true",
                    help="XLA on one thread, timed by process CPU time (steadier on a shared machine)")
    args = ap.parse_args(argv)

    if args.quick:
        plan = [(1_000, 100, 40)]
        repeats = args.repeats or 2
    else:
        plan = [(30_000, 1000, 100), (300_000, 200, 25)]
        repeats = args.repeats or 5

    print(f"DP-SGD throughput: logistic regression, d={D}, q={Q}, sigma={SIGMA}, C={CLIP}")
    clock = ("process CPU time, XLA single-threaded" if CLOCK is time.process_time
             else "wall time, XLA default threading")
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}, {os.cpu_count()} CPUs, "
          f"{platform.processor() or platform.machine()}; {clock}; best of {repeats} repeats, "
          "compile excluded")
    rows = [bench(n, tp, tm, repeats) for n, tp, tm in plan]
    hdr = (f"{'N':>9} {'capacity':>9} {'packed':>9} {'masked':>9} {'bare masked':>12} "
           f"{'bare packed':>12} {'masked/packed':>14} {'bare masked/packed':>19} {'bare/bare':>10} "
           f"{'target':>12}")
    print("marginal per-step times in ms (long run minus short run, over the extra steps)")
    print(hdr)
    print("-" * len(hdr))
    ok = True
    for r in rows:
        ratio, ratio_bare = r["masked"] / r["packed"], r["bare_masked"] / r["packed"]
        target = TARGETS.get(r["n"])
        met = "" if target is None else (
            f">={target:g}x " + ("ok" if min(ratio, ratio_bare) >= target else "MISSED"))
        ok &= target is None or min(ratio, ratio_bare) >= target
        print(f"{r['n']:>9,} {r['capacity']:>9,} {1e3 * r['packed']:>9.3f} {1e3 * r['masked']:>9.3f} "
              f"{1e3 * r['bare_masked']:>12.3f} {1e3 * r['bare_packed']:>12.3f} {ratio:>13.2f}x "
              f"{ratio_bare:>18.2f}x {r['bare_masked'] / r['bare_packed']:>9.2f}x {met:>12}")
    for r in rows:
        print(f"N={r['n']:,}: fixed cost of one dpsgd() call (checks, data to device, accounting "
              f"lookup, trace copy): {1e3 * r['overhead']:.1f} ms")
    try:
        print(f"load average during the run: {os.getloadavg()[0]:.2f} (1 min)")
    except OSError:
        pass
    return 0 if ok or args.quick else 1


if __name__ == "__main__":
    sys.exit(main())
