"""Running a kernel for a whole chain: samples, the chain's PrivacySpent, diagnostics."""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections import OrderedDict
from typing import Any, Callable, cast

import jax
import numpy as np

from .._checks import check_delta, check_positive_int
from ..privacy import PrivacySpent
from ..privacy.spent import SeededBy, not_private
from ..privacy.noise import with_noise_tail
from ..privacy.secure import os_key, resolve_noise_source
from .accounting import (
    FAST_MH_ACCOUNTANTS,
    GAUSSIAN_ACCOUNTANTS,
    NEIGHBOURING,
    FastMHAccountant,
    GaussianAccountant,
    barker_epsilon,
    compose_iterations,
    gaussian_chain_epsilon,
)
from .kernels import BatchLimitError, Kernel, MHInfo, MHState, check_positions, init_states


@dataclasses.dataclass(frozen=True)
class ChainResult:
    """The release of a chain run, with its privacy.

    Attributes:
      samples: float array (num_chains, num_steps, dim): the positions after every step (the release).
      privacy: the :class:`~dpposterior.privacy.PrivacySpent` of releasing all of ``samples``.
      nonprivate_info: :class:`~dpposterior.mcmc.kernels.MHInfo` of numpy arrays (num_chains, num_steps).
        NOT PRIVATE: data-dependent diagnostics outside the guarantee; never publish them.
      method: the kernel's method name.
    """

    samples: np.ndarray
    privacy: PrivacySpent
    nonprivate_info: MHInfo
    method: str


def _chain_privacy(
    kernel: Kernel, num_iterations: int, total_delta: float | None, accountant: str | None, seeded_by: SeededBy
) -> PrivacySpent:
    cfg = kernel.config
    if kernel.method == "tuna_mh" or not cfg.private:
        # nothing to account, but a mistyped accountant or an out-of-range delta is still an error
        allowed = _ACCOUNTANTS.get(kernel.method, tuple(dict.fromkeys(sum(_ACCOUNTANTS.values(), ()))))
        if accountant is not None and accountant not in allowed:
            raise ValueError(f"accountant for {kernel.method} must be one of {allowed} (or None), got {accountant!r}")
        if total_delta is not None:
            check_delta(total_delta, "total_delta")
        return not_private(kernel.method, "non-private sampler (no noise)")
    t = num_iterations
    if kernel.method == "dp_fast_mh":
        c = cfg.constants
        acc = accountant or "optimal"
        if acc not in FAST_MH_ACCOUNTANTS:
            raise ValueError(f"accountant for dp_fast_mh must be one of {FAST_MH_ACCOUNTANTS}, got {acc!r}")
        if total_delta is None:
            floor = 1.0 - math.exp(t * math.log1p(-c.delta))
            total_delta = 2.0 * max(floor, t * c.delta)
            if not total_delta < 1.0:
                raise ValueError(
                    f"the default total_delta (twice what {t} iterations with per-iteration delta "
                    f"{c.delta:g} force) is {total_delta:g} >= 1: no (epsilon, delta) guarantee; lower "
                    "the per-iteration delta or the number of steps, or give total_delta in (0, 1)"
                )
        dg = check_delta(total_delta, "total_delta")
        eps = compose_iterations(c.epsilon, c.delta, t, dg, cast(FastMHAccountant, acc))  # checked above
        # the authors' accounting (advanced composition) for comparison; None where it gives no bound
        authors = compose_iterations(c.epsilon, c.delta, t, dg, "advanced") if dg > t * c.delta else None
        details = (
            ("per_iteration_epsilon", c.epsilon),
            ("per_iteration_delta", c.delta),
            ("epsilon_prime", c.epsilon_prime),
            ("delta_prime", c.delta_prime),
            ("sigma1", c.sigma1),
            ("sigma2", c.sigma2),
            ("batch_cap", c.batch_cap),
            ("lambda", c.lam),
            ("total_bound_C", c.total_bound),
            ("max_bound_c_max", c.max_bound),
            ("epsilon_advanced_composition", authors),
            ("sampling", "with replacement, probabilities c_i/C, size Poisson(lambda + C M)"),
            ("reference", "Zhang, Zhang & De Sa 2023, Theorem 2"),
            # total_bound_C and batch_cap grow with N and the c_i: not privatised, as the paper has it
            ("num_records", "public"),
            ("bound_constants", "public"),
        )
        return PrivacySpent(
            epsilon=eps,
            delta=dg,
            neighbouring=NEIGHBOURING,
            accountant=acc,
            mechanism="dp_fast_mh",
            noise_multiplier=c.sigma2,
            sampling_rate=1.0,
            num_steps=t,
            seeded_by=seeded_by,
            details=details,
        )
    if kernel.method == "dp_barker":
        return _barker_privacy(kernel, t, total_delta, accountant, seeded_by)
    # penalty
    acc = accountant or "pld"
    if acc not in GAUSSIAN_ACCOUNTANTS:
        raise ValueError(f"accountant for penalty must be one of {GAUSSIAN_ACCOUNTANTS}, got {acc!r}")
    if total_delta is None:
        if cfg.delta is None:
            raise ValueError("total_delta is required for a penalty chain built from a noise_multiplier")
        total_delta = cfg.delta
    dg = check_delta(total_delta, "total_delta")
    sigma = cfg.noise_multiplier
    eps = gaussian_chain_epsilon(sigma, t, dg, cast(GaussianAccountant, acc), per_iteration_delta=cfg.delta)
    facts: list[tuple[str, Any]] = [
        ("sensitivity", "2 c_max M(theta, theta') (log ratio, replace-one)"),
        ("reference", "Yildirim & Ermis 2019"),
    ]
    if cfg.delta is not None and cfg.epsilon is not None:
        facts = [("per_iteration_epsilon", cfg.epsilon), ("per_iteration_delta", cfg.delta)] + facts
        if dg > t * cfg.delta:
            facts.append(
                (
                    "epsilon_advanced_composition",
                    gaussian_chain_epsilon(sigma, t, dg, "advanced", per_iteration_delta=cfg.delta),
                )
            )
    return PrivacySpent(
        epsilon=eps,
        delta=dg,
        neighbouring=NEIGHBOURING,
        accountant=acc,
        mechanism="penalty_mh",
        noise_multiplier=sigma,
        sampling_rate=1.0,
        num_steps=t,
        seeded_by=seeded_by,
        details=tuple(facts),
    )


