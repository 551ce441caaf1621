"""The user's model for the minibatch MH samplers: per-record energies, prior, bounds, box, proposal.

The target is ``pi(theta) ~ exp(log_prior(theta) - sum_i U_i(theta))`` restricted to a parameter box,
with ``U_i(theta) = energy_fn(theta, record_i)`` (for a tempered likelihood, ``U_i = -log p(x_i |
theta) / temperature``). The samplers need the Lipschitz-type bound of Zhang, Zhang & De Sa,
"DP-Fast MH: private, fast, and accurate Metropolis-Hastings for large-scale Bayesian inference" (2023)::

    |U_i(theta) - U_i(theta')| <= c_i M(theta, theta')   for all theta, theta' in the box,

with ``M`` the Euclidean distance by default. The bound is the user's claim: the samplers cannot
prove it, but they count its violations at the evaluated records (a non-private diagnostic).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import FLOAT32_MAX, check_float32_array, check_float32_positive, check_positive

Array = Any


def euclidean_distance(theta: Array, theta_new: Array) -> Array:
    """M(theta, theta') = ||theta - theta'||_2 (the default; symmetric, as the samplers require)."""
    return jnp.sqrt(jnp.sum(jnp.square(theta_new - theta)))


@dataclasses.dataclass(frozen=True, eq=False)
class EnergyModel:
    """A validated model for :mod:`dpposterior.mcmc` (build it with :func:`energy_model`).

    Attributes:
      energy_fn: ``U_i(theta) = energy_fn(theta, record)``, a JAX function of a position (1-D array)
        and one record (a pytree slice of ``data``), returning a scalar.
      log_prior_fn: ``log p(theta)`` up to a constant, a JAX function of a position.
      data: a pytree of arrays sharing a leading record axis of length ``num_records``.
      bound_constants: float32 array ``c`` of shape (num_records,), every ``c_i >= 0`` and sum > 0.
      lower, upper: the parameter box (float32 arrays of shape (dim,)), or None for no box.
      distance_fn: ``M(theta, theta')``, symmetric in its arguments.
      num_records: N.
    """

    energy_fn: Callable[[Array, Any], Array]
    log_prior_fn: Callable[[Array], Array]
    data: Any
    bound_constants: Array
    lower: Array | None
    upper: Array | None
    distance_fn: Callable[[Array, Array], Array]
    num_records: int

    @property
    def total_bound(self) -> float:
        """C = sum_i c_i."""
        return float(np.sum(np.asarray(self.bound_constants, np.float64)))

    @property
    def max_bound(self) -> float:
        """c_max = max_i c_i."""
        return float(np.max(np.asarray(self.bound_constants)))


def _check_array(name: str, a: Any) -> np.ndarray:
    if np.ma.is_masked(a):  # np.asarray would drop the mask and use the values under it
        raise ValueError(
            f"{name} is a masked array with {int(np.ma.count_masked(a))} masked value(s); the mask "
            "would be ignored and the values under it used: remove or impute them first"
        )
    arr = np.asarray(a)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    if arr.size and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite: it contains NaN or inf")
    check_float32_array(name, arr, private=True)
    return arr


def energy_model(
    energy_fn: Callable[[Array, Any], Array],
    data: Any,
    *,
    log_prior_fn: Callable[[Array], Array],
    bound_constants: Any,
    box: tuple[Any, Any] | None = None,
    distance_fn: Callable[[Array, Array], Array] | None = None,
) -> EnergyModel:
    """Validates and packs a model given as per-record energies for the minibatch MH samplers.

    Args:
      energy_fn: ``energy_fn(theta, record) -> U_i(theta)``, a JAX-traceable scalar function.
      data: an array or pytree of arrays whose leading axis indexes records (N >= 1), finite.
        Float64 data (with jax x64 enabled) are kept as given, but the samplers compute in float32:
        the values of ``energy_fn``, ``log_prior_fn``, ``distance_fn`` and the proposal are cast to it.
      log_prior_fn: ``log_prior_fn(theta) -> log p(theta)`` (up to a constant), JAX-traceable.
      bound_constants: the c_i of ``|U_i(theta) - U_i(theta')| <= c_i M(theta, theta')``: a finite
        array of shape (N,) with every entry >= 0 and a positive sum. Privacy note: the DP samplers
        treat C = sum c_i and c_max = max c_i as public (as the paper does): use bounds that do not
        depend on the private records (e.g. from a public bound on the data domain).
      box: ``(lower, upper)``: proposals outside ``lower <= theta <= upper`` (elementwise) are
        rejected; the bounds must be non-NaN with ``lower < upper``. ``None``: no box.
      distance_fn: ``M(theta, theta')``; must be symmetric. Default: Euclidean distance.

    Returns:
      An :class:`EnergyModel`.

    Raises:
      TypeError: a non-callable function, non-numeric data or bounds.
      ValueError: empty or non-finite data, data arrays of different lengths, bounds of the wrong
        shape, negative or non-finite bounds or a zero sum, a box with NaN or lower >= upper.
    """
    for name, fn in (("energy_fn", energy_fn), ("log_prior_fn", log_prior_fn)):
        if not callable(fn):
            raise TypeError(f"{name} must be callable, got {fn!r}")
    if distance_fn is not None and not callable(distance_fn):
        raise TypeError(f"distance_fn must be callable or None, got {distance_fn!r}")
    leaves = jax.tree.leaves(data)
    if not leaves:
        raise ValueError("data must hold at least one array of records, got none")
    arrays = [_check_array("data", leaf) for leaf in leaves]
    if any(not a.ndim for a in arrays):
        raise ValueError("data arrays must have a leading record axis; got a scalar")
    lengths = {a.shape[0] for a in arrays}
    if len(lengths) != 1:
        raise ValueError(f"data arrays must share their first axis (records): got lengths {sorted(lengths)}")
    n = lengths.pop()
    if n < 1:
        raise ValueError("data must hold at least one record, got 0")
    c = _check_array("bound_constants", bound_constants)
    if c.dtype.kind == "b":
        raise TypeError("bound_constants must hold real numbers, got booleans")
    c = c.astype(np.float64)
    if c.shape != (n,):
        raise ValueError(f"bound_constants must have shape (num_records,) = ({n},), got {c.shape}")
    if np.any(c < 0) or not np.sum(c) > 0:
        raise ValueError(
            "bound_constants must all be >= 0 with a positive sum (they bound |U_i(theta) - "
            "U_i(theta')| / M(theta, theta'))"
        )
    lower: np.ndarray | jax.Array | None = None
    upper: np.ndarray | jax.Array | None = None
    if box is not None:
        try:
            lo_raw, hi_raw = box
        except (TypeError, ValueError) as e:
            raise ValueError(f"box must be a pair (lower, upper), got {box!r}") from e
        lower, upper = (np.atleast_1d(np.asarray(v)) for v in (lo_raw, hi_raw))
        for name, v in (("lower", lower), ("upper", upper)):
            if v.dtype.kind not in "iuf":
                raise TypeError(f"box {name} bound must hold real numbers (not strings or bools), got dtype {v.dtype}")
        lower, upper = lower.astype(np.float64), upper.astype(np.float64)
        if lower.ndim != 1 or upper.shape != lower.shape:
            raise ValueError(f"box bounds must be 1-D arrays of one shape, got {lower.shape} and {upper.shape}")
        if np.any(np.isnan(lower)) or np.any(np.isnan(upper)):
            raise ValueError("box bounds must not be NaN")
        if not np.all(lower < upper):
            raise ValueError(f"box must have lower < upper in every coordinate, got lower={lower}, upper={upper}")
        for name, v in (("lower", lower), ("upper", upper)):
            big = np.isfinite(v) & (np.abs(v) > FLOAT32_MAX)
            if big.any():
                raise ValueError(
                    f"box {name} bound must be +-inf or lie within the float32 range |x| <= "
                    f"{FLOAT32_MAX:.4g} (the samplers run in float32), got {v[big][0]!r}"
                )
        lower, upper = jnp.asarray(lower, jnp.float32), jnp.asarray(upper, jnp.float32)
    data_j = jax.tree.map(jnp.asarray, data)
    return EnergyModel(
        energy_fn=energy_fn,
        log_prior_fn=log_prior_fn,
        data=data_j,
        bound_constants=jnp.asarray(c, jnp.float32),
        lower=lower,
        upper=upper,
        distance_fn=distance_fn or euclidean_distance,
        num_records=int(n),
    )


class Proposal(NamedTuple):
    """A proposal q(theta' | theta).

    Attributes:
      sample: ``sample(key, theta) -> theta'``.
      log_ratio: ``log_ratio(theta, theta') = log q(theta | theta') - log q(theta' | theta)``, added
        to every acceptance test; None for a symmetric proposal (ratio 0).
    """

    sample: Callable[[Array, Array], Array]
    log_ratio: Callable[[Array, Array], Array] | None = None


def random_walk(scale: Any) -> Proposal:
    """The symmetric Gaussian random walk theta' = theta + scale * N(0, I).

    Args:
      scale: a finite number > 0, or a 1-D array of them (one per coordinate).

    Raises:
      ValueError, TypeError: a scale that is not a real number (bools and strings are refused),
        not finite and > 0, outside the float32 range, or an empty array. A 1-D scale whose length
        differs from the position's dimension is a ValueError when the chain first runs.
    """
    s = np.asarray(scale)
    if s.dtype.kind not in "iuf":
        raise TypeError(f"scale must be a real number > 0 or a 1-D array of them, got {scale!r}")
    s = s.astype(np.float64)
    if s.ndim == 0:
        check_float32_positive(check_positive(float(s), "scale"), "scale")
    elif s.ndim != 1 or s.size == 0 or not (np.all(np.isfinite(s)) and np.all(s > 0)):
        raise ValueError(f"scale must be a finite number > 0 or a non-empty 1-D array of them, got {scale!r}")
    else:
        for v in s:
            check_float32_positive(float(v), "scale")
    s_j = jnp.asarray(s, jnp.float32)

    def sample(key: Array, theta: Array) -> Array:
        if s_j.ndim == 1 and jnp.shape(theta) != s_j.shape:  # static shapes: checked when traced
            raise ValueError(
                f"random_walk scale has {s_j.shape[0]} entries but the position has shape "
                f"{jnp.shape(theta)}: give one scale per coordinate, or a single number"
            )
        return theta + s_j * jax.random.normal(key, jnp.shape(theta), jnp.result_type(theta))

    return Proposal(sample=sample, log_ratio=None)


# --------------------------------------------------------------------------------------------
# NumPyro models


def logistic_bound_constants(features: Any, temperature: float = 1.0) -> np.ndarray:
    """c_i = ||x_i||_2 / temperature: the bound for logistic regression (Zhang, Zhang & De Sa 2023).

    With U_i(w) = -log sigmoid(y_i w.x_i) / T and labels y_i in {-1, +1}:
    |U_i(w) - U_i(w')| <= |w.x_i - w'.x_i| / T <= ||x_i|| ||w - w'|| / T, since log sigmoid is
    1-Lipschitz. (A bias column, if the features carry one, is part of x_i.) Privacy note: c_i read
    from the private features make C and c_max data-dependent; clip the features to a public norm R
    and use c_i = R / T to keep them public.

    Raises:
      TypeError: features that are not real numbers (strings, complex, objects), a temperature that
        is not a real number.
      ValueError: features not of shape (num_records, num_features), not finite or beyond the
        float32 range; a temperature <= 0; bounds that overflow float32.
    """
    f = _check_array("features", features).astype(np.float64)  # real, finite, within float32
    if f.ndim != 2:
        raise ValueError(f"features must have shape (num_records, num_features), got {f.shape}")
    t = check_positive(temperature, "temperature")
    with np.errstate(over="ignore"):  # an overflow is reported below, naming temperature
        c = np.linalg.norm(f, axis=1) / t if f.size else np.zeros(f.shape[0])
    if not np.all(c <= FLOAT32_MAX):
        raise ValueError(
            f"the bounds ||x_i|| / temperature leave the float32 range the samplers run in (largest "
            f"||x_i|| = {float(np.max(np.linalg.norm(f, axis=1))):.4g}, temperature={temperature!r}): "
            "raise temperature or rescale the features"
        )
    return c


def _site_log_prob(site: dict) -> Array:
    # scaled before it is summed, as NumPyro does: a per-record scale (handlers.scale(scale=w) with w a data
    # array, e.g. survey weights) multiplies each record's term, and the result stays a scalar
    lp = site["fn"].log_prob(site["value"])
    if site.get("scale") is not None:
        lp = site["scale"] * lp
    return jnp.sum(lp)


def _in_support(fn: Any, value: Array) -> Array:
    """Whether a latent site's value lies in its distribution's support (a scalar bool, traceable).

    The declared support and, for a ``TransformedDistribution`` (under NumPyro's expand / to_event / mask
    wrappers), the base distribution's support at the value mapped back through the transforms: an
    ``AffineTransform`` built without ``domain=`` declares the real line for an affine Beta or Uniform on
    (-1, 1) (as :func:`dpposterior.releases.model_inspect._check_transformed_support` explains). NumPyro's own
    check (``validate_args``) is off by default before NumPyro 0.2x and can be switched off by the user;
    without it an affine Uniform's log density is finite everywhere. NaN is outside every support.
    """
    from numpyro.distributions import TransformedDistribution

    from ..vi.data_support import _unwrapped

    ok = jnp.all(fn.support(value))
    td = _unwrapped(fn)
    if isinstance(td, TransformedDistribution):
        x = value
        for transform in reversed(td.transforms):
            x = transform.inv(x)
        ok = ok & _in_support(td.base_dist, x)
    return ok


def _prior_term(site: dict) -> Array:
    """A latent site's log density at its value, -inf outside its support (see :func:`_in_support`)."""
    return jnp.where(_in_support(site["fn"], site["value"]), _site_log_prob(site), -jnp.inf)


def _lower_dimensional(support: Any, shape: tuple[int, ...]) -> tuple[int, int] | None:
    """(free coordinates, values) when ``support`` is a lower-dimensional set (simplex, correlation Cholesky
    factor, zero-sum vector, ...) or has no NumPyro bijection (the sphere), else None: no box lies inside it."""
    from numpyro.distributions.transforms import biject_to

    size = int(np.prod(shape))
    try:
        free = int(np.prod(biject_to(support).inverse_shape(shape)))
    except NotImplementedError:
        return (0, size)
    return (free, size) if free < size else None


def numpyro_energy_model(
    model: Callable[..., Any],
    *data: Any,
    bound_constants: Any,
    box: tuple[Any, Any] | None = None,
    temperature: float = 1.0,
    distance_fn: Callable[[Array, Array], Array] | None = None,
    model_kwargs: dict | None = None,
) -> EnergyModel:
    """An :class:`EnergyModel` from a NumPyro model with a plate over records.

    The model is called as ``model(*data, **model_kwargs)``; every positional argument must be an
    array whose leading axis indexes the N records, and the model must draw its observed sites
    inside a ``numpyro.plate`` of size N (the plate's size must follow the data, e.g.
    ``numpyro.plate("data", x.shape[0])``, because each record is evaluated alone, as a batch of one).
    The latent (global) sample sites, flattened in the order the model draws them, form theta; the
    log prior is the sum of their log densities (-inf where a site's value leaves its support, also
    the base support of a ``TransformedDistribution``, whatever NumPyro's ``validate_args``; so the
    chains reject such proposals) plus any ``numpyro.factor`` outside the record plate (it must not
    read the data), and U_i(theta) is minus the log likelihood of record i's observed sites
    (``numpyro.factor`` terms inside the plate included) divided by ``temperature``.

    What the user must still declare (the library cannot derive it from a NumPyro model):
      - ``bound_constants``: the c_i of |U_i(theta) - U_i(theta')| <= c_i M(theta, theta') on the box
        (for logistic regression :func:`logistic_bound_constants`; for the tempered Gaussian mixture
        Zhang, Zhang & De Sa 2023), with C and c_max public for the DP samplers;
      - ``box``: the parameter box on which that bound holds (proposals outside are rejected);
        required when a latent site's support is not the whole real line, and then it must lie
        inside that support (checked; theta lives in the sites' own, constrained space);
      - ``distance_fn`` M, if not the Euclidean distance.
    Local latent sites (inside the record plate) are not supported (the samplers need per-record
    energies that depend on theta only).

    Raises:
      TypeError: a model that is not callable, data that are not arrays.
      ValueError: no plate of size N over the records (or one fixed at N rather than following the
        data), observed sites outside it, observed values that do not follow the positional data
        (e.g. passed in ``model_kwargs``), a record whose observed value lies outside its
        distribution's support (:func:`dpposterior.vi.data_support.check_observed_support`; it reads the
        data before any release, its message is for the data holder), a likelihood of a record that
        reads the other records or their number (e.g. ``x - x.mean()``), latent sites inside it or
        whose prior (or a factor outside the plate) reads the data, no latent site, a latent site whose
        support is lower-dimensional (a simplex, a correlation Cholesky factor: no box lies inside
        it), a constrained latent site without a box or with a box not inside its support, a box whose
        length is not theta's, and what :func:`energy_model` rejects.
    """
    from numpyro import handlers
    from numpyro.distributions import Unit, constraints

    from ..vi.data_support import _unwrapped, check_indices, check_observed_support

    if not callable(model):
        raise TypeError(f"model must be a callable NumPyro model, got {model!r}")
    if not data:
        raise ValueError("give the model's data as positional arguments (arrays with a leading record axis)")
    kwargs = dict(model_kwargs or {})
    arrays = tuple(jnp.asarray(_check_array("data", a)) for a in data)
    lengths = {a.shape[0] if a.ndim else None for a in arrays}
    if None in lengths or len(lengths) != 1:
        raise ValueError(
            f"every data argument must share a leading record axis; got shapes {[a.shape for a in arrays]}"
        )
    n = lengths.pop()
    t = check_positive(temperature, "temperature")
    check_observed_support(model, arrays, kwargs, fitter="numpyro_energy_model")
    check_indices(model, arrays, kwargs, fitter="numpyro_energy_model")
    tr = handlers.trace(handlers.seed(model, 0)).get_trace(*arrays, **kwargs)
    sized_n = {name for name, s in tr.items() if s["type"] == "plate" and s["args"][0] == n}
    if not sized_n:
        raise ValueError(f"the model has no numpyro.plate of size N = {n} over the records")
    # Each energy evaluates the model on a batch of one record: the plate over the records must follow
    # the data to size 1 there (a plate fixed at N would broadcast the record N times).
    tr1 = handlers.trace(handlers.seed(model, 0)).get_trace(*(a[:1] for a in arrays), **kwargs)
    record_plates = (
        sized_n
        if n == 1
        else {name for name in sized_n if name in tr1 and tr1[name]["type"] == "plate" and tr1[name]["args"][0] == 1}
    )
    if not record_plates:
        raise ValueError(
            f"the model's plate(s) {sorted(sized_n)} of size N = {n} keep that size when the model is "
            "given one record: the plate over the records must take its size from the data (e.g. "
            "numpyro.plate('data', x.shape[0])), because each record's energy is evaluated on a "
            "batch of one record (a plate fixed at N counts that record N times)"
        )
    # the record's values changed (bools flipped, numbers + 1): a prior that reads the first record (e.g.
    # centred at x[0]) is the same on that record alone and on all N, but moves with its value
    try:
        tr1_shift = handlers.trace(handlers.seed(model, 0)).get_trace(
            *(~a[:1] if a.dtype == jnp.bool_ else a[:1] + jnp.asarray(1, a.dtype) for a in arrays), **kwargs
        )
    except Exception:  # noqa: BLE001 - the model refuses other values there: cannot tell, leave that check
        tr1_shift = None
    latent: list[str] = []
    observed: list[str] = []
    prior_factors: list[str] = []
    for name, s in tr.items():
        if s["type"] != "sample":
            continue
        in_plate = any(f.name in record_plates for f in s["cond_indep_stack"])
        # numpyro.factor outside the record plate (a penalty on theta, a Jacobian term) belongs to the prior
        prior_factor = s["is_observed"] and not in_plate and isinstance(_unwrapped(s["fn"]), Unit)
        if s["is_observed"] and not prior_factor:
            if not in_plate:
                raise ValueError(
                    f"observed site {name!r} is outside the plate over records {sorted(record_plates)}: "
                    "every observation must be drawn inside it, one record at a time"
                )
            observed.append(name)
        else:
            if in_plate:
                raise ValueError(
                    f"latent site {name!r} is inside the plate over records: local latent variables are not supported"
                )
            if not prior_factor:
                support = s["fn"].support
                while isinstance(support, constraints.independent):
                    support = support.base_constraint
                low_dim = _lower_dimensional(s["fn"].support, tuple(jnp.shape(s["value"])))
                if low_dim is not None:
                    free, size = low_dim
                    what = (
                        f"a set of lower dimension ({free} free coordinates in its {size} values)"
                        if free
                        else "a set NumPyro has no bijection for"
                    )
                    raise ValueError(
                        f"latent site {name!r} has support {s['fn'].support}, {what}: no box lies inside it, and the "
                        "samplers move theta (the sites' own values) by proposals checked against a box only. "
                        "Supported: latent sites whose support is full-dimensional (real, positive, an interval, "
                        "an ordered vector, ...). Reparametrise, e.g. a Dirichlet(alpha) vector as g / g.sum() of "
                        "g ~ Gamma(alpha, 1) with numpyro.deterministic"
                    )
                if support is not constraints.real and box is None:
                    raise ValueError(
                        f"latent site {name!r} has support {s['fn'].support}: give a box inside it "
                        "(box=(lower, upper), one entry per coordinate of theta)"
                    )
            # the log prior is evaluated on the first record only: a prior that reads the data (e.g. centred
            # at x.mean()) would silently use that one record's values, outside every privacy guarantee
            lp_all = np.asarray(s["fn"].log_prob(s["value"]), np.float64)
            for probe, given in ((tr1, "one record"), (tr1_shift, "one record of other values")):
                if probe is None:
                    continue
                one = probe.get(name)
                lp_one = (
                    None
                    if one is None or one["type"] != "sample"
                    else np.asarray(one["fn"].log_prob(s["value"]), np.float64)
                )
                if (
                    lp_one is None
                    or lp_one.shape != lp_all.shape
                    or not np.allclose(lp_one, lp_all, rtol=1e-5, atol=1e-6)
                ):
                    kind = "numpyro.factor" if prior_factor else "prior of latent site"
                    raise ValueError(
                        f"the {kind} {name!r} changes with the data (its density differs "
                        f"when the model is given {given}): a prior must not read the records or their "
                        "number (e.g. be centred at x.mean() or x[0]); give it fixed parameters (pass a "
                        "public N as a number)"
                        + (
                            "; a factor of the likelihood goes inside the plate over records, one "
                            "record's term at a time"
                            if prior_factor
                            else ""
                        )
                    )
            (prior_factors if prior_factor else latent).append(name)
    if not observed:
        raise ValueError("the model has no observed site inside the plate over records")
    for name in observed:  # on one record, each observed site must hold that record's values only
        site = tr1.get(name)
        if site is None or site["type"] != "sample":
            raise ValueError(f"observed site {name!r} is missing when the model is given one record")
        lp_shape = jnp.shape(site["fn"].log_prob(site["value"]))
        for f in site["cond_indep_stack"]:
            if f.name in record_plates and len(lp_shape) >= -f.dim and lp_shape[f.dim] != 1:
                raise ValueError(
                    f"observed site {name!r} has {lp_shape[f.dim]} values along the plate over records when the "
                    "model is given one record: its observations do not come from the positional data arguments "
                    "(e.g. they were passed through model_kwargs or a global); pass every per-record array as a "
                    "positional argument, so that each record's energy uses that record's values only"
                )
    if not latent:
        raise ValueError("the model has no latent sample site (theta)")
    shapes = [tuple(jnp.shape(tr[name]["value"])) for name in latent]
    sizes = [int(np.prod(sh)) for sh in shapes]
    offsets = np.cumsum([0] + sizes)

    def unflatten(theta: Array) -> dict:
        return {name: jnp.reshape(theta[offsets[k] : offsets[k + 1]], shapes[k]) for k, name in enumerate(latent)}

    def _trace(theta: Array, args: tuple) -> dict:
        sub = handlers.substitute(handlers.seed(model, 0), data=unflatten(theta))
        return handlers.trace(sub).get_trace(*args, **kwargs)

    def log_prior_fn(theta: Array) -> Array:
        # the latent sites do not depend on the records: evaluate on the first record only
        trace = _trace(theta, tuple(a[:1] for a in arrays))
        # -inf outside a site's support, whatever NumPyro's validate_args says: the MH test then rejects there
        return sum(_prior_term(trace[name]) for name in latent) + sum(
            _site_log_prob(trace[name]) for name in prior_factors
        )

    def energy_fn(theta: Array, record: Any) -> Array:
        args = tuple(jnp.expand_dims(r, 0) for r in record)
        trace = _trace(theta, args)
        return -sum(_site_log_prob(trace[name]) for name in observed) / t

    em = energy_model(
        energy_fn, arrays, log_prior_fn=log_prior_fn, bound_constants=bound_constants, box=box, distance_fn=distance_fn
    )
    # each energy sees its own record only: a likelihood that reads the other records or their number (e.g.
    # Normal(w * (x - x.mean()), 1)) would be silently another model. At the trace's latent values, the
    # records' energies must add up to the model's log likelihood on all N records.
    theta0 = jnp.concatenate([jnp.ravel(jnp.asarray(tr[name]["value"], jnp.float32)) for name in latent])
    per_record = np.asarray(jax.vmap(energy_fn, in_axes=(None, 0))(theta0, arrays), np.float64)
    whole = float(-sum(_site_log_prob(tr[name]) for name in observed) / t)
    total = float(np.sum(per_record))
    if (
        np.isfinite(total)
        and np.isfinite(whole)
        and abs(total - whole) > 1e-4 * float(np.sum(np.abs(per_record))) + 1e-3
    ):
        raise ValueError(
            f"the records' energies, each evaluated on its record alone, do not add up to the model's log "
            f"likelihood on all {n} records (at a draw of {latent} from the prior): the likelihood of a record reads "
            "the other records or their number (e.g. x - x.mean(), a scale from x.shape[0], a subsampled plate); "
            "standardise the data with public constants before the model, so that each record's likelihood depends "
            "on that record only"
        )
    if em.lower is not None and em.upper is not None:  # a box has both bounds
        dim = int(offsets[-1])
        if em.lower.shape != (dim,):
            raise ValueError(
                f"box bounds must have one entry per coordinate of theta ({dim}: the latent sites "
                f"{latent} flattened), got shape {em.lower.shape}"
            )
        lo = np.where(np.isfinite(em.lower), np.asarray(em.lower, np.float64), -FLOAT32_MAX)
        hi = np.where(np.isfinite(em.upper), np.asarray(em.upper, np.float64), FLOAT32_MAX)
        inset = 1e-6 * (hi - lo)  # points just inside the box: a box may end on an open bound (0 for positive)
        for k, name in enumerate(latent):
            support = tr[name]["fn"].support
            if support is constraints.real or (
                isinstance(support, constraints.independent) and support.base_constraint is constraints.real
            ):
                continue
            sl = slice(offsets[k], offsets[k + 1])
            corners = [jnp.reshape(jnp.asarray(v[sl], jnp.float32), shapes[k]) for v in (lo + inset, hi - inset)]
            inside = all(bool(np.all(support.check(c))) for c in corners)
            if isinstance(support, (type(constraints.ordered_vector), type(constraints.positive_ordered_vector))):
                # two corners can be ordered while the box holds unordered points (lower [0, 1], upper [5, 6]
                # holds [4, 2]): the box lies inside the ordered vectors iff upper_i < lower_{i+1} throughout
                inside = inside and bool(np.all(corners[1][..., :-1] < corners[0][..., 1:]))
            if not inside:
                ordered = (
                    "; for an ordered vector every upper bound must lie below the next coordinate's lower bound"
                    if isinstance(
                        support, (type(constraints.ordered_vector), type(constraints.positive_ordered_vector))
                    )
                    else ""
                )
                raise ValueError(
                    f"the box must lie inside the support of latent site {name!r} ({support}), got lower "
                    f"{np.asarray(em.lower)[sl].tolist()} and upper {np.asarray(em.upper)[sl].tolist()} for "
                    "its coordinates: outside it the prior and likelihood are not defined (NumPyro "
                    f"evaluates them there without checks inside the compiled chain){ordered}"
                )
    return em
