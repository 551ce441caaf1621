"""Runs the DP-SGD replicates of one 10-D linear-regression (or logistic-regression) coverage group and
saves what post-processing may use (per-replicate trace statistics, last iterates, public settings)
with the true theta, so that post-processing variants are compared on the same releases.

    python docs/results/scripts/regression_releases.py --model linear-regression --epsilon 0.1 \
        --replicates 100 --out /tmp/releases-lr-0.1-100.npz

The registry's settings are used (dpposterior.models.registry), the cell's keys come from its seed
(as ``dpposterior coverage``), so the first K replicates equal those of a K' > K cell.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dpposterior.experiments import CellConfig
from dpposterior.experiments.replicates import dpvi_setup, run_replicates


def _register_logistic(k: int) -> str:
    from dpposterior.models.registry import ModelSpec, _simulate_logistic_regression, get_model, register_model

    base = get_model("logistic-regression")

    def simulate(key, num_records):
        return _simulate_logistic_regression(key, num_records, num_features=k)

    name = f"logistic-{k}"
    register_model(ModelSpec(name, base.model, simulate, clip=base.clip, beta_rho=base.beta_rho,
                             lr_scale=base.lr_scale))
    return name


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="linear-regression")
    ap.add_argument("--epsilon", type=float, required=True)
    ap.add_argument("--replicates", type=int, default=100)
    ap.add_argument("--num-records", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", type=int, default=0, help="first replicate (the rest of a larger cell's)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--features", type=int, default=0,
                    help="logistic regression with this many coefficients (intercept included), registered as "
                         "'logistic-<k>' with the registry's logistic settings")
    a = ap.parse_args()
    if a.features:
        a.model = _register_logistic(a.features)
    cfg = CellConfig(a.model, a.epsilon, "grid", replicates=a.start + a.replicates, num_records=a.num_records,
                     seed=a.seed)
    t0 = time.perf_counter()
    setup = dpvi_setup(cfg)
    s = run_replicates(cfg, setup, start=a.start, count=a.replicates)
    wall = time.perf_counter() - t0
    out = {"theta": s.theta, "final_phi": s.final_phi, "noise_sd": setup.noise_sd,
           "learning_rate": setup.learning_rate, "num_latent": setup.num_latent,
           "sampling_rate": cfg.sampling_rate, "num_steps": cfg.num_steps, "wall_seconds": wall,
           "noise_multiplier": setup.noise_multiplier, "clip": setup.clip}
    for name, x in s.stats._asdict().items():
        out["stats_" + name] = np.asarray(x)
    np.savez(a.out, **out)
    print(f"{a.model} epsilon {a.epsilon} K {a.replicates}: {wall:.1f} s (sigma {setup.noise_multiplier:.1f})")


if __name__ == "__main__":
    main()
