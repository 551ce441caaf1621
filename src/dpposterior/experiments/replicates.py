"""The replicates of a coverage cell as one compiled program: simulate, run DPVI, summarise.

For each replicate k: theta ~ prior and a data set D ~ p(D | theta) of N records from the model's
simulator, then the DP-SGD run of :func:`dpposterior.vi.dpvi.dpvi` on D (the same per-record ELBO
loss, beta, learning-rate heuristic, initial parameters and noise multiplier; only the key is fixed,
see :mod:`.config`), then the six per-coordinate sufficient statistics of the trace after burn-in
(:func:`dpposterior.noise_aware.stats.sufficient_statistics_jnp`). All of it is one
``jax.jit(jax.vmap(...))`` over the replicates' keys: the data sets are simulated inside the program,
so a cell of 500 DP-SGD runs is one compiled program, executed in batches of replicates (to bound
memory and to show progress). With several XLA devices (e.g. ``--xla_force_host_platform_device_count=2``
on a CPU host, see :mod:`.xla`) each batch is split over the devices with ``shard_map``; no device
talks to another.

What leaves the program per replicate is what post-processing may use (the statistics of the release
and its last iterate) plus the true theta for the coverage check. The traces themselves stay inside
unless ``return_traces`` (tests) asks for them. Nothing here is a privacy mechanism for users: the
data are synthetic and the keys fixed; it is an experiment that runs the public mechanism.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._batching import cpu_kernel_calls, map_in_chunks
from ..dpsgd import make_dpsgd_run
from ..dpsgd.engine import MECHANISM as DPSGD_MECHANISM
from ..models import registry as _registry
from ..models.registry import ModelSpec, get_model
from ..noise_aware.stats import MIN_STEPS_AFTER_BURN_IN, TraceStats, burn_in_start, sufficient_statistics_jnp
from ..privacy.dpsgd_accounting import calibrate_noise_multiplier, dpsgd_epsilon
from ..privacy.noise import float32_at_least, with_noise_tail
from ..privacy.spent import PrivacySpent
from ..releases import family
from ..vi.dpvi import DEFAULT_INIT_SCALE, heuristic_learning_rate, make_elbo_loss
from ..vi.run_options import RunOptions
from ..releases.layout import ParamLayout
from ..vi.model_inspect import inspect_model, prior_median_unconstrained
from .config import CellConfig, replicate_keys, simulation_and_dpsgd_keys
from .methods import CellData

#: bytes of trace (phi and g~, float32) a batch of replicates may hold inside the program.
TRACE_BYTES_PER_BATCH = 1 << 30
#: replicates per device in one batch (more gains little vectorisation and delays the progress bar).
REPLICATES_PER_DEVICE = 64

#: the fewest burn-in steps whose statistics the replicates return (as ``noise_aware_posterior`` needs for
#: ``priors="burn_in"``).
MIN_BURN_STEPS = MIN_STEPS_AFTER_BURN_IN
#: bytes of simulated data sets (theta and data arrays) one call of :func:`simulate_data` may produce.
DATA_BYTES_PER_CHUNK = 256 * 2**20


@dataclasses.dataclass(frozen=True, eq=False)
class DPVISetup:
    """The DPVI settings of one (model, epsilon, N, T, q, delta) group: what ``dpvi`` would use.

    Attributes:
      spec: the model's :class:`~dpposterior.models.registry.ModelSpec`.
      layout: the model's latent-site layout (from the data shapes, never values).
      num_latent: n; the variational family has d = 2n parameters.
      phi0: (d,) float32 initial parameters (prior median, sd 0.1, as ``dpvi``; or the spec's
        ``init_loc`` and ``init_rho`` where it sets them).
      beta: (d,) float32 preconditioning (1 for mu, ``spec.beta_rho`` for rho).
      learning_rate: (d,) float32, the heuristic with ``spec.lr_scale``, the means of the sites in
        ``spec.mean_lr_factors`` scaled by their factors.
      noise_multiplier: sigma calibrated for (epsilon, delta, q, T) by the accountant.
      clip: C (``spec.clip``).
      data_shapes: shapes and dtypes of the simulated data arrays.
    """

    spec: ModelSpec
    layout: ParamLayout
    num_latent: int
    phi0: np.ndarray
    beta: np.ndarray
    learning_rate: np.ndarray
    noise_multiplier: float
    clip: float
    data_shapes: tuple[jax.ShapeDtypeStruct, ...]

    @property
    def num_params(self) -> int:
        """d = 2n."""
        return 2 * self.num_latent

    @property
    def noise_sd(self) -> np.ndarray:
        """(d,) the DP noise sd sigma C / beta of each coordinate of g~ (float64)."""
        return self.noise_multiplier * self.clip / self.beta.astype(np.float64)

    def dpvi_kwargs(self, config: CellConfig) -> dict[str, Any]:
        """Keyword arguments that make ``dpvi(spec.model, *data, **kwargs, rng_key=...)`` run the same
        mechanism as the cell's replicates (used by the tests that check that it does)."""
        return dict(
            epsilon=config.epsilon,
            delta=config.delta,
            num_steps=config.num_steps,
            sampling_rate=config.sampling_rate,
            clip=self.clip,
            beta_rho=self.spec.beta_rho,
            learning_rate=np.asarray(self.learning_rate),
            num_mc=config.num_mc,
            accountant=config.accountant,
            run_options=RunOptions(progress=False),
            check_clip=False,  # the cells run no clip check: simulated data, the noise model is what is tested
        )


