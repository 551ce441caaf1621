"""The ``dpposterior fit`` and ``dpposterior compare`` commands (registered by ``dpposterior.cli``)."""

from __future__ import annotations

import argparse
import shlex
from typing import Any

FIT_EPILOG = """\
examples:
  dpposterior fit data.csv --target income --model logistic --epsilon 1 --delta 1e-5 \\
      --bounds bounds.toml --out report/
  dpposterior fit data.parquet --target spend --model linear --epsilon 0.5 --delta 1e-6 \\
      --bounds schema.toml --features age region --steps 5000 --out spend-report/
  dpposterior fit data.csv --target y --model mymodels:robust_logistic --epsilon 2 --delta 1e-5 \\
      --bounds bounds.toml --out custom/
  dpposterior fit data.csv --target income --epsilon 0.5 --delta 1e-5 --bounds bounds.toml \\
      --ledger ledger.json --out try2/     # adds this release to ledger.json and reports the total

The schema (--bounds) declares every column used: numeric columns with public bounds
(bounds = [lo, hi]) and categorical columns with their categories. Bounds are never read from the
data; a numeric column without bounds is refused. Values outside the bounds are clipped to them
(out_of_bounds = "clip", the default, stated in the report) or refused (out_of_bounds = "error").
The report folder gets summary.md, summary.html (figures embedded), the figures as PNG and the
released trace (trace.npz). See docs/user-guide.md, "Your own table: dpposterior fit".
"""

COMPARE_EPILOG = """\
examples:
  dpposterior compare data.csv --target income --model logistic --epsilon 1 --delta 1e-5 \\
      --bounds bounds.toml --methods na-dpvi naive dpvim --out compare/
  dpposterior compare data.csv --target spend --model linear --epsilon 1 --delta 1e-5 \\
      --bounds schema.toml --methods na-dpvi gibbs-ss-noisy --budget each --out compare-linear/
  dpposterior compare data.csv --target income --epsilon 1 --delta 1e-5 --bounds bounds.toml \\
      --ledger ledger.json --out compare2/   # adds these releases to ledger.json, reports the total

--budget split (default): the k separate releases get epsilon/k and delta/k each, so together they
stay within (epsilon, delta) by basic composition; when their neighbouring relations differ
(dp-fast-mh is replace-one, the others add/remove-one) the total is for replace-one neighbours and
each add/remove release gets epsilon/(2k) and delta/(k (1 + e^(epsilon/2k))) (group privacy: a
replacement is a removal and an addition), so that together they stay within (epsilon, delta) for
replace-one neighbours. --budget each: every release gets the full budget (equal-cost
comparison; the report gives the larger composed total). 'naive' reuses the na-dpvi release.
The ledger (out/ledger.json, or --ledger) is append-only: a second run adds its releases to those
of earlier runs, and the report gives the total of all of them.
--clip-check EPSILON checks the clip of each DP-SGD release (na-dpvi, dpvim), with one more release
per checked release on top of the budget (the report's composed total includes them).
"""


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "data",
        help="the records: a CSV file (UTF-8, comma-separated; .tsv: tab-separated; may be "
        "gzip-compressed) with a header row, or Parquet (.parquet, needs pyarrow)",
    )
    p.add_argument("--target", required=True, help="the column to predict")
    p.add_argument(
        "--bounds",
        required=True,
        metavar="SCHEMA.toml",
        help="the declared schema: column types, public bounds and categories (TOML)",
    )
    p.add_argument(
        "--model",
        default="logistic",
        help="logistic (default), linear, or a NumPyro model as module:function, called as model(X, y)",
    )
    p.add_argument("--epsilon", type=float, required=True, help="privacy budget epsilon (> 0)")
    p.add_argument("--delta", type=float, required=True, help="privacy delta, in (0, 1); e.g. 1e-5, below 1/N")
    p.add_argument(
        "--features",
        nargs="+",
        default=None,
        metavar="COLUMN",
        help="feature columns (default: every declared column except the target)",
    )
    p.add_argument("--steps", type=int, default=2000, help="DP-SGD steps T (default 2000)")
    p.add_argument("--sampling-rate", type=float, default=0.1, help="Poisson sampling rate q (default 0.1)")
    p.add_argument(
        "--clip",
        type=float,
        default=None,
        help="clip norm C (default: chosen privately inside the budget, about the 99th percentile of the "
        "per-record gradient norms after a pilot of the first 20%% of the steps; the report shows it)",
    )
    p.add_argument("--prob", type=float, default=0.9, help="probability of the reported intervals (default 0.9)")
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed for the privacy noise, an integer in [0, 2^32) (reproduction only; default: from the OS; "
        "compare seeds release i with seed + i)",
    )
    p.add_argument("--no-progress", action="store_true", help="hide the DP-SGD progress bar")
    p.add_argument(
        "--target-kind",
        choices=("binary", "numeric"),
        default=None,
        help="with --model module:function: the target as 0/1 codes (binary) or rescaled by its bounds "
        "(numeric); default binary for two categories or numeric bounds [0, 1], else numeric",
    )


