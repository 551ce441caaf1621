"""Posterior methods of a coverage cell, behind one small registry.

A method turns the releases of a cell's K replicates into posterior draws of theta in the
unconstrained space. It sees what post-processing may see (the per-coordinate sufficient statistics of
each trace after burn-in, each trace's last iterate, the public DP-SGD settings), never data:

    fn(releases: CellReleases, settings: MethodSettings) -> MethodOutput
        MethodOutput.draws          (K, M, n) float32 draws of theta (unconstrained)
        MethodOutput.posterior_sd   (K, n) posterior sd per replicate and coordinate
        MethodOutput.diagnostics    a small JSON-ready dict

``sharpness`` (the mean posterior sd) is the mean of ``posterior_sd``. New methods plug in with
:func:`register_method`.

A second kind of method runs its own DP mechanism (``Method.needs_data``): a baseline that is compared
with NA-DPVI under the same budget releases the replicates' data sets by its own mechanism and
post-processes that release:

    fn(releases: None, settings: MethodSettings, data: CellData) -> MethodOutput
        MethodOutput.privacy        the PrivacySpent of the method's release of each replicate

``releases`` is None: the cell's privacy record is the method's own release, so the method may not
also read the group's DP-SGD releases (and a group of such methods skips DP-SGD altogether).

``CellData`` holds the group's synthetic data sets, exactly those the group's compiled replicate
program simulated (:func:`dpposterior.experiments.replicates.simulate_data`), and the cell's public
mechanism settings; the mechanism's noise comes from ``settings.mechanism_key``, fixed by the cell's
seed and the method's name (:func:`dpposterior.experiments.config.mechanism_key`). Threat model: these
are the synthetic data of an experiment, simulated from fixed keys, never a user's data; only this
mechanism path reads them, and post-processing methods (``needs_data=False``) never receive them.
``Method.models`` restricts a method to the models its mechanism handles; a cell that pairs it with
another model is refused when its :class:`~dpposterior.experiments.config.CellConfig` is built, before
anything runs.

Built in:

* ``"grid"``, ``"laplace"``, ``"nuts"``: NA-DPVI (Räisä et al. 2024, section 3.3) with the solvers of
  :mod:`dpposterior.noise_aware`, on the same density, trace-based priors and statistics as
  :func:`dpposterior.noise_aware.noise_aware_posterior`; the posterior of theta is the mixture over
  phi* draws of q(theta; phi*) (eq. 13). Grid and Laplace are pure ``jax.numpy`` and run vmapped over
  the replicates; they draw 4,000 phi* per replicate (``num_phi_draws``), each the centre of M / 4,000
  draws of theta, as NUTS's 4,000 draws are. NUTS is NumPyro's NUTS, the kernel that
  ``noise_aware_posterior(method="nuts")`` uses (same model, 1,000 warm-up and 4,000 draws, target
  acceptance 0.8, diagonal mass matrix, initial values uniform in (-2, 2)), vmapped over replicates
  through NumPyro's functional ``hmc`` interface with each replicate's statistics as model
  arguments: one compiled sampler runs all replicates of a chunk in lockstep (like NumPyro's
  vectorized chains, each chain on its own replicate's density), so its cost is (warm-up + draws)
  iterations times the deepest tree in the chunk. A whole cell of replicates costs
  about what the reference implementation spends on a few replicates (benchmarks/README.md).
* ``"naive"``: the last iterate q(theta; phi_T), which ignores the DP noise.

Baselines with their own mechanism (:mod:`.baseline_methods`, ``needs_data=True``; same epsilon,
and for DPVIm the same delta, T, q and accountant as the cell's DP-SGD runs):

* ``"bernstein-sheldon"``: Bernstein & Sheldon noise-aware Gibbs on Laplace-noised sufficient
  statistics (beta-bernoulli, dirichlet-categorical, gamma-exponential), pure epsilon-DP.
* ``"gibbs-ss-noisy"``: Gibbs-SS-Noisy on Laplace-noised regression statistics (linear-regression),
  pure epsilon-DP.
* ``"dpvim"``: DPVIm, its own DP-SGD run per replicate (T steps) read as a Gaussian (every model).

Replicates are processed in chunks of a size fixed by the configuration (so results do not depend on
the machine or the backend); each chunk is one compiled call.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._batching import map_in_chunks
from .._fingerprint import hash_code as _hash_code
from ..noise_aware import grid as G
from ..noise_aware import laplace as L
from ..noise_aware import model as M
from ..noise_aware.stats import MIN_STEPS_AFTER_BURN_IN, TraceStats
from ..privacy.dpsgd_accounting import Accountant
from ..privacy.spent import PrivacySpent
from ..releases import family

#: bytes of intermediate arrays a chunk of replicates may use while drawing (about 8 arrays of
#: chunk x M x d float32).
DRAW_BYTES_PER_CHUNK = 256 * 2**20


class CellReleases(NamedTuple):
    """What post-processing may use, for the K replicates of a cell (never the data).

    Attributes:
      stats: :class:`~dpposterior.noise_aware.stats.TraceStats`, fields (K, d), after burn-in.
      final_phi: (K, d) each trace's last iterate phi_T.
      noise_sd: (d,) sigma C / beta, the DP noise sd of each coordinate of g~.
      sampling_rate: q.
      num_latent: n (d = 2n).
      burn_stats: the statistics of the burn-in steps, fields (K, d), for ``priors="burn_in"``; None
        when the burn-in is too short (:data:`dpposterior.experiments.replicates.MIN_BURN_STEPS`).
      learning_rate: (d,) the DP-SGD learning rate (public; in every release), for the identifiability
        rule (:mod:`dpposterior.noise_aware.identify`); None: the rule is not applied.
      prior_sampler: ``(key, m) -> (m, n)`` draws of the model's prior in the unconstrained space, for the
        latents the rule finds unidentified; None: the rule is not applied.
    """

    stats: TraceStats
    final_phi: np.ndarray
    noise_sd: np.ndarray
    sampling_rate: float
    num_latent: int
    burn_stats: TraceStats | None = None
    learning_rate: np.ndarray | None = None
    prior_sampler: Callable[[jax.Array, int], jax.Array] | None = None


class CellData(NamedTuple):
    """The synthetic data sets of a group's K replicates and the cell's public mechanism settings.

    Only methods with ``needs_data=True`` (their own DP mechanism) receive it. The arrays are exactly
    the data sets the group's compiled replicate program simulated from the cell's fixed keys
    (:func:`dpposterior.experiments.replicates.simulate_data`): synthetic data of an experiment, not a
    user's data.

    Attributes:
      model: the model name (:data:`dpposterior.models.MODELS`).
      arrays: the model simulator's data arrays, each (K, N, ...).
      epsilon: the cell's budget per replicate (the same as each DP-SGD run's).
      delta: the cell's delta.
      num_steps: T, the cell's DP-SGD steps (for methods that run DP-SGD themselves).
      sampling_rate: q, the cell's Poisson sampling rate.
      num_records: N, records per data set.
      accountant: ``"pld"`` or ``"rdp"``.
      clip: the DPVI clip norm of the group (``ModelSpec.clip``).
    """

    model: str
    arrays: tuple[np.ndarray, ...]
    epsilon: float
    delta: float
    num_steps: int
    sampling_rate: float
    num_records: int
    accountant: Accountant
    clip: float

    @property
    def num_replicates(self) -> int:
        """K, the leading axis of every array."""
        return int(self.arrays[0].shape[0])


@dataclasses.dataclass(frozen=True)
class MethodSettings:
    """Settings of a method run.

    Attributes:
      keys: (K, 2) raw uint32 keys, one per replicate (post-processing randomness).
      num_draws: M, draws of theta per replicate.
      options: the method's solver options (from ``CellConfig.method_options``).
      mechanism_key: (2,) raw uint32 key of the noise of a method's own mechanism (methods with
        ``needs_data``; :func:`dpposterior.experiments.config.mechanism_key`), or None.
      devices: XLA devices the method may split its vmapped replicates over (the package's methods
        pass it to :func:`dpposterior._batching.map_in_chunks`, which keeps a program that calls a
        custom kernel on one device); the numbers do not depend on it beyond the last bits.
    """

    keys: np.ndarray
    num_draws: int
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    mechanism_key: np.ndarray | None = None
    devices: int = 1


class MethodOutput(NamedTuple):
    """Posterior draws of a cell's replicates.

    Attributes:
      draws: (K, M, n) float32 draws of theta in the unconstrained space.
      posterior_sd: (K, n) float64 posterior sd of each coordinate (the TARP reference scale).
      diagnostics: a JSON-ready dict of solver checks.
      privacy: the PrivacySpent of the method's own release of each replicate (methods with
        ``needs_data``); None for post-processing of the cell's DPVI releases.
    """

    draws: np.ndarray
    posterior_sd: np.ndarray
    diagnostics: dict[str, Any]
    privacy: PrivacySpent | None = None

    @property
    def sharpness(self) -> float:
        """The mean posterior sd over replicates and coordinates (unconstrained space)."""
        return float(np.mean(self.posterior_sd))


#: ``fn(releases, settings) -> MethodOutput``, or ``fn(releases, settings, data)`` with ``needs_data``.
MethodFn = Callable[..., MethodOutput]


@dataclasses.dataclass(frozen=True)
class Method:
    """A registered method.

    Attributes:
      name: its name on the command line and in results.
      fn: the method (module docstring).
      options: the option names it accepts.
      description: one line for ``--help`` and reports.
      needs_data: True for a method that runs its own DP mechanism on the replicates' synthetic data
        (it is called with a third argument, :class:`CellData`); False (default) for post-processing
        of the DPVI releases.
      models: the model names it supports, or None for every model.
      check_options: None or ``check_options(options, model)`` raising ValueError/TypeError for a bad
        option value (called when a cell is configured, before anything runs; ``model`` may be None).
      min_steps: the fewest DP-SGD steps T of a cell the method can run (None: the cell's own minimum);
        a cell with fewer is refused when it is configured.
      canonical_options: None or ``canonical_options(options) -> options``: the checked options in one
        spelling per meaning (e.g. ``bounds`` ``"0.0,5.0"`` -> ``"0,5"``, a float option 2 -> 2.0, an
        option None that means its default left out), so that equivalent spellings make one cell
        (:func:`canonical_method_options`; applied when a cell is configured).
    """

    name: str
    fn: MethodFn
    options: tuple[str, ...]
    description: str
    needs_data: bool = False
    models: tuple[str, ...] | None = None
    check_options: Callable[[dict[str, Any], str | None], None] | None = None
    min_steps: int | None = None
    canonical_options: Callable[[dict[str, Any]], dict[str, Any]] | None = None


METHODS: dict[str, Method] = {}


def method_fingerprint(name: str) -> str | None:
    """A fingerprint of a method of the user's own (None for the package's methods): its function's
    module, qualified name and a SHA-256 of its code (bytecode, constants, names), so that a cell on disk
    computed by an earlier function registered under the same name (``replace=True``, a notebook cell
    run again after an edit) is recomputed, not reused. The package's methods are fingerprinted by its
    version and model settings instead (:func:`dpposterior.experiments.runner.stale_reason`)."""
    import hashlib

    fn = get_method(name).fn
    module = getattr(fn, "__module__", "") or ""
    if module.startswith("dpposterior."):
        return None
    code = getattr(fn, "__code__", None) or getattr(getattr(fn, "__call__", None), "__code__", None)
    h = hashlib.sha256()
    if code is not None:
        _hash_code(h, code)
    qual = getattr(fn, "__qualname__", type(fn).__qualname__)
    return f"{module}.{qual}:{h.hexdigest()[:16]}"


def register_method(
    name: str,
    fn: MethodFn,
    *,
    options: tuple[str, ...] = (),
    description: str = "",
    needs_data: bool = False,
    models: tuple[str, ...] | None = None,
    check_options: Callable[[dict[str, Any], str | None], None] | None = None,
    replace: bool = False,
    min_steps: int | None = None,
    canonical_options: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> Method:
    """Adds a method to :data:`METHODS` (``replace=True`` to overwrite an existing name).

    Args:
      name: the method's name on the command line and in results (letters, digits, '-' and '_').
      fn: ``fn(releases, settings) -> MethodOutput`` (module docstring), or with ``needs_data``
        ``fn(None, settings, data) -> MethodOutput`` whose ``privacy`` is set; must be
        deterministic given ``settings.keys`` and ``settings.mechanism_key``.
      options: the solver options it accepts (checked before a cell runs).
      description: one line for ``--help`` and reports.
      needs_data: the method runs its own DP mechanism on the replicates' synthetic data.
      models: the model names it supports (None: every model).
      check_options: validates option values (None: names are checked only).
      replace: overwrite an existing method of that name.
      min_steps: the fewest DP-SGD steps T of a cell it can run (None: no minimum of its own).
      canonical_options: ``canonical_options(options) -> options`` writes checked options in one spelling
        per meaning, so that equivalent spellings make one cell, computed once (None: options are kept as
        given, numpy numbers as Python numbers, in sorted order). It must return a dict of accepted
        options and be idempotent (checked when a cell is configured).
    """
    if not isinstance(name, str) or not name or not all(c.isalnum() or c in "-_" for c in name):
        raise ValueError(f"method name must be a non-empty string of letters, digits, '-' and '_', got {name!r}")
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    if not isinstance(needs_data, bool):
        raise TypeError(f"needs_data must be a bool, got {needs_data!r}")
    if (
        isinstance(options, str)
        or not isinstance(options, (tuple, list))
        or not all(isinstance(o, str) and o for o in options)
    ):
        # a bare string would become its letters: options="alpha" accepted "a", "l", ... and refused "alpha"
        raise TypeError(f"options must be a tuple of option names (strings), got {options!r}")
    if not isinstance(description, str):
        raise TypeError(f"description must be a string, got {type(description).__name__}")
    if models is not None:
        if isinstance(models, str) or not all(isinstance(m, str) for m in models) or not tuple(models):
            raise TypeError(f"models must be None or a non-empty tuple of model names, got {models!r}")
        models = tuple(models)
        from ..models.registry import MODELS

        unknown = sorted(set(models) - set(MODELS))
        if unknown:
            raise ValueError(f"models names unknown model(s) {unknown}; available: {sorted(MODELS)}")
    if check_options is not None and not callable(check_options):
        raise TypeError(f"check_options must be None or callable, got {type(check_options).__name__}")
    if canonical_options is not None and not callable(canonical_options):
        raise TypeError(f"canonical_options must be None or callable, got {type(canonical_options).__name__}")
    if name in METHODS and not replace:
        raise ValueError(f"method {name!r} is already registered; pass replace=True to overwrite it")
    if min_steps is not None:
        from .._checks import check_positive_int

        min_steps = check_positive_int(min_steps, "min_steps")
    m = Method(name, fn, tuple(options), description, needs_data, models, check_options, min_steps, canonical_options)
    METHODS[name] = m
    return m


def get_method(name: str) -> Method:
    """The registered method called ``name``; ValueError naming the available ones otherwise."""
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; available: {sorted(METHODS)}")
    return METHODS[name]


def check_method_options(name: str, options: dict[str, Any], model: str | None = None) -> None:
    """Raises ValueError for an option the method does not accept, or a value its check refuses (for
    ``model``, when given)."""
    method = get_method(name)
    allowed = method.options
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f"unknown options {unknown} for method {name!r}; allowed: {list(allowed)}")
    if method.check_options is not None:
        method.check_options(dict(options), model)


def canonical_method_options(name: str, options: dict[str, Any]) -> dict[str, Any]:
    """Checked options of method ``name`` in their canonical spelling (``Method.canonical_options``; the
    options as given when the method has none).

    Raises:
      TypeError: the method's ``canonical_options`` returned something else than a dict.
      ValueError: it returned options the method does not accept, or is not idempotent (a second pass
        changes its result, so equal cells could still get two spellings).
    """
    import json

    method = get_method(name)
    if method.canonical_options is None:
        return dict(options)
    out = method.canonical_options(dict(options))
    if not isinstance(out, dict):
        raise TypeError(f"canonical_options of method {name!r} must return a dict of options, got {type(out).__name__}")
    unknown = sorted(str(k) for k in set(out) - set(method.options))
    if unknown:
        raise ValueError(
            f"canonical_options of method {name!r} returned unknown options {unknown}; allowed: {list(method.options)}"
        )
    again = method.canonical_options(dict(out))

    def spelled(o: Any) -> str:
        return json.dumps(o, sort_keys=True, default=repr) if isinstance(o, dict) else repr(o)

    if spelled(again) != spelled(out):
        raise ValueError(
            f"canonical_options of method {name!r} is not idempotent: {options!r} -> {out!r} -> "
            f"{again!r}; it must return options that it leaves unchanged"
        )
    return out


def canonical_number(x: float) -> str:
    """A number as canonical text inside a string option: the shortest repr of the float that reads back
    to it, without a trailing ``.0`` (``"5"``, ``"0.5"``, ``"1e-07"``); -0.0 is ``"0"``."""
    r = repr(float(x) + 0.0)
    return r[:-2] if r.endswith(".0") else r


def float_options(names: tuple[str, ...], drop_none: bool = False) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A ``canonical_options`` that writes the real-valued options ``names`` as floats (2 -> 2.0: the same
    value) and, with ``drop_none``, leaves out options given as None (for methods that read None as the
    option's default)."""

    def canonical(options: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for k, v in options.items():
            if v is None and drop_none:
                continue
            if k in names and isinstance(v, int) and not isinstance(v, bool):
                v = float(v)
            out[k] = v
        return out

    return canonical


def check_method_steps(name: str, num_steps: int) -> None:
    """Raises ValueError if method ``name`` cannot run on ``num_steps`` DP-SGD steps (``Method.min_steps``)."""
    need = get_method(name).min_steps
    if need is not None and num_steps < need:
        raise ValueError(f"method {name!r} needs num_steps >= {need} DP-SGD steps, got {num_steps}")


def check_method_burn_in(name: str, options: dict[str, Any], num_steps: int, burn_in: float) -> None:
    """Raises ValueError if an NA-DPVI solver of the package (grid, Laplace, NUTS) is given
    ``priors="burn_in"`` on a cell whose burn-in keeps fewer than
    :data:`~dpposterior.experiments.replicates.MIN_BURN_STEPS` steps: the h prior is estimated from them,
    and without this check the cell failed only after its group's DP-SGD replicates had run."""
    from ..noise_aware.stats import MIN_STEPS_AFTER_BURN_IN, burn_in_start

    if options.get("priors") != "burn_in" or get_method(name).fn not in (grid_method, laplace_method, nuts_method):
        return
    kept = burn_in_start(num_steps, burn_in)
    if kept < MIN_STEPS_AFTER_BURN_IN:
        raise ValueError(
            f'method {name!r} with priors="burn_in" takes the h prior from the burn-in steps, but '
            f"num_steps={num_steps} with burn_in={burn_in} keeps {kept} of them, fewer than "
            f"{MIN_STEPS_AFTER_BURN_IN}: raise burn_in or num_steps (burn_in * num_steps >= "
            f"{MIN_STEPS_AFTER_BURN_IN})"
        )


def check_method_model(name: str, model: str) -> None:
    """Raises ValueError if method ``name`` does not support model ``model`` (naming the ones it does)."""
    supported = get_method(name).models
    if supported is not None and model not in supported:
        raise ValueError(f"method {name!r} does not support model {model!r}; it supports: {list(supported)}")


# ------------------------------------------------------------------------------ helpers


def chunk_size(num_replicates: int, num_draws: int, num_params: int) -> int:
    """Replicates per compiled drawing call (a function of the sizes only)."""
    per = max(1, num_draws * num_params * 4 * 8)
    return int(max(1, min(num_replicates, DRAW_BYTES_PER_CHUNK // per)))


def _theta_from_phi(key: jax.Array, phi: jax.Array, num_draws: int) -> jax.Array:
    """(num_draws, n) draws of theta from the mixture over the rows of ``phi`` (S, d) of q(theta; phi).

    Row j % S is used for draw j (all rows equally often when S divides num_draws).
    """
    s = phi.shape[0]
    idx = jnp.arange(num_draws) % s
    return family.sample_mixture(key, phi[idx])


def _summarise(draws: np.ndarray) -> np.ndarray:
    return np.std(np.asarray(draws, np.float64), axis=1)


def _as32(stats) -> TraceStats:
    return TraceStats(*(jnp.asarray(x, jnp.float32) for x in stats))


def _stats32(releases: CellReleases) -> TraceStats:
    return _as32(releases.stats)


#: the ``priors`` option of the NA-DPVI solvers: "paper" (:func:`dpposterior.noise_aware.trace_priors`,
#: the default) or "burn_in" (:func:`dpposterior.noise_aware.burn_in_priors`: the h prior from the
#: burn-in steps), as ``noise_aware_posterior(priors=...)``.
PRIOR_CHOICES = ("paper", "burn_in")


#: method options that change the posterior's model, not only its solver's accuracy, or what the cell's
#: epsilon means (the baselines' neighbouring relation: DP-SGD's is add/remove-one): a cell with one of
#: them set to another value than its default is a different method in tables and figures
#: (:func:`method_label`).
LABEL_OPTIONS = ("priors", "neighbouring", "unidentified")
#: the default value of each of :data:`LABEL_OPTIONS` (not shown in labels).
LABEL_OPTION_DEFAULTS = {"priors": "paper", "neighbouring": "add_remove", "unidentified": "prior"}
#: the ``unidentified`` option of the NA-DPVI solvers: "prior" (default: latents that the release cannot
#: identify get the model prior's push-forward, as ``noise_aware_posterior(prior=...)``) or "keep" (the
#: gradient model's posterior for every latent; the rule is still reported).
UNIDENTIFIED_CHOICES = ("prior", "keep")


def method_label(config: dict[str, Any]) -> str:
    """The name of a cell's method in tables and figures: the method, and its :data:`LABEL_OPTIONS`
    when set to another value than the default, e.g. ``"grid (priors burn_in)"`` or
    ``"bernstein-sheldon (neighbouring replace_one)"`` (``config`` as a result record holds it)."""
    opts = config.get("method_options") or {}
    extra = [f"{k} {opts[k]}" for k in LABEL_OPTIONS if opts.get(k) is not None and opts[k] != LABEL_OPTION_DEFAULTS[k]]
    return config["method"] + (f" ({', '.join(extra)})" if extra else "")


def _check_na_options(options: dict[str, Any], model: str | None, solver: str = "") -> None:
    """Checks the options of an NA-DPVI solver (``solver``: "grid", "laplace" or "nuts") as
    ``noise_aware_posterior`` checks its solver options, before any DP-SGD replicate runs: an integer
    option must be an integer (never truncated) at least its minimum, ``tail`` in (0, 0.5), ``tol`` > 0,
    ``target_accept_prob`` in (0, 1)."""
    from ..noise_aware.postprocess import _check_solver_options

    priors = options.get("priors", "paper")
    if not isinstance(priors, str) or priors not in PRIOR_CHOICES:
        raise ValueError(f"the priors option must be one of {PRIOR_CHOICES}, got {priors!r}")
    unidentified = options.get("unidentified", "prior")
    if not isinstance(unidentified, str) or unidentified not in UNIDENTIFIED_CHOICES:
        raise ValueError(
            f"the unidentified option must be one of {UNIDENTIFIED_CHOICES} (the model prior for "
            f"latents the release cannot identify, or the gradient model's posterior), got "
            f"{unidentified!r}"
        )
    if "num_phi_draws" in options:
        from .._checks import check_positive_int

        check_positive_int(options["num_phi_draws"], f"{solver} option num_phi_draws".strip())
    rest = {k: v for k, v in options.items() if k not in ("priors", "num_phi_draws", "unidentified")}
    _check_solver_options(solver or "solver", rest)


def _burn32(releases: CellReleases, priors: str) -> TraceStats | None:
    """The burn-in statistics the ``priors`` choice needs (None for "paper")."""
    if priors == "paper":
        return None
    if releases.burn_stats is None:
        raise ValueError(
            'priors="burn_in" takes the h prior from the burn-in steps, but this cell keeps fewer '
            f"than {MIN_STEPS_AFTER_BURN_IN} of them: raise burn_in"
        )
    return _as32(releases.burn_stats)


def _replicate_priors(stats: TraceStats, burn: TraceStats | None, noise_sd: jax.Array, q: jax.Array):
    """One replicate's trace-based priors: the paper's, or with ``burn`` the burn-in h prior."""
    if burn is None:
        return M.trace_priors(stats, noise_sd, q)
    return M.burn_in_priors(stats, burn, noise_sd, q)


def _prior_rule(
    releases: CellReleases, settings: MethodSettings, draws: np.ndarray, choice: str
) -> tuple[np.ndarray, dict[str, Any]]:
    """The identifiability rule (:mod:`dpposterior.noise_aware.identify`) on each replicate's release:
    with ``choice`` "prior" the draws of its unidentified latents are replaced by draws of the model's prior
    (independent of the other latents); with "keep" they stay. Returns the draws and diagnostics (how many
    replicates each latent failed in, and whether the prior was applied)."""
    if releases.learning_rate is None:
        return draws, {}
    from ..noise_aware.identify import identifiability

    ident = identifiability(releases.stats, releases.noise_sd, releases.sampling_rate, releases.learning_rate)
    mask = np.asarray(ident.prior_only)  # (K, n)
    sampler = releases.prior_sampler if choice == "prior" and bool(mask.any()) else None
    applied = sampler is not None
    if sampler is not None:
        draws = np.array(draws)
        m = draws.shape[1]
        for k in np.flatnonzero(mask.any(axis=1)):
            key = jax.random.fold_in(jax.random.wrap_key_data(jnp.asarray(settings.keys[k], jnp.uint32)), 7)
            prior = np.asarray(sampler(key, m), draws.dtype)
            draws[k][:, mask[k]] = prior[:, mask[k]]
    diag = {
        "unidentified_replicates_per_latent": mask.sum(axis=0).tolist(),
        "prior_only_applied": applied,
        "median_relaxation_steps_of_means": np.median(
            ident.relaxation_steps[:, : releases.num_latent], axis=0
        ).tolist(),
        "median_slope_z_of_means": np.median(ident.slope_z[:, : releases.num_latent], axis=0).tolist(),
    }
    return draws, diag


def _options(settings: MethodSettings, defaults: dict[str, Any]) -> dict[str, Any]:
    out = dict(defaults)
    out.update(settings.options)
    return out


# ------------------------------------------------------------------------------ naive


@partial(jax.jit, static_argnames=("num_draws",))
def _naive_draws(final_phi, keys, num_draws):
    def one(phi, key):
        mu, rho = family.split_phi(phi)
        z = jax.random.normal(jax.random.wrap_key_data(key), (num_draws,) + mu.shape, mu.dtype)
        return mu + family.scale(rho) * z

    return jax.vmap(one)(final_phi, keys)


def naive_method(releases: CellReleases, settings: MethodSettings) -> MethodOutput:
    """The last iterate q(theta; phi_T): ignores the DP noise (the paper's naive baseline)."""
    n = releases.num_latent
    size = chunk_size(len(settings.keys), settings.num_draws, 2 * n)
    fn = partial(_naive_draws, num_draws=settings.num_draws)
    draws = map_in_chunks(
        fn, (np.asarray(releases.final_phi, np.float32), np.asarray(settings.keys)), size, devices=settings.devices
    )
    sd = np.asarray(family.scale(jnp.asarray(releases.final_phi[:, n:], jnp.float32)), np.float64)
    return MethodOutput(draws=draws, posterior_sd=sd, diagnostics={})


# ------------------------------------------------------------------------------ grid

#: phi* draws per replicate of the grid and Laplace solvers (as ``noise_aware_posterior`` stores, and as
#: NUTS draws); each is the centre of num_draws / num_phi_draws draws of theta.
DEFAULT_PHI_DRAWS = 4000

GRID_DEFAULTS = {
    "num_points": 256,
    "num_stages": 3,
    "tail": 1e-7,
    "num_phi_draws": DEFAULT_PHI_DRAWS,
    "priors": "paper",
    "unidentified": "prior",
}


@partial(jax.jit, static_argnames=("num_draws", "num_phi_draws", "num_points", "num_stages", "tail"))
def _grid_draws(stats, burn, keys, noise_sd, q, num_draws, num_phi_draws, num_points, num_stages, tail):
    def one(st, bs, key):
        priors = _replicate_priors(st, bs, noise_sd, q)
        grid = G.grid_posterior(st, priors, noise_sd, q, num_points=num_points, num_stages=num_stages, tail=tail)
        k_phi, k_theta = jax.random.split(jax.random.wrap_key_data(key))
        phi = G.grid_sample(grid, k_phi, min(num_phi_draws, num_draws))["phi_star"]
        return _theta_from_phi(k_theta, phi, num_draws), grid.edge_mass, grid.max_cell_mass

    return jax.vmap(one)(stats, burn, keys)


def grid_method(releases: CellReleases, settings: MethodSettings) -> MethodOutput:
    """NA-DPVI with the grid solver (phi* given h integrated exactly, an adaptive grid over h)."""
    opts = _options(settings, GRID_DEFAULTS)
    d = 2 * releases.num_latent
    size = chunk_size(len(settings.keys), settings.num_draws, d)
    fn = partial(
        _grid_draws,
        noise_sd=jnp.asarray(releases.noise_sd, jnp.float32),
        q=jnp.float32(releases.sampling_rate),
        num_draws=settings.num_draws,
        num_phi_draws=int(opts["num_phi_draws"]),
        num_points=int(opts["num_points"]),
        num_stages=int(opts["num_stages"]),
        tail=float(opts["tail"]),
    )
    burn = _burn32(releases, opts["priors"])
    draws, edge, cell = map_in_chunks(
        fn, (_stats32(releases), burn, np.asarray(settings.keys)), size, devices=settings.devices
    )
    diag = {
        "max_edge_mass": float(np.max(edge)),
        "max_cell_mass": float(np.max(cell)),
        "replicates_with_edge_mass_over_1e-4": int(np.sum(np.max(edge, axis=1) > 1e-4)),
    }
    draws, rule = _prior_rule(releases, settings, draws, opts["unidentified"])
    diag.update(rule)
    return MethodOutput(draws=draws, posterior_sd=_summarise(draws), diagnostics=diag)


# ------------------------------------------------------------------------------ laplace

LAPLACE_DEFAULTS = {
    "num_iterations": 100,
    "num_points": 128,
    "tol": 1e-3,
    "num_phi_draws": DEFAULT_PHI_DRAWS,
    "priors": "paper",
    "unidentified": "prior",
}


@partial(jax.jit, static_argnames=("num_draws", "num_phi_draws", "num_iterations", "num_points"))
def _laplace_draws(stats, burn, keys, noise_sd, q, tol, num_draws, num_phi_draws, num_iterations, num_points):
    priors = _replicate_priors(stats, burn, noise_sd, q)
    res = L.laplace_posterior(
        stats,
        priors,
        jnp.broadcast_to(noise_sd, stats.phi_mean.shape),
        q,
        num_iterations=num_iterations,
        num_points=num_points,
        tol=tol,
    )

    def one(mode, sd, key):
        k_phi, k_theta = jax.random.split(jax.random.wrap_key_data(key))
        phi = mode + sd * jax.random.normal(k_phi, (min(num_phi_draws, num_draws),) + mode.shape, mode.dtype)
        return _theta_from_phi(k_theta, phi, num_draws)

    return jax.vmap(one)(res.phi_star_mode, res.phi_star_sd, keys), res.converged


def laplace_method(releases: CellReleases, settings: MethodSettings) -> MethodOutput:
    """NA-DPVI with the Laplace solver: phi* ~ N(joint mode, marginal inverse-Hessian variance)."""
    opts = _options(settings, LAPLACE_DEFAULTS)
    d = 2 * releases.num_latent
    size = chunk_size(len(settings.keys), settings.num_draws, d)
    fn = partial(
        _laplace_draws,
        noise_sd=jnp.asarray(releases.noise_sd, jnp.float32),
        q=jnp.float32(releases.sampling_rate),
        tol=float(opts["tol"]),
        num_draws=settings.num_draws,
        num_phi_draws=int(opts["num_phi_draws"]),
        num_iterations=int(opts["num_iterations"]),
        num_points=int(opts["num_points"]),
    )
    burn = _burn32(releases, opts["priors"])
    draws, converged = map_in_chunks(
        fn, (_stats32(releases), burn, np.asarray(settings.keys)), size, devices=settings.devices
    )
    diag = {"replicates_not_converged": int(np.sum(~np.all(converged, axis=1)))}
    draws, rule = _prior_rule(releases, settings, draws, opts["unidentified"])
    diag.update(rule)
    return MethodOutput(draws=draws, posterior_sd=_summarise(draws), diagnostics=diag)


# ------------------------------------------------------------------------------ nuts

NUTS_DEFAULTS = {
    "num_warmup": 1000,
    "num_samples": 4000,
    "target_accept_prob": 0.8,
    "max_tree_depth": 10,
    "priors": "paper",
    "unidentified": "prior",
}


def _nuts_potential_gen(stats, priors, noise_sd, q):
    """The potential energy of the NUTS solver's model (:mod:`dpposterior.noise_aware.nuts`) for one
    replicate's statistics; numpyro builds it from the same model."""
    from numpyro.infer.util import potential_energy

    from ..noise_aware.nuts import _post_processing_model

    args = (stats, priors, noise_sd, q, False, None)

    def pe(z):
        return potential_energy(_post_processing_model, args, {}, z)

    return pe


@partial(jax.jit, static_argnames=("num_warmup", "num_samples", "max_tree_depth", "num_draws"))
def _nuts_draws(stats, burn, keys, noise_sd, q, target_accept_prob, num_warmup, num_samples, max_tree_depth, num_draws):
    from numpyro.infer.hmc import hmc

    init_kernel, sample_kernel = hmc(potential_fn_gen=_nuts_potential_gen, algo="NUTS")
    d = stats.phi_mean.shape[-1]

    def one(st, bs, key):
        key = jax.random.wrap_key_data(key)
        k_init, k_run, k_theta = jax.random.split(key, 3)
        priors = _replicate_priors(st, bs, noise_sd, q)
        args = (st, priors, noise_sd, q)
        z0 = jax.random.uniform(k_init, (2, d), minval=-2.0, maxval=2.0)
        init = {"z_phi_star": z0[0], "z_h": z0[1]}
        state = init_kernel(
            init,
            num_warmup,
            target_accept_prob=target_accept_prob,
            max_tree_depth=max_tree_depth,
            model_args=args,
            rng_key=jax.random.key_data(k_run),
        )

        def step(s, _):
            s = sample_kernel(s, model_args=args)
            return s, (s.z["z_phi_star"], s.diverging)

        state, _ = jax.lax.scan(step, state, None, length=num_warmup)
        state, (z_phi, div) = jax.lax.scan(step, state, None, length=num_samples)
        phi = priors.phi_loc + priors.phi_scale * z_phi  # (S, d)
        return _theta_from_phi(k_theta, phi, num_draws), jnp.sum(div), jnp.mean(z_phi, 0), jnp.var(z_phi, 0)

    return jax.vmap(one)(stats, burn, keys)


def nuts_method(releases: CellReleases, settings: MethodSettings) -> MethodOutput:
    """NA-DPVI with NumPyro NUTS on the post-processing model, vmapped over replicates."""
    opts = _options(settings, NUTS_DEFAULTS)
    d = 2 * releases.num_latent
    size = chunk_size(len(settings.keys), max(settings.num_draws, int(opts["num_samples"])), d)
    fn = partial(
        _nuts_draws,
        noise_sd=jnp.asarray(releases.noise_sd, jnp.float32),
        q=jnp.float32(releases.sampling_rate),
        target_accept_prob=float(opts["target_accept_prob"]),
        num_warmup=int(opts["num_warmup"]),
        num_samples=int(opts["num_samples"]),
        max_tree_depth=int(opts["max_tree_depth"]),
        num_draws=settings.num_draws,
    )
    burn = _burn32(releases, opts["priors"])
    draws, div, _, _ = map_in_chunks(
        fn, (_stats32(releases), burn, np.asarray(settings.keys)), size, devices=settings.devices
    )
    diag = {"divergences": int(np.sum(div)), "replicates_with_divergences": int(np.sum(div > 0))}
    draws, rule = _prior_rule(releases, settings, draws, opts["unidentified"])
    diag.update(rule)
    return MethodOutput(draws=draws, posterior_sd=_summarise(draws), diagnostics=diag)


register_method("naive", naive_method, description="last iterate q(theta; phi_T), ignores the DP noise")
register_method(
    "grid",
    grid_method,
    options=tuple(GRID_DEFAULTS),
    check_options=partial(_check_na_options, solver="grid"),
    canonical_options=float_options(("tail",)),
    description="NA-DPVI, grid solver (exact in phi*, adaptive grid over h)",
)
register_method(
    "laplace",
    laplace_method,
    options=tuple(LAPLACE_DEFAULTS),
    check_options=partial(_check_na_options, solver="laplace"),
    canonical_options=float_options(("tol",)),
    description="NA-DPVI, Laplace solver (joint mode, inverse Hessian)",
)
register_method(
    "nuts",
    nuts_method,
    options=tuple(NUTS_DEFAULTS),
    check_options=partial(_check_na_options, solver="nuts"),
    canonical_options=float_options(("target_accept_prob",)),
    description="NA-DPVI, NumPyro NUTS (1,000 warm-up, 4,000 draws), vmapped over replicates",
)
