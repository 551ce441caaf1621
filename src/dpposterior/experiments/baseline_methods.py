"""The papers' baselines as coverage-cell methods with their own DP mechanism (``needs_data=True``).

Each wraps a coverage-cell function of :mod:`dpposterior.baselines.cells`: it releases each of the
group's K synthetic data sets (:class:`~.methods.CellData`) by the baseline's mechanism under the
cell's budget, post-processes the release vectorised over the replicates and returns a
:class:`~.methods.MethodOutput` in NA-DPVI's unconstrained space with the release's ``privacy``:

* ``"bernstein-sheldon"``: Laplace-noised sufficient statistics, pure epsilon-DP, then Bernstein &
  Sheldon's noise-aware Gibbs sampler (NeurIPS 2018). Exponential families only: beta-bernoulli,
  dirichlet-categorical, gamma-exponential.
* ``"gibbs-ss-noisy"``: Laplace-noised regression statistics of clipped records, pure epsilon-DP,
  then Gibbs-SS-Noisy (Bernstein & Sheldon, NeurIPS 2019). linear-regression only.
* ``"dpvim"``: DPVIm's own Poisson-subsampled Gaussian DP-SGD run per replicate with the cell's
  (epsilon, delta), T, q and accountant, read as a Gaussian. Every model.

Threat model: the data are the synthetic data sets of an experiment, simulated from the cell's fixed
keys (:func:`.replicates.simulate_data`), and the mechanisms' noise is drawn from
:func:`.config.mechanism_key` (recorded as ``seeded_by="user"``): a reproducible experiment, not a
release of anyone's data. This module and the mechanisms it calls are the only code of the coverage
engine that reads data sets; the post-processing methods of :mod:`.methods` never receive them.

Options (``CellConfig.method_options``; values are numbers, strings, booleans or None, so that a
configuration stays hashable and JSON-ready; pairs are written as strings):

* ``bernstein-sheldon``: ``num_warmup`` (sweeps discarded, default 1,000), ``thin`` (sweeps per kept
  draw, default :data:`dpposterior.baselines.cells.DEFAULT_THIN`), ``bounds`` (gamma-exponential
  only: ``"lo,hi"``, the clipping interval fixed in advance, default ``"0,5"``), ``neighbouring``
  (``"add_remove"``, default, or ``"replace_one"``), ``snapping`` (False, default: the papers' plain
  Laplace release; True: Mironov's snapping mechanism, :mod:`dpposterior.privacy.snapping`).
* ``gibbs-ss-noisy``: ``num_warmup`` (1,000), ``thin`` (5), ``interweave`` (True), ``x_bound`` (3),
  ``y_bound`` (5), ``fourth_moments`` (``"normal"``, default, or ``"released"``), ``budget_split``
  (e.g. ``"xx=0.4,xy=0.4,yy=0.2"``, with ``x4`` too when the fourth moments are released; default
  equal shares), ``neighbouring``, ``snapping`` (as for bernstein-sheldon).
* ``dpvim``: ``clip`` (default the model's DPVI clip), ``natural_gradient`` (False), ``reading``
  (``"noise_aware"``, default, or ``"averaged"``), ``lr_mu`` and ``lr_rho`` (both or neither;
  default :func:`dpposterior.vi._dpvim.default_learning_rates`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..baselines import cells as BC
from ..releases.statistics import FAMILIES
from .methods import CellData, CellReleases, MethodOutput, MethodSettings, register_method

NEIGHBOURING = ("add_remove", "replace_one")


# ------------------------------------------------------------------------------ option checks


def _int_option(options: dict[str, Any], name: str, minimum: int) -> None:
    v = options.get(name)
    if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < minimum):
        raise ValueError(f"option {name} must be an integer >= {minimum}, got {v!r}")


def _positive_option(options: dict[str, Any], name: str) -> None:
    v = options.get(name)
    if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0):
        raise ValueError(f"option {name} must be a finite number > 0, got {v!r}")


def _choice_option(options: dict[str, Any], name: str, allowed: tuple[Any, ...]) -> None:
    v = options.get(name)
    if v is not None and (isinstance(v, bool) != isinstance(allowed[0], bool) or v not in allowed):
        raise ValueError(f"option {name} must be one of {list(allowed)}, got {v!r}")


def parse_bounds(text: Any) -> tuple[float, float]:
    """``"lo,hi"`` -> (lo, hi) with 0 <= lo < hi finite (the gamma-exponential clipping interval)."""
    try:
        lo, hi = (float(x) for x in str(text).split(","))
    except ValueError:
        raise ValueError(f"option bounds must be a string 'lo,hi' of two numbers, got {text!r}") from None
    if not isinstance(text, str) or not (math.isfinite(lo) and math.isfinite(hi) and 0 <= lo < hi):
        raise ValueError(f"option bounds must be a string 'lo,hi' with 0 <= lo < hi finite, got {text!r}")
    return lo, hi


def parse_budget_split(text: Any) -> dict[str, float]:
    """``"xx=0.4,xy=0.4,yy=0.2"`` -> {"xx": 0.4, "xy": 0.4, "yy": 0.2} (shares checked by the release:
    the parts must be exactly xx, xy, yy (and x4 with released fourth moments) and sum to 1)."""
    if not isinstance(text, str):
        raise ValueError(f"option budget_split must be a string like 'xx=0.4,xy=0.4,yy=0.2', got {text!r}")
    out: dict[str, float] = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        try:
            share = float(value)
        except ValueError:
            share = math.nan
        name = name.strip()
        if not sep or name not in ("xx", "xy", "yy", "x4") or name in out or not (math.isfinite(share) and share > 0):
            raise ValueError(
                f"option budget_split must be a string like 'xx=0.4,xy=0.4,yy=0.2' (parts xx, xy, yy "
                f"and, with released fourth moments, x4; each share > 0, summing to 1), got {text!r}"
            )
        out[name] = share
    return out


def _canonical_baseline(floats: tuple[str, ...]):
    """The baselines' ``canonical_options``: None is the default (``_get``), so it is left out; the
    real-valued options ``floats`` are floats; ``bounds`` and ``budget_split`` are written with canonical
    numbers (``"0.0,5.0"`` -> ``"0,5"``) and ``budget_split`` in the order xx, xy, yy, x4."""
    from .methods import canonical_number, float_options

    plain = float_options(floats, drop_none=True)

    def canonical(options: dict[str, Any]) -> dict[str, Any]:
        out = plain(options)
        if "bounds" in out:
            out["bounds"] = ",".join(canonical_number(v) for v in parse_bounds(out["bounds"]))
        if "budget_split" in out:
            split = parse_budget_split(out["budget_split"])
            out["budget_split"] = ",".join(
                f"{k}={canonical_number(split[k])}" for k in ("xx", "xy", "yy", "x4") if k in split
            )
        return out

    return canonical


def _check_bernstein_sheldon(options: dict[str, Any], model: str | None = None) -> None:
    _int_option(options, "num_warmup", 0)
    _int_option(options, "thin", 1)
    _choice_option(options, "neighbouring", NEIGHBOURING)
    _choice_option(options, "snapping", (True, False))
    if options.get("bounds") is not None:
        if model is not None and model != "gamma-exponential":
            raise ValueError(f"option bounds applies only to gamma-exponential records, not to {model!r}")
        parse_bounds(options["bounds"])


def _check_gibbs_ss_noisy(options: dict[str, Any], model: str | None = None) -> None:
    _int_option(options, "num_warmup", 0)
    _int_option(options, "thin", 1)
    _choice_option(options, "interweave", (True, False))
    _choice_option(options, "snapping", (True, False))
    _positive_option(options, "x_bound")
    _positive_option(options, "y_bound")
    _choice_option(options, "fourth_moments", ("normal", "released"))
    _choice_option(options, "neighbouring", NEIGHBOURING)
    if options.get("budget_split") is not None:
        split = parse_budget_split(options["budget_split"])
        parts = {"xx", "xy", "yy"} | ({"x4"} if options.get("fourth_moments") == "released" else set())
        if set(split) != parts or abs(sum(split.values()) - 1.0) > 1e-9:
            raise ValueError(
                f"option budget_split must give shares for exactly the parts {sorted(parts)}, summing "
                f"to 1, got {options['budget_split']!r}"
            )


def _check_dpvim(options: dict[str, Any], model: str | None = None) -> None:
    _positive_option(options, "clip")
    _choice_option(options, "natural_gradient", (True, False))
    _choice_option(options, "reading", ("noise_aware", "averaged"))
    _positive_option(options, "lr_mu")
    _positive_option(options, "lr_rho")
    if (options.get("lr_mu") is None) != (options.get("lr_rho") is None):
        raise ValueError("options lr_mu and lr_rho go together: give both learning rates or neither")


# ------------------------------------------------------------------------------ methods


def _get(options: dict[str, Any], name: str, default: Any) -> Any:
    """An option's value, ``default`` when it is absent or None."""
    v = options.get(name)
    return default if v is None else v


