"""A privacy ledger: several releases from the same data, composed into one total.

A user who fits three settings on one table has spent the composition of the three releases, not
the epsilon of any one of them. :class:`Ledger` collects the releases' :class:`PrivacySpent` records
and composes them under the privacy loss distribution (PLD) accountant of dp-accounting:

- Gaussian releases, composed **exactly** (up to the PLD discretisation, which is always
  pessimistic): DP-SGD (mechanism ``"poisson_subsampled_gaussian"``: ``num_steps`` Poisson-sampled
  Gaussian steps at ``sampling_rate`` with ``noise_multiplier``, as in
  :func:`~dpposterior.privacy.dpsgd_epsilon`), the Gaussian mechanism (``"gaussian"``) and the
  penalty MH chain (``"penalty_mh"``: ``num_steps`` Gaussian mechanisms of noise multiplier
  ``noise_multiplier``, no subsampling), and DP-SGLD / DP dropout (mechanisms ``"dp_sgld"`` and
  ``"dp_dropout_gaussian"``, :func:`~dpposterior.privacy.dpd_epsilon`: ``num_steps`` Poisson-sampled
  Gaussian steps whose recorded noise multiplier is the noise std over the sensitivity, 2C under
  replace-one and C under add/remove-one, so dp-accounting's noise std over C is twice the record's
  under replace-one), whichever accountant the record itself was computed with.
- Any other release, **conservatively**, from its (epsilon, delta) alone: its PLD is the
  worst case that any (epsilon, delta)-DP mechanism can have (dp-accounting's
  ``from_privacy_parameters``, the dominating pair of Kairouz, Oh & Viswanath 2015), which is no
  worse than basic composition (epsilons and deltas added; up to the PLD discretisation) and often
  tighter. This covers the
  Laplace sufficient-statistic releases of the baselines and the DP-Fast MH chains (whose own
  record is already a composition).

Neighbouring relations: when every release shares one relation, that relation is used. When they
mix (DP-SGD is analysed under add/remove-one, the DP MCMC chains under replace-one), the total is
given for replace-one adjacency (a replacement is a removal and an addition): DP-SGD steps are
re-accounted by dp-accounting under ``REPLACE_ONE``, a Gaussian mechanism's sensitivity is doubled,
and any other add/remove (epsilon, delta) release becomes (2 epsilon, (1 + e^epsilon) delta) by
group privacy. A release that is not private (epsilon = inf) makes the total not private.

What the ledger refuses to compose, at once and with a ValueError naming the release: a Gaussian
release of more than ``MAX_COMPOSED_STEPS`` self-composed steps, or one whose RDP epsilon at the
total's delta exceeds ``MAX_GAUSSIAN_EPSILON`` (a noise multiplier of 1e-9, say): the PLD grid of
such a release grows until it exhausts memory or runs for minutes, and a release that costly protects
nothing. Record a release without a useful guarantee with :func:`~dpposterior.privacy.spent.not_private`.

Conditional guarantees: a release whose record carries a ``"caveat"`` detail (Entropy-SGLD's prior,
whose epsilon holds only for an exact sample from its Gibbs distribution) keeps it in the total: the
total's ``details`` list every caveat under ``"caveat"`` with its release's label, and its summary says
that the guarantee is conditional.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path
from typing import Any

from .._checks import check_delta, check_output_file, check_positive
from .._io import write_bytes_atomic
from .spent import Neighbouring, PrivacySpent

#: mechanisms the ledger composes exactly as Gaussian events.
DPSGD_MECHANISMS = ("poisson_subsampled_gaussian",)
DPD_MECHANISMS = ("dp_sgld", "dp_dropout_gaussian")
GAUSSIAN_MECHANISMS = ("gaussian", "penalty_mh")

#: the most self-composed steps of one Gaussian release (DP-SGD, DP-SGLD, DP dropout) the ledger composes
#: exactly: the PLD accountant's cost grows with the number of steps, to minutes well before 1e7.
MAX_COMPOSED_STEPS = 10**6
#: the largest epsilon of one Gaussian release, by the RDP accountant at the total's delta, that the
#: ledger composes: the PLD grid grows with the privacy loss (a noise multiplier of 1e-9 asks for more
#: memory than exists), and a release beyond it protects nothing.
MAX_GAUSSIAN_EPSILON = 100.0

#: PLD discretisation: start here, refine by 4x until two values agree to _RTOL (or _MIN reached).
_START_DVI = 1e-2
_MIN_DVI = 1e-5
_RTOL = 1e-3


@dataclasses.dataclass(frozen=True)
class LedgerEntry:
    """One release in a :class:`Ledger`: its privacy record and a label."""

    privacy: PrivacySpent
    label: str


def _as_privacy(release: Any) -> PrivacySpent:
    if isinstance(release, PrivacySpent):
        return release
    privacy = getattr(release, "privacy", None)
    if isinstance(privacy, PrivacySpent):
        return privacy
    raise TypeError(
        "Ledger.add takes a release with a .privacy record (a DPVITrace, a chain result, a "
        f"GaussianRelease, ...) or a PrivacySpent, got {type(release).__name__}"
    )


class Ledger:
    """The releases made from one data set, and what they cost together.

    Example::

        ledger = dpp.privacy.Ledger()
        ledger.add(trace_a)            # a DPVITrace (or any release with .privacy, or a PrivacySpent)
        ledger.add(trace_b.privacy)
        print(ledger.total(delta=1e-5).epsilon)
        ledger.save("ledger.json")     # Ledger.load("ledger.json") later, to keep counting

    Args:
      value_discretization_interval: a fixed PLD discretisation interval, or None (default) to
        refine it until the total has converged to about 0.1% (every value is a valid upper bound;
        the smallest is reported).
    """

    def __init__(self, value_discretization_interval: float | None = None) -> None:
        if value_discretization_interval is not None:
            value_discretization_interval = check_positive(
                value_discretization_interval, "value_discretization_interval"
            )
        self._dvi = value_discretization_interval
        self._entries: list[LedgerEntry] = []

    @property
    def entries(self) -> tuple[LedgerEntry, ...]:
        """The releases added so far, in order."""
        return tuple(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, release: Any, label: str = "") -> PrivacySpent:
        """Records one release (an object with a ``.privacy`` record, or a PrivacySpent); returns its record."""
        if not isinstance(label, str):
            raise TypeError(f"label must be a string, got {type(label).__name__}")
        privacy = _as_privacy(release)
        self._entries.append(LedgerEntry(privacy=privacy, label=label or privacy.mechanism))
        return privacy

    def delta_used(self) -> float:
        """The sum of the deltas of the releases that are composed from their (epsilon, delta) (all
        but the Gaussian DP-SGD, DP-SGLD and Gaussian-mechanism releases, composed exactly): :meth:`total`
        needs a total delta above it (plus the accountant's resolution).

        Each delta is counted as it is composed, under :meth:`neighbouring`: when the relations mix,
        an add/remove release's delta becomes (1 + e^epsilon) delta (group privacy of two records),
        capped at 1."""
        relation = self.neighbouring()
        return float(
            sum(_composed_epsilon_delta(e.privacy, relation)[1] for e in self._entries if not _is_gaussian(e.privacy))
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly record of the entries (see :meth:`save`)."""
        return {
            "format": "dpposterior-ledger",
            "version": 1,
            "entries": [{"label": e.label, "privacy": e.privacy.to_dict()} for e in self._entries],
        }

    def save(self, path: str | os.PathLike) -> Path:
        """Writes the entries as JSON (atomically), so later runs on the same data can add to them.

        Raises:
          TypeError: ``path`` is not a str or os.PathLike.
          ValueError: ``path`` is a folder, or its folder cannot be created or written.
        """
        path = check_output_file(path, "path")
        return write_bytes_atomic(path, (json.dumps(self.to_dict(), indent=1) + "\n").encode("utf-8"))

    @classmethod
    def load(cls, path: str | os.PathLike, value_discretization_interval: float | None = None) -> "Ledger":
        """Reads a ledger written by :meth:`save`; a ValueError says what is wrong with a bad file."""
        path = Path(path)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise FileNotFoundError(f"ledger file {str(path)!r} does not exist") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"cannot read ledger file {str(path)!r}: {e}") from None
        if not isinstance(doc, dict) or doc.get("format") != "dpposterior-ledger" or doc.get("version") != 1:
            raise ValueError(f"{str(path)!r} is not a dpposterior ledger (version 1) file")
        ledger = cls(value_discretization_interval)
        entries = doc.get("entries", [])
        if not isinstance(entries, list):
            raise ValueError(f"ledger file {str(path)!r} must hold a list of entries, got {type(entries).__name__}")
        for item in entries:
            if not isinstance(item, dict) or "privacy" not in item:
                raise ValueError(f"ledger file {str(path)!r} has a malformed entry: {item!r}")
            ledger.add(PrivacySpent.from_dict(item["privacy"]), str(item.get("label", "")))
        return ledger

    def _relations_given(self) -> str:
        relations = {e.privacy.neighbouring for e in self._entries}
        return relations.pop() if len(relations) == 1 else "mixed"

    def neighbouring(self) -> Neighbouring:
        """The relation the total holds for: the shared one, or ``"replace_one"`` when they mix."""
        relations = {e.privacy.neighbouring for e in self._entries}
        return relations.pop() if len(relations) == 1 else "replace_one"

    def total(self, delta: float) -> PrivacySpent:
        """The (epsilon, delta) of all the releases together, at the given total ``delta``.

        Returns:
          A PrivacySpent with ``accountant="pld(ledger)"`` (or ``"none"`` if a release is not
          private) whose ``details`` list the parts.

        Raises:
          ValueError: an empty ledger, an invalid delta, a delta below what the releases'
            own deltas already use (:meth:`delta_used`: no finite epsilon exists then), a release
            whose delta as composed is 1 (an add/remove (epsilon, delta) release in a replace-one
            total when (1 + e^epsilon) delta >= 1, or a delta of 1), a release whose epsilon is
            too large to compose (above about 700), or a Gaussian release the PLD accountant cannot
            compose in reasonable time and memory (more than ``MAX_COMPOSED_STEPS`` steps, or an RDP
            epsilon above ``MAX_GAUSSIAN_EPSILON``); each checked before any composition, so that such a
            ledger fails at once.

        A release whose record carries a ``"caveat"`` (a guarantee that holds only under a stated
        assumption) passes it on: the total's ``details`` hold ``("caveat", ...)`` naming each such
        release, and its :meth:`~dpposterior.privacy.PrivacySpent.summary` says the guarantee is
        conditional.
        """
        delta = check_delta(delta)
        if not self._entries:
            raise ValueError("the ledger is empty: add releases before asking for their total")
        parts = tuple((e.label, e.privacy.summary()) for e in self._entries)
        relation = self.neighbouring()
        caveats = tuple(f"{e.label}: {e.privacy.detail('caveat')}" for e in self._entries if e.privacy.detail("caveat"))
        caveat = (("caveat", "; ".join(caveats)),) if caveats else ()
        if any(not e.privacy.is_private for e in self._entries):
            return PrivacySpent(
                epsilon=math.inf,
                delta=1.0,
                neighbouring=relation,
                accountant="none",
                mechanism="composition",
                num_steps=len(self._entries),
                seeded_by="none",
                details=(("parts", parts), ("reason", "at least one release is not private")) + caveat,
            )
        for e in self._entries:  # before any composition: an uncomposable release fails at once
            _check_composable(e, relation, delta)
        epsilon = self._epsilon(delta, relation)
        seeding = {e.privacy.seeded_by for e in self._entries}
        seeded_by = seeding.pop() if len(seeding) == 1 else ("user" if "user" in seeding else "os")
        exact = sum(1 for e in self._entries if _is_gaussian(e.privacy))
        return PrivacySpent(
            epsilon=epsilon,
            delta=delta,
            neighbouring=relation,
            accountant="pld(ledger)",
            mechanism="composition",
            num_steps=len(self._entries),
            seeded_by=seeded_by,
            details=(
                ("parts", parts),
                ("composed_exactly", exact),
                ("composed_from_epsilon_delta", len(self._entries) - exact),
            )
            + caveat,
        )

    # ---------------------------------------------------------------------------------------------

    def _epsilon(self, delta: float, relation: str) -> float:
        if self._dvi is not None:
            return self._epsilon_at(delta, relation, self._dvi)
        dvi, best, previous = _START_DVI, math.inf, None
        while True:
            eps = self._epsilon_at(delta, relation, dvi)
            best = min(best, eps)
            if previous is not None and abs(previous - eps) <= max(_RTOL * best, 1e-6):
                return best
            if dvi <= _MIN_DVI or best == 0.0:
                return best
            previous, dvi = eps, max(dvi / 4.0, _MIN_DVI)

    def _epsilon_at(self, delta: float, relation: str, dvi: float) -> float:
        pld = None
        for e in self._entries:
            try:
                part = _pld_of(e.privacy, relation, dvi)
            except OverflowError as err:  # dp-accounting computes e^epsilon
                raise ValueError(
                    f"the PLD accountant cannot compose release {e.label!r} (epsilon={e.privacy.epsilon!r}, "
                    f"{e.privacy.neighbouring}; doubled when converted to replace-one): e^epsilon overflows "
                    "(epsilon above about 700); such a release protects nothing, record it with "
                    "not_private() instead"
                ) from err
            except (MemoryError, ValueError) as err:  # e.g. numpy's "Maximum allowed size exceeded"
                raise ValueError(
                    f"the PLD accountant cannot compose release {e.label!r} ({e.privacy.summary()}): "
                    f"{type(err).__name__}: {err}; record a release without a useful guarantee with "
                    "not_private()"
                ) from err
            pld = part if pld is None else pld.compose(part)
        if pld is None:  # total() refuses an empty ledger before composing
            raise ValueError("the ledger is empty: add releases before asking for their total")
        try:
            eps = float(pld.get_epsilon_for_delta(delta))
        except (ValueError, OverflowError) as err:  # pragma: no cover - dp-accounting internals
            raise ValueError(f"the PLD accountant cannot compose these releases at delta={delta!r}: {err}") from err
        if math.isinf(eps):
            converted = " (as composed under replace-one adjacency)" if relation != self._relations_given() else ""
            raise ValueError(
                f"no finite epsilon at total delta={delta!r}: the releases' own deltas{converted} (sum "
                f"{self.delta_used():.3g}) and the accountant's resolution need a larger total delta"
            )
        return max(eps, 0.0)


