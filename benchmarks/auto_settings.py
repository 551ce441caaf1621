"""What the default DP-SGD settings cost: ``dpvi`` with ``clip="auto"`` and the clip check (the
defaults) against the same run with a clip given by hand and no check.

Two costs, side by side:

- wall time of one release (compilation excluded by a warm-up call; best of several interleaved
  repeats): the defaults add two private searches (per-record gradient norms of every record at the
  start and at the pilot's end), a second compiled DP-SGD call (the pilot) and the check's norms;
- privacy: the share of the budget the searches and the check take, read as DP-SGD's noise
  multiplier with the defaults over the one with a hand clip at the same (epsilon, delta): the larger
  noise is what the pre-releases cost the run.

Workloads: a Poisson model (1 latent) and a normal with unknown mean and scale (2 latents), N = 5,000,
T = 10,000, q = 0.1, epsilon 1, delta 1e-5; the hand clip is the clip the defaults chose on the same
data (so the hand run is the one a user who knew the clip would have made).

Usage:
  .venv/bin/python benchmarks/auto_settings.py            # the recorded benchmark
  .venv/bin/python benchmarks/auto_settings.py --quick    # N = 500, T = 500: a smoke run
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import numpyro
import numpyro.distributions as dist

import dpposterior as dpp


def poisson(y):
    lam = numpyro.sample("lam", dist.Gamma(4.0, 2.0))
    with numpyro.plate("records", y.shape[0]):
        numpyro.sample("y", dist.Poisson(lam), obs=y)


def normal(y):
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    sigma = numpyro.sample("sigma", dist.HalfNormal(2.0))
    with numpyro.plate("records", y.shape[0]):
        numpyro.sample("y", dist.Normal(mu, sigma), obs=y)


def _best(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    n, steps = (500, 500) if a.quick else (5000, 10_000)
    rng = np.random.default_rng(0)
    data = {
        "poisson": (poisson, rng.poisson(3.0, n).astype(np.float32)),
        "normal": (normal, rng.normal(3.0, 1.5, n).astype(np.float32)),
    }
    common = dict(epsilon=1.0, delta=1e-5, num_steps=steps, run_options=dpp.vi.RunOptions(progress=False))
    print(f"N = {n}, T = {steps}, q = 0.1, epsilon 1, delta 1e-5; best of {a.repeats} (seconds)")
    print(f"{'model':<8} {'hand s':>8} {'auto s':>8} {'ratio':>6} {'sigma hand':>11} {'sigma auto':>11} {'ratio':>6}")
    for name, (model, y) in data.items():
        auto = dpp.dpvi(model, y, rng_key=1, **common)  # warm-up; its clip is the hand run's
        hand = dpp.dpvi(model, y, rng_key=1, clip=auto.clip, check_clip=False, **common)
        t_auto = _best(lambda: dpp.dpvi(model, y, rng_key=2, **common), a.repeats)  # noqa: B023
        t_hand = _best(lambda: dpp.dpvi(model, y, rng_key=2, clip=auto.clip, check_clip=False, **common), a.repeats)  # noqa: B023
        print(
            f"{name:<8} {t_hand:8.2f} {t_auto:8.2f} {t_auto / t_hand:6.2f} {hand.noise_multiplier:11.3f} "
            f"{auto.noise_multiplier:11.3f} {auto.noise_multiplier / hand.noise_multiplier:6.3f}"
        )


if __name__ == "__main__":
    main()
