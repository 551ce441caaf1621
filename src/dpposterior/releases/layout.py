"""The layout of a model's latent sites: names, shapes, supports, and the maps between the
constrained parameter space and the flat unconstrained vector that the variational family lives on.

Post-processing (``noise_aware``, ``validation``) uses a layout to turn variational parameters into
constrained draws; it never needs the data. A layout is saved with a trace as JSON, so supports are
stored as small specs and rebuilt on load.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike
from numpyro.distributions import constraints
from numpyro.distributions.transforms import biject_to

_SINGLETONS = {
    name: getattr(constraints, name)
    for name in (
        "real",
        "positive",
        "unit_interval",
        "simplex",
        "real_vector",
        "ordered_vector",
        "positive_ordered_vector",
        "corr_cholesky",
        "corr_matrix",
        "lower_cholesky",
        "positive_definite",
        "softplus_positive",
        "softplus_lower_cholesky",
        "circular",
        "l1_ball",
        "nonnegative",
        "real_matrix",
        "scaled_unit_lower_cholesky",
        "sphere",
    )
    if hasattr(constraints, name)
}


def support_to_spec(c: constraints.Constraint) -> dict[str, Any]:
    """A JSON-friendly description of a continuous support; ``{"kind": "unknown"}`` if not known."""
    for name, obj in _SINGLETONS.items():
        if c is obj:
            return {"kind": name}
    if isinstance(c, constraints._IndependentConstraint):
        return {
            "kind": "independent",
            "base": support_to_spec(c.base_constraint),
            "ndims": int(c.reinterpreted_batch_ndims),
        }
    if isinstance(c, constraints._Interval):
        return {
            "kind": "interval",
            "low": np.asarray(c.lower_bound).tolist(),
            "high": np.asarray(c.upper_bound).tolist(),
        }
    if isinstance(c, constraints._GreaterThan):
        return {"kind": "greater_than", "low": np.asarray(c.lower_bound).tolist()}
    if isinstance(c, constraints._LessThan):
        return {"kind": "less_than", "high": np.asarray(c.upper_bound).tolist()}
    zero_sum = getattr(constraints, "zero_sum", None)  # ZeroSumNormal: sums to 0 along event_dim axes
    if zero_sum is not None and isinstance(c, zero_sum):
        return {"kind": "zero_sum", "event_dim": int(c.event_dim)}
    return {"kind": "unknown", "repr": repr(c)}


def spec_to_support(spec: dict[str, Any]) -> constraints.Constraint:
    """Inverse of :func:`support_to_spec`; raises ValueError for an unknown spec."""
    kind = spec.get("kind")
    if kind in _SINGLETONS:
        return _SINGLETONS[kind]
    if kind == "independent":
        return constraints.independent(spec_to_support(spec["base"]), int(spec["ndims"]))
    if kind == "interval":
        return constraints.interval(jnp.asarray(spec["low"]), jnp.asarray(spec["high"]))
    if kind == "greater_than":
        return constraints.greater_than(jnp.asarray(spec["low"]))
    if kind == "less_than":
        return constraints.less_than(jnp.asarray(spec["high"]))
    if kind == "zero_sum":
        return constraints.zero_sum(int(spec["event_dim"]))
    raise ValueError(f"cannot rebuild the support {spec!r}: supported kinds are {supported_kinds()}")


def supported_kinds() -> list[str]:
    """The support kinds a layout can save and restore."""
    return sorted(_SINGLETONS) + ["greater_than", "independent", "interval", "less_than", "zero_sum"]


@dataclasses.dataclass(frozen=True)
class Site:
    """One latent site: its name, constrained shape, unconstrained shape and support spec, and the latent
    sites its prior depends on (``parents``: non-empty for a hierarchical prior, e.g. ``theta ~
    Normal(mu, tau)`` has parents ``("mu", "tau")``)."""

    name: str
    shape: tuple[int, ...]
    unconstrained_shape: tuple[int, ...]
    support: dict[str, Any]
    parents: tuple[str, ...] = ()

    @property
    def size(self) -> int:
        """Number of unconstrained coordinates of the site."""
        return int(math.prod(self.unconstrained_shape))

    def transform(self):
        """The bijection from the unconstrained space to the site's support."""
        return biject_to(spec_to_support(self.support))


