"""TunaMH, DP-Fast MH and the penalty algorithm as pure init/step kernels (DP Barker: barker.py).

Every kernel is a :class:`Kernel`: ``init(position) -> MHState`` and a jit-able
``step(key, state) -> (MHState, MHInfo)`` closed over the model; ``step_on_data(key, state, data,
bound_constants)`` is the same step with the data as an argument (for audits that switch a canary
record in and out under jit). The kernels draw no randomness they were not given.

Shared by all: propose theta' (any :class:`~dpposterior.mcmc.model.Proposal`; its log ratio is
always in the test); a proposal outside the box is rejected without looking at the data; the log
prior ratio is always included; accept iff ``log u < log r + Z - s^2 / 2`` with ``Z ~ N(0, s^2)``
(the penalty correction of Ceperley & Dewing 1999, which keeps the chain exactly reversible for any
noise scale s that is symmetric in theta and theta'; s = 0 is the plain MH test).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import check_float32_positive, check_positive, check_positive_int
from ..privacy.noise import add_gaussian_noise, normal_words
from ..privacy.secure import poisson
from .accounting import FastMHConstants, classic_noise_multiplier, dp_fast_mh_constants
from .model import EnergyModel, Proposal

Array = Any

#: default number of minibatch draws evaluated per pass of the minibatch loop.
DEFAULT_CHUNK = 64
#: TunaMH's default lambda = chi C^2 M^2 (Zhang et al. 2020).
DEFAULT_CHI = 1e-5
#: the default ``max_batch`` is max(MAX_BATCH_PER_RECORD * N, MAX_BATCH_FLOOR), at most MAX_BATCH_LIMIT.
MAX_BATCH_PER_RECORD = 10
MAX_BATCH_FLOOR = 10**6
#: the largest ``max_batch`` (the minibatch loop counts records in int32).
MAX_BATCH_LIMIT = 2**30
#: proposals drawn from each initial position to estimate the typical minibatch before a chain runs.
PREFLIGHT_DRAWS = 256


class MHState(NamedTuple):
    """The state of a chain: the position (1-D float32 array) and its log prior (cached)."""

    position: Array
    log_prior: Array


class MHInfo(NamedTuple):
    """What one step did. NOT PRIVATE: these depend on the data and are not released by the DP
    samplers' guarantee (``accepted`` is a function of the released chain when proposals are
    continuous; the others may not be). Use them for debugging and tuning, do not publish them.

    Attributes:
      accepted: whether theta' was accepted.
      proposal_in_box: whether theta' lay in the parameter box (rejected otherwise).
      batch_size: the batch size of the test: TunaMH's Poisson batch size B (records drawn with
        probability c_i / C) for a minibatch test, N for a full-batch test. (The minibatch test
        evaluates about B N c_max / C candidate records: B when all c_i are equal.)
      used_full_batch: whether the full-batch test ran.
      noise_std: the std s of the Gaussian noise added to the log ratio (0 without noise).
      bound_violations: evaluated records with |U_i(theta') - U_i(theta)| > c_i M (beyond float
        tolerance) or NaN: the bound the kernel relies on is wrong there, and so is the chain.
      clipped_ratios: records of the batch whose log ratio the private DP Barker test clipped
        (|U_i(theta) - U_i(theta')| > B, or NaN); 0 for every other kernel and for
        ``private=False``. Where it is not 0 the test used a biased log ratio (see
        :func:`dpposterior.mcmc.dp_barker_kernel`).
      batch_overflow: TunaMH and DP-Fast MH: the minibatch test would have evaluated more than the
        kernel's ``max_batch`` records (or its expected size lambda + C M was not finite), so it was
        not run and theta' was rejected without a test (``batch_size`` 0). The chain is not exact
        from that step on: :func:`~dpposterior.mcmc.run_chain` raises
        :class:`~dpposterior.mcmc.BatchLimitError`; a caller of ``step`` must check this itself.
        Always False for the other kernels.
    """

    accepted: Array
    proposal_in_box: Array
    batch_size: Array
    used_full_batch: Array
    noise_std: Array
    bound_violations: Array
    clipped_ratios: Array
    batch_overflow: Array


class Kernel(NamedTuple):
    """A sampler: pure functions over :class:`MHState`, and what it needs for accounting.

    Attributes:
      init: ``init(position) -> MHState`` (validates the position).
      step: ``step(key, state) -> (MHState, MHInfo)``, jit-able, closed over the model's data.
      step_on_data: ``step_on_data(key, state, data, bound_constants)``: the same step with the
        data passed in (jit-able with traced data).
      method: ``"tuna_mh"``, ``"dp_fast_mh"``, ``"penalty"`` or ``"dp_barker"`` (mcmc/barker.py).
      config: the method's constants (a frozen dataclass).
      model: the :class:`~dpposterior.mcmc.EnergyModel` it samples.
      check_start: ``check_start(positions)`` for initial positions of shape (num_chains, dim),
        run by ``init`` and :func:`~dpposterior.mcmc.run_chain` before any step: TunaMH and
        DP-Fast MH refuse a proposal whose typical minibatch exceeds ``max_batch`` there
        (:class:`~dpposterior.mcmc.BatchLimitError`); None for the other kernels.
    """

    init: Callable[[Array], MHState]
    step: Callable[[Array, MHState], tuple[MHState, MHInfo]]
    step_on_data: Callable[..., tuple[MHState, MHInfo]]
    method: str
    config: Any
    model: EnergyModel
    check_start: Callable[[np.ndarray], None] | None = None


class BatchLimitError(ValueError):
    """TunaMH or DP-Fast MH would evaluate more than ``max_batch`` records in one minibatch test.

    The test's batch size is Poisson(lambda + C M) (records drawn with probability c_i / C), so a
    proposal step M or a bound total C far beyond the posterior's scale makes it astronomically large
    (and the chain run for practically ever). The batch is never truncated, which would change the
    chain's distribution and its privacy: the chain is refused before it runs (the typical step from
    the initial positions is too large) or ends at the first step that exceeds the limit.

    Attributes:
      partial: None when refused before the run; otherwise the :class:`~dpposterior.mcmc.ChainResult`
        of all chains up to (not including) the first step that exceeded the limit (an exact chain;
        None when that was the first step), with the privacy of the whole run, which it is a
        post-processing of (the limit is met or not as a function of M, C and the Poisson draw only).
      step: the first step (0-based) that exceeded the limit, None when refused before the run.
    """

    def __init__(self, message: str, *, partial: Any = None, step: int | None = None):
        super().__init__(message)
        self.partial = partial
        self.step = step


# --------------------------------------------------------------------------------------------
# building blocks


def _take(data: Any, idx: Array) -> Any:
    return jax.tree.map(lambda a: a[idx], data)


def _energies(energy_fn: Callable, theta: Array, records: Any) -> Array:
    # the samplers compute in float32: an energy of float64 data (jax x64 on) is cast here, or it would
    # change the dtype of the loop carries (JAX's "carry input and carry output must have equal types")
    return jax.vmap(energy_fn, in_axes=(None, 0))(theta, records).astype(jnp.float32)


def _violations(du: Array, cm: Array, mask: Array) -> Array:
    """How many masked records break |du| <= c M (beyond float tolerance); a NaN du (an energy that is NaN,
    or inf at both positions) breaks it too, so it is written as "not within the bound"."""
    tol = 1e-4 * cm + 1e-5 * (1.0 + jnp.abs(du))
    return jnp.sum(mask & ~(jnp.abs(du) <= cm + tol)).astype(jnp.int32)


def _full_log_ratio(
    energy_fn: Callable, data: Any, c: Array, theta: Array, theta_new: Array, m: Array
) -> tuple[Array, Array]:
    """(-sum_i (U_i(theta') - U_i(theta)), bound violations) over all records."""
    du = _energies(energy_fn, theta_new, data) - _energies(energy_fn, theta, data)
    return -jnp.sum(du), _violations(du, c * m, jnp.ones(du.shape, bool))


def _tuna_log_ratio(
    key: Array,
    energy_fn: Callable,
    data: Any,
    c: Array,
    big_c: Array,
    lam: Array,
    theta: Array,
    theta_new: Array,
    m: Array,
    chunk: int,
    max_batch: int,
    active: Array = True,
) -> tuple[Array, Array, Array, Array]:
    """TunaMH's minibatch log ratio (Zhang et al. 2020), exact for any batch size.

    The method: B ~ Poisson(lam + C M); B indices drawn with replacement with probability c_i / C;
    index i kept with probability (lam c_i + C phi_i(theta, theta')) / ((lam + C M) c_i), where
    phi_i(theta, theta') = (U_i(theta') - U_i(theta) + c_i M) / 2; each kept i adds
    log(lam c_i + C phi_i(theta', theta)) - log(lam c_i + C phi_i(theta, theta')).

    Implemented by Poisson thinning, exactly equal in law and without any float32 cumulative sum:
    B' ~ Poisson((lam + C M) N c_max / C) candidate indices drawn uniformly; a candidate is one of
    the B draws with probability c_i / c_max (so B ~ Poisson(lam + C M) with indices ~ c_i / C, as
    the method says), and is then kept with the probability above. The candidates are processed
    ``chunk`` at a time in a while loop, so no batch size is truncated.

    The limit: when B' exceeds ``max_batch`` (or its mean is not finite, or beyond 2^30, where the
    Poisson draw itself fails: a mean of inf draws 0 or 2^31 - 1), the loop does not run and
    ``overflow`` is set (the caller rejects theta' and the chain reports the error). ``active``
    False (DP-Fast MH's full-batch branch, whose minibatch result is discarded) draws B' = 0, so a
    vmapped ``lax.cond``, which runs both branches, does no minibatch work there. Neither changes
    a draw of a step that stays under the limit. Returns (log ratio, B, bound violations at the B
    drawn records, overflow).
    """
    n = c.shape[0]
    c_max = jnp.max(c)
    rate = lam + big_c * m
    mean = rate * (n * c_max / big_c)
    drawable = mean < float(MAX_BATCH_LIMIT)  # False for NaN and inf
    k_b, k_loop = jax.random.split(key)
    # threefry or OS-CSPRNG key (secure mode); the same draw as poisson(k_b, mean) where drawable
    drawn = poisson(k_b, jnp.where(active & drawable, mean, 0.0))
    overflow = jnp.asarray(active, bool) & (~drawable | (drawn > max_batch))
    candidates = jnp.where(overflow, 0, drawn)
    offsets = jnp.arange(chunk, dtype=jnp.int32)

    def cond(carry):
        return carry[0] * chunk < candidates

    def body(carry):
        i, acc, drawn, viol = carry
        k_idx, k_draw, k_keep = jax.random.split(jax.random.fold_in(k_loop, i), 3)
        idx = jax.random.randint(k_idx, (chunk,), 0, n)
        valid = i * chunk + offsets < candidates
        ci = c[idx]
        is_draw = valid & (jax.random.uniform(k_draw, (chunk,)) * c_max < ci)
        records = _take(data, idx)
        du = _energies(energy_fn, theta_new, records) - _energies(energy_fn, theta, records)
        phi = 0.5 * (du + ci * m)
        fwd = lam * ci + big_c * phi
        rev = lam * ci + big_c * (ci * m - phi)
        keep = is_draw & (jax.random.uniform(k_keep, (chunk,)) * rate * ci < fwd)
        term = jnp.where(keep, jnp.log(jnp.where(keep, rev, 1.0)) - jnp.log(jnp.where(keep, fwd, 1.0)), 0.0)
        return (
            i + 1,
            acc + jnp.sum(term),
            drawn + jnp.sum(is_draw).astype(jnp.int32),
            viol + _violations(du, ci * m, is_draw),
        )

    init = (jnp.int32(0), jnp.float32(0.0), jnp.int32(0), jnp.int32(0))
    _, log_r, batch, viol = jax.lax.while_loop(cond, body, init)
    return log_r, batch, viol, overflow


class _Proposed(NamedTuple):
    theta_new: Array
    in_box: Array
    m: Array
    log_prior_new: Array
    base_log_ratio: Array  # log prior ratio + proposal log ratio (0 when out of the box)


def _move(key: Array, theta: Array, model: EnergyModel, proposal: Proposal) -> tuple[Array, Array, Array]:
    """(theta', in box, M(theta, theta')): a proposal outside the box stays at theta (M = 0)."""
    # the chain runs in float32: a user function's float64 output (jax x64 on) is cast, not carried
    raw = jnp.asarray(proposal.sample(key, theta)).astype(theta.dtype)
    if model.lower is not None and model.upper is not None:  # a box has both bounds
        in_box = jnp.all((raw >= model.lower) & (raw <= model.upper))
    else:
        in_box = jnp.all(jnp.isfinite(raw))
    theta_new = jnp.where(in_box, raw, theta)  # never evaluate the model outside the box
    m = jnp.asarray(model.distance_fn(theta, theta_new)).astype(jnp.float32)
    return theta_new, in_box, m


def _propose(key: Array, state: MHState, model: EnergyModel, proposal: Proposal) -> _Proposed:
    theta = state.position
    theta_new, in_box, m = _move(key, theta, model, proposal)
    lp_new = jnp.asarray(model.log_prior_fn(theta_new)).astype(jnp.float32)
    base = lp_new - state.log_prior
    if proposal.log_ratio is not None:
        base = base + jnp.asarray(proposal.log_ratio(theta, theta_new)).astype(jnp.float32)
    return _Proposed(theta_new, in_box, m, lp_new, base)


def _decide(
    key: Array,
    state: MHState,
    p: _Proposed,
    log_r: Array,
    noise_std: Array,
    batch: Array,
    full: Array,
    viol: Array,
    overflow: Array = False,
) -> tuple[MHState, MHInfo]:
    k_noise, k_u = jax.random.split(key)
    # the penalty's Gaussian noise N(0, noise_std^2) on the log ratio, drawn and added in float64
    # (privacy.noise: no gap in its support that a record could push the ratio into)
    log_a = add_gaussian_noise(p.base_log_ratio + log_r - 0.5 * noise_std**2, noise_std, normal_words(k_noise, 1))
    accept = p.in_box & (jnp.log(jax.random.uniform(k_u, ())) < log_a)
    return _decide_with(state, p, accept, noise_std, batch, full, viol, overflow)


def _decide_with(
    state: MHState,
    p: _Proposed,
    accept: Array,
    noise_std: Array,
    batch: Array,
    full: Array,
    viol: Array,
    overflow: Array = False,
    clipped: Array = 0,
) -> tuple[MHState, MHInfo]:
    """The new state and the step's info, given the accept decision (a step whose minibatch
    exceeded the limit, ``overflow``, rejects: its test never ran)."""
    overflow = jnp.asarray(overflow, bool)
    accept = accept & ~overflow
    new = MHState(
        position=jnp.where(accept, p.theta_new, state.position),
        log_prior=jnp.where(accept, p.log_prior_new, state.log_prior),
    )
    info = MHInfo(
        accepted=accept,
        proposal_in_box=p.in_box,
        batch_size=jnp.asarray(batch, jnp.int32),
        used_full_batch=jnp.asarray(full, bool),
        noise_std=jnp.asarray(noise_std, jnp.float32),
        bound_violations=viol,
        clipped_ratios=jnp.asarray(clipped, jnp.int32),
        batch_overflow=overflow,
    )
    return new, info


def check_positions(model: EnergyModel, positions: Any) -> np.ndarray:
    """Validates initial positions of shape (num_chains, dim): real numbers, finite and inside the box."""
    raw = np.asarray(positions)
    if raw.dtype.kind not in "iuf":
        raise TypeError(f"positions must hold real numbers (not strings or bools), got dtype {raw.dtype}")
    pos = raw.astype(np.float64)
    if pos.ndim != 2 or pos.shape[0] == 0 or pos.shape[1] == 0:
        raise ValueError(f"positions must be non-empty, of shape (dim,) or (num_chains, dim), got {pos.shape}")
    if not np.all(np.isfinite(pos)):
        raise ValueError("position must be finite")
    if model.lower is not None:
        if model.lower.shape != pos.shape[1:]:
            raise ValueError(f"position has dimension {pos.shape[1]} but the box has shape {model.lower.shape}")
        if not (np.all(pos >= np.asarray(model.lower)) and np.all(pos <= np.asarray(model.upper))):
            raise ValueError("position must lie inside the box")
    return pos


def check_model_outputs(model: EnergyModel, dim: int) -> None:
    """Refuses an ``energy_fn`` or ``log_prior_fn`` that does not return a scalar at a position of shape (dim,).

    A non-scalar result would broadcast silently in the acceptance test (a log prior of shape (dim,)
    accepts each coordinate separately; an energy of shape (1,) mixes the records of a minibatch).
    Only shapes are traced (``jax.eval_shape``): nothing is evaluated on the data.
    """
    theta = jax.ShapeDtypeStruct((dim,), jnp.float32)
    record = jax.tree.map(lambda a: jax.ShapeDtypeStruct(jnp.shape(a)[1:], jnp.result_type(a)), model.data)
    for name, out in (
        ("log_prior_fn", jax.eval_shape(model.log_prior_fn, theta)),
        ("energy_fn", jax.eval_shape(model.energy_fn, theta, record)),
    ):
        shape = getattr(out, "shape", None)
        if shape != ():
            raise ValueError(
                f"{name} must return a scalar for a position of shape ({dim},), got "
                f"{'shape ' + str(shape) if shape is not None else type(out).__name__}"
            )


def init_states(model: EnergyModel, positions: Any) -> MHState:
    """Batched :class:`MHState` (leading chain axis) for positions of shape (num_chains, dim)."""
    theta = jnp.asarray(check_positions(model, positions), jnp.float32)
    check_model_outputs(model, theta.shape[1])
    lp = jax.jit(jax.vmap(model.log_prior_fn))(theta)
    if not np.all(np.isfinite(np.asarray(lp))):
        raise ValueError("log prior at every initial position must be finite")
    return MHState(position=theta, log_prior=jnp.asarray(lp, jnp.float32))


def _make_init(
    model: EnergyModel, check_start: Callable[[np.ndarray], None] | None = None
) -> Callable[[Array], MHState]:
    def init(position: Array) -> MHState:
        pos = np.asarray(position)
        if pos.ndim != 1:
            raise ValueError(f"position must be a non-empty 1-D array, got shape {pos.shape}")
        checked = check_positions(model, pos[None, :])
        theta = jnp.asarray(checked[0], jnp.float32)
        check_model_outputs(model, theta.shape[0])
        if check_start is not None:
            check_start(checked)
        lp = model.log_prior_fn(theta)
        if not np.isfinite(float(lp)):
            raise ValueError(f"log prior at the initial position must be finite, got {float(lp)}")
        return MHState(position=theta, log_prior=jnp.asarray(lp, jnp.float32))

    return init


def make_kernel(
    model: EnergyModel,
    step_on_data: Callable[..., Any],
    method: str,
    config: Any,
    check_start: Callable[[np.ndarray], None] | None = None,
) -> Kernel:
    """The :class:`Kernel` of ``step_on_data`` on ``model``: ``step`` closes over the model's data and bounds."""

    def step(key, state):
        return step_on_data(key, state, model.data, model.bound_constants)

    return Kernel(
        init=_make_init(model, check_start),
        step=step,
        step_on_data=step_on_data,
        method=method,
        config=config,
        model=model,
        check_start=check_start,
    )


def _check_proposal(proposal: Any) -> Proposal:
    if not isinstance(proposal, Proposal):
        raise TypeError(f"proposal must be a dpposterior.mcmc.Proposal (e.g. random_walk(scale)), got {proposal!r}")
    return proposal


def _refuse_unused_privacy(private: bool, **given: Any) -> None:
    """private=False adds no noise: privacy parameters given with it would be silently ignored."""
    if not private:
        named = [k for k, v in given.items() if v is not None]
        if named:
            raise ValueError(
                f"private=False adds no noise, so {', '.join(named)} would be ignored: pass None (or private=True)"
            )


def _max_batch(max_batch: Any, n: int) -> int:
    """``max_batch`` checked, or its default max(10 N, 10^6) (at most 2^30) for N records."""
    if max_batch is None:
        return min(max(MAX_BATCH_PER_RECORD * n, MAX_BATCH_FLOOR), MAX_BATCH_LIMIT)
    v = check_positive_int(max_batch, "max_batch")
    if v > MAX_BATCH_LIMIT:
        raise ValueError(
            f"max_batch must be an integer in [1, 2^30 = {MAX_BATCH_LIMIT}] (records evaluated by one "
            f"minibatch test, counted in int32), got {max_batch!r}"
        )
    return v


_SCALE_ADVICE = (
    "the proposal's step or the bounds are far beyond the posterior's scale: rescale the data (centre "
    "and scale them with public constants) so that the bound constants c_i are small, take a smaller "
    "proposal step (e.g. random_walk(scale) near the posterior's standard deviation), or tighten the "
    "box and the bound constants"
)


def _batch_check_start(
    model: EnergyModel,
    proposal: Proposal,
    method: str,
    max_batch: int,
    lam_of: Callable[[np.ndarray], np.ndarray],
    batch_cap: float | None,
) -> Callable[[np.ndarray], None]:
    """The pre-run check of TunaMH / DP-Fast MH (``Kernel.check_start``).

    From each initial position, PREFLIGHT_DRAWS proposals (a fixed key; the proposal reads no data, and
    nothing of this is released) give the step's M, hence the expected number of records the minibatch
    test evaluates, (lambda + C M) N c_max / C (0 for DP-Fast MH's full-batch branch, lambda + C M >= K).
    Refuses, with :class:`BatchLimitError`, when its median exceeds ``max_batch``: then about half the
    steps or more would end the chain at once.
    """
    big_c, c_max, n = model.total_bound, model.max_bound, model.num_records
    per_draw = n * c_max / big_c
    moves = jax.jit(jax.vmap(jax.vmap(lambda k, t: _move(k, t, model, proposal)[2], (0, None)), (None, 0)))

    def check_start(positions: np.ndarray) -> None:
        theta = jnp.asarray(positions, jnp.float32)
        keys = jax.random.split(jax.random.key(0), PREFLIGHT_DRAWS)
        m = np.asarray(moves(keys, theta), np.float64)  # (num_chains, draws)
        with np.errstate(over="ignore", invalid="ignore"):
            rate = lam_of(m) + big_c * m
            records = rate * per_draw
            if batch_cap is not None:  # DP-Fast MH: the full-batch branch evaluates N records, never more
                records = np.where(rate < batch_cap, records, 0.0)
            records = np.where(np.isnan(m), np.inf, records)
        typical = np.median(records, axis=1)
        j = int(np.argmax(np.where(np.isnan(typical), np.inf, typical)))
        if typical[j] <= max_batch:
            return
        m_med = float(np.median(m[j]))
        lam_med = float(np.median(lam_of(m[j])))
        where = f"initial position {j}" if theta.shape[0] > 1 else "the initial position"
        cap = (
            f"; batch_cap K = {batch_cap:.4g} lets the minibatch branch run up to lambda + C M = K, so a smaller "
            "K also helps"
            if batch_cap is not None
            else ""
        )
        raise BatchLimitError(
            f"{method}: from {where} the typical step (median of {PREFLIGHT_DRAWS} proposals) would evaluate "
            f"{typical[j]:.4g} records in its minibatch test, above max_batch = {max_batch}. The test draws "
            f"Poisson(lambda + C M) records (each costing {per_draw:.4g} candidate evaluations, N c_max / C), with "
            f"C = {big_c:.4g} (sum of the bound constants, N = {n}), proposal step M = {m_med:.4g} (median "
            f"distance M(theta, theta')) and lambda = {lam_med:.4g}: {_SCALE_ADVICE}{cap}. A batch is never "
            "truncated (that would change the chain and its privacy); if so large a batch is intended, raise "
            f"max_batch (at most 2^30)"
        )

    return check_start


def _check_model(model: Any) -> EnergyModel:
    if not isinstance(model, EnergyModel):
        raise TypeError(f"model must be an EnergyModel (build it with dpposterior.mcmc.energy_model), got {model!r}")
    return model


# --------------------------------------------------------------------------------------------
# TunaMH


@dataclasses.dataclass(frozen=True)
class TunaMHConfig:
    """TunaMH's constants: lambda = chi C^2 M^2 (``lam is None``) or the constant ``lam``; the loop chunk
    and ``max_batch``, the most records one minibatch test may evaluate."""

    chi: float
    lam: float | None
    chunk: int
    max_batch: int


def tuna_mh_kernel(
    model: EnergyModel,
    proposal: Proposal,
    *,
    chi: float = DEFAULT_CHI,
    lam: float | None = None,
    chunk: int = DEFAULT_CHUNK,
    max_batch: int | None = None,
) -> Kernel:
    """TunaMH: exact minibatch Metropolis-Hastings (Zhang, Cooper & De Sa 2020). NOT PRIVATE.

    Each step draws B ~ Poisson(lambda + C M(theta, theta')) records with probability c_i / C and
    thins them (see :func:`_tuna_log_ratio`); the chain is reversible with respect to the exact
    posterior. Reference: Zhang, Zhang & De Sa 2023 (the non-private baseline).

    The batch limit: the test evaluates about (lambda + C M) N c_max / C records (lambda + C M when
    all c_i are equal), so a step M or bounds C far beyond the posterior's scale (unscaled data, a
    random walk much wider than the posterior) would make one step run for practically ever. The
    batch is never truncated (that would make the chain inexact). Instead: ``init`` and
    :func:`~dpposterior.mcmc.run_chain` refuse, before any step, a chain whose typical step (the
    median over 256 proposals from each initial position) exceeds ``max_batch`` records; and a
    step that would exceed it while the chain runs rejects theta' untested and sets
    ``MHInfo.batch_overflow``, which ``run_chain`` turns into a
    :class:`~dpposterior.mcmc.BatchLimitError` (the samples before that step are kept in it). A
    chain that completes is exact; with the default limit, a sensible setting never meets it.

    Args:
      model: an :class:`~dpposterior.mcmc.EnergyModel`.
      proposal: a :class:`~dpposterior.mcmc.Proposal`.
      chi: lambda = chi C^2 M^2 (default 1e-5), used when ``lam`` is None.
      lam: a constant lambda > 0 instead.
      chunk: draws evaluated per pass of the minibatch loop (speed only).
      max_batch: the most records one minibatch test may evaluate, an integer in [1, 2^30];
        default max(10 N, 10^6) (a step costing more than ten full-data passes means the scales
        are wrong).

    Raises:
      ValueError, TypeError: invalid arguments.
    """
    model = _check_model(model)
    proposal = _check_proposal(proposal)
    chi = check_positive(chi, "chi")
    lam_c = None if lam is None else check_positive(lam, "lam")
    chunk = check_positive_int(chunk, "chunk")
    mb = _max_batch(max_batch, model.num_records)
    config = TunaMHConfig(chi=chi, lam=lam_c, chunk=chunk, max_batch=mb)

    def step_on_data(key, state, data, c):
        k_prop, k_batch, k_acc = jax.random.split(key, 3)
        p = _propose(k_prop, state, model, proposal)
        big_c = jnp.sum(c)
        lam_v = chi * (big_c * p.m) ** 2 if lam_c is None else jnp.float32(lam_c)
        log_r, batch, viol, over = _tuna_log_ratio(
            k_batch, model.energy_fn, data, c, big_c, lam_v, state.position, p.theta_new, p.m, chunk, mb
        )
        return _decide(k_acc, state, p, log_r, jnp.float32(0.0), batch, False, viol, over)

    big_c = model.total_bound
    lam_of = (lambda m: chi * (big_c * m) ** 2) if lam_c is None else (lambda m: np.full(np.shape(m), lam_c))
    check_start = _batch_check_start(model, proposal, "tuna_mh", mb, lam_of, None)
    return make_kernel(model, step_on_data, "tuna_mh", config, check_start)


# --------------------------------------------------------------------------------------------
# DP-Fast MH


@dataclasses.dataclass(frozen=True)
class FastMHConfig:
    """DP-Fast MH's settings: ``constants`` (None when ``private`` is False), the loop chunk and
    ``max_batch``, the most records one minibatch test may evaluate."""

    private: bool
    constants: FastMHConstants | None
    lam: float
    batch_cap: float
    chunk: int
    max_batch: int


def dp_fast_mh_kernel(
    model: EnergyModel,
    proposal: Proposal,
    *,
    epsilon: float | None,
    delta: float | None,
    batch_cap: float,
    lam: float = 10.0,
    private: bool = True,
    chunk: int = DEFAULT_CHUNK,
    max_batch: int | None = None,
) -> Kernel:
    """DP-Fast MH (Zhang, Zhang & De Sa, "DP-Fast MH", 2023, Algorithm 2 and Theorem 2).

    Each step proposes theta'. If lambda + C M < K (minibatch branch): TunaMH's minibatch log ratio
    with constant lambda; its L2 sensitivity under replace-one adjacency is
    D1 = 2 log(1 + C M / lambda); if D1 >= epsilon', Gaussian noise of std sigma1 D1 is added with
    the penalty correction, else the plain test runs (privacy from the test's own randomness).
    Otherwise (full-batch branch): the full-data log ratio, sensitivity D2 = 2 c_max M, noise std
    sigma2 D2 with the penalty correction. The branch and the noise scales depend on theta, theta'
    only through M (symmetric), so the chain stays exactly reversible for the posterior.

    Privacy: each iteration is (epsilon, delta)-DP under replace-one adjacency (the paper's
    Theorem 2; constants epsilon' = epsilon C/(6 K c_max), delta' = delta C/(2 K c_max),
    sigma1 = sqrt(2 ln(1.25/delta'))/epsilon', sigma2 = sqrt(2 ln(1.25/delta))/epsilon),
    with C and c_max public. The minibatch is drawn with replacement with probabilities
    c_i / C and a Poisson size (not Poisson subsampling). A chain composes its iterations
    (:func:`dpposterior.mcmc.run_chain`, :func:`dpposterior.mcmc.compose_iterations`).

    The batch limit: as :func:`tuna_mh_kernel` (``max_batch``, ``MHInfo.batch_overflow``,
    :class:`~dpposterior.mcmc.BatchLimitError`). The minibatch branch runs only while
    lambda + C M < K, so it evaluates about K N c_max / C records at most on average: only a
    ``batch_cap`` far beyond the paper's epsilon C / (6 c_max) can reach the limit. Whether a step
    meets the limit depends on M, C, c_max and the Poisson draw only, never on the data.

    Args:
      model: an :class:`~dpposterior.mcmc.EnergyModel`.
      proposal: a :class:`~dpposterior.mcmc.Proposal`.
      epsilon, delta: the per-iteration guarantee, epsilon in (0, 1), delta in (0, 1) (None, None
        with ``private=False``); :func:`dpposterior.mcmc.calibrate_chain` turns a total into these.
      batch_cap: K > 0 (the paper recommends about epsilon C / (6 c_max)).
      lam: lambda > 0 (default 10, as in the authors' runs).
      private: False switches the noise off (the non-private version; NOT PRIVATE); epsilon and
        delta must then be None.
      chunk: minibatch draws per pass of the loop (speed only).
      max_batch: the most records one minibatch test may evaluate, an integer in [1, 2^30];
        default max(10 N, 10^6).

    Raises:
      ValueError, TypeError: invalid arguments (see :func:`dpposterior.mcmc.accounting.dp_fast_mh_constants`).
    """
    model = _check_model(model)
    proposal = _check_proposal(proposal)
    if not isinstance(private, (bool, np.bool_)):
        raise TypeError(f"private must be True or False, got {private!r}")
    _refuse_unused_privacy(bool(private), epsilon=epsilon, delta=delta)
    k = check_positive(batch_cap, "batch_cap")
    lam = check_positive(lam, "lam")
    chunk = check_positive_int(chunk, "chunk")
    mb = _max_batch(max_batch, model.num_records)
    constants = None
    eps = dlt = sigma2 = 0.0
    if private:
        if epsilon is None or delta is None:
            raise ValueError("epsilon and delta (per iteration) are required when private=True")
        constants = dp_fast_mh_constants(
            epsilon, delta, total_bound=model.total_bound, max_bound=model.max_bound, batch_cap=k, lam=lam
        )
        eps, dlt, sigma2 = float(epsilon), float(delta), constants.sigma2
    config = FastMHConfig(private=bool(private), constants=constants, lam=lam, batch_cap=k, chunk=chunk, max_batch=mb)

    def step_on_data(key, state, data, c):
        k_prop, k_batch, k_acc = jax.random.split(key, 3)
        p = _propose(k_prop, state, model, proposal)
        big_c = jnp.sum(c)
        c_max = jnp.max(c)
        minibatch = lam + big_c * p.m < k

        def mini(_):
            # active=minibatch: under vmap lax.cond runs both branches; a full-batch lane does no minibatch work
            log_r, batch, viol, over = _tuna_log_ratio(
                k_batch,
                model.energy_fn,
                data,
                c,
                big_c,
                jnp.float32(lam),
                state.position,
                p.theta_new,
                p.m,
                chunk,
                mb,
                minibatch,
            )
            if not private:
                return log_r, jnp.float32(0.0), batch, viol, over
            d1 = 2.0 * jnp.log1p(big_c * p.m / lam)
            eps_p = eps * big_c / (6.0 * k * c_max)
            delta_p = dlt * big_c / (2.0 * k * c_max)
            sigma1 = jnp.sqrt(2.0 * jnp.log(1.25 / delta_p)) / eps_p
            sd = jnp.where(d1 >= eps_p, sigma1 * d1, 0.0)
            return log_r, sd.astype(jnp.float32), batch, viol, over

        def full(_):
            log_r, viol = _full_log_ratio(model.energy_fn, data, c, state.position, p.theta_new, p.m)
            sd = jnp.float32(sigma2) * 2.0 * c_max * p.m
            n = jax.tree.leaves(data)[0].shape[0]
            return log_r, sd.astype(jnp.float32), jnp.int32(n), viol, jnp.asarray(False)

        log_r, sd, batch, viol, over = jax.lax.cond(minibatch, mini, full, None)
        return _decide(k_acc, state, p, log_r, sd, batch, ~minibatch, viol, over)

    check_start = _batch_check_start(model, proposal, "dp_fast_mh", mb, lambda m: np.full(np.shape(m), lam), k)
    return make_kernel(model, step_on_data, "dp_fast_mh", config, check_start)


# --------------------------------------------------------------------------------------------
# the penalty algorithm


@dataclasses.dataclass(frozen=True)
class PenaltyConfig:
    """The penalty algorithm's noise multiplier (None when not private) and its provenance."""

    private: bool
    noise_multiplier: float | None
    epsilon: float | None
    delta: float | None


def penalty_kernel(
    model: EnergyModel,
    proposal: Proposal,
    *,
    epsilon: float | None = None,
    delta: float | None = None,
    noise_multiplier: float | None = None,
    private: bool = True,
) -> Kernel:
    """The penalty algorithm (Yildirim & Ermis 2019), the full-batch DP MH baseline of Zhang, Zhang & De Sa 2023.

    Each step computes the full-data log ratio sum_i (U_i(theta) - U_i(theta')), adds
    Z ~ N(0, s^2) with s = sigma 2 c_max M(theta, theta'), and accepts with
    min(1, exp(log r + Z - s^2/2)) (the penalty correction: exact for the posterior).

    Privacy: a Gaussian mechanism per iteration on a function of L2 sensitivity 2 c_max M under
    replace-one adjacency; no subsampling. With (epsilon, delta) per iteration, sigma =
    sqrt(2 ln(1.25/delta))/epsilon (classic calibration, epsilon < 1); or give
    ``noise_multiplier`` sigma directly (e.g. from :func:`dpposterior.mcmc.calibrate_chain`).
    Composed over a chain as T Gaussian mechanisms (:func:`dpposterior.mcmc.gaussian_chain_epsilon`).

    Args:
      model, proposal: as :func:`tuna_mh_kernel`.
      epsilon, delta: per-iteration guarantee (classic calibration); or
      noise_multiplier: sigma > 0 directly (then epsilon and delta must be None).
      private: False: plain full-batch MH without noise (NOT PRIVATE); epsilon, delta and
        noise_multiplier must then be None.

    Raises:
      ValueError, TypeError: invalid arguments, or privacy parameters given with ``private=False``.
    """
    model = _check_model(model)
    proposal = _check_proposal(proposal)
    if not isinstance(private, (bool, np.bool_)):
        raise TypeError(f"private must be True or False, got {private!r}")
    _refuse_unused_privacy(bool(private), epsilon=epsilon, delta=delta, noise_multiplier=noise_multiplier)
    sigma = 0.0
    if private:
        if noise_multiplier is not None:
            if epsilon is not None or delta is not None:
                raise ValueError("give either (epsilon, delta) or noise_multiplier, not both")
            sigma = check_positive(noise_multiplier, "noise_multiplier")
        elif epsilon is None or delta is None:
            raise ValueError("private=True needs per-iteration epsilon and delta, or a noise_multiplier")
        else:
            sigma = classic_noise_multiplier(epsilon, delta)
        check_float32_positive(sigma, "noise_multiplier")  # the step computes in float32
    config = PenaltyConfig(
        private=bool(private),
        noise_multiplier=sigma if private else None,
        epsilon=None if epsilon is None else float(epsilon),
        delta=None if delta is None else float(delta),
    )

    def step_on_data(key, state, data, c):
        k_prop, k_acc = jax.random.split(key)
        p = _propose(k_prop, state, model, proposal)
        log_r, viol = _full_log_ratio(model.energy_fn, data, c, state.position, p.theta_new, p.m)
        sd = (jnp.float32(sigma) * 2.0 * jnp.max(c) * p.m).astype(jnp.float32)
        n = jax.tree.leaves(data)[0].shape[0]
        return _decide(k_acc, state, p, log_r, sd, jnp.int32(n), True, viol)

    return make_kernel(model, step_on_data, "penalty", config)