def _output(out: BC.BaselineCellOutput) -> MethodOutput:
    from .cell import json_ready_diagnostics  # the cell stores diagnostics this way: the same conversion

    diagnostics = json_ready_diagnostics(out.diagnostics, str(out.diagnostics.get("method", "baseline")))
    return MethodOutput(
        draws=np.asarray(out.draws, np.float32),
        posterior_sd=np.asarray(out.posterior_sd, np.float64),
        diagnostics=diagnostics,
        privacy=out.privacy,
    )


def _check_data(data: CellData, settings: MethodSettings) -> None:
    if not isinstance(data, CellData):
        raise TypeError(f"a method with its own mechanism needs the cell's CellData, got {type(data).__name__}")
    if settings.mechanism_key is None:
        raise ValueError("a method with its own mechanism needs settings.mechanism_key (the cell's fixed key)")


def bernstein_sheldon_method(releases: CellReleases | None, settings: MethodSettings, data: CellData) -> MethodOutput:
    """Bernstein & Sheldon noise-aware Gibbs on each replicate's Laplace-noised sufficient statistic.

    Privacy: pure epsilon-DP per replicate (the cell's epsilon), Laplace mechanism on the sufficient
    statistic (:func:`dpposterior.baselines.release_sufficient_statistics`), add/remove-one
    neighbours by default, N public. The DPVI ``releases`` are not used.
    """
    _check_data(data, settings)
    opts = dict(settings.options)
    _check_bernstein_sheldon(opts, data.model)
    bounds = parse_bounds(opts["bounds"]) if opts.get("bounds") is not None else None
    out = BC.bernstein_sheldon_cell(
        data.model,
        data.arrays,
        data.epsilon,
        settings.mechanism_key,
        settings.num_draws,
        bounds=bounds,
        num_warmup=_get(opts, "num_warmup", 1000),
        thin=opts.get("thin"),
        neighbouring=_get(opts, "neighbouring", "add_remove"),
        snapping=_get(opts, "snapping", False),
        devices=settings.devices,
    )
    return _output(out)