def _fit(args: argparse.Namespace) -> int:
    from .fit import fit_table

    fit_table(
        args.data,
        args.bounds,
        args.target,
        model=args.model,
        epsilon=args.epsilon,
        delta=args.delta,
        num_steps=args.steps,
        sampling_rate=args.sampling_rate,
        clip=args.clip,
        beta_rho=args.beta_rho,
        method=args.method,
        out=args.out,
        seed=args.seed,
        features=args.features,
        prob=args.prob,
        progress=not args.no_progress,
        ledger=args.ledger,
        secure=args.secure,
        target_kind=args.target_kind,
        clip_check=args.clip_check,
        command=shlex.join(["dpposterior", *args.argv]),
    )
    return 0


def _compare(args: argparse.Namespace) -> int:
    from .fit import compare_table

    compare_table(
        args.data,
        args.bounds,
        args.target,
        model=args.model,
        methods=args.methods,
        epsilon=args.epsilon,
        delta=args.delta,
        budget=args.budget,
        num_steps=args.steps,
        sampling_rate=args.sampling_rate,
        clip=args.clip,
        out=args.out,
        seed=args.seed,
        features=args.features,
        prob=args.prob,
        progress=not args.no_progress,
        target_kind=args.target_kind,
        clip_check=args.clip_check,
        ledger=args.ledger,
        secure=args.secure,
    )
    return 0


def add_fit_parsers(subparsers: Any) -> None:
    """Adds ``fit`` and ``compare`` to an ``argparse`` sub-parser collection."""
    fit = subparsers.add_parser(
        "fit",
        help="noise-aware DP regression on your own table (CSV or Parquet), with a report",
        description="Fits logistic or linear regression (or your NumPyro model) to a table of sensitive records "
        "with NA-DPVI at a stated (epsilon, delta) and writes a report folder.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=FIT_EPILOG,
    )
    _common(fit)
    fit.add_argument(
        "--method", choices=("grid", "nuts", "laplace"), default="grid", help="noise-aware solver (default grid)"
    )
    fit.add_argument(
        "--beta-rho", type=float, default=100.0, help="preconditioning of the scale gradients (default 100)"
    )
    fit.add_argument("--out", default="report", help="report folder (default report/)")
    fit.add_argument(
        "--clip-check",
        type=float,
        default=None,
        metavar="EPSILON",
        help="also release, at this epsilon (pure DP, added to the total), a noisy histogram of the "
        "per-record gradient norms at the end of the run: the report says what share of the "
        "records the clip C cut (clipping bias is outside the noise-aware model)",
    )
    fit.add_argument(
        "--secure",
        action="store_true",
        help="privacy noise and sampling bits from the OS CSPRNG (no seed exists; not with --seed)",
    )
    fit.add_argument(
        "--ledger",
        default=None,
        metavar="LEDGER.json",
        help="a ledger file of earlier releases from the same data: this release is added and the "
        "report gives the total of all (created if missing)",
    )
    fit.set_defaults(func=_fit)

    cmp_ = subparsers.add_parser(
        "compare",
        help="several DP methods on one table under one budget, side by side in one report",
        description="Runs several DP inference methods on the same table and puts their posteriors side by side, "
        "with the composed privacy of everything released.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=COMPARE_EPILOG,
    )
    _common(cmp_)
    cmp_.add_argument(
        "--methods",
        nargs="+",
        default=["na-dpvi", "naive", "dpvim"],
        metavar="METHOD",
        help="na-dpvi, naive (same release as na-dpvi), dpvim, gibbs-ss-noisy (linear only), "
        "dp-fast-mh (DP MCMC, logistic only; mixes only at large N); default: na-dpvi naive dpvim",
    )
    cmp_.add_argument(
        "--budget",
        choices=("split", "each"),
        default="split",
        help="split (default): releases share the budget, so that together they stay within it for "
        "replace-one neighbours when the methods' relations differ (dp-fast-mh beside add/remove "
        "releases), else for their shared relation; each: every release gets all of it",
    )
    cmp_.add_argument("--out", default="compare-report", help="report folder (default compare-report/)")
    cmp_.add_argument(
        "--ledger",
        default=None,
        metavar="LEDGER.json",
        help="a ledger file of earlier releases from the same data (default OUT/ledger.json): these "
        "releases are appended, never overwriting earlier ones, and the report gives the total of "
        "all (created if missing)",
    )
    cmp_.add_argument(
        "--clip-check",
        type=float,
        default=None,
        metavar="EPSILON",
        help="also release, at this epsilon (pure DP), a noisy histogram of the per-record gradient "
        "norms at the end of each DP-SGD run: na-dpvi's (the release naive shares; "
        "clip_check.json) and dpvim's (its loc gradients at its own clip; clip_check_dpvim.json); "
        "na-dpvi, naive or dpvim must be among the methods. The report says what share of "
        "the records C cut in each. Beyond the budget under --budget split and each alike: not "
        "taken from any method's share, added to the composed total and ledger.json",
    )
    cmp_.add_argument(
        "--secure",
        action="store_true",
        help="every release's noise and sampling bits from the OS CSPRNG (no seed exists; not with --seed)",
    )
    cmp_.set_defaults(func=_compare)
