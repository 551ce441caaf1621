"""Computes some of the NA-DPVI reproduction's planned coverage cells (one model, one epsilon, a subset of
its methods) with the coverage engine, into a results folder. The configurations are the plan's
(`dpposterior.reproduce.na_dpvi.plan`), so the files carry the same names as the tracked ones in
docs/results/na-dpvi-work/coverage and can replace them there; `dpposterior reproduce na-dpvi
--report-only` then writes the report from them.

    python docs/results/scripts/reproduction_cells.py linear-regression 0.1 grid,laplace,naive,dpvim \
        /tmp/cells

A method name selects every planned cell of that method (e.g. `grid` selects the grid with the default
and with the burn-in h prior).
"""

from __future__ import annotations

import argparse

from dpposterior.experiments import run_coverage
from dpposterior.reproduce.na_dpvi import plan


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("epsilon", type=float)
    ap.add_argument("methods", help="comma-separated method names")
    ap.add_argument("out", help="results folder (cells/<model>/*.json are written under it)")
    a = ap.parse_args()
    methods = a.methods.split(",")
    cells = [c for c in plan().cells if c.model == a.model and c.epsilon == a.epsilon and c.method in methods]
    if not cells:
        raise SystemExit(f"no planned cell of {a.model} at epsilon {a.epsilon} with methods {methods}")
    print(a.model, a.epsilon, [(c.method, dict(c.method_options)) for c in cells], flush=True)
    summary = run_coverage(cells, a.out, progress=False)
    print("computed", len(summary.computed), flush=True)


if __name__ == "__main__":
    main()
