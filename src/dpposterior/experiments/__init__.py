"""The papers' coverage experiments as code (Räisä et al. 2024, 13.4).

A coverage cell is (model, epsilon, method): K replicates of theta ~ prior, data ~ p(data | theta),
a DP-SGD trace of ``dpvi`` on the data, the method's posterior from the trace, and TARP coverage in
the unconstrained space with data-dependent reference points re-drawn R times. The baselines
(``"bernstein-sheldon"``, ``"gibbs-ss-noisy"``, ``"dpvim"``) instead release the same synthetic data
sets by their own mechanism under the same budget (:mod:`.baseline_methods`). The replicates run as
one compiled ``jit(vmap(...))`` program; cells run in this process or as Ray tasks, and each finished
cell is written atomically so that a re-run resumes where it stopped.

    from dpposterior.experiments import CellConfig, run_coverage, write_reports
    cells = [CellConfig("beta-bernoulli", eps, m) for eps in (0.1, 1.0) for m in ("grid", "naive")]
    summary = run_coverage(cells, "results/")
    write_reports(summary.results, "results/")    # or folder_results("results/")[0]: every cell there

A model of the user's own runs in cells once registered (:func:`register_model`, from Python; the
command line runs the papers' models), as a method of the user's own does (:func:`register_method`).

The command line is ``dpposterior coverage`` (:mod:`.cli_coverage`).

Public API: the coverage runner with its config, result and errors, the reports, and the registries of
models and methods with the types a method receives and returns; the engine's steps (replicates, one
cell, one group, the result store, the tables) stay in ``replicates``, ``cell``, ``runner``, ``store``,
``report``.
"""

from ..models.registry import register_model
from .config import CellConfig
from .methods import METHODS
from .methods import CellData
from .methods import CellReleases
from .methods import MethodOutput
from .methods import MethodSettings
from .methods import register_method

# the baselines with their own mechanism register themselves in METHODS, after the methods above: every
# import of a module of this package runs this file first, so METHODS always holds them
from . import baseline_methods as _baseline_methods  # noqa: F401
from .report import folder_results
from .report import write_reports
from .runner import CellsUnusableError
from .runner import RunSummary
from .runner import run_coverage
from .store import CorruptResultError

__all__ = [
    "METHODS",
    "CellConfig",
    "CellData",
    "CellReleases",
    "CellsUnusableError",
    "CorruptResultError",
    "MethodOutput",
    "MethodSettings",
    "RunSummary",
    "folder_results",
    "register_method",
    "register_model",
    "run_coverage",
    "write_reports",
]
