"""The NA-DPVI paper's solvers, its published figures and the bars its reproduction is held to.

Shared by the plan of the reproduction (:mod:`.na_dpvi`) and its report (:mod:`.report`), which must
not import each other: the plan runs the report.
"""

from __future__ import annotations

#: the NA-DPVI solvers of the paper (methods of :mod:`dpposterior.experiments.methods`).
NA_DPVI_SOLVERS = ("nuts", "laplace", "grid")

#: the paper's published figures (Räisä et al. 2024, section 4) for the report.
PAPER_COVERAGE_RMSE = {
    "beta-bernoulli": 0.016,
    "gamma-exponential": 0.023,
    "dirichlet-categorical": 0.020,
    "linear-regression": 0.036,
}
PAPER_ADULT_CALIBRATION_RMSE = 0.024
#: the bars of issue 5 (best NA-DPVI solver).
COVERAGE_BAR = {
    "beta-bernoulli": 0.03,
    "gamma-exponential": 0.03,
    "dirichlet-categorical": 0.03,
    "linear-regression": 0.045,
}
ADULT_BAR = 0.03
