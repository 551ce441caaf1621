"""The ``dpposterior`` command line."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Sequence


def _demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    run_demo(
        epsilon=args.epsilon,
        delta=args.delta,
        num_steps=args.steps,
        sampling_rate=args.sampling_rate,
        clip=args.clip,
        method=args.method,
        out=args.out,
        seed=args.seed,
        progress=not args.no_progress,
    )
    return 0


def _version() -> str:
    from . import __version__

    return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dpposterior",
        description="Noise-aware Bayesian inference under differential privacy.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser(
        "demo",
        help="noise-aware logistic regression on the vendored UCI Adult data",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  dpposterior demo\n  dpposterior demo --epsilon 0.3 --method nuts --out adult-eps0.3/",
    )
    demo.add_argument("--epsilon", type=float, default=1.0, help="privacy budget epsilon (default 1.0)")
    demo.add_argument("--delta", type=float, default=1e-5, help="privacy delta (default 1e-5)")
    demo.add_argument("--steps", type=int, default=10_000, help="DP-SGD steps T (default 10,000)")
    demo.add_argument("--sampling-rate", type=float, default=0.1, help="Poisson sampling rate q (default 0.1)")
    demo.add_argument("--clip", type=float, default=11.0, help="clip norm C (default 11)")
    demo.add_argument(
        "--method", choices=("grid", "nuts", "laplace"), default="grid", help="noise-aware solver (default grid)"
    )
    demo.add_argument("--out", default="demo-output", help="output folder for figures and the trace")
    demo.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed for the privacy noise, an integer in [0, 2^32) (reproduction only; default: from the OS)",
    )
    demo.add_argument("--no-progress", action="store_true", help="hide progress bars")
    demo.set_defaults(func=_demo)
    __import__("dpposterior.experiments.cli_coverage", fromlist=["_"]).add_coverage_parser(sub)
    __import__("dpposterior.reproduce.cli", fromlist=["_"]).add_reproduce_parser(sub)
    __import__("dpposterior.tabular.cli", fromlist=["_"]).add_fit_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line ``argv`` (default: ``sys.argv[1:]``) and returns the exit code.

    Bad input, and a file that cannot be read or written, end in one line on stderr,
    ``dpposterior COMMAND: error: ...``, and exit code 2 (argparse's own errors exit with 2 too).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # the command line, for reports that record it
    try:
        return args.func(args)
    except (ValueError, TypeError, OSError) as e:  # OSError: a file that cannot be read or written
        print(f"dpposterior {args.command}: error: {_command_line_words(str(e))}", file=sys.stderr)
        return 2


def _command_line_words(message: str) -> str:
    """A library message's advice to pass ``clip=`` by hand, worded for the command line (``--clip``)."""
    return re.sub(r"\b([Pp]ass) clip= ", r"\1 --clip ", message)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
