"""The posterior handed to users: a mixture of variational Gaussians q(theta; phi*) over phi* draws.

Post-processing only: a Posterior is built from a release (a trace) and never sees data.
"""

from __future__ import annotations

import dataclasses
import inspect
import warnings
from collections.abc import Mapping
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import check_positive_int, check_real
from ..privacy.clip_binds import clip_binds_message
from ..privacy.randomness import user_key
from ..privacy.spent import PrivacySpent
from . import family
from .layout import ParamLayout
from .summary import PosteriorSummary, summary_rows

#: (key, m) -> (m, 2n); the key as _key gives it (a raw uint32 NumPy key stays NumPy)
PhiSampler = Callable[[jax.Array | np.ndarray, int], jax.Array]


@dataclasses.dataclass(frozen=True, eq=False)
class Posterior:
    """An approximate posterior p~(theta | release) = E_{phi* ~ p(phi* | release)} q(theta; phi*).

    Attributes:
      layout: the model's latent sites (names, shapes, supports).
      phi_star: (M, 2n) draws of the variational parameters phi* = (mu*, rho*). M = 1 for a point
        estimate (the naive last-iterate baseline).
      privacy: the PrivacySpent of the release this posterior was computed from (post-processing
        costs no further privacy).
      method: how phi* was obtained ("last_iterate", "grid", "nuts", "laplace", ...).
      phi_sampler: optional exact sampler ``(key, m) -> (m, 2n)`` of phi*; when given, sampling uses it
        instead of resampling the stored draws.
      diagnostics: post-processing diagnostics (never data-dependent beyond the release).
      linear_response: None (q is the diagonal Gaussian of phi*), or an (n, n) lower-triangular L that
        shapes q: theta = mu* + softplus(rho*) * (L eps), so q's covariance is
        diag(sd) L L^T diag(sd) (:func:`dpposterior.noise_aware.model_terms.linear_response`).
    """

    layout: ParamLayout
    phi_star: jax.Array
    privacy: PrivacySpent
    method: str
    phi_sampler: PhiSampler | None = None
    diagnostics: dict[str, Any] = dataclasses.field(default_factory=dict)
    linear_response: np.ndarray | None = None

    def __post_init__(self) -> None:
        phi = jnp.asarray(self.phi_star)
        if phi.ndim == 1:
            phi = phi[None, :]
        if phi.ndim != 2 or phi.shape[1] != 2 * self.layout.num_latent:
            raise ValueError(
                f"phi_star must have shape (M, {2 * self.layout.num_latent}) for this layout, "
                f"got {tuple(jnp.shape(self.phi_star))}"
            )
        object.__setattr__(self, "phi_star", phi)
        if self.linear_response is not None:
            n = self.layout.num_latent
            shape = np.asarray(self.linear_response, np.float64)
            if shape.shape != (n, n) or not np.all(np.isfinite(shape)) or np.any(np.triu(shape, 1) != 0):
                raise ValueError(
                    f"linear_response must be None or a finite lower-triangular ({n}, {n}) array, got shape "
                    f"{shape.shape}"
                )
            object.__setattr__(self, "linear_response", shape)

    @property
    def num_latent(self) -> int:
        """n, the number of latent coordinates (unconstrained)."""
        return self.layout.num_latent

    def sample_phi(self, key: jax.Array, num_samples: int) -> jax.Array:
        """(num_samples, 2n) draws of phi* from its posterior."""
        _check_num(num_samples)
        checked = _key(key)
        if self.phi_sampler is not None:
            return self.phi_sampler(checked, num_samples)
        idx = jax.random.randint(checked, (num_samples,), 0, self.phi_star.shape[0])
        return self.phi_star[idx]

    def sample_unconstrained(self, key: jax.Array, num_samples: int) -> jax.Array:
        """(num_samples, n) draws of theta in the unconstrained space."""
        _check_num(num_samples)
        k1, k2 = jax.random.split(_key(key))
        return family.sample_mixture(k2, self.sample_phi(k1, num_samples), self.linear_response)

    def sample(self, key: jax.Array, num_samples: int) -> dict[str, jax.Array]:
        """Draws of the constrained values, one array (num_samples, *site shape) per latent site.

        ``key``: a single JAX PRNG key or an int seed in [0, 2**32); the same key gives the same draws.

        Raises:
          ValueError: ``num_samples`` not an integer >= 1, an int seed outside [0, 2**32), an array of keys.
          TypeError: ``key`` neither a JAX key nor an int.
        """
        return self.layout.constrain(self.sample_unconstrained(key, num_samples))

    def mean_unconstrained(self) -> jax.Array:
        """Exact posterior mean of theta in the unconstrained space: the mean of mu* over phi* draws."""
        mu, _ = family.split_phi(self.phi_star)
        return jnp.mean(mu, axis=0)

    def sd_unconstrained(self) -> jax.Array:
        """Posterior sd of theta in the unconstrained space: sqrt(E[sd_q^2] R_jj + Var[mu*]), with R_jj = 1
        unless q has a linear-response shape."""
        mu, rho = family.split_phi(self.phi_star)
        widen = 1.0 if self.linear_response is None else jnp.sum(jnp.asarray(self.linear_response) ** 2, axis=1)
        var = jnp.mean(family.scale(rho) ** 2, axis=0) * widen + jnp.var(mu, axis=0)
        return jnp.sqrt(var)

    def mean(self, key: jax.Array | None = None, num_samples: int = 4000) -> dict[str, jax.Array]:
        """Monte Carlo posterior means of the constrained values (fixed key 0 unless given)."""
        draws = self.sample(jax.random.PRNGKey(0) if key is None else key, num_samples)
        return {k: jnp.mean(v, axis=0) for k, v in draws.items()}

    def predictive(
        self,
        key: jax.Array,
        model: Callable,
        *new_data: Any,
        num_samples: int | None = None,
        model_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> dict[str, jax.Array]:
        """Posterior predictive draws of the model's observed sites at ``new_data``.

        ``model(*new_data, **model_kwargs, **kwargs)`` is run with the latent sites substituted by
        posterior draws; observed sites whose value is not passed (e.g. ``y=None``) are sampled, and the
        model's deterministic sites are returned with them. ``new_data`` is new, public input (e.g. test
        covariates), not the private training data.

        Array-likes in ``new_data`` (pandas DataFrames and Series, lists) are converted to arrays, as
        ``dpvi`` converts its data arrays.

        Args:
          key: a single JAX PRNG key (``jax.random.key`` / ``jax.random.PRNGKey``) or an int seed in
            [0, 2**32) (JAX keeps 32 bits of a seed: others are refused, not wrapped to another seed's draws).
          model: the NumPyro model that was fitted.
          *new_data: the model's positional arguments for the new records.
          num_samples: the number of posterior draws, the leading axis of every returned array (1000 if
            not given).
          model_kwargs: the model's keyword arguments; use it for a keyword whose name this method takes
            itself (``num_samples``, ``key``, ``model``, ``model_kwargs``).
          **kwargs: further keyword arguments of the model.

        Raises:
          ValueError: ``model`` lacks a latent site of this posterior, or has a global latent site that
            the posterior does not hold (not the model that was fitted), or an array in ``new_data`` has
            no records (length 0), or a keyword is given both in ``model_kwargs`` and by name.
        """
        kw = _model_keywords(model, model_kwargs, kwargs, num_samples_given=num_samples is not None)
        k1, k2 = jax.random.split(_key(key))
        return run_predictive(
            self.layout, self.sample(k1, 1000 if num_samples is None else num_samples), k2, model, new_data, kw
        )

    @property
    def warnings(self) -> tuple[str, ...]:
        """What post-processing warned about (``diagnostics["warnings"]``): unidentified latents, solver
        checks that failed, the naive baseline's overconfidence. Empty when nothing was flagged."""
        return tuple(self.diagnostics.get("warnings", ()))

    def summary(self, key: jax.Array | None = None, num_samples: int = 4000, prob: float = 0.9) -> PosteriorSummary:
        """Rows (one per constrained scalar) with mean, sd, robust sd and the central ``prob`` interval.

        Each row's ``parameter`` names the scalar as ArviZ does (:meth:`to_arviz`, :meth:`summary_table`):
        the site name for a scalar site, else the name with its index, ``w[0]`` for a site of shape (1,)
        and ``M[0, 1]`` for a matrix site. The statistics are those of :meth:`sample`'s draws at ``key``
        (fixed key 0 unless given, as :meth:`to_arviz`), in float64; ``sd`` is their population sd (ddof 0;
        ArviZ's is ddof 1) and ``robust_sd`` the sd of the normal with the same interval (robust where the
        draws have heavy tails). The interval's ends are keyed by their quantile levels, e.g. ``q0.05`` and ``q0.95``
        for ``prob=0.9`` and ``q0.0005`` and ``q0.9995`` for ``prob=0.999``.

        Returns:
          A :class:`~dpposterior.releases.summary.PosteriorSummary`: the list of rows, with this
          posterior's :attr:`warnings` attached; ``print()`` it for an aligned table and the warnings.

        Raises:
          ValueError: ``prob`` outside (0, 1); ``num_samples`` below 2 (one draw has sd 0); a bad ``key``
            as in :meth:`sample`.
        """
        if not 0 < check_real("prob", prob) < 1:
            raise ValueError(f"prob must lie in (0, 1), got {prob!r}")
        draws = self.sample(jax.random.PRNGKey(0) if key is None else key, num_samples)
        return summary_rows(draws, self.layout, prob, num_samples, self.warnings)

    def to_arviz(
        self,
        key: jax.Array | None = None,
        num_samples: int = 4000,
        *,
        num_chains: int = 4,
        coords: dict[str, Any] | None = None,
        dims: dict[str, Any] | None = None,
    ):
        """An ArviZ InferenceData of constrained draws, with the privacy record in its attributes.

        The draws are :meth:`sample`'s at ``key`` (fixed key 0 unless given, as :meth:`summary`, so the
        two describe the same draws), split in order into ``num_chains`` chains of
        ``num_samples / num_chains`` draws. They are independent draws of the posterior, not a Markov
        chain's: the chains let ArviZ compute R-hat (about 1 by construction) and its per-chain plots,
        and check nothing about a sampler. The variables keep the model's order of the latent sites.

        Args:
          key: as :meth:`sample`; fixed key 0 unless given.
          num_samples: the number of draws, a multiple of ``num_chains``.
          num_chains: how many chains the draws are split into (4 by default).
          coords: ArviZ's coordinates: a dimension's labels, e.g. ``{"feature": ["age", "income"]}``.
          dims: ArviZ's dimension names of a site, one per axis, e.g. ``{"w": ["feature"]}``; a site's
            axis without a name is ArviZ's ``<site>_dim_<k>`` (which ``coords`` may also label).

        Returns:
          An ``arviz.InferenceData`` with a ``posterior`` group. Its attributes (and the posterior
          group's) hold ``method``, ``num_chains``, ``chains`` (what the chains are) and the privacy
          record as numbers and strings (``privacy_epsilon``, ``privacy_delta``, ..., ``privacy_record``
          as JSON; :func:`dpposterior._arviz.privacy_attrs`), so ``to_netcdf`` writes them.

        Raises:
          ValueError: ``num_samples`` not a multiple of ``num_chains``; ``coords`` or ``dims`` that do not
            fit the latent sites (an unknown site or dimension, a wrong number of names or labels); a
            latent site named like an ArviZ dimension (``chain``, ``draw``, ``<site>_dim_<k>``), which
            ArviZ would make a coordinate and leave out; a bad ``key`` as in :meth:`sample`.
        """
        _check_num(num_samples)
        if num_samples % check_positive_int(num_chains, "num_chains"):
            raise ValueError(
                f"num_samples={num_samples} is not a multiple of num_chains={num_chains}: the draws are "
                "split into chains of equal length"
            )
        draws = self.sample(jax.random.PRNGKey(0) if key is None else key, num_samples)
        return draws_to_arviz(draws, self.method, self.privacy, num_chains=num_chains, coords=coords, dims=dims)

    def summary_table(self, key: jax.Array | None = None, num_samples: int = 4000, prob: float = 0.9):
        """ArviZ's summary table (``arviz.summary(kind="stats")``: mean, sd, HDI at ``prob``) of
        :meth:`to_arviz`, as a pandas DataFrame with the privacy record in ``.attrs["privacy"]``."""
        return _summary_table(self.to_arviz(key, num_samples, num_chains=1), self.privacy, prob)


def draws_to_arviz(
    draws: dict[str, Any],
    method: str,
    privacy: PrivacySpent,
    *,
    num_chains: int = 4,
    coords: dict[str, Any] | None = None,
    dims: dict[str, Any] | None = None,
    chains: str = "independent",
):
    """An InferenceData of constrained ``draws`` (one array (M, *site shape) per site) split into
    ``num_chains`` chains, with the privacy record in attrs and the variables in the order of ``draws``
    (the model's order of the latent sites; ``arviz.from_dict`` sorts them by name).
    :func:`dpposterior._arviz.inference_data` holds the rules and the errors."""
    from .._arviz import inference_data

    return inference_data(draws, method, privacy, num_chains=num_chains, coords=coords, dims=dims, chains=chains)


def _summary_table(idata: Any, privacy: PrivacySpent, prob: float):
    from .._arviz import import_arviz

    az = import_arviz()

    if not 0 < check_real("prob", prob) < 1:
        raise ValueError(f"prob must lie in (0, 1), got {prob!r}")
    table = az.summary(idata, kind="stats", hdi_prob=prob)
    table.attrs["privacy"] = privacy.summary()
    return table


def point_posterior(
    layout: ParamLayout, phi: jax.Array, privacy: PrivacySpent, method: str = "last_iterate"
) -> Posterior:
    """q(theta; phi) at one phi: the naive baseline that ignores the DP noise (its warnings say so)."""
    return Posterior(
        layout=layout,
        phi_star=jnp.asarray(phi)[None, :],
        privacy=privacy,
        method=method,
        diagnostics={"warnings": [_baseline_warning(method)] + [m for m in (clip_binds_message(privacy),) if m]},
    )


#: the warning a point posterior carries: it is a baseline, not a calibrated posterior
NAIVE_WARNING = (
    "naive baseline: one DP-SGD iterate taken as the posterior ignores the privacy noise, so its "
    "intervals are too narrow; use dpposterior.noise_aware_posterior(trace) for calibrated ones"
)

#: the same for DPVIm's posteriors, whose trace ``noise_aware_posterior`` does not take (it keeps no gradients)
DPVIM_WARNING = (
    "DPVIm baseline: a Gaussian at the trace's iterates does not model the DP-SGD gradient noise, so its "
    "intervals can be too narrow; for calibrated ones fit with dpposterior.dpvi (which keeps the gradients) "
    "and pass that trace to dpposterior.noise_aware_posterior"
)


def _baseline_warning(method: str) -> str:
    """The warning of a point posterior made by ``method``: DPVIm's traces cannot be post-processed."""
    return DPVIM_WARNING if method.startswith("dpvim") else NAIVE_WARNING


def _as_model_input(a: Any, i: int) -> Any:
    """An array-like argument (DataFrame, Series, list) as a numeric NumPy array; anything else unchanged.
    An array of no records is refused (NumPyro's plate would fail with a bare AssertionError)."""
    if (
        a is None
        or isinstance(a, (bool, int, float, complex, str, bytes, jax.Array, np.ndarray))
        or not (hasattr(a, "__array__") or isinstance(a, list))
    ):
        arr = a
    else:
        try:
            arr = np.asarray(a)
        except (ValueError, TypeError):  # ragged and the like: left to the model
            return a
        if arr.dtype.kind not in "biuf":
            return a
    if isinstance(arr, (np.ndarray, jax.Array)) and arr.ndim >= 1 and arr.shape[0] == 0:
        raise ValueError(f"new data argument {i} has no records (length 0); pass at least one record to predict")
    return arr


def run_predictive(
    layout: ParamLayout,
    samples: dict[str, jax.Array],
    key: jax.Array,
    model: Callable,
    new_data: tuple[Any, ...],
    model_kwargs: dict[str, Any],
) -> dict[str, jax.Array]:
    """NumPyro's ``Predictive`` on posterior ``samples`` (one array per latent site), after checking that
    ``model`` is the fitted one; returns every site that is not a latent site (observed and deterministic)."""
    from numpyro.infer import Predictive

    if not callable(model):
        raise TypeError(
            f"model must be the fitted NumPyro model (a callable), got {type(model).__name__}: call "
            "predictive(key, model, *new_data)"
        )
    new_data = tuple(_as_model_input(a, i) for i, a in enumerate(new_data))
    _check_predictive_model(model, layout, samples, new_data, model_kwargs)
    out = Predictive(model, posterior_samples=samples, return_sites=None)(key, *new_data, **model_kwargs)
    return {k: v for k, v in out.items() if k not in samples}


def _model_keywords(
    model: Callable, model_kwargs: dict[str, Any] | None, kwargs: dict[str, Any], *, num_samples_given: bool
) -> dict[str, Any]:
    """The model's keyword arguments from ``model_kwargs`` and the remaining ``**kwargs``. Warns when
    ``num_samples`` was given and the model has a parameter of that name that ``model_kwargs`` does not
    give: the value is read as the number of draws, not passed to the model."""
    if model_kwargs is None:
        model_kwargs = {}
    elif not isinstance(model_kwargs, dict):
        raise TypeError(
            f"model_kwargs must be a dict of the model's keyword arguments, got {type(model_kwargs).__name__}"
        )
    both = sorted(set(model_kwargs) & set(kwargs))
    if both:
        raise ValueError(f"the model keywords {both} are given both in model_kwargs and by name; give each once")
    if num_samples_given and "num_samples" not in model_kwargs:
        try:
            params: Mapping[str, inspect.Parameter] = inspect.signature(model).parameters
        except (TypeError, ValueError):  # builtins and the like: nothing to compare
            params = {}
        if "num_samples" in params and params["num_samples"].kind not in (
            inspect.Parameter.VAR_POSITIONAL,
            inspect.Parameter.VAR_KEYWORD,
        ):
            warnings.warn(
                "num_samples was read as the number of posterior draws, but the model also has a "
                "parameter named num_samples, which gets its default; to pass the model's, use "
                "model_kwargs={'num_samples': ...}",
                UserWarning,
                stacklevel=3,
            )
    return {**model_kwargs, **kwargs}


def _check_num(n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"num_samples must be an integer >= 1, got {n!r}")


def _key(key: Any) -> jax.Array | np.ndarray:
    """A user's ``key`` (an int seed in [0, 2**32), a single JAX key, or a raw uint32 key of shape (2,))
    as a JAX key; anything else is an error naming ``key`` (:func:`dpposterior.privacy.randomness.user_key`)."""
    return user_key(key, "key")


def _check_predictive_model(
    model: Callable,
    layout: ParamLayout,
    samples: dict[str, jax.Array],
    new_data: tuple[Any, ...],
    model_kwargs: dict[str, Any],
) -> None:
    """Refuses a model whose latent sites are not this posterior's: Predictive would silently draw the
    missing ones from their prior and return them as if they were predictions."""
    from numpyro import handlers

    one = {k: v[0] for k, v in samples.items()}

    def trace(*args):
        return handlers.trace(handlers.substitute(handlers.seed(model, rng_seed=0), data=one)).get_trace(
            *args, **model_kwargs
        )

    tr = trace(*new_data)
    # The plates over the new records are those whose size doubles with the records (new_data is public
    # input); a latent site in another plate (features, groups) is global, not a per-record latent.
    doubled = tuple(jnp.concatenate([a, a]) if np.ndim(a) >= 1 else a for a in new_data)
    try:
        tr2 = trace(*doubled) if any(np.ndim(a) >= 1 for a in new_data) else None
    except Exception:  # noqa: BLE001 - a model that cannot take twice the records: fall back below
        tr2 = None
    if tr2 is None:  # cannot tell: every plate counts as a plate over the records (the old rule)
        record_plates = {name for name, s in tr.items() if s["type"] == "plate"}
    else:
        record_plates = {
            name
            for name, s in tr.items()
            if s["type"] == "plate" and name in tr2 and tr2[name]["args"][0] == 2 * s["args"][0]
        }
    sites = {name for name, s in tr.items() if s["type"] == "sample"}
    missing = [name for name in layout.names if name not in sites]
    extra = [
        name
        for name, s in tr.items()
        if s["type"] == "sample"
        and not s["is_observed"]
        and name not in samples
        and not any(f.name in record_plates for f in s["cond_indep_stack"])
    ]
    if missing or extra:
        raise ValueError(
            f"the model does not match this posterior: it lacks the posterior's latent sites "
            f"{missing} and has global latent sites {extra} that the posterior does not hold (they "
            f"would be drawn from their prior); the posterior's latent sites are {list(layout.names)}: "
            "pass the model that was fitted"
        )
