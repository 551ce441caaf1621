"""The ``dpposterior coverage`` command: the paper's coverage experiment over a grid of cells."""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Any

from .._checks import check_output_dir
from . import config as C

EPILOG = """\
examples:
  dpposterior coverage --model beta-bernoulli --epsilon 0.1 0.3 1.0 --method nuts laplace grid naive \\
      --replicates 500 --repeats 20 --out results/
  dpposterior coverage --model beta-bernoulli --epsilon 1.0 --method grid naive --replicates 50 \\
      --num-steps 2000 --out quick/
  dpposterior coverage --model linear-regression --epsilon 1.0 --method grid --backend ray --address auto \\
      --out results/
  dpposterior coverage --model beta-bernoulli --epsilon 0.1 1.0 --method grid bernstein-sheldon dpvim \\
      --replicates 100 --out baselines/

--model, --epsilon and --method take several values; given twice, a flag adds its values to the first.
Each finished cell (model, epsilon, method) is written at once to OUT/cells/; re-running the same
command skips finished cells. OUT gets coverage_<model>.png, coverage_table.csv and coverage_table.md,
which show every finished cell in OUT (earlier runs' too; a run with other settings adds rows marked
with them); the table printed is this run's cells. Beside each joint TARP RMSE the tables show each
latent coordinate's own: its marginal TARP RMSE and the coverage of its equal-tailed 90% interval.
Cells of one (model, epsilon) share their DP-SGD replicates (the same K traces for every method).
The baselines (bernstein-sheldon, gibbs-ss-noisy, dpvim) release the same K synthetic data sets by
their own mechanism under the same budget; each cell records the privacy of its release.
"""