@functools.lru_cache(maxsize=64)
def _model_structure(model_name: str, num_records: int):
    spec = get_model(model_name)
    theta_shapes, data_shapes = jax.eval_shape(lambda k: spec.simulate(k, num_records), jax.random.PRNGKey(0))
    data_shapes = tuple(data_shapes)
    dummy = tuple(np.zeros(s.shape, s.dtype) for s in data_shapes)
    layout = inspect_model(spec.model, dummy, {})
    mu0 = prior_median_unconstrained(spec.model, dummy, {}, layout)
    return spec, layout, data_shapes, mu0


@functools.lru_cache(maxsize=64)
def prior_sampler(model_name: str, num_records: int) -> Callable[[jax.Array, int], jax.Array]:
    """``(key, m) -> (m, n)`` draws of the model's prior of its latents in the unconstrained space, from the
    model's simulator (theta of a one-record data set; the prior of the global latents does not depend on
    the number of records), for the identifiability rule of the NA-DPVI methods."""
    spec, layout, _, _ = _model_structure(model_name, num_records)

    @jax.jit
    def draw(keys):
        return jax.vmap(lambda k: layout.unconstrain(spec.simulate(k, 1)[0]))(keys)

    def sampler(key, m):
        return draw(jax.random.split(key, int(m)))

    return sampler


def model_settings(model: str, num_records: int) -> dict[str, Any]:
    """What a cell's results depend on beyond its :class:`CellConfig`: the model's DP-SGD settings
    (clip, beta_rho, lr_scale of its :class:`~dpposterior.models.registry.ModelSpec`) and its
    unconstrained maps (the parameter layout with each site's support).

    A finished cell records them (``"model_settings"``); a re-run recomputes a cell whose recorded
    settings differ from the current ones (:func:`dpposterior.experiments.run_coverage`), so changing
    a model's clip or map never silently keeps results computed under the old ones.
    """
    spec, layout, _, _ = _model_structure(model, num_records)
    settings = {
        "clip": float(spec.clip),
        "beta_rho": float(spec.beta_rho),
        "lr_scale": float(spec.lr_scale),
        "layout": layout.to_dict(),
    }
    if spec.mean_lr_factors:  # only where set, so that the other models' records stay current
        settings["mean_lr_factors"] = {site: float(f) for site, f in spec.mean_lr_factors}
    if spec.init_loc:
        settings["init_loc"] = {site: float(v) for site, v in spec.init_loc}
    if spec.init_rho is not None:
        settings["init_rho"] = float(spec.init_rho)
    return settings


