"""Adult releases re-made with the DP-SGD learning rate scaled by m, read by NA-DPVI (grid).

Re-makes the full reproduction's DPVI releases of UCI Adult (same settings and keys as
``dpposterior reproduce na-dpvi``, so the same noise streams) with ``lr_scale = m * sqrt(features)``
(m = 1 is the full run), and prints the test-split calibration RMSE, sharpness and accuracy of the grid
posterior under the paper's priors and under ``priors="burn_in"``. Used in
docs/results/na-dpvi-misses.md:

    .venv/bin/python docs/results/scripts/adult_learning_rate.py 1.0,0.1 0.5,4 0 4

(epsilons, multipliers m, first repeat, stop repeat). Non-private analysis of a reproduction (fixed
keys): never use fixed keys for a real release.
"""

import sys
import time

import jax

from dpposterior import datasets
from dpposterior.noise_aware import noise_aware_posterior
from dpposterior.reproduce.adult import AdultSettings, _keys, _posterior_stats, dpvi_release


def main(epsilons: list[float], multipliers: list[float], first: int, stop: int) -> None:
    s = AdultSettings()
    X, y = datasets.adult_design("train", reference_levels=False)[:2]
    Xt, yt = datasets.adult_design("test", reference_levels=False)[:2]
    for eps in epsilons:
        for m in multipliers:
            for r in range(first, stop):
                t0 = time.time()
                keys = _keys(s.seed, eps, r)
                tr = dpvi_release(s, eps, r, X, y, lr_multiplier=m)
                out = []
                for priors in ("paper", "burn_in"):
                    post = noise_aware_posterior(tr, method="grid", rng_key=keys["post"], priors=priors)
                    st = _posterior_stats(post, Xt, yt, jax.random.PRNGKey(3), 2000, 10)
                    out.append(f"{priors} {st['calibration_rmse']:.4f}/{st['sharpness']:.3f}/acc {st['test_accuracy']:.3f}")
                print(f"eps {eps} m {m} repeat {r}: " + "  ".join(out) + f"  ({time.time() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main([float(e) for e in sys.argv[1].split(",")], [float(m) for m in sys.argv[2].split(",")],
         int(sys.argv[3]), int(sys.argv[4]))
