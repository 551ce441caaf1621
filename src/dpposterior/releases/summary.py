"""The table a posterior's ``summary()`` returns: one row per constrained scalar, with the posterior's
warnings attached, so that whoever prints the estimates prints the warnings with them.

Post-processing only: built from posterior draws.
"""

from __future__ import annotations

from statistics import NormalDist
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

#: significant digits of the printed table (the draws are float32: digits beyond about 7 are noise)
PRINT_DIGITS = 4


class PosteriorSummary(list):
    """A list of row dicts (``parameter``, ``mean``, ``sd``, ``robust_sd``, the interval's ends) that also
    carries the posterior's ``warnings`` (a tuple of strings, empty when none).

    ``robust_sd`` is the sd of the normal distribution with the same central interval: the interval's
    width over 2 z, z the standard normal's quantile at (1 + prob) / 2. It equals ``sd`` for normal draws
    and stays with the interval when the draws are heavy-tailed (then ``sd`` can be several times larger).
    ``str()`` gives an aligned table with the values rounded to :data:`PRINT_DIGITS` significant digits,
    followed by the warnings; the row values themselves are not rounded.
    """

    def __init__(self, rows: Iterable[dict[str, Any]] = (), warnings: Sequence[str] = ()) -> None:
        super().__init__(rows)
        self.warnings: tuple[str, ...] = tuple(str(w) for w in warnings)

    def __str__(self) -> str:
        if not self:
            lines = ["(no parameters)"]
        else:
            header = list(self[0])
            cells = [header] + [[_fmt(r[k]) for k in header] for r in self]
            widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
            lines = [
                "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
                for row in cells
            ]
            lines.insert(1, "  ".join("-" * w for w in widths))
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.{PRINT_DIGITS}g}"
    return str(value)


def scalar_labels(name: str, shape: tuple[int, ...]) -> list[str]:
    """The names of a site's scalars in C order, as ArviZ's summary names them: ``name`` for a scalar
    site (shape ()), else ``name[i]`` / ``name[i, j]`` (a site of shape (1,) is ``w[0]``, not ``w``)."""
    if len(shape) == 0:
        return [name]
    return [f"{name}[{', '.join(map(str, idx))}]" for idx in np.ndindex(*shape)]


def interval_labels(prob: float) -> tuple[str, str]:
    """The keys of a central ``prob`` interval's ends: ``"q"`` and each quantile level with the fewest
    significant digits (at least 3) that name it, e.g. q0.05 / q0.95 for 0.9 and q0.0005 / q0.9995 for
    0.999 (three digits alone print the 0.9995 quantile as q1, the maximum)."""
    lo, hi = (1 - prob) / 2, 1 - (1 - prob) / 2
    tol = 1e-6 * min(lo, prob)  # close on the scale of the tails and of the interval itself
    for digits in range(3, 18):
        lo_text, hi_text = f"{lo:.{digits}g}", f"{hi:.{digits}g}"
        if (abs(float(lo_text) - lo) <= tol and abs(float(hi_text) - hi) <= tol and lo_text != hi_text) or digits == 17:
            break
    return f"q{lo_text}", f"q{hi_text}"


def summary_rows(
    draws: Mapping[str, Any], layout: Any, prob: float, num_draws: int, warnings: Sequence[str] = ()
) -> PosteriorSummary:
    """The summary of constrained ``draws`` (one array (num_draws, *site shape) per site) at central
    probability ``prob``: mean, sd (population, ddof 0), robust sd and the interval's ends, in float64.

    Raises:
      ValueError: fewer than 2 draws (one draw has sd 0 and an interval of one point, which would read
        as a posterior with no uncertainty).
    """
    if int(num_draws) < 2:
        raise ValueError(
            f"a summary needs at least 2 draws, got num_samples={num_draws}: one draw has sd 0 and an interval of "
            "one point, which would read as a posterior with no uncertainty (the default is 4000)"
        )
    lo_q, hi_q = (1 - prob) / 2, 1 - (1 - prob) / 2
    lo_key, hi_key = interval_labels(prob)
    z = NormalDist().inv_cdf(hi_q)
    rows = []
    for name, v in draws.items():
        v = np.asarray(v, np.float64).reshape(num_draws, -1)
        shape = layout.sites[layout.names.index(name)].shape
        for j, label in enumerate(scalar_labels(name, shape)):
            col = v[:, j]
            lo, hi = float(np.quantile(col, lo_q)), float(np.quantile(col, hi_q))
            rows.append(
                {
                    "parameter": label,
                    "mean": float(col.mean()),
                    "sd": float(col.std()),
                    "robust_sd": (hi - lo) / (2 * z),
                    lo_key: lo,
                    hi_key: hi,
                }
            )
    return PosteriorSummary(rows, warnings)