#: the accountants of each method (the first is the default).
_ACCOUNTANTS = {"dp_fast_mh": FAST_MH_ACCOUNTANTS, "penalty": GAUSSIAN_ACCOUNTANTS, "dp_barker": ("rdp",)}


def _check_kernel(kernel: Any) -> Kernel:
    if not isinstance(kernel, Kernel):
        raise TypeError(
            f"kernel must be a dpposterior.mcmc.Kernel (e.g. from penalty_kernel), got {type(kernel).__name__}"
        )
    return kernel


def _barker_privacy(
    kernel: Kernel, t: int, total_delta: float | None, accountant: str | None, seeded_by: SeededBy
) -> PrivacySpent:
    cfg = kernel.config
    acc = accountant or "rdp"
    if acc != "rdp":
        raise ValueError(f"accountant for dp_barker must be 'rdp', got {acc!r}")
    dg = check_delta(cfg.delta if total_delta is None else total_delta, "total_delta")
    n = kernel.model.num_records
    eps, order = barker_epsilon(cfg.batch_size, n, t, dg)
    per_iter, _ = barker_epsilon(cfg.batch_size, n, 1, dg)
    details = (
        ("per_iteration_epsilon", per_iter),
        ("rdp_order", order),
        ("batch_size", cfg.batch_size),
        ("clip", cfg.clip),
        ("normal_variance_C", cfg.normal_variance),
        ("correction_max_cdf_error", cfg.correction.max_cdf_error),
        ("sampling", "b of N uniformly without replacement, every iteration"),
        ("amplification", "Wang, Balle & Kasiviswanathan 2019, Theorem 9"),
        ("reference", "Heikkila et al. 2019"),
    )
    if cfg.batch_size == n:  # barker_epsilon takes each order's smaller bound (barker_full_batch_rdp)
        details = details[:6] + (
            ("sampling", "all N records every iteration (b = N)"),
            (
                "full_batch_bound",
                "the smaller, per RDP order, of the paper's bound and the "
                "Gaussian mechanism's (s2 = 0 at b = N: variance C, replace-one sensitivity 2B)",
            ),
            ("reference", "Heikkila et al. 2019; Mironov 2017"),
        )
    return PrivacySpent(
        epsilon=eps,
        delta=dg,
        neighbouring=NEIGHBOURING,
        accountant="rdp",
        mechanism="dp_barker",
        noise_multiplier=None,
        sampling_rate=cfg.batch_size / n,
        num_steps=t,
        seeded_by=seeded_by,
        details=details,
    )


