"""Coverage of the statistics-release baselines with and without Mironov's snapping mechanism.

    .venv/bin/python docs/results/scripts/snapping_coverage.py expfam       # three families, epsilon 0.1, K = 500
    .venv/bin/python docs/results/scripts/snapping_coverage.py regression   # linear regression, epsilon 1, K = 100
    .venv/bin/python docs/results/scripts/snapping_coverage.py regression500  # the snapped K = 500 cell only

``regression500`` runs only the snapped cell: its plain twin is the reproduction's stored cell
(docs/results/na-dpvi-work/coverage/cells/linear-regression/, the same seed, settings and data sets).

Each pair of cells reads the same simulated data sets (same seed); the snapped release
(``method_options`` ``snapping=True``) clamps, noises and rounds each statistic, and the Gibbs sampler
conditions on the rounding interval. Prints the coverage RMSE, the sharpness (mean posterior sd) and
the sampling time. Used in docs/results/snapping.md. Result files go to /tmp/snapping-coverage-*.
"""

import sys
import time

from dpposterior.experiments import CellConfig, run_coverage
from dpposterior.experiments.report import marginal_text
from dpposterior.experiments.xla import configure_xla_cpu


def main(kind: str) -> None:
    if kind == "expfam":
        plan = [("beta-bernoulli", 0.1, (), 500), ("gamma-exponential", 0.1, (("thin", 3),), 500),
                ("dirichlet-categorical", 0.1, (), 500)]
        method = "bernstein-sheldon"
    elif kind in ("regression", "regression500"):
        plan = [("linear-regression", 1.0, (("thin", 2),), 100 if kind == "regression" else 500)]
        method = "gibbs-ss-noisy"
    else:
        sys.exit("usage: snapping_coverage.py expfam | regression | regression500")
    snaps = (True,) if kind == "regression500" else (False, True)
    cells = [CellConfig(model, eps, method, replicates=k, method_options=tuple(sorted(opts + (("snapping", s),))))
             for model, eps, opts, k in plan for s in snaps]
    t0 = time.time()
    summary = run_coverage(cells, f"/tmp/snapping-coverage-{kind}")
    print(f"wall {time.time() - t0:.0f} s")
    for r in summary.results:
        c = r["config"]
        print(f"{c['model']:22s} eps={c['epsilon']:<4} {dict(c['method_options'])}  K={c['replicates']}  "
              f"RMSE {r['rmse']:.4f}  {marginal_text(r)}  sharpness {r['sharpness']:.4f}  "
              f"method {r['timing']['method_seconds']:.0f} s")


if __name__ == "__main__":
    configure_xla_cpu(2)
    main(sys.argv[1] if len(sys.argv) > 1 else "")
