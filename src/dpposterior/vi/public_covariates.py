"""The public sample of a regression's covariates that ``dpvi(..., public_covariates=...)`` takes.

A regression's curvature depends on its covariates, whose distribution the model does not state. Given a
public sample of them (a public survey of the same population, or a design drawn from a distribution the
data holder can state publicly), dpvi simulates records from it and the model and computes the model's
curvature terms (:mod:`dpposterior.vi.model_curvature`). ``noise_aware_posterior`` uses them on request
(``priors="model"``), not by default: on the calibration suite's regressions they calibrated a weakly
identified logistic regression but made the Poisson and probit regressions under-cover more than the
trace's slope. Those terms are released with the trace without noise, so the sample must never be the
private records, nor derived from them.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from .model_curvature import argument_sites

__all__ = ["check_public_covariates"]


def check_public_covariates(
    public_covariates: Sequence[Any] | None,
    data: tuple[Any, ...],
    model: Callable,
    model_kwargs: dict[str, Any],
) -> tuple[np.ndarray | None, ...] | None:
    """``public_covariates`` checked against the private ``data`` (shapes and dtypes) and the model.

    Args:
      public_covariates: None, or one entry per data argument: None for an argument the model observes
        (the observed value of a sample site, simulated from the model), else a public sample of that
        argument's records, with the argument's trailing shape; the given samples share their number of rows.
      data: the private data arrays (read for their shapes and dtypes, and to refuse a sample equal to them).
      model, model_kwargs: the model, traced on placeholders to tell observed arguments from covariates.

    Returns:
      The samples as numpy arrays (None where not given), or None where ``public_covariates`` is None.

    Raises:
      TypeError: not a sequence of arrays and None.
      ValueError: the wrong number of entries, no sample given, a shape or row count that does not fit, a
        value that is not finite, a sample equal to the private argument, a sample given for an argument the
        model observes, or an argument that is neither observed nor given.
    """
    if public_covariates is None:
        return None
    if isinstance(public_covariates, (str, bytes)) or not isinstance(public_covariates, Sequence):
        raise TypeError(
            "public_covariates must be a tuple with one entry per data argument (None, or a public sample of "
            f"that argument's records), got {type(public_covariates).__name__}"
        )
    if len(public_covariates) != len(data):
        raise ValueError(
            f"public_covariates must have one entry per data argument ({len(data)}), got {len(public_covariates)}"
        )
    out: list[np.ndarray | None] = []
    for i, (sample, private) in enumerate(zip(public_covariates, data)):
        if sample is None:
            out.append(None)
            continue
        if sample is private:
            raise ValueError(_private_message(i))
        try:
            arr = np.asarray(sample)
        except Exception as e:  # noqa: BLE001 - name what was wrong
            raise TypeError(f"public_covariates[{i}] must be an array, got {type(sample).__name__}") from e
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"public_covariates[{i}] must hold real numbers, got dtype {arr.dtype}")
        want = tuple(np.shape(private)[1:])
        if arr.ndim != np.ndim(private) or tuple(arr.shape[1:]) != want or arr.shape[0] < 1:
            raise ValueError(
                f"public_covariates[{i}] must have shape (m,) + {want} with m >= 1 rows, like data argument {i} "
                f"of shape {tuple(np.shape(private))}; got {arr.shape}"
            )
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"public_covariates[{i}] holds NaN or inf")
        if arr.shape == np.shape(private) and bool(np.array_equal(arr, np.asarray(private))):
            raise ValueError(_private_message(i))
        out.append(arr)
    given = [a for a in out if a is not None]
    if not given:
        raise ValueError("public_covariates gives no sample: pass None instead, or a sample for each covariate")
    rows = {a.shape[0] for a in given}
    if len(rows) != 1:
        raise ValueError(
            f"the samples of public_covariates must share their number of rows (records), got {sorted(rows)}"
        )
    sites = argument_sites(model, data, model_kwargs)
    if sites is None:
        raise ValueError(
            "public_covariates needs a model that runs on placeholder data of the data's shapes, to tell its "
            "observed arguments from its covariates; this model does not"
        )
    for i, (site, sample) in enumerate(zip(sites, out)):
        if sample is not None and site is not None:
            raise ValueError(
                f"public_covariates[{i}] gives a sample for data argument {i}, which the model observes (the value "
                f"of sample site {site!r}); pass None there: the model simulates it"
            )
        if sample is None and site is None:
            raise ValueError(
                f"data argument {i} is not the observed value of a sample site (a covariate), so "
                f"public_covariates[{i}] must give a public sample of it"
            )
    return tuple(out)


def _private_message(i: int) -> str:
    return (
        f"public_covariates[{i}] equals private data argument {i}: the curvature terms computed from it are "
        "released with the trace without noise, so it must be a public sample (a public survey of the same "
        "population, or a design drawn from a distribution you can state publicly), never the private records"
    )
