"""Privacy accounting, the privacy record of a release, and the randomness of privacy noise.

- DP-SGD (Poisson-subsampled Gaussian, add/remove-one): :func:`dpsgd_epsilon`,
  :func:`calibrate_noise_multiplier` (PLD by default, RDP optional; dp-accounting).
- The Gaussian mechanism: :func:`gaussian_sigma` (classic, epsilon < 1),
  :func:`analytic_gaussian_sigma` (exact, any epsilon), :func:`gaussian_mechanism` (a release).
- Classic tools: :func:`advanced_composition`, :func:`amplify_by_poisson_subsampling`,
  :func:`gaussian_zcdp_rho`, :func:`zcdp_compose`, :func:`zcdp_to_dp`.
- DP dropout: :func:`dpd_ac_epsilon`, :func:`dpd_zcdp_epsilon`, :func:`dpd_epsilon`,
  :func:`calibrate_dpd_noise_multiplier`.
- Empirical audits (lower bounds on epsilon): :func:`audit_many_runs`,
  :func:`epsilon_lower_bound_from_scores`, :func:`audit_one_run`, :class:`AuditResult`.
- Several releases from one data set, composed (PLD): :class:`Ledger`.
- The record of a release: :class:`PrivacySpent`, :func:`not_private`; noise seeds:
  :func:`os_seeded_key`, :func:`resolve_key`; secure mode (OS CSPRNG, no seed):
  :func:`secure_bits`, :func:`secure_uniform`, :func:`secure_normal`, :func:`secure_laplace`.
- Mironov's snapping mechanism (floating-point-safe Laplace releases): :func:`snap`,
  :class:`SnappedRelease`.
"""

from .audit import AuditResult
from .audit import audit_many_runs
from .audit import audit_one_run
from .audit import clopper_pearson_lower
from .audit import clopper_pearson_upper
from .audit import epsilon_lower_bound_from_counts
from .audit import epsilon_lower_bound_from_scores
from .audit import one_run_epsilon_lower_bound
from .composition import advanced_composition
from .composition import amplify_by_poisson_subsampling
from .composition import gaussian_zcdp_rho
from .composition import zcdp_compose
from .composition import zcdp_to_dp
from .dp_dropout import calibrate_dpd_noise_multiplier
from .dp_dropout import dpd_ac_epsilon
from .dp_dropout import dpd_epsilon
from .dp_dropout import dpd_zcdp_epsilon
from .dpsgd_accounting import calibrate_noise_multiplier
from .dpsgd_accounting import dpsgd_epsilon
from .gaussian import GaussianRelease
from .gaussian import analytic_gaussian_sigma
from .gaussian import gaussian_mechanism
from .gaussian import gaussian_sigma
from .ledger import Ledger
from .ledger import LedgerEntry
from .randomness import os_seeded_key
from .randomness import resolve_key
from .._checks import LargeDeltaWarning
from .clip_binds import ClipBindsWarning
from .secure import NoiseNotSecureWarning
from .secure import secure_bits
from .secure import secure_laplace
from .secure import secure_normal
from .secure import secure_uniform
from .snapping import SnappedRelease
from .snapping import snap
from .spent import PrivacySpent
from .spent import not_private

__all__ = [
    "AuditResult",
    "GaussianRelease",
    "ClipBindsWarning",
    "LargeDeltaWarning",
    "Ledger",
    "LedgerEntry",
    "NoiseNotSecureWarning",
    "PrivacySpent",
    "SnappedRelease",
    "advanced_composition",
    "amplify_by_poisson_subsampling",
    "analytic_gaussian_sigma",
    "audit_many_runs",
    "audit_one_run",
    "calibrate_dpd_noise_multiplier",
    "calibrate_noise_multiplier",
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "dpd_ac_epsilon",
    "dpd_epsilon",
    "dpd_zcdp_epsilon",
    "dpsgd_epsilon",
    "epsilon_lower_bound_from_counts",
    "epsilon_lower_bound_from_scores",
    "gaussian_mechanism",
    "gaussian_sigma",
    "gaussian_zcdp_rho",
    "not_private",
    "one_run_epsilon_lower_bound",
    "os_seeded_key",
    "resolve_key",
    "secure_bits",
    "secure_laplace",
    "secure_normal",
    "secure_uniform",
    "snap",
    "zcdp_compose",
    "zcdp_to_dp",
]
