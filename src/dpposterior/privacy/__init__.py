"""Privacy accounting, the privacy record of a release, and the randomness of privacy noise.

- DP-SGD (Poisson-subsampled Gaussian, add/remove-one): :func:`dpsgd_epsilon`,
  :func:`calibrate_noise_multiplier` (PLD by default, RDP optional; dp-accounting).
- The Gaussian mechanism: :func:`gaussian_sigma` (classic, epsilon < 1),
  :func:`analytic_gaussian_sigma` (exact, any epsilon), :func:`gaussian_mechanism` (a release).
- Classic tools: :func:`advanced_composition`, :func:`amplify_by_poisson_subsampling`,
  :func:`gaussian_zcdp_rho`, :func:`zcdp_compose`, :func:`zcdp_to_dp`.
- DP dropout: :func:`dpd_epsilon` (its ``accountant`` picks AC, zCDP or PLD),
  :func:`calibrate_dpd_noise_multiplier`.
- Empirical audits (lower bounds on epsilon): :func:`audit_many_runs`,
  :func:`epsilon_lower_bound_from_scores`, :func:`audit_one_run`, :class:`AuditResult`.
- Several releases from one data set, composed (PLD): :class:`Ledger`.
- The record of a release: :class:`PrivacySpent`; the warnings a release can carry.
- Mironov's snapping mechanism (floating-point-safe Laplace releases): :func:`snap`,
  :class:`SnappedRelease`.

The building blocks stay in the modules: the audits' binomial bounds (``audit``), the DP dropout
accountants one by one (``dp_dropout``), noise seeds (``randomness``), secure mode's OS-random draws
(``secure``), the non-private record (``spent.not_private``).
"""

from .audit import AuditResult
from .audit import audit_many_runs
from .audit import audit_one_run
from .audit import epsilon_lower_bound_from_scores
from .composition import advanced_composition
from .composition import amplify_by_poisson_subsampling
from .composition import gaussian_zcdp_rho
from .composition import zcdp_compose
from .composition import zcdp_to_dp
from .dp_dropout import calibrate_dpd_noise_multiplier
from .dp_dropout import dpd_epsilon
from .dpsgd_accounting import calibrate_noise_multiplier
from .dpsgd_accounting import dpsgd_epsilon
from .gaussian import GaussianRelease
from .gaussian import analytic_gaussian_sigma
from .gaussian import gaussian_mechanism
from .gaussian import gaussian_sigma
from .ledger import Ledger
from .ledger import LedgerEntry
from .._checks import LargeDeltaWarning
from .clip_binds import ClipBindsWarning
from .secure import NoiseNotSecureWarning
from .snapping import SnappedRelease
from .snapping import snap
from .spent import PrivacySpent

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
    "dpd_epsilon",
    "dpsgd_epsilon",
    "epsilon_lower_bound_from_scores",
    "gaussian_mechanism",
    "gaussian_sigma",
    "gaussian_zcdp_rho",
    "snap",
    "zcdp_compose",
    "zcdp_to_dp",
]