def _is_gaussian(p: PrivacySpent) -> bool:
    return p.noise_multiplier is not None and (
        p.mechanism in DPSGD_MECHANISMS
        or p.mechanism in DPD_MECHANISMS
        or (p.mechanism in GAUSSIAN_MECHANISMS and p.sampling_rate == 1.0)
    )


def _gaussian_sigma(p: PrivacySpent) -> float:
    """The noise multiplier of a release :func:`_is_gaussian` accepts (such a release always has one)."""
    if p.noise_multiplier is None:
        raise ValueError(f"release {p.summary()} has no noise multiplier: it is not a Gaussian release")
    return p.noise_multiplier


def _pld_of(p: PrivacySpent, relation: str, dvi: float):
    """The PLD of one release under ``relation`` (see the module docstring)."""
    from dp_accounting.pld import common
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    from .dpsgd_accounting import _RELATIONS

    convert = p.neighbouring != relation  # only add_remove -> replace_one happens
    if p.noise_multiplier is not None and (p.mechanism in DPSGD_MECHANISMS or p.mechanism in DPD_MECHANISMS):
        # dp-accounting's noise multiplier is the noise std over the clip C, under either relation (its
        # REPLACE_ONE moves one record's contribution by 2C); a DP-SGLD record's is over its sensitivity
        std_over_clip = p.noise_multiplier * (
            2.0 if p.mechanism in DPD_MECHANISMS and p.neighbouring == "replace_one" else 1.0
        )
        run = pld_lib.from_gaussian_mechanism(
            standard_deviation=std_over_clip,
            value_discretization_interval=dvi,
            sampling_prob=p.sampling_rate,
            neighboring_relation=_RELATIONS[relation],
        ).self_compose(p.num_steps)
        extra = p.detail("extra_gaussian")
        if p.mechanism in DPSGD_MECHANISMS and extra is not None:
            # a pre-release of the same run (the private clip choice, the clip check): one Gaussian
            # mechanism of sensitivity 1 (2 once add/remove is read as replace-one)
            run = run.compose(
                pld_lib.from_gaussian_mechanism(
                    standard_deviation=float(extra),
                    sensitivity=2.0 if convert else 1.0,
                    value_discretization_interval=dvi,
                )
            )
        return run
    if _is_gaussian(p):
        # T Gaussian mechanisms of noise multiplier sigma = one of sigma / sqrt(T); sensitivity 1
        # in units of the release's own sensitivity (2 after add/remove -> replace-one).
        return pld_lib.from_gaussian_mechanism(
            standard_deviation=_gaussian_sigma(p) / math.sqrt(p.num_steps),
            sensitivity=2.0 if convert else 1.0,
            value_discretization_interval=dvi,
        )
    eps, dlt = _composed_epsilon_delta(p, relation)
    return pld_lib.from_privacy_parameters(
        common.DifferentialPrivacyParameters(eps, dlt), value_discretization_interval=dvi
    )


