"""``dpposterior reproduce na-dpvi``: the NA-DPVI paper's experiments, with every baseline it compares.

Three parts (Räisä, Jälkö & Honkela, "Noise-aware differentially private variational inference", 2024,
section 4):

1. Exponential families: Beta-Bernoulli, Gamma-Exponential and Dirichlet-Categorical x epsilon in
   {0.1, 0.3, 1.0} x {NA-DPVI NUTS, Laplace, grid; naive last iterate; DPVIm; Bernstein-Sheldon},
   K = 500 replicates, R = 20 reference re-draws, T = 10,000, N = 5,000, q = 0.1, delta = 1e-5.
2. 10-D Bayesian linear regression: the same epsilons x {NA-DPVI NUTS, Laplace, grid; naive; DPVIm;
   Gibbs-SS-Noisy}.
3. UCI Adult logistic regression: posterior predictive calibration on the test split
   (:mod:`.adult`).
4. Widths: NA-DPVI (grid) on Beta-Bernoulli under other DP-SGD settings (steps T, sampling rate q) at
   the same privacy budget, to show which settings narrow the noise-aware posterior towards the
   Bernstein-Sheldon width while staying calibrated (K = 200).

Parts 1 and 2 are coverage cells of :mod:`dpposterior.experiments` (one compiled program per group of
replicates, resumable result files, local or Ray backend); part 3 is resumable per release. The report
(:mod:`.report`) is written to ``docs/results/na-dpvi.md`` with PNG figures beside it.
``--quick`` runs every part at toy sizes (a smoke test of the pipeline, not a measurement).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any, Sequence

from .adult import AdultSettings
from .na_dpvi_paper import NA_DPVI_SOLVERS

PARTS = ("coverage", "adult", "widths")
EXPFAM_MODELS = ("beta-bernoulli", "gamma-exponential", "dirichlet-categorical")
REGRESSION_MODEL = "linear-regression"
EPSILONS = (0.1, 0.3, 1.0)
EXPFAM_METHODS = NA_DPVI_SOLVERS + ("naive", "dpvim", "bernstein-sheldon")
REGRESSION_METHODS = NA_DPVI_SOLVERS + ("naive", "dpvim", "gibbs-ss-noisy")

#: (T, q) settings of the widths part (the paper's is (10,000, 0.1)).
WIDTH_SETTINGS = ((10_000, 0.1), (2_000, 0.1), (10_000, 0.03), (10_000, 0.3), (3_000, 0.3), (30_000, 0.1))

#: burn-in share per model where the paper's 20% is too short. Gamma-Exponential: the DP-SGD
#: relaxation time of the rate's mean, 1 / (eta q N F(theta)) with F = (sigmoid(u) / theta)^2 the
#: per-record Fisher information of the softplus coordinate u, grows as theta^2: about 3,600 steps at
#: the prior's 84% quantile (theta = 5.4) against 2,000 burn-in steps, and the transient from the prior
#: median then lies where the gradient is visibly non-linear in u (NA-DPVI's linear gradient model is
#: misspecified there). Measured before the full run on seed 1 (not the full run's seed 0), K = 300,
#: grid: coverage RMSE 0.027 / 0.020 / 0.035 at epsilon 0.1 / 0.3 / 1 with 20%, 0.027 / 0.009 /
#: 0.023 with 50%.
BURN_IN = {"gamma-exponential": 0.5}

#: method options of the regression cells. NUTS: 500 warm-up iterations and 1,000 draws (each the
#: centre of 20 of the 20,000 theta draws) instead of 1,000 + 4,000: at epsilon 0.1 the weights' slopes
#: are poorly identified, so the trees are deep and, vmapped, every iteration costs the deepest tree of
#: its chunk; the shorter chain takes well under half the time with a coverage RMSE within the noise of
#: a small K. The long pole of the regression cells is Gibbs-SS-Noisy, not NUTS.
#: Gibbs-SS-Noisy: the same 1,000 warm-up sweeps and 20,000 kept draws, thinned by 2 instead of 5
#: (41,000 sweeps per replicate instead of 101,000). Measured on 6 replicates with 4,000 draws thinned
#: by 5 (seed 0): the integrated autocorrelation time of the least-mixed coordinate, in sweeps, was at
#: most 25 at epsilon 0.1 (ESS >= 1,600 at thin 2), at most 210 at 0.3 (ESS >= 190) and up to 1,640
#: at 1 (log sigma2 in one replicate: ESS about 25 at thin 2, 60 at thin 5; the median replicate's
#: about 22 sweeps). Each cell records its chains' ESS in its diagnostics (the report lists them).
REGRESSION_METHOD_OPTIONS = {"nuts": (("num_warmup", 500), ("num_samples", 1000)), "gibbs-ss-noisy": (("thin", 2),)}

#: method options of the exponential-family cells. Bernstein-Sheldon on Gamma-Exponential: 20,000 draws
#: thinned by 3 (61,000 sweeps per replicate) instead of the default 10 (201,000): about 30 sweeps per
#: effective draw at epsilon 0.1 (`baselines/cells.py`, DEFAULT_THIN) leaves ESS about 2,000, far more
#: than TARP needs. At K = 500 (seed 0) a cell takes about a quarter of the time of thin 10, with the
#: same coverage RMSE (0.0044 / 0.0040 / 0.0059 at epsilon 0.1 / 0.3 / 1 against 0.0045 / 0.0039 /
#: 0.0058); least-mixed replicate's ESS 248 at 0.1 (median 1,474). Each cell records its chains' ESS in
#: its diagnostics.
EXPFAM_METHOD_OPTIONS = {("gamma-exponential", "bernstein-sheldon"): (("thin", 3),)}

#: NA-DPVI cells run a second time with the h prior from the burn-in steps (``priors="burn_in"``,
#: :func:`dpposterior.noise_aware.burn_in_priors`), beside the paper's trace-based priors, on the same DP-SGD
#: releases. The grid solver only: it is exact for the post-processing model (A is diagonal, so each
#: coordinate's (phi*, h) posterior is two-dimensional), and costs seconds per cell. Measured on the full
#: run's Gamma-Exponential cell at epsilon 0.1 (K = 500, seed 0, burn-in 0.5): RMSE 0.0446 with the
#: paper's priors (as in the full run), 0.0149 with the burn-in h prior (sharpness 0.375 -> 0.407).
BURN_IN_PRIOR_SOLVERS = ("grid",)
_BURN_IN_PRIORS = (("priors", "burn_in"),)


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a reproduction runs: the coverage cells and the Adult settings."""

    cells: tuple[Any, ...]
    adult: AdultSettings
    quick: bool
    widths: tuple[Any, ...] = ()