def mean_learning_rate_factors(layout: ParamLayout, factors: tuple[tuple[str, float], ...]) -> np.ndarray:
    """(d,) multipliers of the learning rate: ``factor`` on the means of each named site, 1 elsewhere.

    Raises:
      ValueError: on a site the model does not have, or a factor that is not finite and > 0.
    """
    n = layout.num_latent
    out = np.ones(2 * n)
    for site, factor in factors:
        factor = float(factor)
        if not (np.isfinite(factor) and factor > 0):
            raise ValueError(f"the learning-rate factor of site {site!r} must be finite and > 0, got {factor}")
        out[layout.site_slice(site)] *= factor
    return out


def dpvi_setup(config: CellConfig) -> DPVISetup:
    """The DPVI settings of a cell's group, computed exactly as :func:`dpposterior.vi.dpvi.dpvi` does."""
    spec, layout, data_shapes, mu0 = _model_structure(config.model, config.num_records)
    n = layout.num_latent
    d = 2 * n
    beta = jnp.concatenate([jnp.ones(n), jnp.full(n, float(spec.beta_rho))])
    sigma = calibrate_noise_multiplier(
        config.epsilon, config.delta, config.sampling_rate, config.num_steps, config.accountant
    )
    lr = mean_learning_rate_factors(layout, spec.mean_lr_factors) * heuristic_learning_rate(
        config.num_steps, d, sigma, spec.clip, beta, spec.lr_scale
    )
    mu0 = np.array(mu0, np.float64)
    for site, value in spec.init_loc:  # the spec's initial point, where it sets one
        mu0[layout.site_slice(site)] = float(value)
    rho0 = family.inverse_scale(DEFAULT_INIT_SCALE) if spec.init_rho is None else float(spec.init_rho)
    phi0 = jnp.concatenate([jnp.asarray(mu0), jnp.full(n, rho0)]).astype(jnp.float32)
    return DPVISetup(
        spec=spec,
        layout=layout,
        num_latent=n,
        phi0=np.asarray(phi0, np.float32),
        beta=np.asarray(beta, np.float32),
        learning_rate=np.asarray(lr, np.float32),
        noise_multiplier=float(sigma),
        clip=float(spec.clip),
        data_shapes=data_shapes,
    )


class ReplicateSummaries(NamedTuple):
    """What the replicates of a group hand to post-processing and to the coverage check.

    Attributes:
      theta: (K, n) the true parameters in the unconstrained space (for the coverage check only).
      final_phi: (K, d) float32, the last iterate phi_T of each trace (the naive baseline's input); None
        in a group of mechanism-only methods, which runs no DP-SGD.
      stats: :class:`~dpposterior.noise_aware.stats.TraceStats` with fields (K, d) (float32, centred,
        after burn-in); None where ``final_phi`` is.
      phi: (K, T, d) traces, only with ``return_traces`` (else None).
      grads: (K, T, d) noisy gradients, only with ``return_traces`` (else None).
      burn_stats: the same statistics of the burn-in steps 0 .. T*-1 (for the h prior of
        ``priors="burn_in"``, :func:`dpposterior.noise_aware.burn_in_priors`); None where ``final_phi``
        is, or when the burn-in is shorter than ``MIN_BURN_STEPS`` steps.
    """

    theta: np.ndarray
    final_phi: np.ndarray | None
    stats: TraceStats | None
    phi: np.ndarray | None = None
    grads: np.ndarray | None = None
    burn_stats: TraceStats | None = None


@dataclasses.dataclass(frozen=True)
class _Static:
    model: str
    num_records: int
    num_steps: int
    sampling_rate: float
    num_mc: int
    clip: float
    burn_start: int
    devices: int
    return_traces: bool