def _composed_epsilon_delta(p: PrivacySpent, relation: str) -> tuple[float, float]:
    """The (epsilon, delta) a release composed from its (epsilon, delta) has under ``relation``: its
    own, or for an add/remove release in a replace-one total (a replacement is a removal and an
    addition) (2 epsilon, (1 + e^epsilon) delta) by group privacy, the delta capped at 1."""
    eps, dlt = float(p.epsilon), float(p.delta)
    if p.neighbouring != relation:  # only add_remove -> replace_one happens
        eps, dlt = 2.0 * eps, min(dlt * (1.0 + math.exp(min(eps, 700.0))), 1.0)
    return eps, dlt


def _gaussian_cost_problem(p: PrivacySpent, relation: str, delta: float) -> str | None:
    """Why the PLD accountant cannot compose the Gaussian release ``p`` in reasonable time and memory
    (see ``MAX_COMPOSED_STEPS``, ``MAX_GAUSSIAN_EPSILON``), or None. The epsilon is dp-accounting's RDP
    bound at ``delta`` (cheap for any setting) of the release as the ledger composes it; it decides only
    what is composed, never a reported total."""
    from .dpsgd_accounting import _epsilon_raw

    if p.mechanism in DPSGD_MECHANISMS or p.mechanism in DPD_MECHANISMS:
        if p.num_steps > MAX_COMPOSED_STEPS:
            return (
                f"it has {p.num_steps} self-composed steps, more than the {MAX_COMPOSED_STEPS} the PLD "
                "accountant composes in reasonable time"
            )
        std = _gaussian_sigma(p) * (2.0 if p.mechanism in DPD_MECHANISMS and p.neighbouring == "replace_one" else 1.0)
        std = std / (2.0 if relation == "replace_one" else 1.0)  # a replacement moves a sum by up to 2C
        q, steps = p.sampling_rate, p.num_steps
    else:  # T Gaussian mechanisms = one of noise multiplier sigma / sqrt(T)
        std = _gaussian_sigma(p) / math.sqrt(p.num_steps) / (2.0 if p.neighbouring != relation else 1.0)
        q, steps = 1.0, 1
    try:
        eps = _epsilon_raw(std, delta, q, steps, "rdp", 0.0)
    except (ArithmeticError, ValueError):
        eps = math.inf
    if eps > MAX_GAUSSIAN_EPSILON:
        return (
            f"its noise multiplier {p.noise_multiplier!r} over {p.num_steps} steps at sampling rate "
            f"{p.sampling_rate!r} gives an epsilon above {MAX_GAUSSIAN_EPSILON:g} (RDP bound {eps:.3g} at "
            f"delta {delta:g}): the PLD accountant's grid for it would exhaust memory or run for minutes, "
            "and a release that costly protects nothing"
        )
    return None