def plan(quick: bool = False, seed: int = 0) -> Plan:
    """The full reproduction (the paper's sizes) or the ``--quick`` smoke test."""
    from ..experiments import CellConfig
    from ..experiments.config import DEFAULT_BURN_IN

    if quick:
        sizes: dict[str, Any] = dict(replicates=6, repeats=4, num_steps=60, num_records=200, num_draws=400, seed=seed)
        nuts = (("num_warmup", 100), ("num_samples", 200))  # the experiments tests' sizes: shared compilations
        # one exponential family with every method, and the regression with its baseline: every code path
        # of the full run, with the compilations the engine's tests share (same sizes)
        cells = []
        for meth in EXPFAM_METHODS:
            opts = nuts if meth == "nuts" else ((("num_warmup", 50),) if meth == "bernstein-sheldon" else ())
            cells.append(CellConfig("beta-bernoulli", 1.0, meth, method_options=opts, **sizes))
        cells.append(CellConfig("beta-bernoulli", 1.0, "grid", method_options=_BURN_IN_PRIORS, **sizes))
        for meth in ("grid", "naive", "gibbs-ss-noisy"):
            opts = (("num_warmup", 50),) if meth == "gibbs-ss-noisy" else ()
            cells.append(CellConfig(REGRESSION_MODEL, 1.0, meth, method_options=opts, **sizes))
        # the burn-in prior through the grid (NUTS with it would be one more compilation in the tests)
        adult = AdultSettings(
            epsilons=(1.0,),
            repeats=1,
            methods=("nuts", "laplace", "naive", "dpvim"),
            burn_in_prior_methods=("grid",),
            num_steps=60,
            num_warmup=50,
            num_samples=100,
            num_predictive=200,
            seed=seed,
        )
        widths: tuple[CellConfig, ...] = (CellConfig("beta-bernoulli", 0.5, "grid", **sizes),)
        return Plan(tuple(cells), adult, True, widths)
    sizes = dict(replicates=500, repeats=20, num_steps=10_000, num_records=5_000, seed=seed)
    cells = [
        CellConfig(
            model,
            e,
            meth,
            burn_in=BURN_IN.get(model, DEFAULT_BURN_IN),
            method_options=EXPFAM_METHOD_OPTIONS.get((model, meth), ()),
            **sizes,
        )
        for model in EXPFAM_MODELS
        for e in EPSILONS
        for meth in EXPFAM_METHODS
    ]
    cells += [
        CellConfig(REGRESSION_MODEL, e, meth, method_options=REGRESSION_METHOD_OPTIONS.get(meth, ()), **sizes)
        for e in EPSILONS
        for meth in REGRESSION_METHODS
    ]
    cells += [
        CellConfig(
            model,
            e,
            meth,
            burn_in=BURN_IN.get(model, DEFAULT_BURN_IN),
            method_options=_BURN_IN_PRIORS + REGRESSION_METHOD_OPTIONS.get(meth, ()),
            **sizes,
        )
        for model in EXPFAM_MODELS + (REGRESSION_MODEL,)
        for e in EPSILONS
        for meth in BURN_IN_PRIOR_SOLVERS
    ]
    widths = tuple(
        CellConfig(
            "beta-bernoulli",
            e,
            "grid",
            replicates=200,
            repeats=20,
            num_records=5_000,
            num_steps=t,
            sampling_rate=q,
            seed=seed,
        )
        for e in (0.1, 1.0)
        for t, q in WIDTH_SETTINGS
    )
    return Plan(tuple(cells), AdultSettings(seed=seed), False, widths)