def chain_privacy(
    kernel: Kernel,
    num_steps: int,
    *,
    num_chains: int = 1,
    total_delta: float | None = None,
    accountant: str | None = None,
    seeded_by: SeededBy = "os",
) -> PrivacySpent:
    """The PrivacySpent of releasing ``num_chains`` chains of ``num_steps`` iterations on the same data.

    All iterations of all chains are composed (num_chains * num_steps mechanisms). DP-Fast MH:
    accountant ``"optimal"`` (default), ``"pld"``, ``"advanced"`` or ``"basic"``
    (:func:`dpposterior.mcmc.compose_iterations`); ``total_delta`` defaults to twice what the
    per-iteration deltas force. Penalty: ``"pld"`` (default), ``"rdp"``, ``"exact"``, ``"advanced"``
    (:func:`dpposterior.mcmc.gaussian_chain_epsilon`); ``total_delta`` defaults to the per-iteration
    delta. The advanced-composition figure (the authors' accounting) is kept in ``details``.
    DP Barker: ``"rdp"`` (:func:`dpposterior.mcmc.barker_epsilon`); ``total_delta`` defaults to the
    kernel's ``delta``; the per-iteration epsilon is in ``details``. Each private iteration draws one
    Gaussian normal (:mod:`dpposterior.privacy.noise`), whose tail term is added to delta.
    """
    kernel = _check_kernel(kernel)
    t = check_positive_int(num_steps, "num_steps") * check_positive_int(num_chains, "num_chains")
    return with_noise_tail(_chain_privacy(kernel, t, total_delta, accountant, seeded_by), t)


