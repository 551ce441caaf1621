"""ArviZ, imported without its refactor notice.

ArviZ 0.23 emits a ``FutureWarning`` on import announcing its 1.0 refactor; it says nothing about
this library's use of it, and under ``-W error`` (our test suite, some users' CI) the first import
would fail wherever it happens. Every ArviZ import of the package goes through here.
"""

from __future__ import annotations

import warnings
from typing import Any


def import_arviz() -> Any:
    """The ``arviz`` module, its import-time refactor notice silenced (only that warning)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"\s*ArviZ is undergoing a major refactor", category=FutureWarning)
        import arviz
    return arviz


#: how many chains :meth:`Posterior.to_arviz <dpposterior.noise_aware.Posterior.to_arviz>` splits its draws into
DEFAULT_CHAINS = 4

_RESERVED_DIMS = ("chain", "draw")


def privacy_attrs(privacy: Any) -> dict[str, Any]:
    """A privacy record as ArviZ / netCDF attributes: numbers as numbers, text as text.

    ``privacy`` is the one-line summary, ``privacy_<field>`` each field of the record
    (``privacy_epsilon`` a float, ``math.inf`` for a release that is not private; ``privacy_num_steps``
    an int; ``privacy_noise_multiplier`` left out where the mechanism has none), ``privacy_detail_<key>``
    each detail that is a number or a string (a yes/no detail as ``"True"`` / ``"False"``: netCDF has no
    booleans), and ``privacy_record`` the whole record as JSON, which
    ``PrivacySpent.from_dict(json.loads(...))`` reads back.
    """
    import json
    import numbers

    attrs: dict[str, Any] = {"privacy": privacy.summary()}
    for field in ("epsilon", "delta", "sampling_rate", "noise_multiplier"):
        value = getattr(privacy, field)
        if value is not None:
            attrs[f"privacy_{field}"] = float(value)
    attrs["privacy_num_steps"] = int(privacy.num_steps)
    for field in ("neighbouring", "accountant", "mechanism", "seeded_by"):
        attrs[f"privacy_{field}"] = str(getattr(privacy, field))
    for key, value in privacy.details:
        if isinstance(value, bool):
            attrs[f"privacy_detail_{key}"] = str(value)
        elif isinstance(value, numbers.Integral):
            attrs[f"privacy_detail_{key}"] = int(value)
        elif isinstance(value, numbers.Real):
            attrs[f"privacy_detail_{key}"] = float(value)
        elif isinstance(value, str):
            attrs[f"privacy_detail_{key}"] = value
    attrs["privacy_record"] = json.dumps(privacy.to_dict(), default=_json_value)
    return attrs


def _json_value(value: Any) -> Any:
    """A NumPy / JAX scalar or array in a detail as plain JSON (anything else as its text)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


