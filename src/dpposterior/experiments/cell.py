"""One coverage cell: the posterior of a method on a group's replicates, and its TARP coverage.

The coverage check is that of Räisä et al. 2024 (13.4) in the unconstrained space, with
the paper's data-dependent reference points: per replicate, the mean of the mu-trace after burn-in
(a statistic of the release) plus Uniform(-4, 4) times the method's posterior sd, per coordinate.
The R repeats re-draw the references over the same K replicates (they are not new DP-SGD runs); the
summary is the RMSE of the curve averaged over the repeats, with the RMSE of each single draw beside
it (:func:`dpposterior.validation.tarp_coverage_repeats`). Beside the joint figure each latent
coordinate gets its own: the marginal TARP RMSE with the same references
(:func:`dpposterior.validation.marginal_tarp_rmse`) and the coverage of its equal-tailed 90% interval
with a binomial standard error (:func:`dpposterior.validation.central_coverage`).

References must be centred on a statistic of the release the method's posterior conditions on (TARP's
guarantee, Lemos et al. 2023, theorem 3). For the NA-DPVI methods and the naive baseline that is the
paper's centre, the mean of the DPVI mu-trace after burn-in. A baseline with its own mechanism
(``Method.needs_data``) does not condition on the DPVI trace, so its references are centred on its own
posterior mean per replicate instead: centring it on the trace mean (information about theta from the
same data set that its posterior does not use) was measured to inflate an exactly calibrated sampler's
error (Bernstein-Sheldon, Beta-Bernoulli, K = 400, N = 500, T = 400, 20 reference draws: RMSE 0.019
with trace-mean centres against 0.008 with its own posterior mean at epsilon 0.3; 0.008 against 0.007
at epsilon 3). The spread is each method's own posterior sd in both cases.

Each record holds the privacy of the release the method's posterior rests on (``record["privacy"]``:
``PrivacySpent.to_dict()`` plus its one-line ``summary`` and ``release``): the group's DP-SGD release
for the post-processing methods, the method's own release for the baselines.
"""

from __future__ import annotations

import datetime
import platform
import time
from typing import Any

import jax
import numpy as np

from .. import validation
from ..models.registry import model_fingerprint
from ..noise_aware.stats import TraceStats
from ..privacy.spent import PrivacySpent
from .config import CellConfig, mechanism_key, postprocessing_keys, reference_key
from .methods import (
    CellData,
    CellReleases,
    MethodSettings,
    check_method_model,
    check_method_options,
    get_method,
    method_fingerprint,
)
from .replicates import DPVISetup, ReplicateSummaries, cell_data, dpvi_privacy, model_settings, prior_sampler

RESULT_FORMAT = "dpposterior.coverage_cell"
RESULT_VERSION = 1

#: central probability of the equal-tailed interval whose coverage each cell records per coordinate.
CENTRAL_LEVEL = 0.9


def _package_version() -> str:
    from .. import __version__

    return __version__


def releases_of(summaries: ReplicateSummaries, setup: DPVISetup, config: CellConfig) -> CellReleases:
    """The post-processing inputs of a group's replicates (statistics, last iterates, public settings)."""
    stats, final_phi = _dpsgd_release(summaries)
    return CellReleases(
        stats=stats,
        final_phi=final_phi,
        noise_sd=setup.noise_sd,
        sampling_rate=config.sampling_rate,
        num_latent=setup.num_latent,
        burn_stats=summaries.burn_stats,
        learning_rate=setup.learning_rate,
        prior_sampler=prior_sampler(config.model, config.num_records),
    )


def _dpsgd_release(summaries: ReplicateSummaries) -> tuple[TraceStats, np.ndarray]:
    """(stats, final_phi) of a group that ran DP-SGD, as every group with a post-processing method does."""
    if summaries.stats is None or summaries.final_phi is None:
        raise ValueError("the group ran no DP-SGD (mechanism-only methods): it has no trace to post-process")
    return summaries.stats, summaries.final_phi