def _check_composable(entry: LedgerEntry, relation: str, delta: float) -> None:
    """A ValueError for a release the ledger cannot compose: a guarantee whose delta, as composed, is 1
    (it bounds nothing, and dp-accounting fails on it with a bare IndexError when composed with another
    release), or a Gaussian release beyond what the PLD accountant composes (:func:`_gaussian_cost_problem`)."""
    p = entry.privacy
    if _is_gaussian(p):
        why = _gaussian_cost_problem(p, relation, delta)
        if why is not None:
            raise ValueError(
                f"the ledger cannot compose release {entry.label!r}: {why}. Allowed: at most "
                f"{MAX_COMPOSED_STEPS} steps and epsilon up to {MAX_GAUSSIAN_EPSILON:g} per Gaussian "
                "release (record a release without a useful guarantee with not_private())"
            )
        return
    eps, dlt = _composed_epsilon_delta(p, relation)
    if dlt < 1.0:
        return
    if p.delta >= 1.0:
        why = f"its delta is {p.delta!r}: an (epsilon, 1)-DP guarantee bounds nothing"
    else:
        why = (
            f"it is ({p.epsilon!r}, {p.delta!r})-DP under add/remove-one adjacency, and the total is for "
            "replace-one adjacency (the releases' relations mix); by group privacy a replacement then costs "
            f"(2 epsilon, (1 + e^epsilon) delta) = ({eps:.4g}, {p.delta * (1.0 + math.exp(min(p.epsilon, 700.0))):.3g}),"
            " a delta of at least 1"
        )
    raise ValueError(
        f"the ledger cannot compose release {entry.label!r}: {why}, so no total (epsilon, delta) "
        "below 1 exists (record a release without a guarantee with not_private())"
    )
