"""Checks that every record's observed values lie in the support of the model's likelihood.

A record outside the support (a negative value under a LogNormal, 0.5 under a Bernoulli, -1 under a
Poisson) has a log likelihood of -inf or NaN, or a finite value of a formula that no longer means
anything (NumPyro does not validate observations by default). DP-SGD zeroes a per-record gradient that
is not finite, so the first kind is silently dropped from the fit and the second silently mis-fitted.
This check refuses such data before any noise is drawn. So does :func:`check_indices` for an index
out of bounds (a group id past the number of groups), which JAX clamps silently.

It reads the private records, as the checks of :func:`~dpposterior.vi.model_inspect.check_data` (NaN,
dtypes) do: its error message is seen by whoever runs the fit (the data holder) and is never part of a
release. That a release exists reveals that the data passed it (docs/user-guide.md, threat model).
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify
from numpyro import handlers
from numpyro.distributions import MaskedDistribution, constraints

from ..releases.model_inspect import _unwrapped

#: records per model run: bounds the memory of the check on large data.
CHUNK_RECORDS = 65_536
#: prior draws of the latent sites at which a support is compared, to tell a fixed support from one
#: that depends on the latent values (Uniform(0, theta)), which is refused.
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


def _raise_if_values_cause(
    error: Exception, model: Callable, chunk: tuple[Any, ...], model_kwargs: dict[str, Any], fitter: str
) -> None:
    """Raises ValueError when the model failed on the records' values, not on their shapes.

    The model is traced once more on abstract arrays of the same shapes and dtypes. NumPyro validates
    some arguments only on concrete values (``handlers.scale`` refuses weights <= 0) and skips the
    check under tracing, as in the DP-SGD engine: a model that traces but fails on the values would be
    fitted there without the check. A model that fails on the shapes too is left to the engine's checks,
    which name the shape or argument at fault.
    """

    def run(*arrays: Any) -> int:
        handlers.trace(handlers.seed(model, rng_seed=0)).get_trace(*arrays, **model_kwargs)
        return 0

    try:
        jax.eval_shape(run, *chunk)
    except Exception:  # noqa: BLE001 - it fails on the shapes: the engine's checks report it
        return
    raise ValueError(
        f"the model raised {type(error).__name__} when run on the records ({error}), but not on arrays of their "
        f"shapes and dtypes: the records' values cause it. Under {fitter}'s compiled run NumPyro skips checks "
        "that need concrete values (handlers.scale weights must be > 0, for example), so the model would be "
        "fitted as it is. Correct those values or the model. (This check reads the data before any release; "
        "its message is for you, the data holder, and is not released.)"
    ) from error


def check_observed_support(
    model: Callable, data: tuple[jnp.ndarray, ...], model_kwargs: dict[str, Any], fitter: str = "dpvi"
) -> None:
    """Raises ValueError when records' observed values lie outside their distribution's support.

    The model runs on the data (in chunks of :data:`CHUNK_RECORDS` records) with the latent sites drawn
    from the prior; for every observed site whose support does not depend on the latent values, each
    record's value is checked with the support's ``check`` (entries masked out by ``.mask`` or
    ``handlers.mask`` are not counted). A site whose support depends on the latent values
    (``Uniform(0, theta)``: it differs between two prior draws) is refused: NumPyro's ``log_prob`` does
    not enforce a support, so every record outside it would get a finite, meaningless likelihood
    (``-log theta``), whose gradient pulls theta below the data, and the fit would be confidently wrong.
    A model that fails when run on the records but traces on abstract arrays of their shapes is refused
    (the values cause the failure, e.g. a ``handlers.scale`` weight <= 0, which NumPyro checks only on
    concrete values); one that fails on the shapes too is left to the checks that follow (the DP-SGD
    engine's own).

    Args:
      model: the NumPyro model, run as ``model(*data, **model_kwargs)``.
      data: the checked data arrays (records on the leading axis).
      model_kwargs: the model's keyword arguments.
      fitter: the name in the message ("dpvi", "dpvim", "numpyro_energy_model").

    Raises:
      ValueError: naming the site, its distribution and support, how many records lie outside, and the
        first of them; naming a site whose support depends on the latent values; or quoting the model's
        own error where the records' values make it fail.
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
            except Exception as e:  # noqa: BLE001 - reported below or by the engine's checks
                _raise_if_values_cause(e, model, chunk, model_kwargs, fitter)
                return
            for name, site in runs[0].items():
                if name in skip:
                    continue
                support = site["fn"].support
                if any(name not in r for r in runs[1:]):
                    skip.add(name)  # a site that only some prior draws reach: not checkable here
                    continue
                if any(not _same_support(support, r[name]["fn"].support) for r in runs[1:]):
                    raise ValueError(
                        f"observed site {name!r} ({type(_unwrapped(site['fn'])).__name__} with support {support}) "
                        "has a support that depends on the latent values (it differs between two draws of the "
                        "prior). NumPyro's log_prob does not enforce a support, so every record outside it would "
                        f"get a finite but meaningless likelihood (Uniform(0, theta) gives -log theta), and {fitter} "
                        "would fit it: the gradient pulls the latent past the data and the posterior is confidently "
                        "wrong. Write the likelihood with a support fixed by public values (for example theta = a "
                        "public bound on the data plus a positive excess), or one whose support does not move"
                    )
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


def check_indices(
    model: Callable, data: tuple[jnp.ndarray, ...], model_kwargs: dict[str, Any], fitter: str = "dpvi"
) -> None:
    """Raises ValueError when the model, run on the data, indexes an array out of its bounds.

    JAX clamps an out-of-bounds index instead of failing (``theta[g]`` with ``g = 7`` and 5 groups reads
    ``theta[4]``), so such records would be fitted to the wrong entries with no error. The model's log
    likelihood runs on the data (in chunks of :data:`CHUNK_RECORDS` records) under
    ``jax.experimental.checkify``'s index checks, with the latent sites fixed at a prior draw made outside
    them (a sampler may clamp an index by design: NumPyro's LKJCholesky does). A model that cannot run
    under them (it reads concrete data values) is left to the checks that follow.

    Raises:
      ValueError: naming the out-of-bounds index JAX reports.
    """

    def log_lik(latents: dict[str, Any], *chunk: Any) -> Any:
        run = handlers.substitute(handlers.seed(model, rng_seed=0), data=latents)
        tr = handlers.trace(run).get_trace(*chunk, **model_kwargs)
        total = jnp.zeros(())
        for site in tr.values():
            if site["type"] == "sample" and site["is_observed"]:
                total = total + jnp.sum(site["fn"].log_prob(site["value"]))
        return total

    checked = checkify.checkify(log_lik, errors=checkify.index_checks)
    num_records = int(data[0].shape[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NumPyro's out-of-support warnings: check_observed_support reports them
        for start in range(0, num_records, CHUNK_RECORDS):
            chunk = tuple(a[start : start + CHUNK_RECORDS] for a in data)
            try:
                tr = handlers.trace(handlers.seed(model, rng_seed=0)).get_trace(*chunk, **model_kwargs)
                latents = {k: v["value"] for k, v in tr.items() if v["type"] == "sample" and not v["is_observed"]}
                err, _ = checked(latents, *chunk)
                message = err.get()
            except Exception:  # noqa: BLE001 - a model that cannot be checked this way: left to the engine
                return
            if message:
                first = message.splitlines()[0]
                raise ValueError(
                    f"the model indexes an array out of its bounds on the data ({first}): JAX clamps such an "
                    f"index instead of failing (index 7 into 5 groups reads group 4), so {fitter} would fit those "
                    "records to the wrong entries. Correct the records' indices (a group id must lie in [0, number "
                    "of groups)), or the model's sizes. (This check reads the data before any release; its message "
                    "is for you, the data holder, and is not released.)"
                )