#: the folder under ``out`` where the full run keeps its result files by default. With the maintainers'
#: ``--out docs/results`` it is ``docs/results/na-dpvi-work``, tracked in git beside the report, so that
#: ``--report-only`` works on a fresh clone and a run longer than one sitting can be finished elsewhere
#: (the files are small JSON: about 50 kB a coverage cell, 5 kB an Adult release). An earlier run kept
#: them in an ignored folder and they were lost with the machine, so its report could no longer be
#: rewritten.
DEFAULT_WORK = "na-dpvi-work"

#: the same for ``quick`` runs (toy results: never committed).
DEFAULT_QUICK_WORK = "na-dpvi-quick-work"

#: where :func:`run` writes without ``out`` (``dpposterior reproduce na-dpvi`` without ``--out``)
DEFAULT_OUT = "dpposterior-results/na-dpvi"


def default_work(out: str | Path, quick: bool) -> Path:
    """The default result-file folder: ``out/na-dpvi-work`` (``out/na-dpvi-quick-work`` for ``quick``)."""
    return Path(out) / (DEFAULT_QUICK_WORK if quick else DEFAULT_WORK)


def run(
    work: str | Path | None = None,
    out: str | Path = DEFAULT_OUT,
    *,
    quick: bool = False,
    backend: str = "local",
    address: str | None = None,
    seed: int = 0,
    parts: Sequence[str] = ("coverage", "adult", "widths"),
    progress: bool = True,
    log=print,
    report_only: bool = False,
) -> dict[str, Any]:
    """Runs (or resumes) the reproduction and writes the report.

    Args:
      work: folder of the resumable result files (cells and Adult releases); default
        ``out/na-dpvi-work`` (``out/na-dpvi-quick-work`` with ``quick``): :func:`default_work`.
      out: folder of the report: ``na-dpvi.md`` (``na-dpvi-quick.md`` with ``quick``) and its PNGs;
        default ``dpposterior-results/na-dpvi`` under the working directory (``docs/results`` for the
        reports the repository keeps).
      quick: toy sizes (smoke test).
      backend, address: coverage-engine backend (``"local"`` or ``"ray"``) and Ray address.
      seed: base seed of every key (reproduction; the experiment's data are synthetic or public-split).
      parts: which parts to run (``"coverage"``, ``"adult"``, ``"widths"``).
      progress: progress bars.
      report_only: compute nothing: write the report from the result files on disk, naming at its top
        every planned cell and release that has none (a partial report of an unfinished run).

    Returns:
      A dict with the coverage results, the Adult records, wall times and the report path.
    """
    from ..experiments import run_coverage, write_reports
    from ..experiments.report import folder_results
    from .adult import run_adult
    from .report import write_report

    unknown = sorted(set(parts) - set(PARTS))
    if unknown or not parts:
        raise ValueError(f"parts must be a non-empty subset of {PARTS}, got {list(parts)}")
    p = plan(quick, seed)
    work, out = Path(default_work(out, quick) if work is None else work), Path(out)
    timing: dict[str, float] = {}
    if report_only:
        return _report_from_disk(p, parts, work, out, quick, backend, log)
    coverage_results: list[dict[str, Any]] = []
    if "coverage" in parts:
        t0 = time.perf_counter()
        summary = run_coverage(list(p.cells), work / "coverage", backend=backend, address=address, progress=progress)
        timing["coverage"] = time.perf_counter() - t0
        coverage_results = summary.results
        everything, notes = folder_results(work / "coverage", coverage_results)  # earlier runs' cells too
        for note in notes:
            log(f"note: {note}")
        write_reports(everything, work / "coverage")
        log(
            f"coverage cells: {len(summary.computed)} computed, {len(summary.skipped)} found on disk, "
            f"{timing['coverage']:.1f} s"
        )
    adult_records: list[dict[str, Any]] = []
    if "adult" in parts:
        t0 = time.perf_counter()
        adult_records = run_adult(p.adult, work, log=log if progress else None)
        timing["adult"] = time.perf_counter() - t0
        log(f"Adult releases: {len(adult_records)}, {timing['adult']:.1f} s")
    width_results: list[dict[str, Any]] = []
    if "widths" in parts:
        t0 = time.perf_counter()
        width_results = run_coverage(
            list(p.widths), work / "widths", backend=backend, address=address, progress=progress
        ).results
        timing["widths"] = time.perf_counter() - t0
        log(f"width cells: {len(width_results)}, {timing['widths']:.1f} s")
    name = "na-dpvi-quick" if quick else "na-dpvi"
    report = write_report(
        coverage_results,
        adult_records,
        out,
        name=name,
        timing=timing,
        quick=quick,
        command=_command(quick, backend, work, out),
        widths=width_results,
    )
    log(f"wrote {report}")
    return {"coverage": coverage_results, "adult": adult_records, "timing": timing, "report": report}


