"""The whole NA-DPVI pipeline on UCI Adult: ours against the reference code's approach, end to end.

Both columns run the demo's release (Bayesian logistic regression on the vendored Adult training set,
epsilon 1, delta 1e-5, T = 10,000, q = 0.1, C = 11, beta_rho = 550, lr_scale = sqrt(d)) and then the
noise-aware post-processing, inside this package and with the same key:

- **ours**: ``dpvi`` with the packed Poisson sampler (O(qN) per step), then
  ``noise_aware_posterior(method="grid")`` (six statistics per coordinate; exact up to its grid) and,
  as a second row, ``method="nuts"`` on the statistics;
- **reference approach** (papers/NOTES.md section 1: full-N masked per-example gradients, a
  likelihood over the whole trace): ``dpvi(..., sampling="masked")`` (a Bernoulli mask over all N
  records every step), then ``noise_aware_posterior(method="nuts", full_trace=True)`` (NumPyro NUTS on
  the O(T d) likelihood, 1,000 warm-up and 4,000 draws as ours).

Times are wall-clock seconds of each stage as a user waits for it (compilation included), in one
process; the ratio is reference / ours. The noise calibration (the PLD accountant, the same for both)
is done once before either column and printed apart, so that neither column pays it alone. Target (issue 11): at least 20x end to end.

Usage:
  .venv/bin/python benchmarks/pipeline.py            # the recorded benchmark (10-20 minutes on 2 cores)
  .venv/bin/python benchmarks/pipeline.py --quick    # 600 Adult rows, T = 60, short NUTS (smoke test)
  .venv/bin/python benchmarks/pipeline.py --ours-only   # only our pipeline (benchmarks/gpu_check.sh)
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a subset of Adult, T = 200, short NUTS (seconds)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ours-only", action="store_true",
                    help="time only our pipeline (e.g. on a GPU, where the reference's 20 minutes do not fit)")
    args = ap.parse_args(argv)

    import jax
    import numpy as np

    from dpposterior import datasets, models, noise_aware_posterior
    from dpposterior.vi import RunOptions
    from dpposterior.vi.dpvi import dpvi

    X, y, _ = datasets.adult_design("train", reference_levels=False)
    steps, nuts = 10_000, dict(num_warmup=1000, num_samples=4000)
    if args.quick:
        X, y, steps, nuts = X[:600], y[:600], 60, dict(num_warmup=20, num_samples=20)
    d = X.shape[1]
    common = dict(epsilon=1.0, delta=1e-5, num_steps=steps, sampling_rate=0.1, clip=11.0, beta_rho=550.0,
                  lr_scale=math.sqrt(d), run_options=RunOptions(progress=False),
                  model_name="adult-logistic-regression")
    key = jax.random.PRNGKey(args.seed)
    print(f"NA-DPVI pipeline on UCI Adult: N = {X.shape[0]:,}, {d} features, T = {steps:,}, q = 0.1, "
          f"epsilon 1; NUTS {nuts['num_warmup']} warm-up + {nuts['num_samples']} draws; {os.cpu_count()} CPUs")

    from dpposterior.privacy import calibrate_noise_multiplier

    t0 = time.perf_counter()
    calibrate_noise_multiplier(1.0, 1e-5, 0.1, steps)   # shared by both columns: warm the accountant's cache
    print(f"noise calibration (PLD, shared by both, not in the columns): {time.perf_counter() - t0:.1f} s")

    def timed(fn):
        t0 = time.perf_counter()
        out = fn()
        return out, time.perf_counter() - t0

    ours_trace, t_ours_dpsgd = timed(lambda: dpvi(models.logistic_regression, X, y, rng_key=key, **common))
    _, t_grid = timed(lambda: noise_aware_posterior(ours_trace, method="grid", rng_key=1))
    _, t_nuts = timed(lambda: noise_aware_posterior(ours_trace, method="nuts", rng_key=1, **nuts))
    if args.ours_only:
        print(f"ours only: packed DP-SGD {t_ours_dpsgd:.1f} s + grid {t_grid:.1f} s = {t_ours_dpsgd + t_grid:.1f} s; "
              f"+ stats NUTS {t_nuts:.1f} s; devices {jax.devices()}")
        return 0
    masked = dict(common, run_options=RunOptions(progress=False, sampling="masked"))
    ref_trace, t_ref_dpsgd = timed(lambda: dpvi(models.logistic_regression, X, y, rng_key=key, **masked))
    ref_post, t_ref_post = timed(lambda: noise_aware_posterior(ref_trace, method="nuts", rng_key=1, full_trace=True,
                                                               **nuts))
    ref_total = t_ref_dpsgd + t_ref_post
    rows = [("ours: packed DP-SGD + grid", t_ours_dpsgd, t_grid),
            ("ours: packed DP-SGD + stats NUTS", t_ours_dpsgd, t_nuts),
            ("reference: masked DP-SGD + full-trace NUTS", t_ref_dpsgd, t_ref_post)]
    head = f"{'pipeline':>44} {'DP-SGD s':>9} {'post s':>8} {'total s':>8} {'reference / this':>17}"
    print(head)
    print("-" * len(head))
    for name, a, b in rows:
        print(f"{name:>44} {a:>9.1f} {b:>8.1f} {a + b:>8.1f} {ref_total / (a + b):>16.1f}x")
    best = ref_total / (t_ours_dpsgd + t_grid)
    print(f"target >= 20x end to end (grid): {'met' if best >= 20 else 'NOT met'} ({best:.1f}x); "
          f"with stats NUTS: {ref_total / (t_ours_dpsgd + t_nuts):.1f}x")
    print(f"DP-SGD alone: masked / packed = {t_ref_dpsgd / t_ours_dpsgd:.1f}x; post-processing alone: full-trace "
          f"NUTS / grid = {t_ref_post / t_grid:.1f}x, / stats NUTS = {t_ref_post / t_nuts:.1f}x")
    same_privacy = ours_trace.privacy.epsilon == ref_trace.privacy.epsilon
    print(f"same privacy spent by both releases: {same_privacy} (epsilon {ours_trace.privacy.epsilon:.4f}); "
          f"full-trace NUTS max R-hat of phi* {float(np.max(ref_post.diagnostics['r_hat_phi_star'])):.3f}")
    try:
        print(f"load average during the run: {os.getloadavg()[0]:.2f} (1 min)")
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
