"""Reading a NumPyro model's structure: its latent sites, the plate over the records, and the
per-record split of the log joint into prior and likelihood.

``inspect_model`` runs the model on dummy record batches (zeros, or ones for a model that cannot take
zeros) with the shapes and dtypes of the data (never the data values), so the layout and the initial
parameters cannot depend on the private data. It lives with the layout it builds: post-processing
(a prior sampler of the model's latents, :func:`dpposterior.noise_aware.model_prior_sampler`) reads a
model's layout without a mechanism. The checks a fitter makes on the data values are in
:mod:`dpposterior.vi.model_inspect`.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from numpyro import handlers
from numpyro.distributions import Delta, ExpandedDistribution, Independent, MaskedDistribution, Unit
from numpyro.distributions.transforms import biject_to

from .layout import ParamLayout, Site, support_to_spec, supported_kinds

_PLATE_PROBE = 3  # records in the dummy batch used to find the plate over the records
#: a second, different record count: a plate is over the records only if its size follows the batch in
#: both runs (a plate over 3 features or 3 groups has size 3 in the first run too)
_PLATE_PROBE_OTHER = 5


#: the values of the dummy records, tried in turn: zeros, then ones for a model that cannot take zeros (per-record
#: weights in handlers.scale must be positive)
_DUMMY_FILLS = (0, 1)


def _dummy(data: tuple[Any, ...], n: int, fill: int = 0) -> tuple[jax.Array, ...]:
    return tuple(jnp.full((n,) + tuple(a.shape[1:]), fill, dtype=a.dtype) for a in data)


def _trace(model: Callable, args: tuple, kwargs: dict, seed: int = 0, params: dict | None = None):
    m = handlers.seed(model, rng_seed=seed)
    if params is not None:
        m = handlers.substitute(m, data=params)
    return handlers.trace(m).get_trace(*args, **kwargs)


def inspect_model(model: Callable, data: tuple[Any, ...], model_kwargs: dict[str, Any]) -> ParamLayout:
    """Builds the latent-site layout and checks the model's structure.

    Raises:
      ValueError: no plate over the records (or one with ``subsample_size``), a ``numpyro.param`` site
        (it would stay at its initial value), a discrete or Delta (point-mass) latent site, a latent site
        inside the plate over the records (a per-record latent variable), a latent site whose support
        depends on other latent sites or has no bijection to an unconstrained space, a TransformedDistribution
        latent site whose declared support is wider than its base distribution's image (an AffineTransform
        without ``domain=``), no observed site, an
        observed or factor site outside the plate over the records, an observed value that is not one row
        per record or that is computed from an array keyword argument (data passed as a keyword), a model
        whose log joint on a batch of dummy records is not the sum over the records alone (it reads the
        whole batch: data standardised inside the model, a prior scaled by the number of records), a model
        that needs concrete data values (its structure computed from the data), or a model that fails on
        dummy records of zeros and of ones.
    """
    first_error = None
    for fill in _DUMMY_FILLS:
        try:
            probe_args = _dummy(data, _PLATE_PROBE, fill)
            with warnings.catch_warnings():  # NumPyro's support warnings would speak of the dummy records
                warnings.simplefilter("ignore")
                tr = _trace(model, probe_args, model_kwargs)
                other = _trace(model, _dummy(data, _PLATE_PROBE, fill), model_kwargs, seed=1)  # supports that vary
                resized = _trace(model, _dummy(data, _PLATE_PROBE_OTHER, fill), model_kwargs)
            break
        except Exception as e:  # noqa: BLE001 - the user's model failed on these dummy records
            first_error = first_error or e
    else:  # the user's model failed on data of the given shapes
        err = first_error
        hint = (
            "; a latent site whose distribution cannot be sampled (an improper prior such as ImproperUniform) "
            "is not supported: dpvi draws its initial value from the prior, give it a proper one"
            if isinstance(err, NotImplementedError)
            else ""
        )
        what = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
        n = int(data[0].shape[0]) if data and np.ndim(data[0]) else None
        per_record = [
            f"{k}= (shape {tuple(np.shape(v))})"
            for k, v in model_kwargs.items()
            if n is not None and np.ndim(v) >= 1 and np.shape(v)[0] == n and not isinstance(v, (str, bytes))
        ]
        if per_record and not hint:
            hint = (
                f"; {', '.join(per_record)} went to the model as a keyword argument, a public constant that every "
                "record sees whole (the model runs on a few dummy records here): pass data arrays positionally, "
                "in the model's order, e.g. dpvi(model, y, X, ...) for model(y, X)"
            )
        raise ValueError(
            f"the model failed when run on data of shapes {[tuple(a.shape) for a in data]}: {what}{hint}"
        ) from err
    record_plates = {
        name
        for name, s in tr.items()
        if s["type"] == "plate"
        and s["args"][0] == _PLATE_PROBE
        and name in resized
        and resized[name]["args"][0] == _PLATE_PROBE_OTHER
    }
    for name in record_plates:
        # both probes: a fixed subsample_size equal to one probe's record count looks like "no subsampling" there
        for probe, size in ((tr, _PLATE_PROBE), (resized, _PLATE_PROBE_OTHER)):
            if probe[name]["args"][1] not in (None, size):
                raise ValueError(
                    f"the plate {name!r} over the records has subsample_size={probe[name]['args'][1]}: "
                    "dpvi does its own Poisson subsampling (sampling_rate), on which the privacy "
                    "accounting rests; remove subsample_size from the plate"
                )
    params = [name for name, s in tr.items() if s["type"] == "param"]
    if params:
        raise ValueError(
            f"the model has numpyro.param sites {params}: dpvi fits only latent sample sites, so a param "
            "would silently stay at its initial value; give it a prior and make it a sample site, e.g. "
            "numpyro.sample('s', dist.HalfNormal(1.0))"
        )
    observed = [name for name, s in tr.items() if s["type"] == "sample" and s["is_observed"]]
    if not observed:
        raise ValueError("the model has no observed site: condition a sample site on the data with obs=...")
    for name in observed:
        site = tr[name]
        frames = {f.name for f in site["cond_indep_stack"] if f.size == _PLATE_PROBE}
        if not frames & record_plates:
            if isinstance(site["fn"], Unit):
                raise ValueError(
                    f"numpyro.factor site {name!r} lies outside the plate over the records: dpvi reads every "
                    "observed or factor site as part of a record's likelihood; put a prior term into a sample "
                    "site's distribution instead, or move a per-record term inside the plate"
                )
            fixed = [(f.name, f.size) for f in site["cond_indep_stack"]]
            if fixed:  # a plate whose size does not follow the records: numpyro.plate("records", N) with N fixed
                raise ValueError(
                    f"the model has no plate over the records for observed site {name!r}: it lies in plate(s) "
                    f"{', '.join(f'{n!r} of size {k}' for n, k in fixed)}, whose size stays fixed when the number "
                    "of records changes; dpvi runs the model on batches of records (down to one), so the plate "
                    "over the records must take its size from the data: `with numpyro.plate('records', "
                    "X.shape[0]):`, not a fixed N or a keyword argument"
                )
            constant = name in resized and np.shape(site["value"]) == np.shape(resized[name]["value"])
            hint = (
                f"; if {name!r} is a global parameter fixed with handlers.condition (or obs= a constant), make "
                "it a constant or a numpyro.deterministic site instead: dpvi reads every observed site as part "
                "of a record's likelihood"
                if constant
                else ""
            )
            raise ValueError(
                f"the model has no plate over the records for observed site {name!r}: wrap the likelihood in "
                "`with numpyro.plate('records', X.shape[0]):` so that the leading axis of every data array "
                f"indexes records (the per-record loss and the privacy unit depend on it){hint}"
            )
        # both probes: a keyword array of 3 (or 5) records fits the probe of that size by coincidence
        _check_observed_shape(name, site, resized.get(name))
    _check_keyword_observations(model, probe_args, model_kwargs, tr, observed)

    sites = []
    for name, s in tr.items():
        if s["type"] != "sample" or s["is_observed"]:
            continue
        fn = s["fn"]
        if fn.support.is_discrete:
            raise ValueError(
                f"latent site {name!r} is discrete (support {fn.support}); dpvi supports only "
                "continuous latent sites: marginalise it out of the model"
            )
        if isinstance(_base_distribution(fn), Delta):
            raise ValueError(
                f"latent site {name!r} is a Delta (a point mass): its log density has no gradient, so "
                "dpvi would fit it as if its prior were flat; record a fixed or derived value with "
                "numpyro.deterministic instead"
            )
        if any(f.name in record_plates for f in s["cond_indep_stack"]):
            base = name[: -len("_unobserved")]
            if name.endswith("_unobserved") and f"{base}_observed" in tr:
                raise ValueError(
                    f"numpyro.sample({base!r}, ..., obs_mask=...) makes the masked values of {base!r} "
                    f"per-record latent variables (site {name!r}) to impute, which dpvi cannot fit (it "
                    "fits only global latent variables); to leave the masked values out of the "
                    "likelihood, wrap the site in numpyro.handlers.mask(mask=...) or use "
                    "dist.Normal(...).mask(...) with obs="
                )
            raise ValueError(
                f"latent site {name!r} lies inside the plate over the records (a per-record latent "
                "variable); dpvi fits only global latent variables"
            )
        shape = tuple(np.shape(s["value"]))
        try:
            ushape = tuple(biject_to(fn.support).inverse_shape(shape))
        except NotImplementedError as e:  # NumPyro has no bijection for this support (e.g. the sphere)
            raise ValueError(
                f"latent site {name!r} has a support ({fn.support}) that NumPyro cannot map to an "
                "unconstrained space (no biject_to), so dpvi cannot fit it: reparametrise it with a "
                "supported one (real, positive, interval, simplex, ordered, correlation "
                "Cholesky, ...), e.g. a direction as v / |v| of an unconstrained vector v with "
                "numpyro.deterministic"
            ) from e
        spec = support_to_spec(fn.support)
        if spec["kind"] == "unknown":
            raise ValueError(
                f"latent site {name!r} has a support ({fn.support}) that dpvi cannot save and restore "
                f"with its trace; the supported kinds are {', '.join(supported_kinds())}: reparametrise "
                "the site with one of them (and numpyro.deterministic for the derived value)"
            )
        if name in other and support_to_spec(other[name]["fn"].support) != spec:
            raise ValueError(
                f"the support of latent site {name!r} ({fn.support}) depends on other latent sites "
                "(it changes between prior draws); dpvi needs a fixed support per site: "
                "reparametrise, e.g. sample u ~ Uniform(0, 1) and set b = top * u with "
                "numpyro.deterministic"
            )
        _check_transformed_support(name, fn, s["value"])
        sites.append(Site(name, shape, ushape, spec))
    if not sites:
        raise ValueError("the model has no latent sites to infer")
    values = {site.name: tr[site.name]["value"] for site in sites}
    _check_traceable(model, data, model_kwargs, values)
    _check_records_separate(model, data, model_kwargs, values)
    parents = latent_parents(model, probe_args, model_kwargs, values)
    return ParamLayout(tuple(dataclasses.replace(site, parents=parents.get(site.name, ())) for site in sites))


def latent_parents(
    model: Callable, args: tuple, model_kwargs: dict[str, Any], values: dict[str, Any]
) -> dict[str, tuple[str, ...]]:
    """The latent sites whose prior depends on other latent sites that the records do not inform directly
    (a hierarchical prior), each with those parents, in the model's order.

    Site s has parent p when the gradient of s's prior log density at its value, with respect to p's
    value, is not zero at ``values`` (a prior draw on the dummy records ``args``: a structural fact, read
    without the data). Zero or not finite everywhere counts as no dependence. A model whose sites cannot
    be differentiated this way reports none.
    """
    names = list(values)
    out: dict[str, tuple[str, ...]] = {}

    def log_likelihood(vals):
        tr = _trace(model, args, model_kwargs, params=vals)
        return sum(
            jnp.sum(v["fn"].log_prob(v["value"])) for v in tr.values() if v["type"] == "sample" and v["is_observed"]
        )

    def nonzero(g) -> bool:
        return bool(np.any(np.nan_to_num(np.asarray(g), nan=0.0, posinf=0.0, neginf=0.0) != 0))

    point = {k: jnp.asarray(v, jnp.float32) for k, v in values.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the dummy records may lie outside the support: no warning about them
        try:  # latents the records inform directly are not hyperparameters, whatever their role in a prior
            informed = {k for k, g in jax.grad(log_likelihood)(point).items() if nonzero(g)}
        except Exception:  # noqa: BLE001
            informed = set()
        for name in names:

            def log_prior(vals, name=name):
                site = _trace(model, args, model_kwargs, params=vals)[name]
                return jnp.sum(site["fn"].log_prob(site["value"]))

            try:
                grads = jax.grad(log_prior)(point)
            except Exception:  # noqa: BLE001 - a site that cannot be differentiated: no structure to report
                continue
            found = tuple(p for p in names if p != name and p not in informed and nonzero(grads[p]))
            if found:
                out[name] = found
    return out


#: offsets, in the unconstrained space, from a prior draw to the points where a latent site's support is checked
_SUPPORT_OFFSETS = (-1.0, 1.0, -4.0, 4.0)


def _check_transformed_support(name: str, fn: Any, value: Any) -> None:
    """Refuses a ``TransformedDistribution`` latent site whose declared support is wider than its base's image.

    dpvi places its Gaussian family on ``biject_to(fn.support)``, so the fit and the posterior draws range
    over the declared support. A ``TransformedDistribution`` takes that support from its transforms'
    codomains, and an ``AffineTransform(loc, scale)`` built without ``domain=`` declares the real line: an
    affine Beta on (-1, 1) would be fitted, and drawn from, outside (-1, 1) without a word (its log density
    is -inf there). Checked at the prior draw moved by :data:`_SUPPORT_OFFSETS` (the larger ones scaled by
    1 + |u|) in the unconstrained space: each point is mapped back through the transforms and must lie in
    the base distribution's support. A point that float32 cannot map back (a bounded support's edge, where
    the sigmoid rounds to 1; an inverse that overflows) is skipped. Public: no data is read here.
    """
    from numpyro.distributions import TransformedDistribution

    td = _unwrapped(fn)
    if not isinstance(td, TransformedDistribution):
        return
    try:
        t = biject_to(fn.support)
        u0 = jnp.asarray(t.inv(jnp.asarray(value)), dtype=jnp.float32)
        for offset in _SUPPORT_OFFSETS:
            u = u0 + offset * (1.0 + jnp.abs(u0)) if abs(offset) > 1 else u0 + offset
            v = t(u)
            if not bool(jnp.all(jnp.abs(t.inv(v) - u) <= 1e-3 * (1.0 + jnp.abs(u)))):
                continue  # v rounds onto the support's edge in float32: not an interior point
            x = v
            for transform in reversed(td.transforms):
                x = transform.inv(x)
            if not bool(jnp.all(jnp.isfinite(x))):
                continue  # the inverse overflows float32: cannot tell
            if not bool(jnp.all(td.base_dist.support(x))):
                break
        else:
            return
    except Exception:  # noqa: BLE001 - transforms that cannot be inverted or checked here: not checked
        return
    shown = np.asarray(v).ravel()[:4].tolist()
    raise ValueError(
        f"latent site {name!r}: its TransformedDistribution declares the support {fn.support}, but {shown} in "
        f"that support is not the image of a value in its base distribution's support "
        f"({type(td.base_dist).__name__}, {td.base_dist.support}): its log density is -inf or NaN there. dpvi fits a "
        "latent site over its declared support, so the fit and the posterior draws would leave the "
        "distribution's support silently. A TransformedDistribution takes its support from its transforms: "
        "give them the base's support, e.g. AffineTransform(-1.0, 2.0, domain=constraints.unit_interval) for "
        "a Beta mapped to (-1, 1), or use a distribution with that support (Uniform, TruncatedNormal)"
    )


_VALUE_ERRORS = (
    jax.errors.ConcretizationTypeError,
    jax.errors.TracerArrayConversionError,
    jax.errors.TracerIntegerConversionError,
    jax.errors.TracerBoolConversionError,
)


def _check_traceable(
    model: Callable, data: tuple[Any, ...], model_kwargs: dict[str, Any], values: dict[str, Any]
) -> None:
    """Refuses a model that needs the concrete values of a record (its structure computed from the data).

    The per-record loss is traced by JAX with the record abstract; ``int(g.max()) + 1`` groups or
    ``np.unique(g)`` cannot be, and the layout found on the dummy records would not be the data's anyway.
    Shapes only (``jax.eval_shape``): nothing is compiled or run.
    """
    record = tuple(a[0] for a in _dummy(data, 1))
    try:
        jax.eval_shape(lambda r: record_log_joint(model, r, model_kwargs, values), record)
    except _VALUE_ERRORS as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ValueError(
            "the model needs concrete values of the data (or of a latent site), not only their shapes (JAX: "
            + first
            + "): dpvi traces the per-record loss with the record abstract, and a structure computed from "
            "the data (a number of groups from int(g.max()) + 1 or np.unique(g), a Python if on a data value) "
            "cannot be traced, nor kept private; pass such numbers as public keyword arguments "
            "(dpvi(model, g, y, ..., num_groups=4)) and use jnp.where for conditions on values"
        ) from e
    except Exception:  # noqa: BLE001 - other failures are reported by the DP-SGD engine's own check
        return


def _ramp(data: tuple[Any, ...], n: int) -> tuple[jax.Array, ...]:
    """Dummy records that differ from each other (record i holds i, or i mod 2 for ints and bools):
    public values with the shapes and dtypes of the data."""
    out = []
    for a in data:
        i = np.arange(n).reshape((n,) + (1,) * (np.ndim(a) - 1))
        v = i + 1 if np.dtype(a.dtype).kind == "f" else i % 2  # floats from 1: positive, as weights must be
        out.append(jnp.asarray(np.broadcast_to(v, (n,) + tuple(a.shape[1:])), dtype=a.dtype))
    return tuple(out)


def _check_records_separate(
    model: Callable, data: tuple[Any, ...], model_kwargs: dict[str, Any], values: dict[str, Any]
) -> None:
    """Refuses a model whose log joint on a batch of records is not the sum of its one-record log joints.

    dpvi evaluates every record alone (the per-record loss that is clipped); a model that reads the other
    records of its batch (data standardised inside the model, a prior scaled by ``x.shape[0]``) would be
    fitted as a different model without a word. Checked on public dummy records, never on the data.
    """
    try:  # a model that passed once with these shapes passes again: no second compilation
        key = (
            model,
            tuple((np.shape(a)[1:], np.dtype(a.dtype).str) for a in data),
            tuple(sorted(model_kwargs.items())),
            tuple((k, np.shape(v)) for k, v in sorted(values.items())),
        )
        hash(key)
    except TypeError:  # unhashable model kwargs (arrays): no caching
        key = None
    if key is not None and key in _SEPARATE_OK:
        return

    def both(values, batch):  # one compiled program: far faster than running the model op by op
        together = _log_joint_parts(_trace(model, batch, model_kwargs, params=values))
        alone = [
            _log_joint_parts(_trace(model, tuple(a[i : i + 1] for a in batch), model_kwargs, params=values))
            for i in range(_PLATE_PROBE)
        ]
        return together, alone

    batch = _ramp(data, _PLATE_PROBE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the dummy values may lie outside the support: no warning about them
        try:
            (prior_all, lik_all), parts = jax.jit(both)(values, batch)
        except Exception:  # noqa: BLE001 - the model cannot take these dummy values (or jit): nothing to compare
            return
    lik_sum = sum(float(p[1]) for p in parts)
    priors = [float(p[0]) for p in parts]
    _raise_unless_separate(lik_all, lik_sum, prior_all, priors)
    if key is not None:
        if len(_SEPARATE_OK) > 256:
            _SEPARATE_OK.clear()
        _SEPARATE_OK.add(key)


#: models (with their data shapes and keyword arguments) that passed :func:`_check_records_separate`.
_SEPARATE_OK: set = set()


def _raise_unless_separate(lik_all, lik_sum, prior_all, priors) -> None:
    """The ValueError of :func:`_check_records_separate` when the batch and one-record log joints differ."""
    same_lik = np.allclose(float(lik_all), lik_sum, rtol=1e-4, atol=1e-3, equal_nan=True)
    same_prior = np.allclose(priors, float(prior_all), rtol=1e-4, atol=1e-3, equal_nan=True)
    if not (same_lik and same_prior):
        what = (
            "the likelihood of a record changes with the other records of the batch"
            if not same_lik
            else "the prior changes with the number of records"
        )
        raise ValueError(
            f"{what} (on {_PLATE_PROBE} dummy records: log likelihood {float(lik_all):.6g} together, "
            f"{lik_sum:.6g} one record at a time; log prior {float(prior_all):.6g} together, {priors[0]:.6g} for one "
            "record): dpvi evaluates every record alone (the per-record loss that is clipped), so the model it "
            "fits would not be yours. Do not compute from the whole data inside the model (x - x.mean(), "
            "x / x.std(), x.shape[0] in a prior): standardise with public constants before the call, or pass "
            "such constants as keyword arguments"
        )


def prior_median_unconstrained(
    model: Callable, data: tuple[Any, ...], model_kwargs: dict[str, Any], layout: ParamLayout, num_draws: int = 101
) -> jax.Array:
    """The coordinate-wise median of prior draws mapped to the unconstrained space (data-independent:
    the model runs on a dummy record of zeros, or of ones if it cannot take zeros, and fixed seeds)."""
    for fill in _DUMMY_FILLS:
        try:
            with warnings.catch_warnings():
                # the dummy record may lie outside a factor likelihood's support: NumPyro's warning about it
                # would speak of values the user never passed
                warnings.simplefilter("ignore")
                draws = [_trace(model, _dummy(data, 1, fill), model_kwargs, seed=seed) for seed in range(num_draws)]
            break
        except Exception:  # noqa: BLE001 - the model cannot take these dummy values: try the next
            if fill == _DUMMY_FILLS[-1]:
                raise
    draws = [{s.name: tr[s.name]["value"] for s in layout.sites} for tr in draws]
    stacked = {k: jnp.stack([d[k] for d in draws]) for k in draws[0]}
    return jnp.median(layout.unconstrain(stacked), axis=0)


def record_log_joint(
    model: Callable, record: tuple[jax.Array, ...], model_kwargs: dict[str, Any], values: dict[str, jax.Array]
) -> tuple[jax.Array, jax.Array]:
    """(log prior of the latent sites, log likelihood of ONE record) at constrained ``values``.

    ``record`` holds one record per data array (no leading axis); the model is run on a batch of one.
    """
    batch = tuple(jnp.expand_dims(r, 0) for r in record)
    return _log_joint_parts(_trace(model, batch, model_kwargs, params=values))


def _log_joint_parts(tr: dict) -> tuple[jax.Array, jax.Array]:
    """(log prior of the latent sites, log likelihood of the observed and factor sites) of a trace."""
    log_prior = jnp.zeros(())
    log_lik = jnp.zeros(())
    for s in tr.values():
        if s["type"] != "sample":
            continue
        lp = s["fn"].log_prob(s["value"])
        if s.get("scale") is not None:  # before the sum (as NumPyro does): the scale may be one weight per record
            lp = lp * s["scale"]
        lp = jnp.sum(lp)
        if s["is_observed"]:
            log_lik = log_lik + lp
        else:
            log_prior = log_prior + lp
    return log_prior, log_lik


def _unwrapped(fn: Any) -> Any:
    """The distribution under NumPyro's wrappers (expand, to_event, mask), for the message."""
    while isinstance(fn, (ExpandedDistribution, Independent, MaskedDistribution)):
        fn = fn.base_dist
    return fn