def gibbs_ss_noisy_method(releases: CellReleases | None, settings: MethodSettings, data: CellData) -> MethodOutput:
    """Gibbs-SS-Noisy on each replicate's Laplace-noised regression statistics of clipped records.

    Privacy: pure epsilon-DP per replicate (the cell's epsilon, split over the statistics' parts by
    sequential composition; :func:`dpposterior.baselines.release_regression_statistics`),
    clipping bounds fixed in advance, add/remove-one neighbours by default, N public. The DPVI
    ``releases`` are not used.
    """
    _check_data(data, settings)
    opts = dict(settings.options)
    _check_gibbs_ss_noisy(opts, data.model)
    split = parse_budget_split(opts["budget_split"]) if opts.get("budget_split") is not None else None
    out = BC.gibbs_ss_noisy_cell(
        data.arrays,
        data.epsilon,
        settings.mechanism_key,
        settings.num_draws,
        x_bound=_get(opts, "x_bound", BC.DEFAULT_X_BOUND),
        y_bound=_get(opts, "y_bound", BC.DEFAULT_Y_BOUND),
        fourth_moments=_get(opts, "fourth_moments", "normal"),
        budget_split=split,
        num_warmup=_get(opts, "num_warmup", 1000),
        thin=_get(opts, "thin", 5),
        interweave=_get(opts, "interweave", True),
        neighbouring=_get(opts, "neighbouring", "add_remove"),
        snapping=_get(opts, "snapping", False),
        devices=settings.devices,
    )
    return _output(out)