#: the methods of a run that names none.
DEFAULT_METHODS = ("grid", "naive")


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def add_coverage_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Adds the ``coverage`` sub-command to an ``argparse`` sub-parser collection."""
    p = subparsers.add_parser(
        "coverage",
        help="TARP coverage of DP posteriors over replicated synthetic data (papers' experiment)",
        description="Coverage experiment of Räisä et al. 2024, section 13.4: for each (model, epsilon, method), K "
        "replicates of theta ~ prior, data ~ p(data | theta), a DP-SGD trace, the method's posterior, "
        "and TARP coverage with data-dependent reference points re-drawn R times.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
    )
    # action="extend": a repeated flag (--epsilon 0.1 --epsilon 1) adds its values instead of replacing them
    p.add_argument(
        "--model",
        nargs="+",
        action="extend",
        required=True,
        metavar="MODEL",
        help="model name(s): beta-bernoulli, gamma-exponential, dirichlet-categorical, "
        "linear-regression, logistic-regression (a model of your own: register_model in Python)",
    )
    p.add_argument(
        "--epsilon", nargs="+", action="extend", required=True, metavar="EPS", help="privacy budget(s), each > 0"
    )
    p.add_argument(
        "--method",
        nargs="+",
        action="extend",
        default=None,
        metavar="METHOD",
        help="posterior method(s): nuts, laplace, grid (NA-DPVI solvers), naive (last iterate); "
        "baselines with their own DP release of the same budget: bernstein-sheldon "
        "(beta-bernoulli, dirichlet-categorical, gamma-exponential), gibbs-ss-noisy "
        "(linear-regression), dpvim (every model); default: grid naive",
    )
    p.add_argument(
        "--replicates",
        type=int,
        default=C.DEFAULT_REPLICATES,
        help=f"K, replicates per cell (default {C.DEFAULT_REPLICATES})",
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=C.DEFAULT_REPEATS,
        help=f"R, re-draws of the reference points (default {C.DEFAULT_REPEATS})",
    )
    p.add_argument(
        "--num-steps", type=int, default=C.DEFAULT_NUM_STEPS, help=f"T, DP-SGD steps (default {C.DEFAULT_NUM_STEPS})"
    )
    p.add_argument(
        "--num-records",
        type=int,
        default=C.DEFAULT_NUM_RECORDS,
        help=f"N, records per simulated data set (default {C.DEFAULT_NUM_RECORDS})",
    )
    p.add_argument(
        "--sampling-rate",
        type=float,
        default=C.DEFAULT_SAMPLING_RATE,
        help=f"q, Poisson sampling rate (default {C.DEFAULT_SAMPLING_RATE})",
    )
    p.add_argument("--delta", type=float, default=C.DEFAULT_DELTA, help=f"privacy delta (default {C.DEFAULT_DELTA})")
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the experiment (synthetic data and fixed DP-SGD keys, recorded; default 0)",
    )
    p.add_argument(
        "--num-draws",
        type=int,
        default=C.DEFAULT_NUM_DRAWS,
        help=f"M, posterior draws per replicate (default {C.DEFAULT_NUM_DRAWS})",
    )
    p.add_argument(
        "--burn-in",
        type=float,
        default=C.DEFAULT_BURN_IN,
        help=f"share of each trace dropped before post-processing (default {C.DEFAULT_BURN_IN})",
    )
    p.add_argument("--out", default="coverage-results", help="results folder (default coverage-results/)")
    p.add_argument("--backend", default="local", help="local (default, in this process) or ray")
    p.add_argument(
        "--address",
        default=None,
        help="Ray cluster address (with --backend ray; 'auto' joins a running cluster; default: a local Ray instance)",
    )
    p.add_argument(
        "--devices",
        type=int,
        default=None,
        help="XLA CPU devices to split the replicates over, in DP-SGD and in each method's vmapped program "
        "(one device for a program that calls linear-algebra kernels) (default: min(2, CPU cores)); "
        "set before JAX starts, ignored if XLA_FLAGS already sets a device count",
    )
    p.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="replicates per compiled batch, >= 1 (default: equal batches of at most 64 per device and "
        "1 GiB of traces)",
    )
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.set_defaults(func=coverage_command)
    return p


def _parse_epsilons(values: list[str]) -> list[float]:
    out = []
    for v in values:
        try:
            e = float(v)
        except ValueError:
            raise ValueError(f"invalid epsilon {v!r}: each epsilon must be a finite number > 0") from None
        if not math.isfinite(e) or e <= 0:
            raise ValueError(f"invalid epsilon {v!r}: each epsilon must be a finite number > 0")
        out.append(e)
    return out


def _unique(xs: list[Any]) -> list[Any]:
    seen: list[Any] = []
    for x in xs:
        if x not in seen:
            seen.append(x)
    return seen


def coverage_command(args: argparse.Namespace) -> int:
    """Runs the cells of the command line, writes the reports, prints the table; returns the exit code."""
    from .xla import configure_xla_cpu

    if args.devices is not None and args.devices < 1:
        raise ValueError(f"--devices must be >= 1, got {args.devices}")
    if args.batch_size is not None and args.batch_size < 1:
        raise ValueError(f"--batch-size must be >= 1 (replicates per compiled batch), got {args.batch_size}")
    devices_wanted = args.devices if args.devices is not None else min(2, _cpu_count())
    xla = configure_xla_cpu(devices_wanted)  # before anything starts JAX's backend

    from ..models.registry import MODELS
    from .methods import METHODS

    models = _unique(args.model)
    for m in models:
        if m not in MODELS:
            raise ValueError(
                f"unknown model {m!r}; available: {', '.join(sorted(MODELS))} (a model of your own "
                "runs from Python: dpposterior.models.register_model, then run_coverage)"
            )
    methods = _unique(args.method if args.method is not None else list(DEFAULT_METHODS))
    for m in methods:
        if m not in METHODS:
            raise ValueError(f"unknown method {m!r}; available: {', '.join(sorted(METHODS))}")
    epsilons = _unique(_parse_epsilons(args.epsilon))
    if args.backend not in ("local", "ray"):
        raise ValueError(f"unknown backend {args.backend!r}; available: local, ray")
    if args.address is not None and args.backend != "ray":
        raise ValueError("--address needs --backend ray")
    check_output_dir(args.out, "--out")  # before hours of computation, not after
    try:
        configs = [
            C.CellConfig(
                model=m,
                epsilon=e,
                method=meth,
                replicates=args.replicates,
                repeats=args.repeats,
                num_steps=args.num_steps,
                num_records=args.num_records,
                sampling_rate=args.sampling_rate,
                delta=args.delta,
                seed=args.seed,
                num_draws=args.num_draws,
                burn_in=args.burn_in,
            )
            for m in models
            for e in epsilons
            for meth in methods
        ]
    except (ValueError, TypeError) as e:  # name the flags, not CellConfig's fields
        raise type(e)(_as_flags(str(e))) from e

    import jax

    from .report import folder_results, table_markdown, write_reports
    from .runner import CellsUnusableError, run_coverage

    devices = min(devices_wanted, jax.device_count())
    try:
        summary = run_coverage(
            configs,
            args.out,
            backend=args.backend,
            address=args.address,
            devices=devices,
            batch_size=args.batch_size,
            progress=not args.no_progress,
        )
    except ImportError as e:
        print(f"dpposterior coverage: error: {e}", file=sys.stderr)
        return 2
    except CellsUnusableError as e:  # the other cells are saved: the folder's reports still show them
        everything, notes = folder_results(args.out)
        for note in notes:
            print(f"dpposterior coverage: note: {note}", file=sys.stderr)
        if everything:
            paths = write_reports(everything, args.out)
            print(
                f"the tables and plots in {args.out} cover its {len(everything)} finished cell(s): "
                + ", ".join(str(p) for p in paths.values()),
                file=sys.stderr,
            )
        print(f"dpposterior coverage: error: {e}", file=sys.stderr)
        return 1
    # the folder's reports show every finished cell in it, earlier runs' too (not only this run's)
    everything, notes = folder_results(args.out, summary.results)
    for note in notes:
        print(f"dpposterior coverage: note: {note}", file=sys.stderr)
    paths = write_reports(everything, args.out)
    print(table_markdown(summary.results), end="")
    print(
        f"\n{len(summary.computed)} cell(s) computed, {len(summary.skipped)} found finished in {args.out}; "
        f"wall time {summary.wall_seconds:.1f} s on {devices} XLA device(s)"
        + ("" if xla["applied"] else f" ({xla['reason']}: XLA flags unchanged)")
    )
    # "from earlier runs" miscounted: a cell this run found finished came from an earlier run too
    shown = len({r["config_digest"] for r in summary.results})
    print(
        f"the tables and plots in {args.out} cover {len(everything)} finished cell(s): the {shown} in the table "
        f"above and {len(everything) - shown} other cell(s) in the folder"
    )
    for kind, p in paths.items():
        print(f"  {kind}: {p}")
    return 0


#: CellConfig's fields that the command sets, and their flags.
_FLAGS = {
    "num_steps": "--num-steps",
    "num_records": "--num-records",
    "sampling_rate": "--sampling-rate",
    "num_draws": "--num-draws",
    "burn_in": "--burn-in",
    "replicates": "--replicates",
    "repeats": "--repeats",
    "epsilon": "--epsilon",
    "delta": "--delta",
    "seed": "--seed",
}


def _as_flags(message: str) -> str:
    """A CellConfig error with its field names written as the command's flags (``num_steps`` -> ``--num-steps``)."""
    import re

    return re.sub(
        r"(?<![\w-])(" + "|".join(sorted(_FLAGS, key=len, reverse=True)) + r")(?![\w-])",
        lambda m: _FLAGS[m.group(1)],
        message,
    )
