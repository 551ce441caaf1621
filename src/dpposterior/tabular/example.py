"""A synthetic table with a known answer: the example of the README and the tests of ``fit``.

``loans.csv``: N fictional loan applicants with ``age`` (18-90), ``income`` (thousands, 0-200),
``region`` (north / south / east) and a binary ``default`` (no / yes) drawn from a logistic model
whose true coefficients on the rescaled design (:mod:`dpposterior.tabular.design`) are
:data:`TRUE_COEFFICIENTS`. Nothing here is real data.

    python -m dpposterior.tabular.example OUT_FOLDER [--n 4000] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

#: the true logistic coefficients, in the design's column order
TRUE_COEFFICIENTS = {"age": -0.8, "income": -1.2, "region=south": 0.6, "region=east": 0.0, "(intercept)": -0.5}

SCHEMA = """\
# Public facts about loans.csv, declared by the analyst (never read from the data).
out_of_bounds = "clip"      # values outside the bounds are clipped to them; "error" refuses them

[columns.age]
type = "numeric"
bounds = [18, 90]

[columns.income]
type = "numeric"
bounds = [0, 200]           # thousands a year

[columns.region]
type = "categorical"
categories = ["north", "south", "east"]     # the first is the reference level

[columns.default]
type = "categorical"
categories = ["no", "yes"]                  # the target: "yes" is coded 1
"""


def make_table(n: int = 4000, seed: int = 0) -> str:
    """The CSV text of ``n`` synthetic records (deterministic for a given ``seed``)."""
    rng = np.random.default_rng(seed)
    age = np.round(rng.uniform(18, 90, n))
    income = np.round(rng.uniform(0, 200, n), 1)
    region = rng.choice(["north", "south", "east"], n)
    t = TRUE_COEFFICIENTS
    eta = (
        t["age"] * (age - 54) / 36
        + t["income"] * (income - 100) / 100
        + t["region=south"] * (region == "south")
        + t["region=east"] * (region == "east")
        + t["(intercept)"]
    )
    y = np.where(rng.random(n) < 1.0 / (1.0 + np.exp(-eta)), "yes", "no")
    lines = ["age,income,region,default"]
    lines += [f"{a:.0f},{i:.1f},{r},{d}" for a, i, r, d in zip(age, income, region, y)]
    return "\n".join(lines) + "\n"


def write_example(folder: str | Path, n: int = 4000, seed: int = 0) -> tuple[Path, Path]:
    """Writes ``loans.csv`` and ``loans.toml`` into ``folder``; returns their paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    csv, toml = folder / "loans.csv", folder / "loans.toml"
    csv.write_text(make_table(n, seed))
    toml.write_text(SCHEMA)
    return csv, toml


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", help="folder for loans.csv and loans.toml")
    p.add_argument("--n", type=int, default=4000, help="number of records (default 4000)")
    p.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    args = p.parse_args(argv)
    csv, toml = write_example(args.out, args.n, args.seed)
    print(f"wrote {csv} and {toml}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