def run_chain(
    kernel: Kernel,
    initial_position: Any,
    num_steps: int,
    *,
    rng_key: Any = None,
    total_delta: float | None = None,
    accountant: str | None = None,
    secure: bool = False,
) -> ChainResult:
    """Runs ``kernel`` for ``num_steps`` iterations from each initial position and accounts the release.

    Args:
      kernel: from :func:`tuna_mh_kernel`, :func:`dp_fast_mh_kernel`, :func:`penalty_kernel` or
        :func:`dp_barker_kernel`.
      initial_position: (dim,) for one chain or (num_chains, dim) for several (run in parallel with
        vmap, each composed into the privacy total). The initial positions must not depend on the
        private data (they are not accounted).
      num_steps: T >= 1 iterations per chain.
      rng_key: None (privacy noise seeded from the operating system; recorded ``seeded_by="os"``),
        or an int / JAX key (reproduction only: whoever knows it can remove the noise).
      total_delta, accountant: see :func:`chain_privacy`.
      secure: every value an iteration draws (proposal, minibatch size and indices, Gaussian
        privacy noise, acceptance uniform) is computed from fresh bits of the operating system's
        CSPRNG, read at the moment of the draw (:func:`~dpposterior.privacy.secure.os_key`); no
        seed exists, so none can leak (recorded ``seeded_by="secure"``). ``rng_key`` must then be
        None. Each draw costs a host round trip.

    Returns:
      A :class:`ChainResult` whose ``privacy`` covers every released sample.

    Raises:
      BatchLimitError: (a ValueError) TunaMH or DP-Fast MH whose minibatch test would evaluate more
        than the kernel's ``max_batch`` records: before the run, when the typical step from the
        initial positions does; or after it, when a step did (the chain is not exact from that
        step on; the samples of all chains before it are in the error's ``partial``). See
        :func:`tuna_mh_kernel`.
    """
    t = check_positive_int(num_steps, "num_steps")
    if not isinstance(kernel, Kernel):
        raise TypeError(f"kernel must be a dpposterior.mcmc.Kernel, got {kernel!r}")
    pos = np.asarray(initial_position)
    if pos.ndim == 1:
        pos = pos[None, :]
    if pos.ndim != 2:
        raise ValueError(f"initial_position must have shape (dim,) or (num_chains, dim), got {pos.shape}")
    pos = check_positions(kernel.model, pos)
    raw_key, seeded_by = resolve_noise_source(rng_key, secure)
    privacy = chain_privacy(
        kernel, t, num_chains=pos.shape[0], total_delta=total_delta, accountant=accountant, seeded_by=seeded_by
    )
    state = init_states(kernel.model, pos)
    if kernel.check_start is not None:  # TunaMH, DP-Fast MH: the typical minibatch within max_batch
        kernel.check_start(pos)
    if seeded_by == "secure":  # every draw of every iteration and chain reads the OS CSPRNG
        step_keys = jax.random.split(os_key(), (pos.shape[0], t))
        samples, info = _run_steps(kernel, step_keys, state)
    else:
        keys = jax.random.split(jax.random.wrap_key_data(raw_key), pos.shape[0])
        samples, info = _run(kernel, keys, state, t)
    info = MHInfo(*(np.asarray(x) for x in info))
    if np.any(info.batch_overflow):
        _raise_batch_limit(kernel, np.asarray(samples), info, privacy)
    invalid = int(np.sum(_invalid_minibatch_tests(kernel.method, info)))
    if invalid:  # only for a non-private chain, whose whole output is outside any guarantee anyway
        warnings.warn(
            f"{invalid} of {info.accepted.size} minibatch Barker tests (private=False) had a variance "
            f"estimate s2 of the log ratio at or above C = {kernel.config.normal_variance:g}: their test "
            "is invalid (Seita et al.), so s2 was set to C and no Gaussian was added; use a larger "
            "batch_size (ChainDiagnostics.nonprivate_invalid_test_fraction counts them)",
            RuntimeWarning,
            stacklevel=2,
        )
    return ChainResult(samples=np.asarray(samples), privacy=privacy, nonprivate_info=info, method=kernel.method)


def _raise_batch_limit(kernel: Kernel, samples: np.ndarray, info: MHInfo, privacy: PrivacySpent) -> None:
    """Ends a run in which a minibatch test exceeded ``max_batch``, keeping the exact samples before it."""
    over = np.asarray(info.batch_overflow, bool)
    first = np.where(over.any(axis=1), over.argmax(axis=1), over.shape[1])
    chain = int(np.argmin(first))
    t0 = int(first[chain])
    partial = None
    if t0 > 0:
        partial = ChainResult(
            samples=samples[:, :t0],
            privacy=privacy,
            nonprivate_info=MHInfo(*(x[:, :t0] for x in info)),
            method=kernel.method,
        )
    cfg, model = kernel.config, kernel.model
    lam = f"lambda = {cfg.lam:.4g}" if cfg.lam is not None else f"lambda = chi C^2 M^2 with chi = {cfg.chi:.3g}"
    raise BatchLimitError(
        f"{kernel.method}: step {t0} of chain {chain} would have evaluated more than max_batch = {cfg.max_batch} "
        f"records in its minibatch test ({int(over.sum())} of {over.size} steps did), so the run ends there: a batch "
        f"is never truncated (that would change the chain and its privacy). Its size is Poisson(lambda + C M) "
        f"records, each costing N c_max / C = {model.num_records * model.max_bound / model.total_bound:.4g} candidate "
        f"evaluations, with C = {model.total_bound:.4g} (N = {model.num_records}) and {lam}: the proposal step M of "
        "that step was far beyond the posterior's scale (the typical step from the initial positions was within the "
        "limit; a proposal whose steps grow as the chain moves, or a rare large step). Rescale the data with public "
        "constants so that the bound constants are small, take a smaller proposal step, tighten the box and the "
        "bounds, or raise max_batch (at most 2^30). "
        + (
            f"The exact samples of all chains before step {t0} are in this error's .partial (accounted as the "
            "whole run)."
            if partial is not None
            else "No step before it completed."
        ),
        partial=partial,
        step=t0,
    )