def _nonfinite_counts(data: tuple[jax.Array, ...]) -> jax.Array:
    """(number of data arrays,) int32: the NaN and infinite values in each simulated array (0 for integer
    and boolean arrays)."""
    return jnp.stack(
        [
            jnp.sum(~jnp.isfinite(a)).astype(jnp.int32)
            if jnp.issubdtype(a.dtype, jnp.inexact)
            else jnp.zeros((), jnp.int32)
            for a in data
        ]
    )


def check_simulated_data(config: CellConfig, counts: np.ndarray, start: int = 0) -> None:
    """Raises ValueError if a simulated data set holds NaN or infinite values.

    ``dpvi`` refuses such data (a record with an infinite value has no likelihood, and DP-SGD would drop
    its gradient, fitting the other records while N counts it), so a replicate with one has no release of
    the mechanism the cell measures; and the model's likelihood never draws one: the simulator is wrong
    (an overflow, a log of 0). Before this check such replicates were used silently.

    Args:
      config: the cell (its model names the simulator).
      counts: (replicates, data arrays) the non-finite values of each replicate's arrays.
      start: the index of the first replicate in ``counts``.
    """
    counts = np.asarray(counts)
    bad = np.flatnonzero(counts.sum(axis=1))
    if bad.size:
        i = int(bad[0])
        j = int(np.flatnonzero(counts[i])[0])
        raise ValueError(
            f"spec.simulate of model {config.model!r} returned non-finite data: replicate {start + i} "
            f"(seed {config.seed}, num_records={config.num_records}) has {int(counts[i, j])} NaN or "
            f"infinite value(s) in data[{j}], and {bad.size} of the {counts.shape[0]} replicates have "
            "some; dpvi refuses such data, so the cell cannot run its mechanism on them. The model's "
            "likelihood never draws them: make the simulator return finite records (e.g. avoid an "
            "overflow or a log of 0)"
        )


@functools.lru_cache(maxsize=16)
def _program(static: _Static) -> Callable:
    """The jitted, vmapped (and, on several devices, shard_mapped) replicate program."""
    spec, layout, _, _ = _model_structure(static.model, static.num_records)
    d = 2 * layout.num_latent
    loss = make_elbo_loss(spec.model, layout, static.num_records, static.num_mc)
    run = make_dpsgd_run(
        loss,
        num_records=static.num_records,
        num_params=d,
        clip=static.clip,
        sampling_rate=static.sampling_rate,
        num_steps=static.num_steps,
        loss_needs_key=True,
    )

    def one(key, phi0, sigma, lr, beta):
        k_sim, k_dp = simulation_and_dpsgd_keys(key)
        theta, data = spec.simulate(k_sim, static.num_records)
        phis, grads, final = run(k_dp, phi0, tuple(data), sigma, lr, beta)
        stats = sufficient_statistics_jnp(phis, grads, static.burn_start)
        out = (layout.unconstrain(theta), final, stats, _nonfinite_counts(data))
        if static.burn_start >= MIN_BURN_STEPS:
            out = out + (sufficient_statistics_jnp(phis[: static.burn_start], grads[: static.burn_start]),)
        if static.return_traces:
            out = out + (phis, grads)
        return out

    batched = jax.vmap(one, in_axes=(0, None, None, None, None))
    if static.devices == 1:
        return jax.jit(batched)
    from jax.sharding import NamedSharding, PartitionSpec as P

    mesh = jax.sharding.Mesh(np.asarray(jax.devices()[: static.devices]), ("replicates",))
    specs = (P("replicates"), P(), P(), P(), P())
    per_device = jax.shard_map(batched, mesh=mesh, in_specs=specs, out_specs=P("replicates"), check_vma=False)
    return jax.jit(per_device, in_shardings=tuple(NamedSharding(mesh, s) for s in specs))


