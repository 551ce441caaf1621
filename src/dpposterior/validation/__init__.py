"""Checks that a posterior is calibrated: TARP coverage (joint and per coordinate), central-interval
coverage, calibration curves, coverage RMSE.

Post-processing only: these functions take posterior draws, true parameters, reference points and
predicted probabilities, never data records (Räisä, Jälkö & Honkela,
"Noise-aware differentially private variational inference", 2024, sections 2.2, 3.1, 13.4).
"""

from ._inputs import default_alpha_grid
from .calibration import CalibrationResult
from .calibration import calibration_curve
from .coverage import TarpRepeatsResult
from .coverage import TarpResult
from .coverage import coverage_from_f
from .coverage import coverage_rmse
from .coverage import marginal_coverage
from .coverage import tarp_coverage
from .coverage import tarp_coverage_repeats
from .coverage import tarp_f_values
from .marginal import CentralCoverage
from .marginal import central_coverage
from .marginal import marginal_tarp_f
from .marginal import marginal_tarp_rmse
from .references import reference_points
from .references import repeated_reference_points

__all__ = [
    "CalibrationResult",
    "CentralCoverage",
    "TarpRepeatsResult",
    "TarpResult",
    "calibration_curve",
    "central_coverage",
    "coverage_from_f",
    "coverage_rmse",
    "default_alpha_grid",
    "marginal_coverage",
    "marginal_tarp_f",
    "marginal_tarp_rmse",
    "reference_points",
    "repeated_reference_points",
    "tarp_coverage",
    "tarp_coverage_repeats",
    "tarp_f_values",
]