def _invalid_minibatch_tests(method: str, info: MHInfo) -> np.ndarray:
    """Steps of a non-private minibatch Barker test whose s2 reached C (the kernel then sets s2 = C,
    so its Gaussian sd is 0). A private test caps s2 at 0.9801 < C and the exact full-data test uses
    no Gaussian, so neither is counted."""
    if method != "dp_barker":
        return np.zeros(info.accepted.shape, bool)
    return (~np.asarray(info.used_full_batch, bool)) & (np.asarray(info.noise_std) == 0)


def make_chain_run(kernel: Kernel, num_steps: int) -> Callable[..., tuple[Any, MHInfo]]:
    """The pure core of :func:`run_chain`: ``run(key, state, data, bound_constants) -> (positions, info)``.

    One chain of ``num_steps`` steps of ``kernel.step_on_data`` from ``state`` (an :class:`MHState`),
    with the data passed in, so it can be jitted or vmapped with traced data (e.g. a privacy audit
    that switches a canary record in and out). It accounts nothing: the privacy of what it returns
    is :func:`chain_privacy` of the same kernel and number of steps. ``positions`` has shape
    (num_steps, dim); ``info`` is NOT PRIVATE. Unlike :func:`run_chain`, it neither runs
    ``kernel.check_start`` nor raises on ``info.batch_overflow`` (TunaMH, DP-Fast MH): the steps
    from the first overflow on are not exact; check it.
    """
    if not isinstance(kernel, Kernel):
        raise TypeError(f"kernel must be a dpposterior.mcmc.Kernel, got {kernel!r}")
    t = check_positive_int(num_steps, "num_steps")

    steps = _steps_run(kernel)

    def run(key, state, data, bound_constants):
        return steps(jax.random.split(key, t), state, data, bound_constants)

    return run


def _steps_run(kernel: Kernel) -> Callable[..., tuple[Any, MHInfo]]:
    """``run(step_keys (T,), state, data, bound_constants) -> (positions, info)``: one key per step."""

    def run(step_keys, state, data, bound_constants):
        def body(carry, k):
            new, info = kernel.step_on_data(k, carry, data, bound_constants)
            return new, (new.position, info)

        _, (positions, info) = jax.lax.scan(body, state, step_keys)
        return positions, info

    return run


# compiled chain programs, per kernel object: a second run_chain with the same kernel (and T) reuses
# the program instead of tracing and compiling again. Keyed by id(kernel) and checked by identity
# (the entry holds the kernel, so its id cannot be reused while cached); the data are arguments,
# not constants baked into the program. An entry keeps its kernel, and so the kernel's data, in
# memory until it is evicted: the cache is kept small (the last few kernels) for that reason.
_COMPILED: OrderedDict[tuple[int, str, int], tuple[Kernel, Callable[..., Any]]] = OrderedDict()
_COMPILED_MAX = 4


def _compiled(kernel: Kernel, which: str, num_steps: int) -> Callable[..., Any]:
    key = (id(kernel), which, num_steps)
    hit = _COMPILED.get(key)
    if hit is not None and hit[0] is kernel:
        _COMPILED.move_to_end(key)
        return hit[1]
    run = _steps_run(kernel) if which == "steps" else make_chain_run(kernel, num_steps)
    fn = jax.jit(jax.vmap(run, in_axes=(0, 0, None, None)))
    _COMPILED[key] = (kernel, fn)
    while len(_COMPILED) > _COMPILED_MAX:
        _COMPILED.popitem(last=False)
    return fn


def _run_steps(kernel: Kernel, step_keys, state: MHState):
    fn = _compiled(kernel, "steps", 0)
    return fn(step_keys, state, kernel.model.data, kernel.model.bound_constants)


