"""Checks that every record's observed values lie in the support of the model's likelihood.

A record outside the support (a negative value under a LogNormal, 0.5 under a Bernoulli, -1 under a
Poisson) has a log likelihood of -inf or NaN, or a finite value of a formula that no longer means
anything (NumPyro does not validate observations by default). DP-SGD zeroes a per-record gradient that
is not finite, so the first kind is silently dropped from the fit and the second silently mis-fitted.
This check refuses such data before any noise is drawn.

It reads the private records, as the checks of :func:`~dpposterior.vi.model_inspect.check_data` (NaN,
dtypes) do: its error message is seen by whoever runs the fit (the data holder) and is never part of a
release. That a release exists reveals that the data passed it (docs/user-guide.md, threat model).
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

import jax.numpy as jnp
import numpy as np
from numpyro import handlers
from numpyro.distributions import MaskedDistribution, constraints

from ..releases.model_inspect import _unwrapped

#: records per model run: bounds the memory of the check on large data.
CHUNK_RECORDS = 65_536
#: prior draws of the latent sites at which a support is compared, to tell a fixed support from one
#: that depends on the latent values (Uniform(0, theta)), which is not checked.
_SEEDS = (0, 1)


def _observed_sites(model: Callable, chunk: tuple[Any, ...], model_kwargs: dict[str, Any], seed: int) -> dict:
    tr = handlers.trace(handlers.seed(model, rng_seed=seed)).get_trace(*chunk, **model_kwargs)
    return {name: s for name, s in tr.items() if s["type"] == "sample" and s["is_observed"]}


def _support_leaves(c: constraints.Constraint) -> list[np.ndarray]:
    """The array parameters of a constraint (bounds), nested constraints included."""
    leaves = []
    for value in vars(c).values():
        if isinstance(value, constraints.Constraint):
            leaves += _support_leaves(value)
        elif isinstance(value, (int, float, np.ndarray, np.generic)) or hasattr(value, "shape"):
            leaves.append(np.asarray(value))
    return leaves


def _same_support(a: constraints.Constraint, b: constraints.Constraint) -> bool:
    if type(a) is not type(b):
        return False
    la, lb = _support_leaves(a), _support_leaves(b)
    return len(la) == len(lb) and all(
        x.shape == y.shape and np.array_equal(x, y, equal_nan=True) for x, y in zip(la, lb)
    )


def _record_mask(site: dict, shape: tuple[int, ...]) -> np.ndarray:
    """Which entries of the support check count: those not masked out (``.mask(m)``, ``handlers.mask``)."""
    keep = np.ones(shape, bool)
    masks = [site.get("mask")]
    fn = site["fn"]
    while hasattr(fn, "base_dist"):
        if isinstance(fn, MaskedDistribution):
            masks.append(fn._mask)
        fn = fn.base_dist
    for m in masks:
        if m is None or m is True:
            continue
        try:
            keep = keep & np.broadcast_to(np.asarray(m, bool), shape)
        except ValueError:  # a mask that does not broadcast to the records: count every entry
            continue
    return keep


def check_observed_support(
    model: Callable, data: tuple[jnp.ndarray, ...], model_kwargs: dict[str, Any], fitter: str = "dpvi"
) -> None:
    """Raises ValueError when records' observed values lie outside their distribution's support.

    The model runs on the data (in chunks of :data:`CHUNK_RECORDS` records) with the latent sites drawn
    from the prior; for every observed site whose support does not depend on the latent values, each
    record's value is checked with the support's ``check`` (entries masked out by ``.mask`` or
    ``handlers.mask`` are not counted). A site whose support depends on the latent values
    (``Uniform(0, theta)``) is not checked: no prior draw can tell which records the fit will accept.
    A model that fails when run here is left to the checks that follow (the DP-SGD engine's own).

    Args:
      model: the NumPyro model, run as ``model(*data, **model_kwargs)``.
      data: the checked data arrays (records on the leading axis).
      model_kwargs: the model's keyword arguments.
      fitter: the name in the message ("dpvi", "dpvim", "numpyro_energy_model").

    Raises:
      ValueError: naming the site, its distribution and support, how many records lie outside, and the
        first of them.
    """
    num_records = int(data[0].shape[0])
    bad: dict[str, list[int]] = {}
    described: dict[str, str] = {}
    skip: set[str] = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NumPyro's out-of-support warnings under validation: we report them
        for start in range(0, num_records, CHUNK_RECORDS):
            chunk = tuple(a[start : start + CHUNK_RECORDS] for a in data)
            seeds = _SEEDS if start == 0 else _SEEDS[:1]  # which supports are fixed: found on the first chunk
            try:
                runs = [_observed_sites(model, chunk, model_kwargs, seed) for seed in seeds]
            except Exception:  # noqa: BLE001 - reported by the engine's checks, with their own messages
                return
            for name, site in runs[0].items():
                if name in skip:
                    continue
                support = site["fn"].support
                if any(name not in r or not _same_support(support, r[name]["fn"].support) for r in runs[1:]):
                    skip.add(name)  # depends on the latent values: not checkable here
                    continue
                try:
                    ok = np.asarray(support.check(jnp.asarray(site["value"])), bool)
                except Exception:  # noqa: BLE001 - a support NumPyro cannot check on this value
                    skip.add(name)
                    continue
                if ok.ndim == 0 or ok.shape[0] != chunk[0].shape[0]:
                    skip.add(name)  # not one row per record (refused elsewhere)
                    continue
                outside = ~ok & _record_mask(site, ok.shape)
                rows = np.nonzero(outside.reshape(ok.shape[0], -1).any(axis=1))[0]
                if rows.size:
                    bad.setdefault(name, []).extend((rows + start).tolist())
                    described[name] = f"{type(_unwrapped(site['fn'])).__name__} with support {support}"
    if bad:
        name = next(iter(bad))
        bad_rows = bad[name]
        raise ValueError(
            f"observed site {name!r} ({described[name]}) has values outside the support in {len(bad_rows)} of "
            f"{num_records} records (the first is record {bad_rows[0]}): their log likelihood is -inf, NaN or "
            f"meaningless, and {fitter} would not fit them as data of the model (a likelihood that is not finite "
            "is dropped, e.g. DP-SGD zeroes its gradient, or breaks an energy bound; a finite but meaningless one "
            "is fitted wrongly). Remove or correct those records, or change the model's likelihood. (This check "
            "reads the data before any release; its message is for you, the data holder, and is not released.)"
        )
