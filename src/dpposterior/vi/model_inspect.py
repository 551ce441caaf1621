"""The checks a fitter (dpvi, dpvim) makes on its arguments before it reads the model's structure: the data
arrays, and model keywords that clash with the fitter's own settings. Reading the model's structure
(:func:`~dpposterior.releases.model_inspect.inspect_model`) lives in :mod:`dpposterior.releases.model_inspect`,
with the layout it builds, and is re-exported here for the mechanisms.
"""

from __future__ import annotations

import functools
import inspect
import reprlib
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import check_float32_array
from ..releases.model_inspect import inspect_model as inspect_model
from ..releases.model_inspect import prior_median_unconstrained as prior_median_unconstrained
from ..releases.model_inspect import record_log_joint as record_log_joint


def check_setting_names(model: Callable, num_data: int, fitter: Callable, settings: dict[str, Any]) -> None:
    """Refuses a model keyword that is also a setting of ``fitter`` (dpvi, dpvim) given a value there.

    ``fitter(model, *data, ..., **model_kwargs)`` takes its own settings first, so ``beta=2.0`` meant for
    ``model(x, beta=...)`` becomes the fitter's setting and the model silently keeps its default.
    ``settings`` maps the fitter's setting names to the values of this call; one left at the fitter's
    default, a required one (epsilon, delta, clip: the fitter's by necessity) and a model keyword bound with
    ``functools.partial`` are not counted as clashes.
    """
    try:
        params = list(inspect.signature(model).parameters.values())
        defaults = {k: p.default for k, p in inspect.signature(fitter).parameters.items()}
    except (TypeError, ValueError):  # a callable without a signature (a NumPyro handler, a builtin)
        return
    named = [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    positional = named[:num_data]  # the data fill the first parameters: those are not keywords
    if all(p.kind == p.POSITIONAL_OR_KEYWORD for p in positional):
        named = named[num_data:]
    names = [p.name for p in named]
    bound = set(getattr(model, "keywords", None) or ()) if isinstance(model, functools.partial) else set()

    def given(name: str) -> bool:
        default = defaults.get(name, inspect.Parameter.empty)
        value = settings[name]
        # a required setting (epsilon, delta, clip) is the fitter's; a keyword bound by functools.partial, the model's
        if value is default or default is inspect.Parameter.empty or name in bound:
            return False
        plain = (bool, int, float, str)
        return not (isinstance(value, plain) and isinstance(default, plain) and value == default)

    clash = [name for name in names if name in settings and given(name)]
    if clash:
        name = clash[0]
        raise ValueError(
            f"{name}= is a setting of {fitter.__name__} and also a parameter of your model: {fitter.__name__} reads "
            f"{name}={reprlib.repr(settings[name])} as its own setting, and the model would silently keep its "
            f"default {name}; pass the model's value with functools.partial(model, {name}=...) (or rename the "
            f"model's parameter), and leave {fitter.__name__}'s {name} at its default if you did not mean to set it"
        )


def _has_records_axis(value: Any) -> bool:
    """Whether a model keyword looks like data: an array (or nested list) with at least one axis."""
    if isinstance(value, (str, bytes)):
        return False
    try:
        return np.ndim(value) >= 1
    except (ValueError, TypeError):  # a ragged nested list: an array the user meant, badly shaped
        return True


def check_data(data: tuple[Any, ...], model_kwargs: dict[str, Any] | None = None) -> tuple[jax.Array, ...]:
    """Checks the data arrays: numeric, non-empty, sharing their first axis, finite.

    Args:
      data: the positional data arguments of the fitter.
      model_kwargs: the model's keyword arguments, only to say, when no data came positionally, which of
        them look like data (arrays with a leading axis): those reach the model as public constants.

    Raises:
      ValueError, TypeError: naming the data argument at fault and what is allowed.
    """
    if len(data) == 0:
        keyed = [k for k, v in (model_kwargs or {}).items() if _has_records_axis(v)]
        given = (
            f": {', '.join(f'{k}=' for k in keyed)} went to the model as keyword argument(s), which are public "
            "constants that every record sees whole (never clipped), not the private records"
            if keyed
            else ""
        )
        raise ValueError(
            f"no data given{given}; pass the data arrays positionally after the model, in the order the model "
            "takes them: dpvi(model, X, y, ...)"
        )
    arrays = []
    for i, a in enumerate(data):
        if a is None:
            raise ValueError(f"data argument {i} is None; every data array must hold the records")
        if isinstance(a, dict):
            raise TypeError(
                f"data argument {i} is a dict; pass the data arrays positionally, in the order the "
                "model takes them: dpvi(model, X, y, ...)"
            )
        if np.ma.is_masked(a):
            raise ValueError(
                f"data argument {i} is a masked array with {int(np.ma.count_masked(a))} masked value(s); "
                "the mask would be ignored and the values under it used: remove or impute them "
                "before fitting (nothing is silently dropped)"
            )
        try:
            arr = np.asarray(a)
        except (ValueError, TypeError) as e:  # ragged nested lists and the like
            raise TypeError(
                f"data argument {i} must be an array of numbers, could not convert {type(a).__name__}: {e}"
            ) from e
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"data argument {i} must be numeric (bool, int or float), got dtype {arr.dtype}")
        if arr.ndim == 0:
            raise ValueError(f"data argument {i} is a scalar; data arrays need a leading axis of records")
        if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
            bad = int(np.sum(~np.isfinite(arr)))
            raise ValueError(
                f"data argument {i} contains {bad} NaN or infinite value(s); remove or impute them "
                "before fitting (nothing is silently dropped)"
            )
        check_float32_array(f"data argument {i}", arr, private=True)
        arrays.append(arr)
    lengths = [a.shape[0] for a in arrays]
    if len(set(lengths)) != 1:
        raise ValueError(f"data arrays must share their first axis (records): got lengths {lengths}")
    if lengths[0] == 0:
        raise ValueError("the data hold no records (length 0)")
    return tuple(jnp.asarray(a) for a in arrays)