def cpu_linalg_kernels(config: CellConfig, setup: DPVISetup) -> tuple[str, ...]:
    """The custom kernels (on CPU: jaxlib's LAPACK/BLAS, e.g. ``lapack_spotrf_ffi``) that a group's
    replicate program calls (empty on other platforms, and for the papers' models).

    Why it matters (:func:`dpposterior._batching.cpu_kernel_calls`): on several XLA CPU devices such
    kernels hang the process. For example, a model with one
    multivariate-normal covariance per record (batched Cholesky factorisations) hangs on two devices
    and runs on one. :func:`~.runner.compute_group` runs such a group on one device. Lowering the
    one-device program is cheap (no computation).
    """
    static = _Static(
        model=config.model,
        num_records=config.num_records,
        num_steps=config.num_steps,
        sampling_rate=config.sampling_rate,
        num_mc=config.num_mc,
        clip=setup.clip,
        burn_start=burn_in_start(config.num_steps, config.burn_in),
        devices=1,
        return_traces=False,
    )
    keys = jax.ShapeDtypeStruct((1, 2), jnp.uint32)
    return cpu_kernel_calls(
        _program(static),
        keys,
        setup.phi0,
        np.float32(float32_at_least(setup.noise_multiplier)),
        setup.learning_rate,
        setup.beta,
    )