def _run(kernel: Kernel, keys, state: MHState, num_steps: int):
    fn = _compiled(kernel, "run", num_steps)
    return fn(keys, state, kernel.model.data, kernel.model.bound_constants)


@dataclasses.dataclass(frozen=True)
class ChainDiagnostics:
    """Diagnostics of a chain run.

    Attributes:
      ess: bulk effective sample size per coordinate (ArviZ), from the released samples.
      rhat: rank-normalised split R-hat per coordinate (ArviZ), from the released samples; NaN for a
        single chain (R-hat compares chains: run several, an ``initial_position`` of shape (chains, dim)).
      nonprivate_acceptance_rate: fraction of accepted proposals. NOT PRIVATE (from MHInfo).
      nonprivate_mean_batch_size: mean records evaluated per step. NOT PRIVATE.
      nonprivate_full_batch_fraction: fraction of steps that ran the full-batch test. NOT PRIVATE.
      nonprivate_bound_violations: total evaluated records that broke the bound. NOT PRIVATE.
      nonprivate_invalid_test_fraction: fraction of steps of a non-private minibatch Barker test
        (``dp_barker_kernel(private=False)``, b < N) whose variance estimate s2 reached C, where the
        test is invalid and s2 was set to C (0 for every other kernel). NOT PRIVATE.
      nonprivate_clipped_fraction: share of the log ratios evaluated by a private DP Barker test
        that its clip B = 0.99 sqrt(b) / N changed (``MHInfo.clipped_ratios`` over the records
        evaluated; 0 for every other kernel). Where it is not about 0 the chain is biased: shorten
        the proposal until c_max M(theta, theta') <= B for most proposals. NOT PRIVATE.
    """

    ess: np.ndarray
    rhat: np.ndarray
    nonprivate_acceptance_rate: float
    nonprivate_mean_batch_size: float
    nonprivate_full_batch_fraction: float
    nonprivate_bound_violations: int
    nonprivate_invalid_test_fraction: float = 0.0
    nonprivate_clipped_fraction: float = 0.0


def diagnostics(result: ChainResult, burn_in: int = 0) -> ChainDiagnostics:
    """ESS and R-hat (ArviZ) of the released samples after ``burn_in``, and the NON-PRIVATE step
    statistics (acceptance, batch sizes, full-batch fraction, bound violations) over all steps."""
    from .._arviz import import_arviz

    az = import_arviz()

    if not isinstance(result, ChainResult):
        raise TypeError(f"result must be a ChainResult (from run_chain), got {type(result).__name__}")
    b = check_positive_int(burn_in, "burn_in", minimum=0)
    draws = result.samples[:, b:, :]
    if draws.shape[1] < 4:
        raise ValueError(f"need at least 4 draws per chain after burn_in={b}, got {draws.shape[1]}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # R-hat of a single chain / constant draws
        warnings.filterwarnings("ignore", "More chains", UserWarning)  # many short chains are fine here
        ds = az.convert_to_dataset({"theta": draws})
        ess = np.asarray(az.ess(ds, method="bulk")["theta"].values, np.float64)
        # R-hat compares chains: undefined for one (ArviZ would log a shape warning and give NaN)
        rhat = (
            np.asarray(az.rhat(ds)["theta"].values, np.float64)
            if draws.shape[0] > 1
            else np.full(draws.shape[2:], np.nan)
        )
    info = result.nonprivate_info
    return ChainDiagnostics(
        ess=ess,
        rhat=rhat,
        nonprivate_acceptance_rate=float(np.mean(info.accepted)),
        nonprivate_mean_batch_size=float(np.mean(info.batch_size)),
        nonprivate_full_batch_fraction=float(np.mean(info.used_full_batch)),
        nonprivate_bound_violations=int(np.sum(info.bound_violations)),
        nonprivate_invalid_test_fraction=float(np.mean(_invalid_minibatch_tests(result.method, info))),
        nonprivate_clipped_fraction=float(np.sum(info.clipped_ratios) / max(float(np.sum(info.batch_size)), 1.0)),
    )
