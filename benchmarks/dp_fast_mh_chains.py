"""DP-Fast MH against the penalty algorithm and DP Barker over many chains (issue 7's Done-when).

The mixture of `dpposterior reproduce dp-fast-mh` (N = 50,000, temperature 500, per-iteration
epsilon 0.05, delta 1e-5, start (0, 0), 10,000 iterations), with C chains per method run as one
vmapped program (KL only: no wall-clock figures; under vmap both branches of DP-Fast MH's switch are
computed, so its run time here says nothing about its cost). Prints each method's symmetric KL after T
(mean and standard error over chains) and its ratio to the penalty method's.

    .venv/bin/python benchmarks/dp_fast_mh_chains.py --chains 64 --step 0.06 \
        --methods penalty fast-mh:200 fast-mh:10
    .venv/bin/python benchmarks/dp_fast_mh_chains.py --quick   # 2,000 records, 200 iterations, 2 chains, epsilon 0.5 (smoke test)
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

from dpposterior import mcmc
from dpposterior.reproduce import dp_fast_mh as d


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chains", type=int, default=64)
    ap.add_argument("--step", type=float, default=0.06, help="random-walk scale (every method)")
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--epsilon", type=float, default=0.05)
    ap.add_argument("--methods", nargs="+", default=["penalty", "fast-mh:200", "fast-mh:10", "barker"],
                    help="penalty, barker, exact (non-private full-batch MH), fast-mh:LAMBDA (K by the "
                         "reproduction's noise-free rule)")
    ap.add_argument("--quick", action="store_true",
                    help="2,000 records, 200 iterations, 2 chains, epsilon 0.5 (smoke test)")
    a = ap.parse_args(argv)
    s = d.FULL
    records = s.gmm_records
    if a.quick:   # DP Barker has no batch size meeting epsilon 0.05 on 2,000 records: 0.5 in the smoke test
        records, a.steps, a.chains, a.epsilon = 2_000, 200, 2, 0.5
    model = d.gmm_model(d.gmm_data(records, s.seed), s.gmm_temperature)
    edges = (np.arange(-1.2, 2.2 + 1e-9, s.bin_width), np.arange(-2.6, 2.6 + 1e-9, s.bin_width))
    ref = d.gmm_reference(model, edges, sub=3 if records > 10_000 else 2)
    big_c, c_max, n = model.total_bound, model.max_bound, model.num_records
    prop = mcmc.random_walk(a.step)
    print(f"C = {big_c:.1f}, c_max = {c_max:.5f}: the minibatch branch is noise-free only for moves "
          f"M < epsilon / (12 c_max) = {a.epsilon / (12 * c_max):.3f}")
    base = None
    for name in a.methods:
        if name.startswith("fast-mh:"):
            lam = float(name.split(":")[1])
            kernel = mcmc.dp_fast_mh_kernel(model, prop, epsilon=a.epsilon, delta=s.delta, lam=lam,
                                            batch_cap=d.fast_mh_batch_cap(a.epsilon, big_c, c_max, lam))
        elif name == "penalty":
            kernel = mcmc.penalty_kernel(model, prop, epsilon=a.epsilon, delta=s.delta)
        elif name == "barker":
            kernel = mcmc.dp_barker_kernel(model, prop, batch_size=mcmc.barker_batch_size(a.epsilon, s.delta, n),
                                           delta=s.delta)
        elif name == "exact":
            kernel = mcmc.penalty_kernel(model, prop, private=False)
        else:
            raise SystemExit(f"unknown method {name!r}")
        data, c, state = model.data, model.bound_constants, kernel.init(np.zeros(2))

        @jax.jit
        def run(keys, kernel=kernel, state=state):
            def one(k):
                def body(carry, kk):
                    new, info = kernel.step_on_data(kk, carry, data, c)
                    return new, (new.position, info.accepted, info.batch_size)
                return jax.lax.scan(body, state, jax.random.split(k, a.steps))[1]
            return jax.vmap(one)(keys)

        t0 = time.perf_counter()
        pos, acc, batch = jax.block_until_ready(run(jax.random.split(jax.random.key(777), a.chains)))
        kl = np.array([d.symmetric_kl(d.sample_probs(np.asarray(p), edges), ref) for p in pos])
        mean, se = kl.mean(), kl.std(ddof=1) / np.sqrt(a.chains)
        base = mean if base is None else base
        print(f"{name:14s} KL after {a.steps}: {mean:.3f} +- {se:.3f} (se, {a.chains} chains)  "
              f"ratio to the first row {mean / base:.3f}  acceptance {float(np.mean(acc)):.2f}  "
              f"mean batch {float(np.mean(batch)):.0f} (NON-PRIVATE diagnostics)  [{time.perf_counter() - t0:.0f} s]",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
