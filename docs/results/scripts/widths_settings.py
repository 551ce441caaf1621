"""Beta-Bernoulli NA-DPVI (grid) width at epsilon 0.1 under DP-SGD settings outside the reproduction's plan.

    .venv/bin/python docs/results/scripts/widths_settings.py q1 500,2000       # full batches, T = 500 and 2,000
    .venv/bin/python docs/results/scripts/widths_settings.py clip 1.0          # the clip replaced (one per process)

K = 200 replicates, 20 reference re-draws, N = 5,000, seed 0; prints the coverage RMSE and the sharpness
(mean posterior sd of logit p). Used in docs/results/na-dpvi-misses.md. The clip is replaced in the model
registry before any cell runs: the engine keeps a model's settings for the rest of the process, so run one
clip per process. Result files go to /tmp/widths-settings-*.
"""

import dataclasses
import sys
import time

from dpposterior.experiments import CellConfig, run_coverage
from dpposterior.experiments.report import marginal_text
from dpposterior.models import registry


def main(kind: str, values: str) -> None:
    if kind == "clip":
        (clip,) = [float(v) for v in values.split(",")]
        registry.MODELS["beta-bernoulli"] = dataclasses.replace(registry.MODELS["beta-bernoulli"], clip=clip)
        cells = [CellConfig("beta-bernoulli", 0.1, "grid", replicates=200, repeats=20, num_records=5_000,
                            num_steps=10_000, sampling_rate=0.1, seed=0)]
    elif kind == "q1":
        cells = [CellConfig("beta-bernoulli", 0.1, "grid", replicates=200, repeats=20, num_records=5_000,
                            num_steps=int(t), sampling_rate=1.0, seed=0) for t in values.split(",")]
    else:
        sys.exit("usage: widths_settings.py q1 T[,T...] | clip C")
    t0 = time.time()
    for r in run_coverage(cells, f"/tmp/widths-settings-{kind}-{values}", progress=False).results:
        print(f"clip {r['model_settings']['clip']} T {r['config']['num_steps']} q {r['config']['sampling_rate']}: "
              f"RMSE {r['rmse']:.4f} {marginal_text(r)} sharpness {r['sharpness']:.4f}", flush=True)
    print(f"{time.time() - t0:.0f} s")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