def dpvim_method(releases: CellReleases | None, settings: MethodSettings, data: CellData) -> MethodOutput:
    """DPVIm: its own DP-SGD run per replicate (the cell's epsilon, delta, T, q and accountant), read as
    a Gaussian.

    Privacy: Poisson-subsampled Gaussian DP-SGD, add/remove-one neighbours, the location gradient
    clipped to ``clip`` (default the model's DPVI clip), sigma calibrated by the cell's accountant
    (:func:`dpposterior.baselines.cells.dpvim_cell`). The DPVI ``releases`` are not used: DPVIm spends
    the cell's budget on its own run.
    """
    _check_data(data, settings)
    opts = dict(settings.options)
    _check_dpvim(opts, data.model)
    lr = None if opts.get("lr_mu") is None else (float(opts["lr_mu"]), float(opts["lr_rho"]))
    out = BC.dpvim_cell(
        data.model,
        data.arrays,
        data.epsilon,
        settings.mechanism_key,
        settings.num_draws,
        delta=data.delta,
        num_steps=data.num_steps,
        sampling_rate=data.sampling_rate,
        clip=_get(opts, "clip", data.clip),
        natural_gradient=_get(opts, "natural_gradient", False),
        learning_rate=lr,
        reading=_get(opts, "reading", "noise_aware"),
        accountant=data.accountant,
        devices=settings.devices,
    )
    return _output(out)


register_method(
    "bernstein-sheldon",
    bernstein_sheldon_method,
    options=("num_warmup", "thin", "bounds", "neighbouring", "snapping"),
    description="Bernstein-Sheldon noise-aware Gibbs on Laplace-noised sufficient statistics (own "
    "pure epsilon-DP release)",
    needs_data=True,
    models=FAMILIES,
    check_options=_check_bernstein_sheldon,
    canonical_options=_canonical_baseline(()),
)
register_method(
    "gibbs-ss-noisy",
    gibbs_ss_noisy_method,
    options=(
        "num_warmup",
        "thin",
        "interweave",
        "x_bound",
        "y_bound",
        "fourth_moments",
        "budget_split",
        "neighbouring",
        "snapping",
    ),
    description="Gibbs-SS-Noisy on Laplace-noised regression statistics (own pure epsilon-DP release)",
    needs_data=True,
    models=("linear-regression",),
    check_options=_check_gibbs_ss_noisy,
    canonical_options=_canonical_baseline(("x_bound", "y_bound")),
)
register_method(
    "dpvim",
    dpvim_method,
    options=("clip", "natural_gradient", "reading", "lr_mu", "lr_rho"),
    description="DPVIm, its own DP-SGD run per replicate (same epsilon, delta, T, q), Gaussian reading",
    needs_data=True,
    models=None,
    check_options=_check_dpvim,
    min_steps=BC.DPVIM_MIN_STEPS,
    canonical_options=_canonical_baseline(("clip", "lr_mu", "lr_rho")),
)
