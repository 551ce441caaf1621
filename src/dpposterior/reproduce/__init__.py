"""Reproductions of the papers' experiments (``dpposterior reproduce <experiment>``).

    from dpposterior.reproduce import run_na_dpvi
    run_na_dpvi(quick=True)   # toy sizes: writes ./dpposterior-results/na-dpvi/na-dpvi-quick.md

Each experiment writes resumable result files under ``work`` and a Markdown report with PNG figures
under ``out`` (default ``dpposterior-results/<experiment>`` under the working directory; the
repository's own reports are written with ``out="docs/results"``, hours of compute for the full
run); ``quick=True`` runs it at toy sizes (a smoke test of the pipeline).
"""

from .adult import AdultSettings
from .adult import run_adult
from .na_dpvi import Plan
from .na_dpvi import plan as na_dpvi_plan
from .na_dpvi import run as run_na_dpvi

__all__ = [
    "AdultSettings",
    "Plan",
    "na_dpvi_plan",
    "run_adult",
    "run_na_dpvi",
]
