"""Adult releases post-processed with the paper's trace-based priors and with the burn-in priors.

Re-makes the full reproduction's DPVI releases of UCI Adult (same settings and keys as
``dpposterior reproduce na-dpvi``, so the same releases) for the given epsilon and repeats, and
reports the test-split calibration RMSE and sharpness of NA-DPVI (grid) under several h priors:
the paper's, its sd x2 and x3, and ``priors="burn_in"``. Used in docs/results/na-dpvi-misses.md:

    .venv/bin/python docs/results/scripts/adult_priors.py 0.1 0 5

Non-private analysis of a reproduction (fixed keys): never use fixed keys for a real release.
"""

import sys

import jax
import numpy as np

from dpposterior import datasets
from dpposterior.noise_aware import TracePriors, noise_aware_posterior
from dpposterior.reproduce.adult import AdultSettings, _posterior_stats, dpvi_release


def main(eps: float, first: int, stop: int) -> None:
    s = AdultSettings()
    X, y = datasets.adult_design("train", reference_levels=False)[:2]
    Xt, yt = datasets.adult_design("test", reference_levels=False)[:2]
    res: dict[str, list] = {}
    for r in range(first, stop):
        tr = dpvi_release(s, eps, r, X, y)
        pr = noise_aware_posterior(tr, method="grid", rng_key=1).diagnostics["priors"]
        variants = {"paper": pr, "sd x2": pr._replace(h_scale=pr.h_scale * 2),
                    "sd x3": pr._replace(h_scale=pr.h_scale * 3), "burn_in": "burn_in"}
        for name, v in variants.items():
            v = v if isinstance(v, str) else TracePriors(*(np.asarray(x) for x in v))
            post = noise_aware_posterior(tr, method="grid", rng_key=2, priors=v)
            st = _posterior_stats(post, Xt, yt, jax.random.PRNGKey(3), 2000, 10)
            res.setdefault(name, []).append((st["calibration_rmse"], st["sharpness"]))
            print(f"repeat {r} {name:8s} calibration RMSE {st['calibration_rmse']:.4f} sharpness {st['sharpness']:.3f}",
                  flush=True)
    for name, v in res.items():
        a = np.asarray(v)
        print(f"{name:8s} mean calibration RMSE {a[:, 0].mean():.4f}, sharpness {a[:, 1].mean():.3f}")


if __name__ == "__main__":
    main(float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