def _base_distribution(fn: Any) -> Any:
    """The distribution under NumPyro's wrappers (expand, to_event, mask)."""
    while hasattr(fn, "base_dist") and not isinstance(fn, Delta):
        fn = fn.base_dist
    return fn


def _check_keyword_observations(
    model: Callable, args: tuple, model_kwargs: dict[str, Any], tr: dict, observed: list[str]
) -> None:
    """Refuses an observed value computed from an array passed as a keyword argument. Such an array reaches
    every record whole, outside the per-record clipping, so it is unprotected data; the shape check misses it
    when it broadcasts against the records (an array of one record). Found by running the model once more
    with every numeric keyword array shifted: an observed value that moves depends on one of them."""
    arrays = {
        k: v
        for k, v in model_kwargs.items()
        if isinstance(v, (np.ndarray, jax.Array)) and v.ndim >= 1 and v.size >= 1 and np.asarray(v).dtype.kind in "biuf"
    }
    if not arrays:
        return
    for key in arrays:
        shifted = dict(model_kwargs)
        shifted[key] = arrays[key] + np.asarray(1, np.asarray(arrays[key]).dtype)
        try:
            tr2 = _trace(model, args, shifted)
        except Exception:  # noqa: BLE001 - the model refuses other values there: cannot tell, leave it
            continue
        for name in observed:
            if name in tr2 and not np.array_equal(np.asarray(tr[name]["value"]), np.asarray(tr2[name]["value"])):
                raise ValueError(
                    f"observed site {name!r} takes its value from the keyword argument {key!r} (shape "
                    f"{tuple(np.shape(arrays[key]))}): data passed as a keyword argument reaches every record "
                    "whole and unprotected by the per-record clipping; pass every data array positionally: "
                    "dpvi(model, X, y, ...). A public constant observation can be a scalar (obs=1.0)"
                )