def inference_data(
    draws: dict[str, Any],
    method: str,
    privacy: Any,
    *,
    num_chains: int = DEFAULT_CHAINS,
    coords: dict[str, Any] | None = None,
    dims: dict[str, Any] | None = None,
    chains: str = "independent",
) -> Any:
    """An ArviZ ``InferenceData`` of constrained ``draws`` (one array (M, *site shape) per site).

    The M draws are split in order into ``num_chains`` chains of M / ``num_chains`` draws each, so that
    ArviZ's R-hat and its plots per chain are defined. ``chains`` says what the chains are:
    ``"independent"`` (independent draws of the posterior: R-hat is about 1 by construction and checks
    nothing about a sampler) or ``"blocks"`` (consecutive blocks of one sampler run: R-hat compares the
    run's parts, as ArviZ's split R-hat does). The privacy record is in the attributes of the
    InferenceData and of its posterior group (:func:`privacy_attrs`), with ``method``, ``num_chains`` and
    ``chains`` (that sentence); every attribute is a number or a string, so ``to_netcdf`` writes them.

    ``coords`` and ``dims`` are ArviZ's: ``dims`` maps a site to the names of its dimensions (one per
    axis of the site's shape) and ``coords`` a dimension to its labels, e.g.
    ``dims={"w": ["feature"]}, coords={"feature": ["age", "income"]}``; a dimension without ``dims`` is
    ArviZ's ``<site>_dim_<k>``, which ``coords`` may also label.

    Raises:
      ValueError: M not a multiple of ``num_chains``; ``dims`` naming a site that is not a latent site,
        or giving a number of names other than the site's number of axes, or naming ``chain`` or
        ``draw``; ``coords`` naming a dimension no site has, or labels not one per entry of that
        dimension (or repeated); a latent site named like an ArviZ dimension (``chain``, ``draw``,
        ``<site>_dim_<k>``), which ArviZ would make a coordinate and leave out.
      TypeError: ``coords`` or ``dims`` not a dict, or ``num_chains`` not an integer.
    """
    import numpy as np

    from ._checks import check_positive_int

    az = import_arviz()
    c = check_positive_int(num_chains, "num_chains")
    if chains not in ("independent", "blocks"):
        raise ValueError(f"chains must be 'independent' or 'blocks', got {chains!r}")
    arrays = {k: np.asarray(v) for k, v in draws.items()}
    m = next(iter(arrays.values())).shape[0] if arrays else 0
    if m % c:
        raise ValueError(
            f"the {m} draws cannot be split into num_chains={c} chains of equal length: give a number "
            f"of draws that is a multiple of num_chains"
        )
    shapes = {k: v.shape[1:] for k, v in arrays.items()}
    dims, coords = _check_dims(dims, shapes), _check_coords(coords, dims, shapes)
    posterior = {k: v.reshape(c, m // c, *v.shape[1:]) for k, v in arrays.items()}
    what = (
        "independent draws of the posterior, split in order into chains: R-hat is about 1 by construction"
        if chains == "independent"
        else "consecutive blocks of one sampler run's draws: R-hat compares the blocks, as split R-hat does"
    )
    attrs = {"method": method, "num_chains": c, "chains": what, **privacy_attrs(privacy)}
    try:
        idata = az.from_dict(posterior=posterior, coords=coords, dims=dims, attrs=attrs)
    except ValueError as e:  # e.g. a site named like another site's dimension, of another length
        raise ValueError(
            f"ArviZ cannot hold the latent sites {list(posterior)} as variables ({e}); a site "
            "named 'chain', 'draw' or '<site>_dim_<k>' takes a dimension's name: rename it in the "
            "model"
        ) from e
    lost = [k for k in posterior if k not in idata.posterior.data_vars]
    if lost:  # ArviZ made them coordinates: they would be left out of to_arviz and summary_table, silently
        raise ValueError(
            f"the latent sites {lost} cannot be ArviZ variables: ArviZ names its dimensions 'chain', "
            "'draw' and '<site>_dim_<k>', and makes a variable of such a name a coordinate, so it would "
            "be left out of to_arviz and summary_table; rename the site in the model (sample and "
            "summary hold it)"
        )
    # the variables in the model's order of the latent sites (from_dict sorts them by name)
    group = idata.posterior[list(posterior)]
    group.attrs.update(attrs)
    return az.InferenceData(posterior=group, attrs=dict(idata.attrs))


def _check_dims(dims: Any, shapes: dict[str, tuple[int, ...]]) -> dict[str, list[str]] | None:
    if dims is None:
        return None
    if not isinstance(dims, dict):
        raise TypeError(
            f"dims must be a dict of a site's dimension names, e.g. {{'w': ['feature']}}, got {type(dims).__name__}"
        )
    out = {}
    for site, names in dims.items():
        if site not in shapes:
            raise ValueError(f"dims names {site!r}, which is not a latent site; the latent sites are {list(shapes)}")
        if isinstance(names, str):
            names = [names]
        names = list(names)
        if len(names) != len(shapes[site]) or not all(isinstance(n, str) for n in names):
            raise ValueError(
                f"dims[{site!r}] must give one name (a string) per axis of the site, whose draws have "
                f"shape {tuple(shapes[site])}, got {names!r}"
            )
        reserved = [n for n in names if n in _RESERVED_DIMS]
        if reserved:
            raise ValueError(f"dims[{site!r}] names {reserved}: 'chain' and 'draw' are ArviZ's sample dimensions")
        out[site] = names
    return out


def _check_coords(
    coords: Any, dims: dict[str, list[str]] | None, shapes: dict[str, tuple[int, ...]]
) -> dict[str, list[Any]] | None:
    if coords is None:
        return None
    if not isinstance(coords, dict):
        raise TypeError(
            f"coords must be a dict of a dimension's labels, e.g. {{'feature': ['age', 'income']}}, "
            f"got {type(coords).__name__}"
        )
    sizes: dict[str, set[int]] = {}
    for site, shape in shapes.items():
        names = (dims or {}).get(site) or [f"{site}_dim_{k}" for k in range(len(shape))]
        for name, size in zip(names, shape):
            sizes.setdefault(name, set()).add(int(size))
    out = {}
    for name, labels in coords.items():
        if name in _RESERVED_DIMS:
            raise ValueError(
                f"coords labels {name!r}: 'chain' and 'draw' are ArviZ's sample dimensions, numbered by to_arviz"
            )
        if name not in sizes:
            raise ValueError(
                f"coords labels the dimension {name!r}, which no latent site has; the dimensions are "
                f"{sorted(sizes)} (name a site's dimensions with dims)"
            )
        labels = [labels] if isinstance(labels, str) else list(labels)
        if len(sizes[name]) != 1 or len(labels) not in sizes[name]:
            raise ValueError(
                f"coords[{name!r}] has {len(labels)} labels, but the dimension {name!r} has "
                f"{' and '.join(map(str, sorted(sizes[name])))} entries: give one label per entry"
            )
        if len(set(map(str, labels))) != len(labels):
            raise ValueError(f"coords[{name!r}] repeats a label: each entry needs its own, got {labels!r}")
        out[name] = labels
    return out