def default_batch_size(config: CellConfig, num_latent: int, devices: int = 1) -> int:
    """Replicates per compiled batch: at most :data:`REPLICATES_PER_DEVICE` per device and traces of at
    most :data:`TRACE_BYTES_PER_BATCH`, in equal batches (K = 500 on 2 devices: 4 batches of 126).

    A function of the configuration and the device count only, so every backend batches a cell the
    same way (batching changes results only in the last bits of floating point).
    """
    per_replicate = config.num_steps * 2 * (2 * num_latent) * 4
    cap = max(1, min(REPLICATES_PER_DEVICE * devices, TRACE_BYTES_PER_BATCH // per_replicate))
    num_batches = -(-config.replicates // cap)
    b = -(-config.replicates // num_batches)
    return -(-b // devices) * devices


def replicate_batch_size(
    config: CellConfig, num_latent: int, devices: int, batch_size: int | None = None, count: int | None = None
) -> int:
    """The replicates per compiled batch that :func:`run_replicates` uses for ``count`` replicates (default
    all ``config.replicates``): ``batch_size`` (default :func:`default_batch_size`) capped at the count and
    rounded down to a multiple of ``devices`` (at least ``devices``). With ``devices``, what decides a
    cell's numbers in the last bits of floating point beyond its configuration."""
    count = config.replicates if count is None else count
    if batch_size is None:
        batch_size = default_batch_size(config, num_latent, devices)
    return max(devices, (min(batch_size, max(count, devices)) // devices) * devices)


def _in_batches(program: Callable, keys: np.ndarray, batch_size: int, args: tuple, progress: Any = None) -> Any:
    """``program(keys_batch, *args)`` over batches of ``batch_size`` keys (:func:`map_in_chunks`)."""
    return map_in_chunks(lambda kb: program(kb, *args), (keys,), batch_size, progress)


def run_replicates(
    config: CellConfig,
    setup: DPVISetup | None = None,
    *,
    batch_size: int | None = None,
    devices: int = 1,
    start: int = 0,
    count: int | None = None,
    return_traces: bool = False,
    progress: Any = None,
) -> ReplicateSummaries:
    """Simulates replicates ``start .. start + count - 1`` of a cell's group and runs DPVI on each.

    Args:
      config: any cell of the group (the method is ignored).
      setup: the group's :class:`DPVISetup` (computed if None).
      batch_size: replicates per compiled batch (default :func:`default_batch_size`); the last batch is
        padded with repeats of its last key, so one program serves every batch.
      devices: XLA devices to split each batch over (<= ``jax.device_count()``); the batch size is
        rounded to a multiple of it.
      start, count: the range of replicates (default all ``config.replicates``).
      return_traces: also return the full traces (tests; memory K x T x d x 8 bytes).
      progress: a tqdm-like object with ``update(n)`` advanced per finished replicate, or None.

    Returns:
      :class:`ReplicateSummaries` as numpy arrays.

    Raises:
      ValueError: a simulated data set holds NaN or infinite values (:func:`check_simulated_data`).
    """
    if batch_size is not None:  # a float or 0 is refused, never truncated or replaced
        from .._checks import check_positive_int

        batch_size = check_positive_int(batch_size, "batch_size (replicates per compiled batch)")
    setup = dpvi_setup(config) if setup is None else setup
    count = config.replicates - start if count is None else count
    if devices < 1 or devices > jax.device_count():
        raise ValueError(f"devices must lie in [1, {jax.device_count()}] (jax.device_count()), got {devices}")
    batch_size = replicate_batch_size(config, setup.num_latent, devices, batch_size, count)
    static = _Static(
        model=config.model,
        num_records=config.num_records,
        num_steps=config.num_steps,
        sampling_rate=config.sampling_rate,
        num_mc=config.num_mc,
        clip=setup.clip,
        burn_start=burn_in_start(config.num_steps, config.burn_in),
        devices=devices,
        return_traces=bool(return_traces),
    )
    program = _program(static)
    # numpy inputs (uncommitted): the program places them on its device(s).
    args = (setup.phi0, np.float32(float32_at_least(setup.noise_multiplier)), setup.learning_rate, setup.beta)
    keys = np.asarray(replicate_keys(config.seed, start, count))
    cat = _in_batches(program, keys, batch_size, args, progress)
    theta, final, stats = cat[0], cat[1], TraceStats(*cat[2])
    check_simulated_data(config, cat[3], start)
    rest = list(cat[4:])
    burn = TraceStats(*rest.pop(0)) if static.burn_start >= MIN_BURN_STEPS else None
    traces = (rest[0], rest[1]) if return_traces else (None, None)
    return ReplicateSummaries(
        theta=theta, final_phi=final, stats=stats, phi=traces[0], grads=traces[1], burn_stats=burn
    )


def replicate_data(config: CellConfig, index: int) -> tuple[dict[str, jax.Array], tuple[jax.Array, ...], jax.Array]:
    """(theta, data, DP-SGD key) of replicate ``index``, as the compiled program draws them.

    For tests and debugging: ``dpvi(spec.model, *data, rng_key=key, **setup.dpvi_kwargs(config))``
    releases the trace of that replicate.
    """
    spec = get_model(config.model)
    key = replicate_keys(config.seed, index, 1)[0]
    k_sim, k_dp = simulation_and_dpsgd_keys(key)
    theta, data = jax.jit(lambda k: spec.simulate(k, config.num_records))(k_sim)
    return theta, tuple(data), k_dp


def dpvi_privacy(config: CellConfig, setup: DPVISetup) -> PrivacySpent:
    """The PrivacySpent of each replicate's DP-SGD release, as ``dpvi`` records it for a fixed key.

    The accountant's epsilon for the calibrated sigma (cached by the accountant, so this is cheap).
    """
    eps = dpsgd_epsilon(setup.noise_multiplier, config.delta, config.sampling_rate, config.num_steps, config.accountant)
    record = with_noise_tail(
        PrivacySpent(
            epsilon=eps,
            delta=config.delta,
            neighbouring="add_remove",
            accountant=config.accountant,
            mechanism=DPSGD_MECHANISM,
            noise_multiplier=setup.noise_multiplier,
            sampling_rate=config.sampling_rate,
            num_steps=config.num_steps,
            seeded_by="user",
            details=(("clip", setup.clip), ("sampling", "poisson")),
        ),
        config.num_steps * int(np.size(setup.phi0)),
    )
    # as dpvi labels the N its trace stores
    return dataclasses.replace(record, details=record.details + (("dataset_size", "public"),))


@functools.lru_cache(maxsize=16)
def _simulator(model_name: str, num_records: int) -> Callable:
    """jit(vmap) of replicate keys -> (theta unconstrained, data), the program's first lines."""
    spec, layout, _, _ = _model_structure(model_name, num_records)

    def one(key):
        k_sim, _ = simulation_and_dpsgd_keys(key)
        theta, data = spec.simulate(k_sim, num_records)
        return layout.unconstrain(theta), tuple(data)

    return jax.jit(jax.vmap(one))


def simulate_data(
    config: CellConfig, *, start: int = 0, count: int | None = None, chunk_size: int | None = None
) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """The (theta, data) of replicates ``start .. start + count - 1`` of a cell's group, exactly as the
    compiled replicate program simulates them (same keys: :func:`.config.replicate_keys` ->
    :func:`.config.simulation_and_dpsgd_keys` -> ``spec.simulate``), vmapped in chunks.

    Synthetic data of an experiment: for methods with their own mechanism (``needs_data``) and for
    tests; post-processing never receives them.

    Args:
      config: any cell of the group (the method is ignored).
      start, count: the range of replicates (default all ``config.replicates``).
      chunk_size: replicates per compiled call (default: data of at most :data:`DATA_BYTES_PER_CHUNK`);
        the last chunk is padded with repeats of its last key, so one program serves every chunk.

    Returns:
      theta (count, n) in the unconstrained space, and the data arrays, each (count, N, ...).

    Raises:
      ValueError: a simulated data set holds NaN or infinite values (:func:`check_simulated_data`).
    """
    count = config.replicates - start if count is None else count
    count = int(count)
    if count < 1 or start < 0:
        raise ValueError(f"start must be >= 0 and count >= 1, got start={start!r}, count={count!r}")
    _, layout, data_shapes, _ = _model_structure(config.model, config.num_records)
    if chunk_size is None:
        per = 4 * layout.num_latent + sum(int(np.prod(s.shape)) * np.dtype(s.dtype).itemsize for s in data_shapes)
        chunk_size = max(1, DATA_BYTES_PER_CHUNK // max(1, per))
    chunk_size = max(1, min(int(chunk_size), count))
    program = _simulator(config.model, config.num_records)
    keys = np.asarray(replicate_keys(config.seed, start, count))
    theta, data = _in_batches(program, keys, chunk_size, ())
    data = tuple(data)
    check_simulated_data(
        config,
        np.stack(
            [
                np.sum(~np.isfinite(a.reshape(count, -1)), axis=1)
                if jnp.issubdtype(a.dtype, jnp.inexact)
                else np.zeros(count, np.int64)
                for a in data
            ],
            axis=1,
        ),
        start,
    )
    return theta, data


def cell_data(
    config: CellConfig, setup: DPVISetup | None = None, *, arrays: tuple[np.ndarray, ...] | None = None
) -> CellData:
    """The :class:`~.methods.CellData` of a cell's group: its K synthetic data sets (:func:`simulate_data`,
    the true theta left out, or ``arrays`` that :func:`simulate_data` already returned for the group)
    and its public mechanism settings."""
    setup = dpvi_setup(config) if setup is None else setup
    data = simulate_data(config)[1] if arrays is None else tuple(arrays)
    return CellData(
        model=config.model,
        arrays=data,
        epsilon=config.epsilon,
        delta=config.delta,
        num_steps=config.num_steps,
        sampling_rate=config.sampling_rate,
        num_records=config.num_records,
        accountant=config.accountant,
        clip=setup.clip,
    )


def _clear_model_caches() -> None:
    """Forgets the structures and compiled programs cached by model name (a model was registered)."""
    _model_structure.cache_clear()
    _program.cache_clear()
    _simulator.cache_clear()
    prior_sampler.cache_clear()


_registry._ON_CHANGE.append(_clear_model_caches)


def trace_bytes(config: CellConfig, num_latent: int) -> int:
    """Bytes of all K traces (phi and g~ in float32), for memory planning."""
    return int(config.replicates) * int(config.num_steps) * 2 * 2 * num_latent * 4
