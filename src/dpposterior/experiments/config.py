"""The configuration of a coverage cell and the derivation of its random keys.

A coverage cell is one (model, epsilon, method) point of the paper's coverage experiment
(Räisä et al. 2024, 13.4). Its :class:`CellConfig` is the full
description of what is computed: two runs with equal configurations give equal results, which is what
lets a re-run skip finished cells (:mod:`.store`).

Randomness. A cell is a simulation on synthetic data, so its keys are fixed and derived from the cell's
``seed`` alone (never from the operating system), and the seed is recorded with the results:

    base                 = PRNGKey(seed)
    replicate k          = fold_in(fold_in(base, 0), k)
      simulation key     = fold_in(replicate k, 0)      theta ~ prior, data ~ p(data | theta)
      DP-SGD key         = fold_in(replicate k, 1)      the ``rng_key`` of ``dpvi`` for this replicate
    post-processing k    = fold_in(fold_in(fold_in(base, 1), method_stream(method)), k)
    reference points     = fold_in(base, 2)             shared by every method of the seed
    mechanism noise      = fold_in(fold_in(base, 3), method_stream(method))
                                                        a baseline's own release (needs_data methods)

The replicate keys do not depend on epsilon or the method, so the cells of one seed share their
theta and data sets (common random numbers: methods and budgets are compared on the same replicates,
and the methods of one (model, epsilon) share the same DP-SGD traces).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import zlib
from typing import Any, Iterable

import jax
import numpy as np

from .._checks import check_delta, check_epsilon, check_positive_int, check_sampling_rate
from ..privacy.dpsgd_accounting import Accountant

#: version of the cell computation; part of the configuration, so results of an older scheme are
#: recomputed rather than mixed with new ones.
SCHEME = 1

#: the paper's settings.
DEFAULT_REPLICATES = 500
DEFAULT_REPEATS = 20
DEFAULT_NUM_STEPS = 10_000
DEFAULT_NUM_RECORDS = 5_000
DEFAULT_SAMPLING_RATE = 0.1
DEFAULT_DELTA = 1e-5
DEFAULT_NUM_DRAWS = 20_000
DEFAULT_BURN_IN = 0.2
DEFAULT_NUM_MC = 10


def _check_seed(seed: Any) -> int:
    s = check_positive_int(seed, "seed", minimum=0)
    if s >= 2**32:
        raise ValueError(f"seed must be an integer in [0, 2^32), got {seed!r}")
    return s


def _check_options(options: Any) -> tuple[tuple[str, Any], ...]:
    if options is None:
        return ()
    items: Iterable[tuple[Any, Any]]
    if isinstance(options, dict):
        items = options.items()
    else:
        try:
            items = [(k, v) for k, v in options]
        except (TypeError, ValueError) as e:
            raise TypeError(f"method_options must be a dict of solver options, got {options!r}") from e
    out = []
    seen: set[str] = set()
    for k, v in items:
        if not isinstance(k, str):
            raise TypeError(f"method_options keys must be strings, got {k!r}")
        if k in seen:  # (name, value) pairs: a second value would silently win or lose
            raise ValueError(f"method_options gives the option {k!r} more than once; give each option once")
        seen.add(k)
        if isinstance(v, np.generic) and v.dtype.kind in "biuf":
            v = v.item()  # a numpy number is the number it holds (and has the same digest)
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"method_options values must be finite (a result file holds no NaN or inf); {k}={v!r}")
        if isinstance(v, bool) or v is None or isinstance(v, (int, float, str)):
            out.append((k, v))
        else:
            raise TypeError(f"method_options values must be numbers, strings, booleans or None; {k}={v!r}")
    return tuple(sorted(out))


@dataclasses.dataclass(frozen=True, eq=False)
class CellConfig:
    """Everything that determines one coverage cell's results.

    Attributes:
      model: a model name of :data:`dpposterior.models.MODELS` (e.g. ``"beta-bernoulli"``).
      epsilon: the privacy budget of each replicate's DP-SGD run (> 0).
      method: a method name of :data:`dpposterior.experiments.METHODS` (e.g. ``"grid"``, ``"naive"``).
      replicates: K, the number of (theta, data, DP-SGD trace) replicates.
      repeats: R, the number of re-draws of the reference points over the same K replicates.
      num_steps: T, DP-SGD steps per replicate.
      num_records: N, records per simulated data set.
      sampling_rate: q, the Poisson sampling rate.
      delta: the privacy delta.
      seed: the cell's seed; every key of the cell derives from it (module docstring).
      num_draws: M, posterior draws per replicate for TARP.
      burn_in: share of each trace dropped before the post-processing (T* = floor(burn_in T)).
      num_mc: Monte Carlo draws of the ELBO per DP-SGD step (as ``dpvi``).
      accountant: ``"pld"`` or ``"rdp"``, for calibrating sigma (as ``dpvi``).
      method_options: solver options of the method, as sorted (name, value) pairs (empty: defaults), in
        the method's canonical spelling (:func:`~dpposterior.experiments.methods.canonical_method_options`):
        equivalent spellings (``bounds`` ``"0.0,5.0"`` and ``"0,5"``) give one configuration and digest.
      scheme: version of the computation (:data:`SCHEME`).
    """

    model: str
    epsilon: float
    method: str
    replicates: int = DEFAULT_REPLICATES
    repeats: int = DEFAULT_REPEATS
    num_steps: int = DEFAULT_NUM_STEPS
    num_records: int = DEFAULT_NUM_RECORDS
    sampling_rate: float = DEFAULT_SAMPLING_RATE
    delta: float = DEFAULT_DELTA
    seed: int = 0
    num_draws: int = DEFAULT_NUM_DRAWS
    burn_in: float = DEFAULT_BURN_IN
    num_mc: int = DEFAULT_NUM_MC
    accountant: Accountant = "pld"
    method_options: tuple[tuple[str, Any], ...] = ()
    scheme: int = SCHEME

    def __post_init__(self) -> None:
        from ..models.registry import get_model
        from .methods import get_method

        if not isinstance(self.model, str):
            raise TypeError(f"model must be a model name (str), got {self.model!r}")
        get_model(self.model)
        if not isinstance(self.method, str):
            raise TypeError(f"method must be a method name (str), got {self.method!r}")
        get_method(self.method)
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        set_("epsilon", check_epsilon(self.epsilon))
        set_("replicates", check_positive_int(self.replicates, "replicates", minimum=2))
        set_("repeats", check_positive_int(self.repeats, "repeats"))
        set_("num_steps", check_positive_int(self.num_steps, "num_steps", minimum=10))
        set_("num_records", check_positive_int(self.num_records, "num_records"))
        set_("sampling_rate", check_sampling_rate(self.sampling_rate))
        set_("delta", check_delta(self.delta))
        set_("seed", _check_seed(self.seed))
        set_("num_draws", check_positive_int(self.num_draws, "num_draws", minimum=2))
        b = self.burn_in
        if (
            isinstance(b, bool)
            or not isinstance(b, (int, float, np.integer, np.floating))
            or not (0.0 <= float(b) < 1.0)
        ):
            raise ValueError(f"burn_in must be a number in [0, 1), got {b!r}")
        set_("burn_in", float(b))
        start = math.floor(self.burn_in * self.num_steps)
        if self.num_steps - start < 10:
            raise ValueError(
                f"num_steps={self.num_steps} with burn_in={self.burn_in} leaves fewer than 10 steps "
                "for the post-processing model"
            )
        set_("num_mc", check_positive_int(self.num_mc, "num_mc"))
        if self.accountant not in ("pld", "rdp"):
            raise ValueError(f"accountant must be 'pld' or 'rdp', got {self.accountant!r}")
        set_("method_options", _check_options(self.method_options))
        from .methods import (
            canonical_method_options,
            check_method_burn_in,
            check_method_model,
            check_method_options,
            check_method_steps,
        )

        check_method_model(self.method, self.model)
        check_method_options(self.method, dict(self.method_options), self.model)
        # one spelling per meaning ("0.0,5.0" and "0,5" are one cell, computed once); the canonical
        # options are checked again, as the method will read them
        canonical = _check_options(canonical_method_options(self.method, dict(self.method_options)))
        if repr(canonical) != repr(self.method_options):  # 2 == 2.0, but "2" and "2.0" are two digests
            check_method_options(self.method, dict(canonical), self.model)
            set_("method_options", canonical)
        check_method_steps(self.method, self.num_steps)
        check_method_burn_in(self.method, dict(self.method_options), self.num_steps, self.burn_in)
        if self.scheme != SCHEME:
            raise ValueError(f"scheme {self.scheme!r} is not computed by this version (scheme {SCHEME})")
        set_("_identity", self.canonical_json())

    # ------------------------------------------------------------------ identity
    def __eq__(self, other: object) -> bool:
        """Equal configurations are one cell: the same :meth:`canonical_json`, so the same digest (field
        by field, ``{"width": 2}`` would equal ``{"width": 2.0}`` under another digest)."""
        if not isinstance(other, CellConfig):
            return NotImplemented
        return self._identity == other._identity  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._identity)  # type: ignore[attr-defined]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (``method_options`` as a dict)."""
        d = dataclasses.asdict(self)
        d["method_options"] = dict(self.method_options)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "CellConfig":
        """Inverse of :meth:`to_dict`; raises ValueError/TypeError for unknown or invalid fields."""
        if not isinstance(d, dict):
            raise TypeError(f"a cell configuration must be a dict, got {type(d).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(f"unknown cell configuration fields {unknown}")
        return cls(**d)

    def canonical_json(self) -> str:
        """The configuration as canonical JSON (sorted keys, exact float repr): what results match on."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    def digest(self) -> str:
        """SHA-256 of :meth:`canonical_json` (hex)."""
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()

    def group_key(self) -> tuple:
        """Cells with equal group keys share their DP-SGD traces (all fields but method and its options)."""
        d = self.to_dict()
        d.pop("method")
        d.pop("method_options")
        return tuple(sorted(d.items()))

    def label(self) -> str:
        """A short human-readable label, e.g. ``beta-bernoulli eps=0.1 grid`` (with the options that make
        a different method, e.g. ``grid (priors burn_in)``: :func:`~dpposterior.experiments.methods.method_label`)."""
        from .methods import method_label

        return f"{self.model} eps={self.epsilon:g} {method_label(self.to_dict())}"


# ---------------------------------------------------------------------------------- keys


def base_key(seed: int) -> jax.Array:
    """The raw uint32 key of a seed."""
    return jax.random.PRNGKey(int(seed))


def replicate_keys(seed: int, start: int, count: int) -> jax.Array:
    """Raw keys (count, 2) of replicates ``start, ..., start + count - 1`` (module docstring)."""
    stream = jax.random.fold_in(base_key(seed), 0)
    idx = np.arange(start, start + count, dtype=np.uint32)
    return jax.vmap(lambda i: jax.random.fold_in(stream, i))(idx)


def simulation_and_dpsgd_keys(replicate_key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(simulation key, DP-SGD key) of one replicate key (raw uint32 keys)."""
    return jax.random.fold_in(replicate_key, 0), jax.random.fold_in(replicate_key, 1)


def method_stream(method: str) -> int:
    """A stable 31-bit number for a method name (CRC-32), so keys never depend on registry order."""
    return zlib.crc32(method.encode()) & 0x7FFFFFFF


def postprocessing_keys(seed: int, method: str, count: int) -> jax.Array:
    """Raw keys (count, 2) of the post-processing randomness of replicates 0..count-1 for ``method``."""
    stream = jax.random.fold_in(jax.random.fold_in(base_key(seed), 1), method_stream(method))
    return jax.vmap(lambda i: jax.random.fold_in(stream, i))(np.arange(count, dtype=np.uint32))


def mechanism_key(seed: int, method: str) -> jax.Array:
    """The raw key (2,) of the noise of ``method``'s own mechanism (methods that release the replicates'
    data themselves, e.g. the baselines); independent of the replicate and post-processing streams."""
    return jax.random.fold_in(jax.random.fold_in(base_key(seed), 3), method_stream(method))


def reference_key(seed: int) -> jax.Array:
    """The raw key of the reference-point draws (shared by the methods of a seed)."""
    return jax.random.fold_in(base_key(seed), 2)
