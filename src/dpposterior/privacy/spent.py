"""What a release cost: the frozen privacy record attached to every release."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Literal

from .._checks import check_positive, check_positive_int, check_real, check_sampling_rate

Neighbouring = Literal["add_remove", "replace_one"]
SeededBy = Literal["os", "user", "secure", "none"]

NEIGHBOURING_RELATIONS = ("add_remove", "replace_one")
SEEDING = ("os", "user", "secure", "none")


@dataclasses.dataclass(frozen=True)
class PrivacySpent:
    """What a release cost, under which assumptions.

    Attributes:
      epsilon: the epsilon of the (epsilon, delta)-DP guarantee (``math.inf`` for a release that is
        not private, e.g. a non-private debug run).
      delta: the delta of the guarantee (0 for a pure epsilon-DP release).
      neighbouring: ``"add_remove"`` (add or remove one record, as Poisson-sampled DP-SGD is
        analysed) or ``"replace_one"`` (substitute one record).
      accountant: how ``epsilon`` was obtained, e.g. ``"pld(dvi=1e-4)"``, ``"rdp"``,
        ``"advanced_composition"``, ``"zcdp"``, ``"pure"``, ``"none"``.
      mechanism: a short name of the mechanism, e.g. ``"poisson_subsampled_gaussian"``.
      noise_multiplier: the Gaussian noise std divided by the L2 sensitivity (None if not Gaussian).
      sampling_rate: the Poisson sampling rate q (1.0 without subsampling).
      num_steps: how many times the mechanism was run and released.
      seeded_by: ``"os"`` (default: seed from the operating system, never shown), ``"secure"``
        (``secure=True``: every noise and sampling bit read from the operating system's CSPRNG, no
        seed; :mod:`dpposterior.privacy.secure`), ``"user"`` (a key given for reproduction only), or
        ``"none"`` (no randomness, e.g. a non-private run).
      details: extra facts (clip norm, composition of parts, ...), as a tuple of (key, value) pairs so
        the record stays hashable and immutable.

    Raises:
      TypeError: a number field that is not a real number (bools and strings included), a non-string
        ``accountant`` or ``mechanism``, or ``details`` that is not a tuple.
      ValueError: epsilon NaN or < 0, delta outside [0, 1], a noise multiplier that is not finite and
        > 0, a sampling rate outside (0, 1], num_steps < 1, or an unknown neighbouring relation or
        seeding.
    """

    epsilon: float
    delta: float
    neighbouring: Neighbouring
    accountant: str
    mechanism: str
    noise_multiplier: float | None = None
    sampling_rate: float = 1.0
    num_steps: int = 1
    seeded_by: SeededBy = "os"
    details: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        # Numbers are checked (bools and strings refused) and stored as plain float / int, so that a
        # record never holds a value the accountants (e.g. :class:`~dpposterior.privacy.Ledger`)
        # would misread or fail on.
        eps = check_real("PrivacySpent.epsilon", self.epsilon)
        if math.isnan(eps) or eps < 0:
            raise ValueError(f"PrivacySpent.epsilon must be a number >= 0 (inf allowed), got {self.epsilon!r}")
        dlt = check_real("PrivacySpent.delta", self.delta)
        if not 0 <= dlt <= 1:
            raise ValueError(f"PrivacySpent.delta must lie in [0, 1], got {self.delta!r}")
        if self.neighbouring not in NEIGHBOURING_RELATIONS:
            raise ValueError(
                f"PrivacySpent.neighbouring must be one of {NEIGHBOURING_RELATIONS}, got {self.neighbouring!r}"
            )
        if self.seeded_by not in SEEDING:
            raise ValueError(f"PrivacySpent.seeded_by must be one of {SEEDING}, got {self.seeded_by!r}")
        for name in ("accountant", "mechanism"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"PrivacySpent.{name} must be a string, got {getattr(self, name)!r}")
        sigma = (
            None
            if self.noise_multiplier is None
            else check_positive(self.noise_multiplier, "PrivacySpent.noise_multiplier")
        )
        q = check_sampling_rate(self.sampling_rate, "PrivacySpent.sampling_rate")
        steps = check_positive_int(self.num_steps, "PrivacySpent.num_steps")
        if not isinstance(self.details, tuple):
            raise TypeError(
                "PrivacySpent.details must be a tuple of (key, value) pairs (so the record stays "
                f"hashable), got a {type(self.details).__name__}"
            )
        for field, value in (
            ("epsilon", eps),
            ("delta", dlt),
            ("noise_multiplier", sigma),
            ("sampling_rate", q),
            ("num_steps", steps),
        ):
            object.__setattr__(self, field, value)

    @property
    def is_private(self) -> bool:
        """True when the guarantee is finite (epsilon < inf), conditional or not (see :attr:`caveat`)."""
        return math.isfinite(self.epsilon)

    @property
    def caveat(self) -> str:
        """What the guarantee assumes beyond the mechanism as run, or ``""`` when it is unconditional.

        Read from ``details["caveat"]`` (e.g. Entropy-SGLD's exact Gibbs sample). A record with a caveat
        holds only if its assumption does; :meth:`summary` says so, and a
        :class:`~dpposterior.privacy.Ledger` total carries the caveats of its parts."""
        return str(self.detail("caveat", "") or "")

    def detail(self, key: str, default: Any = None) -> Any:
        """Looks up one of ``details`` by key."""
        for k, v in self.details:
            if k == key:
                return v
        return default

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict (inf epsilon becomes the string ``"inf"``)."""
        d = dataclasses.asdict(self)
        d["epsilon"] = "inf" if math.isinf(self.epsilon) else float(self.epsilon)
        d["details"] = [[k, v] for k, v in self.details]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "PrivacySpent":
        """Inverse of :meth:`to_dict`; raises ValueError on a malformed record."""
        if not isinstance(d, dict):
            raise ValueError(f"malformed privacy record {d!r}: expected a dict")
        try:
            kw = dict(d)
            if kw.get("epsilon") == "inf":
                kw["epsilon"] = math.inf
            kw["details"] = tuple((str(k), _tupled(v)) for k, v in kw.get("details", ()))
            return cls(**kw)
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"malformed privacy record {d!r}: {e}") from e

    def summary(self) -> str:
        """One human-readable line; a conditional guarantee (:attr:`caveat`) says so first."""
        if not self.is_private:
            return f"NOT PRIVATE ({self.mechanism}; accountant {self.accountant})"
        conditional = f"CONDITIONAL (holds only if the caveat does: {self.caveat}) " if self.caveat else ""
        parts = [
            f"{conditional}(epsilon={self.epsilon:.4g}, delta={self.delta:.3g})-DP",
            f"{self.neighbouring} neighbours",
            f"accountant {self.accountant}",
            f"mechanism {self.mechanism}",
        ]
        if self.noise_multiplier is not None:
            parts.append(f"noise multiplier {self.noise_multiplier:.4g}")
        parts.append(f"q={self.sampling_rate:.4g}, steps={self.num_steps}")
        parts.append(f"seeded by {self.seeded_by}")
        return "; ".join(parts)


def _tupled(value: Any) -> Any:
    """JSON lists back to the tuples ``details`` holds (a list would make the record unhashable and
    unequal to the one it was written from)."""
    if isinstance(value, list):
        return tuple(_tupled(v) for v in value)
    return value


def not_private(mechanism: str, reason: str = "") -> PrivacySpent:
    """The record of a release that carries no DP guarantee (debug or non-private baselines)."""
    details = (("reason", reason),) if reason else ()
    return PrivacySpent(
        epsilon=math.inf,
        delta=1.0,
        neighbouring="add_remove",
        accountant="none",
        mechanism=mechanism,
        seeded_by="none",
        details=details,
    )
