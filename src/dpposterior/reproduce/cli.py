"""``dpposterior reproduce``: the papers' experiments from one command."""

from __future__ import annotations

import argparse
from pathlib import Path

EXPERIMENTS = ("na-dpvi", "pacbayes", "dp-dropout", "dp-fast-mh")

#: where ``reproduce <experiment>`` writes without ``--out``: ``dpposterior-results/<experiment>`` under the
#: working directory, never the installed package or a source tree (``--out docs/results`` is the
#: maintainers' choice, for the reports the repository keeps)
DEFAULT_OUT = "dpposterior-results"


def default_out(experiment: str) -> str:
    """The report folder of ``experiment`` when ``--out`` is not given."""
    return f"{DEFAULT_OUT}/{experiment}"


#: the experiments that run in one go and write one report: (module, run function, report writer).
#: ``run(quick=, verbose=)`` returns the report writer's leading arguments (one value or a tuple).
_SINGLE_RUN = {
    "pacbayes": (".pacbayes", "run_pacbayes", "write_pacbayes_report"),
    "dp-dropout": (".dp_dropout", "run_dp_dropout", "write_dp_dropout_report"),
    "dp-fast-mh": (".dp_fast_mh", "run_dp_fast_mh", "write_dp_fast_mh_report"),
}


def _reproduce(args: argparse.Namespace) -> int:
    from .._checks import check_output_dir, check_seed

    if args.experiment in _SINGLE_RUN:
        # these options drive the na-dpvi run only; the other experiments would silently ignore them
        # (--report-only would compute everything, --seed would not change a key)
        given = [
            flag
            for flag, used in (
                ("--work", args.work is not None),
                ("--backend", args.backend != "local"),
                ("--address", args.address is not None),
                ("--parts", args.parts is not None),
                ("--report-only", args.report_only),
                ("--seed", args.seed is not None),
            )
            if used
        ]
        if given:
            raise ValueError(
                f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} to na-dpvi only; "
                f"reproduce {args.experiment} takes --quick, --out and --no-progress (its seeds are fixed)"
            )
    if args.out is None:
        args.out = default_out(args.experiment)
    # checked before hours of computation, so that no result is lost to a bad path at the end
    check_output_dir(args.out, "--out")
    if getattr(args, "work", None) is not None:
        check_output_dir(args.work, "--work")
    check_seed(args.seed, "--seed")
    if args.seed is None:
        args.seed = 0
    if args.experiment == "na-dpvi":
        from .na_dpvi import PARTS, run

        parts = tuple(args.parts) if args.parts else PARTS
        import os

        from ..experiments.xla import configure_xla_cpu

        configure_xla_cpu(min(2, len(os.sched_getaffinity(0))))  # before anything starts JAX's backend
        run(
            work=args.work,
            out=args.out,
            quick=args.quick,
            backend=args.backend,
            address=args.address,
            seed=args.seed,
            parts=parts,
            progress=not args.no_progress,
            report_only=args.report_only,
        )
        return 0
    if args.experiment in _SINGLE_RUN:
        import importlib
        import time

        module, run_name, write_name = _SINGLE_RUN[args.experiment]
        mod = importlib.import_module(module, __package__)
        t0 = time.perf_counter()
        results = getattr(mod, run_name)(quick=args.quick, verbose=not args.no_progress)
        results = results if isinstance(results, tuple) else (results,)
        cmd = f"dpposterior reproduce {args.experiment}" + (" --quick" if args.quick else "") + f" --out {args.out}"
        path = getattr(mod, write_name)(
            *results, args.out, quick=args.quick, wall_seconds=time.perf_counter() - t0, command=cmd
        )
        data = Path(path).with_suffix(".json")
        print(f"wrote {path}" + (f" and {data.name} (every row, machine-readable)" if data.exists() else ""))
        return 0
    raise ValueError(f"unknown experiment {args.experiment!r}; available: {', '.join(EXPERIMENTS)}")


def add_reproduce_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "reproduce",
        help=f"run a paper's experiments and write the report (default ./{DEFAULT_OUT}/<experiment>/)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "examples:\n"
            "  dpposterior reproduce na-dpvi --quick --work /tmp/na-quick --out /tmp/na-quick\n"
            "  dpposterior reproduce na-dpvi                      # the full run (hours of compute; resumable)\n"
            "  dpposterior reproduce na-dpvi --backend ray --address auto\n"
            "  dpposterior reproduce na-dpvi --parts adult        # only the UCI Adult calibration\n"
            "  dpposterior reproduce pacbayes                     # DP PAC-Bayes on MNIST 7 vs 9 (minutes)\n"
            "  dpposterior reproduce dp-dropout                   # DP dropout / DP-SGLD, MNIST 7v9 + Adult\n"
            "  dpposterior reproduce dp-fast-mh                   # DP MCMC: mixture + MNIST 7v9 (minutes)\n"
            "  dpposterior reproduce na-dpvi --out docs/results   # maintainers: the reports the repository keeps\n"
            f"Without --out the report goes to ./{DEFAULT_OUT}/<experiment>/ under the working directory.\n"
            "A re-run resumes: finished cells and releases under --work are not recomputed."
        ),
    )
    p.add_argument("experiment", choices=EXPERIMENTS, help="which paper's experiments")
    p.add_argument("--quick", action="store_true", help="toy sizes: a smoke test of the pipeline, not results")
    p.add_argument(
        "--work",
        default=None,
        help="na-dpvi: folder of the resumable result files (default <out>/na-dpvi-work, with --quick "
        "<out>/na-dpvi-quick-work; with --out docs/results the full run's is tracked in git, so the "
        "report can be rewritten from a fresh clone)",
    )
    p.add_argument(
        "--out",
        default=None,
        help=f"folder of the report, its figures and its JSON rows (default ./{DEFAULT_OUT}/<experiment>)",
    )
    p.add_argument("--backend", choices=("local", "ray"), default="local", help="na-dpvi: coverage-engine backend")
    p.add_argument("--address", default=None, help="na-dpvi: Ray address (with --backend ray; 'auto' joins a cluster)")
    p.add_argument(
        "--parts",
        nargs="+",
        choices=("coverage", "adult", "widths"),
        default=None,
        help="na-dpvi: run only these parts (default: all)",
    )
    p.add_argument("--seed", type=int, default=None, help="na-dpvi: base seed of the experiment's keys (default 0)")
    p.add_argument("--no-progress", action="store_true", help="hide progress output")
    p.add_argument(
        "--report-only",
        action="store_true",
        help="na-dpvi: compute nothing; write the report from the result files in --work, naming "
        "the planned cells that have none",
    )
    p.set_defaults(func=_reproduce)
    return p