def _check_observed_shape(name: str, site: dict, resized_site: dict | None) -> None:
    """Refuses an observed value that is not one row per record of the dummy batches (``site`` from the run
    on ``_PLATE_PROBE`` records, ``resized_site`` from the run on ``_PLATE_PROBE_OTHER``)."""
    runs = [(site, _PLATE_PROBE)] + ([(resized_site, _PLATE_PROBE_OTHER)] if resized_site is not None else [])
    for s, num_records in runs:
        value_shape, fn_shape = tuple(np.shape(s["value"])), tuple(s["fn"].shape())
        try:
            broadcast = np.broadcast_shapes(value_shape, fn_shape)
        except ValueError:
            broadcast = None
        if broadcast == fn_shape:
            continue
        follows_records = resized_site is not None and np.shape(site["value"]) != np.shape(resized_site["value"])
        if follows_records:  # the value comes from the data arrays, but its shape is not the distribution's
            raise ValueError(
                f"observed site {name!r} got a value of shape {value_shape} where its distribution, run on "
                f"{num_records} records, has shape {fn_shape}"
                + (f" (the two would broadcast to {broadcast})" if broadcast else "")
                + ": make the data's shape per record match the distribution's, e.g. pass a column y[:, 0] or "
                "y.ravel() for a (N, 1) array, or give the distribution an event shape (.to_event(1)) or a "
                "plate over the columns"
            )
        raise ValueError(
            f"observed site {name!r} got a value of shape {value_shape} where the model, run on "
            f"{num_records} records, expects {fn_shape}: its value does not come from the data arrays "
            "one row per record (data passed as a keyword argument, e.g. y=y, reaches every record whole "
            "and unprotected); pass every data array positionally: dpvi(model, X, y, ...)"
        )