def _privacy_record(privacy: PrivacySpent, release: str) -> dict[str, Any]:
    import json

    d = json.loads(json.dumps(privacy.to_dict()))  # tuples -> lists, as the record reads back from disk
    d["summary"] = privacy.summary()
    d["release"] = release
    return d


def json_ready_diagnostics(diagnostics: Any, method: str) -> dict[str, Any]:
    """A method's diagnostics as they read back from a result file, so that a fresh record equals a
    resumed one and a finished cell is never lost at its save: numpy and JAX numbers and arrays become
    Python numbers and lists, tuples become lists, mapping keys strings, and NaN and infinities (which
    JSON cannot hold) the strings ``"nan"``, ``"inf"`` and ``"-inf"``.

    Raises:
      TypeError: ``diagnostics`` is not a dict, or holds a value of another type (naming the method and key).
    """
    import math

    def conv(x: Any, where: str) -> Any:
        if isinstance(x, dict):
            return {str(k): conv(v, f"{where}.{k}") for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [conv(v, f"{where}[{i}]") for i, v in enumerate(x)]
        if isinstance(x, (jax.Array, np.ndarray, np.generic)):
            a = np.asarray(x)
            if a.dtype.kind in "biuf":
                return conv(a.tolist(), where)
            if a.dtype.kind == "U":
                return a.tolist()
        if x is None or isinstance(x, (bool, int, str)):
            return x
        if isinstance(x, float):
            return x if math.isfinite(x) else ("nan" if math.isnan(x) else ("inf" if x > 0 else "-inf"))
        raise TypeError(
            f"method {method!r} returned diagnostics that a result file cannot hold: {where} is a "
            f"{type(x).__name__}; diagnostics hold numbers, strings, booleans, None, lists and dicts"
        )

    if not isinstance(diagnostics, dict):
        raise TypeError(f"method {method!r} returned diagnostics of type {type(diagnostics).__name__}, not a dict")
    return conv(diagnostics, "diagnostics")


def _finite_replicates(summaries: ReplicateSummaries, draws: np.ndarray, with_trace: bool) -> np.ndarray:
    """Replicates with a finite theta and finite draws, and (``with_trace``: a post-processing method)
    a finite DP-SGD release."""
    ok = np.all(np.isfinite(summaries.theta), axis=1)
    if with_trace:
        stats, final_phi = _dpsgd_release(summaries)
        ok &= np.all(np.isfinite(final_phi), axis=1)
        ok &= np.all(np.stack([np.all(np.isfinite(x), axis=1) for x in stats]), axis=0)
    ok &= np.all(np.isfinite(draws), axis=(1, 2))
    return ok


class CellUnusableError(ValueError):
    """A cell whose method left fewer than 2 replicates with a finite trace and posterior: an outcome of
    the cell's settings (e.g. a learning rate that makes DP-SGD overflow), not of the run. The runner
    records it, computes the other cells, and names it at the end (:func:`.runner.run_coverage`)."""


def evaluate_cell(
    config: CellConfig,
    setup: DPVISetup,
    summaries: ReplicateSummaries,
    *,
    data: CellData | None = None,
    replicates_seconds: float = 0.0,
    execution: dict[str, Any] | None = None,
    devices: int = 1,
) -> dict[str, Any]:
    """Runs the cell's method on the replicates and measures its coverage; returns the result record.

    TARP references are centred on the group's DPVI trace mean after burn-in for the post-processing
    methods and on the method's own posterior mean for a method with its own mechanism (module docstring).

    Args:
      config: the cell.
      setup: the group's DPVI settings.
      summaries: the group's replicates (all ``config.replicates`` of them); for a method with its own
        mechanism only their ``theta`` is read (``final_phi`` and ``stats`` may be None).
      data: the group's synthetic data sets (:func:`.replicates.cell_data`), used only by a method with
        its own mechanism (``needs_data``); simulated here when such a method needs them and None is
        given (pass them to share one simulation among the methods of a group).
      replicates_seconds: wall time of the group's set-up (sigma calibration, model inspection) and of
        simulating and running DP-SGD on its replicates, compilation included (recorded; it is shared
        by the methods of a group computed together).
      execution: how it ran (backend, devices, batch size ...), recorded as is.
      devices: XLA devices the method may split its vmapped replicates over (``MethodSettings.devices``).

    Returns:
      A JSON-ready dict (see :mod:`.store` for the file format): configuration, seed, coverage curve
      (averaged over repeats) and its sd over repeats, RMSE, single-draw RMSEs, per coordinate the
      marginal TARP RMSE (``marginal_rmse``) and the 90% central coverage (``central_coverage``, with
      ``central_coverage_se``), sharpness, privacy,
      timings, diagnostics (as :func:`json_ready_diagnostics` stores them, so the record equals the one
      read back from its file) and versions.

    Raises:
      CellUnusableError: fewer than 2 replicates have a finite trace and posterior.
      ValueError: the method's draws or ``posterior_sd`` have the wrong shape, or a method with its own
        mechanism returned no PrivacySpent or one above the cell's (epsilon, delta).
      TypeError: diagnostics that a result file cannot hold (:func:`json_ready_diagnostics`).
    """
    method = get_method(config.method)
    options = dict(config.method_options)
    check_method_model(config.method, config.model)
    check_method_options(config.method, options, config.model)
    k = config.replicates
    if summaries.theta.shape[0] != k:
        raise ValueError(f"the summaries hold {summaries.theta.shape[0]} replicates, the cell needs {k}")
    n = setup.num_latent

    t0 = time.perf_counter()
    settings = MethodSettings(
        keys=np.asarray(postprocessing_keys(config.seed, config.method, k)),
        num_draws=config.num_draws,
        options=options,
        mechanism_key=np.asarray(mechanism_key(config.seed, config.method)),
        devices=devices,
    )
    if method.needs_data:
        if data is None:
            data = cell_data(config, setup)
        if data.model != config.model or data.num_replicates != k or data.num_records != config.num_records:
            raise ValueError(
                f"the data hold {data.num_replicates} data sets of {data.num_records} {data.model!r} "
                f"records, the cell needs {k} of {config.num_records} {config.model!r} records"
            )
        out = method.fn(None, settings, data)  # its own release only: the DP-SGD releases are not its to use
        if not isinstance(out.privacy, PrivacySpent):
            raise ValueError(
                f"method {config.method!r} runs its own mechanism but returned no PrivacySpent (got {out.privacy!r})"
            )
        if out.privacy.epsilon > config.epsilon * (1 + 1e-9) or out.privacy.delta > config.delta:
            raise ValueError(
                f"method {config.method!r} released each replicate at (epsilon={out.privacy.epsilon:g}, "
                f"delta={out.privacy.delta:g}), more than the cell's budget (epsilon={config.epsilon:g}, "
                f"delta={config.delta:g}) under which its result would be reported"
            )
        privacy = _privacy_record(out.privacy, "method")
    else:
        if summaries.stats is None or summaries.final_phi is None:
            raise ValueError(
                f"method {config.method!r} post-processes the group's DP-SGD releases, but the "
                "summaries hold none (a group of mechanism-only methods skips DP-SGD)"
            )
        out = method.fn(releases_of(summaries, setup, config), settings)
        privacy = _privacy_record(dpvi_privacy(config, setup), "dpvi")
    draws = np.asarray(out.draws)
    if draws.shape != (k, config.num_draws, n):
        raise ValueError(
            f"method {config.method!r} returned draws of shape {draws.shape}, expected "
            f"{(k, config.num_draws, n)} (replicates, draws, unconstrained parameters)"
        )
    post_sd = np.asarray(out.posterior_sd, np.float64)
    if post_sd.shape != (k, n):
        raise ValueError(
            f"method {config.method!r} returned posterior_sd of shape {post_sd.shape}, expected {(k, n)} "
            "(replicates, unconstrained parameters)"
        )
    diagnostics = json_ready_diagnostics(out.diagnostics, config.method)
    t_method = time.perf_counter() - t0

    t1 = time.perf_counter()
    ok = _finite_replicates(summaries, draws, not method.needs_data) & np.all(
        np.isfinite(post_sd) & (post_sd > 0), axis=1
    )
    excluded = np.flatnonzero(~ok).tolist()
    if ok.sum() < 2:
        raise CellUnusableError(
            f"{config.label()}: fewer than 2 replicates have finite traces and posteriors "
            f"({len(excluded)} of {k} excluded), so its coverage cannot be measured"
        )
    if method.needs_data:  # a statistic of the method's own release (module docstring)
        center = np.where(ok[:, None], np.mean(np.where(ok[:, None, None], draws, 0.0), axis=1, dtype=np.float64), 0.0)
    else:  # the paper's: the mean of the DPVI mu-trace after burn-in
        center = np.asarray(_dpsgd_release(summaries)[0].phi_mean, np.float64)[:, :n]
    # References are drawn for all K replicates (so replicate i's reference never depends on which
    # others were excluded) and then restricted to the finite ones.
    scale = np.where(ok[:, None], post_sd, 1.0)
    refs = validation.repeated_reference_points(
        reference_key(config.seed), np.where(ok[:, None], center, 0.0), scale, config.repeats
    )
    if ok.all():
        used_draws, used_theta, used_refs = draws, summaries.theta, refs
    else:
        used_draws, used_theta, used_refs = draws[ok], summaries.theta[ok], refs[:, ok]
    res = validation.tarp_coverage_repeats(used_draws, used_theta, used_refs)
    single = np.asarray(res.single_draw_rmse, np.float64)
    # each coordinate on its own, with the joint's references: a joint curve can hide a miscalibrated
    # coordinate behind the widest one (validation.marginal)
    marginal = validation.marginal_tarp_rmse(used_draws, used_theta, used_refs)
    central = validation.central_coverage(used_draws, used_theta, level=CENTRAL_LEVEL)
    t_cov = time.perf_counter() - t1

    sharp_coord = post_sd[ok].mean(axis=0)
    record = {
        "format": RESULT_FORMAT,
        "version": RESULT_VERSION,
        "config": config.to_dict(),
        "config_digest": config.digest(),
        "seed": config.seed,
        "label": config.label(),
        "alpha": res.alpha.tolist(),
        "coverage": res.coverage.tolist(),
        "coverage_sd": res.std.tolist(),
        "rmse": float(res.rmse),
        "single_draw_rmse": single.tolist(),
        "single_draw_rmse_mean": float(single.mean()),
        "single_draw_rmse_sd": float(single.std(ddof=1)) if single.size > 1 else 0.0,
        "sharpness": float(sharp_coord.mean()),
        "sharpness_per_coordinate": sharp_coord.tolist(),
        "marginal_rmse": marginal.tolist(),
        "central_coverage_level": CENTRAL_LEVEL,
        "central_coverage": central.coverage.tolist(),
        "central_coverage_se": central.standard_error.tolist(),
        "coordinates": setup.layout.coordinate_names(),
        "num_replicates_used": int(ok.sum()),
        "excluded_replicates": excluded,
        "noise_multiplier": setup.noise_multiplier,
        "clip": setup.clip,
        "beta": setup.beta.astype(float).tolist(),
        "model_settings": model_settings(config.model, config.num_records),
        "method_fingerprint": method_fingerprint(config.method),
        "privacy": privacy,
        "diagnostics": diagnostics,
        "timing": {
            "replicates_seconds": float(replicates_seconds),
            "method_seconds": t_method,
            "coverage_seconds": t_cov,
            "wall_seconds": float(replicates_seconds) + t_method + t_cov,
        },
        "execution": dict(execution or {}),
        "package_version": _package_version(),
        "jax_version": jax.__version__,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.platform(),
    }
    model_print = model_fingerprint(config.model)
    if model_print is not None:  # a model of the user's own; the package's models' records stay as they were
        record["model_fingerprint"] = model_print
    return record


#: fields of a result that depend on how and when it ran, not on its configuration.
VOLATILE_FIELDS = ("timing", "execution", "created", "host")


def comparable(record: dict[str, Any]) -> dict[str, Any]:
    """The result without its volatile fields (timing, execution, date, host): equal for equal configs
    on the same numerics, whatever the backend."""
    return {k: v for k, v in record.items() if k not in VOLATILE_FIELDS}