def _report_from_disk(
    p: Plan, parts: Sequence[str], work: Path, out: Path, quick: bool, backend: str, log
) -> dict[str, Any]:
    """The report of whatever the plan's result files on disk hold; computes nothing."""
    from ..experiments.store import ResultStore
    from .adult import run_adult
    from .report import write_report

    missing: list[str] = []

    def load(cells, folder):
        store, found = ResultStore(folder), []
        for c in cells:
            r = store.load(c)
            if r is None:
                missing.append(c.label())
            else:
                found.append(r)
        return found

    coverage = load(p.cells, work / "coverage") if "coverage" in parts else []
    adult = run_adult(p.adult, work, compute=False, missing=missing) if "adult" in parts else []
    widths = load(p.widths, work / "widths") if "widths" in parts else []
    name = "na-dpvi-quick" if quick else "na-dpvi"
    report = write_report(
        coverage,
        adult,
        out,
        name=name,
        timing={},
        quick=quick,
        command=_command(quick, backend, work, out) + " --report-only",
        widths=widths,
        not_computed=missing,
    )
    log(f"wrote {report} from the files on disk ({len(missing)} planned cells or releases without a result)")
    return {
        "coverage": coverage,
        "adult": adult,
        "widths": widths,
        "timing": {},
        "report": report,
        "not_computed": missing,
    }


def _command(quick: bool, backend: str, work: Path, out: Path) -> str:
    cmd = "dpposterior reproduce na-dpvi"
    if quick:
        cmd += " --quick"
    if backend != "local":
        cmd += f" --backend {backend}"
    return cmd + f" --work {work} --out {out}"