@dataclasses.dataclass(frozen=True)
class ParamLayout:
    """The flat unconstrained parameter vector theta (length ``num_latent``) of a model.

    Coordinates are laid out site by site in ``sites`` order, each site flattened in C order.
    """

    sites: tuple[Site, ...]

    @property
    def num_latent(self) -> int:
        """Length n of the unconstrained vector (the variational family has d = 2n parameters)."""
        return sum(s.size for s in self.sites)

    @property
    def names(self) -> tuple[str, ...]:
        """The latent sites' names, in the model's order."""
        return tuple(s.name for s in self.sites)

    def coordinate_names(self) -> list[str]:
        """A readable name per unconstrained coordinate, e.g. ``w[3]``."""
        out = []
        for s in self.sites:
            if s.size == 1 and s.unconstrained_shape in ((), (1,)):
                out.append(s.name)
            else:
                out.extend(f"{s.name}[{','.join(map(str, idx))}]" for idx in np.ndindex(*s.unconstrained_shape))
        return out

    def site_slice(self, name: str) -> slice:
        """The coordinates of site ``name`` in the flat unconstrained vector."""
        start = 0
        for s in self.sites:
            if s.name == name:
                return slice(start, start + s.size)
            start += s.size
        raise ValueError(f"no latent site {name!r}; the model's latent sites are {list(self.names)}")

    def split(self, theta: ArrayLike) -> dict[str, jax.Array]:
        """Splits a flat (..., n) unconstrained array into per-site (..., *unconstrained_shape) arrays."""
        theta = jnp.asarray(theta)
        if theta.shape[-1] != self.num_latent:
            raise ValueError(
                f"expected a last axis of length {self.num_latent} (the model's unconstrained "
                f"size), got shape {theta.shape}"
            )
        batch = theta.shape[:-1]
        out, start = {}, 0
        for s in self.sites:
            out[s.name] = theta[..., start : start + s.size].reshape(batch + s.unconstrained_shape)
            start += s.size
        return out

    def constrain(self, theta: jax.Array) -> dict[str, jax.Array]:
        """Maps flat unconstrained (..., n) values to constrained per-site values."""
        parts = self.split(theta)
        return {s.name: s.transform()(parts[s.name]) for s in self.sites}

    def constrain_with_log_det(self, theta: jax.Array) -> tuple[dict[str, jax.Array], jax.Array]:
        """Like :meth:`constrain` for one unbatched (n,) vector, plus sum log|det J| of the maps."""
        parts = self.split(theta)
        values, total = {}, jnp.zeros(())
        for s in self.sites:
            t = s.transform()
            u = parts[s.name]
            v = t(u)
            ldj = t.log_abs_det_jacobian(u, v)
            values[s.name] = v
            total = total + jnp.sum(ldj)
        return values, total

    def unconstrain(self, values: dict[str, Any]) -> jax.Array:
        """Maps per-site constrained values (with a common batch shape) to a flat (..., n) array."""
        missing = [s.name for s in self.sites if s.name not in values]
        if missing:
            raise ValueError(f"missing values for latent sites {missing}; expected {list(self.names)}")
        flats = []
        batch = None
        for s in self.sites:
            v = jnp.asarray(values[s.name])
            u = s.transform().inv(v)
            nb = u.ndim - len(s.unconstrained_shape)
            b = u.shape[:nb]
            if batch is None:
                batch = b
            elif b != batch:
                raise ValueError(f"site {s.name!r} has batch shape {b}, others {batch}")
            flats.append(u.reshape(b + (s.size,)))
        return jnp.concatenate(flats, axis=-1)

    def to_dict(self) -> dict[str, Any]:
        """The layout as plain JSON-able values (what a saved trace stores)."""
        return {
            "sites": [
                {
                    "name": s.name,
                    "shape": list(s.shape),
                    "unconstrained_shape": list(s.unconstrained_shape),
                    "support": s.support,
                    **({"parents": list(s.parents)} if s.parents else {}),
                }
                for s in self.sites
            ]
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ParamLayout":
        try:
            sites = tuple(
                Site(
                    name=str(s["name"]),
                    shape=tuple(int(x) for x in s["shape"]),
                    unconstrained_shape=tuple(int(x) for x in s["unconstrained_shape"]),
                    support=dict(s["support"]),
                    parents=tuple(str(p) for p in s.get("parents", ())),
                )
                for s in d["sites"]
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"malformed parameter layout {d!r}: {e}") from e
        return cls(sites)

    @classmethod
    def flat(cls, n: int, name: str = "theta") -> "ParamLayout":
        """A layout of one real vector site of length n (for traces not tied to a model)."""
        return cls((Site(name, (n,), (n,), {"kind": "independent", "base": {"kind": "real"}, "ndims": 1}),))
