"""The NA-DPVI paper's UCI Adult experiment: posterior predictive calibration on the test split.

For each epsilon and repeat: one DPVI release of Bayesian logistic regression on the vendored Adult
training set (Räisä et al. 2024, section 4.3; the settings of its reference implementation: T = 10,000,
q = 0.1, C = 11, beta_rho = 550, lambda_c = sqrt(57)), the posteriors read from it (NA-DPVI with each
requested solver and the naive last iterate; by default NUTS also with the burn-in h prior,
``priors="burn_in"``, read from the same release), and one DPVIm release under the same budget; each
posterior's predictive probabilities on the TEST split give a calibration curve (10 equal-count bins),
its calibration RMSE and Brier score, and its sharpness (mean posterior sd of the weights).

Privacy: the training split is the private data set; only the mechanisms (``dpvi``, ``dpvim``) read
it. The test split is treated as public held-out data (as in the paper), so the calibration figures
are computed from releases and public data. Every release's PrivacySpent is stored with its result.
The experiment fixes its keys (seeded from ``seed``, epsilon and the repeat) so that it reproduces;
that is for reproduction only, never for a real release.

Each (epsilon, repeat) is written to its own JSON file as soon as it is done (atomically), so an
interrupted run resumes where it stopped: a file whose settings match is not recomputed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import time
import zlib
from pathlib import Path
from typing import Any, Sequence

import jax
import numpy as np

from .._checks import check_delta, check_epsilon, check_positive_int, check_sampling_rate

#: NA-DPVI solvers and baselines this experiment knows.
ADULT_METHODS = ("nuts", "laplace", "grid", "naive", "dpvim")
#: the NA-DPVI solvers among them (each can also run with the burn-in h prior).
ADULT_SOLVERS = ("nuts", "laplace", "grid")
#: the label suffix of a solver run with ``priors="burn_in"`` (as the coverage tables name such a cell).
BURN_IN_SUFFIX = " (priors burn_in)"
RESULT_FORMAT = "dpposterior.adult_calibration"
RESULT_VERSION = 1


@dataclasses.dataclass(frozen=True)
class AdultSettings:
    """Settings of the Adult calibration experiment (defaults: the paper's).

    Attributes:
      epsilons: privacy budgets, each a separate set of releases.
      repeats: independent releases per epsilon.
      methods: a subset of :data:`ADULT_METHODS`.
      burn_in_prior_methods: NA-DPVI solvers (of :data:`ADULT_SOLVERS`) that also read each release
        with ``priors="burn_in"`` (the h prior from the burn-in steps: docs/results/na-dpvi-misses.md),
        reported as e.g. ``"nuts (priors burn_in)"``; the same release, no extra privacy cost.
      num_steps, sampling_rate, clip, beta_rho, delta: the DP-SGD settings (``lr_scale`` is sqrt(features)).
      num_warmup, num_samples: NUTS chain lengths.
      nuts_marginalize: run NUTS on h with phi* drawn exactly given h (the same posterior as the joint
        NUTS; on Adult traces it mixes about ten times better, benchmarks/README.md "Post-processing").
      num_predictive: posterior draws for the predictive probabilities.
      bins: calibration bins (equal-count).
      seed: base of every key of the experiment.
    """

    epsilons: tuple[float, ...] = (0.1, 0.3, 1.0)
    repeats: int = 20
    methods: tuple[str, ...] = ("nuts", "laplace", "naive", "dpvim")
    burn_in_prior_methods: tuple[str, ...] = ("nuts",)
    num_steps: int = 10_000
    sampling_rate: float = 0.1
    clip: float = 11.0
    beta_rho: float = 550.0
    delta: float = 1e-5
    num_warmup: int = 1000
    num_samples: int = 4000
    nuts_marginalize: bool = True
    num_predictive: int = 2000
    bins: int = 10
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.epsilons:
            raise ValueError("epsilons must name at least one privacy budget")
        object.__setattr__(self, "epsilons", tuple(check_epsilon(e) for e in self.epsilons))
        check_positive_int(self.repeats, "repeats")
        unknown = [m for m in self.methods if m not in ADULT_METHODS]
        if unknown or not self.methods:
            raise ValueError(f"methods must be a non-empty subset of {ADULT_METHODS}, got {self.methods!r}")
        object.__setattr__(self, "methods", tuple(self.methods))
        if isinstance(self.burn_in_prior_methods, str) or not all(
            isinstance(m, str) and m in ADULT_SOLVERS for m in self.burn_in_prior_methods
        ):
            raise ValueError(
                f"burn_in_prior_methods must be a tuple of NA-DPVI solvers from {ADULT_SOLVERS}, "
                f"got {self.burn_in_prior_methods!r}"
            )
        object.__setattr__(self, "burn_in_prior_methods", tuple(self.burn_in_prior_methods))
        check_positive_int(self.num_steps, "num_steps", minimum=10)
        check_sampling_rate(self.sampling_rate)
        for name in ("clip", "beta_rho"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
        check_delta(self.delta)
        for name in ("num_warmup", "num_samples", "num_predictive", "bins"):
            check_positive_int(getattr(self, name), name)

    def run_settings(self, epsilon: float) -> dict[str, Any]:
        """What determines one (epsilon, repeat) file's numbers (besides the repeat index)."""
        d = dataclasses.asdict(self)
        for k in ("epsilons", "repeats"):
            d.pop(k)
        d["epsilon"] = float(epsilon)
        d["methods"] = list(self.methods)
        d["burn_in_prior_methods"] = list(self.burn_in_prior_methods)
        return d

    def labels(self) -> tuple[str, ...]:
        """The method labels of a record, in order: ``methods``, then the burn-in-prior solvers."""
        return self.methods + tuple(m + BURN_IN_SUFFIX for m in self.burn_in_prior_methods)


def _digest(d: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(d, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _keys(seed: int, epsilon: float, repeat: int) -> dict[str, jax.Array]:
    base = jax.random.fold_in(jax.random.PRNGKey(seed), zlib.crc32(repr(float(epsilon)).encode()) & 0x7FFFFFFF)
    k = jax.random.fold_in(base, repeat)
    names = ("dpvi", "dpvim", "post")
    return {name: jax.random.fold_in(k, i) for i, name in enumerate(names)}


def _posterior_stats(
    post: Any, X_test: np.ndarray, y_test: np.ndarray, key: jax.Array, num_draws: int, bins: int
) -> dict[str, Any]:
    from ..validation import calibration_curve

    w = np.asarray(post.sample(key, num_draws)["w"], np.float64)  # (S, p)
    z = X_test @ w.T
    prob = np.mean(1.0 / (1.0 + np.exp(-z)), axis=1)
    curve = calibration_curve(prob, y_test, bins=bins)
    return {
        "calibration_rmse": float(curve.rmse),
        "brier": float(curve.brier),
        "test_accuracy": float(np.mean((prob > 0.5) == (y_test == 1))),
        "sharpness": float(np.mean(w.std(axis=0))),
        "mean_predicted": np.asarray(curve.mean_predicted, float).tolist(),
        "observed_frequency": np.asarray(curve.observed_frequency, float).tolist(),
    }


def _privacy_dict(p: Any) -> dict[str, Any]:
    return {"summary": p.summary(), "epsilon": float(p.epsilon), "delta": float(p.delta)}


def dpvi_release(
    settings: AdultSettings, epsilon: float, repeat: int, X: np.ndarray, y: np.ndarray, *, lr_multiplier: float = 1.0
) -> Any:
    """The reproduction's DPVI release of one (epsilon, repeat) on Adult's training split.

    Same settings and keys as the full run (the keys depend only on ``settings.seed``, ``epsilon`` and
    ``repeat``), so that analysis scripts re-make exactly the releases the report used. The learning
    rate is ``lr_multiplier * sqrt(features)`` (1 in the report). Fixed keys: a reproduction, never a
    real release.
    """
    from .. import models
    from ..vi import RunOptions, dpvi

    return dpvi(
        models.logistic_regression,
        X,
        y,
        epsilon=epsilon,
        delta=settings.delta,
        num_steps=settings.num_steps,
        sampling_rate=settings.sampling_rate,
        clip=settings.clip,
        beta_rho=settings.beta_rho,
        lr_scale=lr_multiplier * math.sqrt(X.shape[1]),
        rng_key=_keys(settings.seed, epsilon, repeat)["dpvi"],
        run_options=RunOptions(progress=False),
        model_name="adult-logistic-regression",
    )


def _reference_design() -> tuple[np.ndarray, ...]:
    """(X, y, X_test, y_test) of the reference implementation's 57-column design (every level one-hot,
    no reference level), so that the reproduction uses the dimension the reference used."""
    from .. import datasets

    return tuple(a for split in ("train", "test") for a in datasets.adult_design(split, reference_levels=False)[:2])


def run_one(
    settings: AdultSettings, epsilon: float, repeat: int, data: tuple | None = None, log=None
) -> dict[str, Any]:
    """One (epsilon, repeat): the releases, the posteriors and their calibration on the test split."""
    from .. import models
    from ..noise_aware import noise_aware_posterior
    from ..vi._dpvim import dpvim

    if data is None:
        data = _reference_design()
    X, y, Xt, yt = data
    keys = _keys(settings.seed, epsilon, repeat)
    out: dict[str, Any] = {"methods": {}, "timing": {}}
    need_dpvi = any(m != "dpvim" for m in settings.methods) or bool(settings.burn_in_prior_methods)
    if need_dpvi:
        t0 = time.perf_counter()
        trace = dpvi_release(settings, epsilon, repeat, X, y)
        out["timing"]["dpvi"] = time.perf_counter() - t0
        out["privacy_dpvi"] = _privacy_dict(trace.privacy)
        out["noise_multiplier"] = float(trace.noise_multiplier)
    runs = [(m, "paper") for m in settings.methods] + [(m, "burn_in") for m in settings.burn_in_prior_methods]
    for i, (m, priors) in enumerate(runs):
        label = m + (BURN_IN_SUFFIX if priors == "burn_in" else "")
        t0 = time.perf_counter()
        if m == "dpvim":
            t1 = time.perf_counter()
            tr = dpvim(
                models.logistic_regression,
                X,
                y,
                epsilon=epsilon,
                delta=settings.delta,
                num_steps=settings.num_steps,
                sampling_rate=settings.sampling_rate,
                clip=settings.clip,
                rng_key=keys["dpvim"],
                model_name="adult-logistic-regression",
            )
            out["timing"]["dpvim_release"] = time.perf_counter() - t1
            post = tr.noise_aware_posterior()
            out["privacy_dpvim"] = _privacy_dict(tr.privacy)
        elif m == "naive":
            post = trace.last_iterate_posterior()
        else:
            extra: dict[str, Any] = (
                {
                    "num_warmup": settings.num_warmup,
                    "num_samples": settings.num_samples,
                    "marginalize_phi_star": settings.nuts_marginalize,
                }
                if m == "nuts"
                else {}
            )
            if priors != "paper":
                extra["priors"] = priors
            post = noise_aware_posterior(trace, method=m, rng_key=jax.random.fold_in(keys["post"], 100 + i), **extra)
        res = _posterior_stats(
            post, Xt, yt, jax.random.fold_in(keys["post"], i), settings.num_predictive, settings.bins
        )
        res["diagnostics"] = {
            k: v for k, v in getattr(post, "diagnostics", {}).items() if isinstance(v, (bool, int, float, str))
        }
        out["methods"][label] = res
        out["timing"][label] = time.perf_counter() - t0
        if log is not None:
            log(
                f"  adult eps={epsilon:g} repeat {repeat} {label}: calibration RMSE {res['calibration_rmse']:.4f}, "
                f"sharpness {res['sharpness']:.4f}"
            )
    return out


def _path(work: Path, epsilon: float, repeat: int, digest: str) -> Path:
    # the settings' digest in the path: releases of other settings never overwrite these
    return work / "adult" / f"eps{epsilon:g}-{digest[:12]}" / f"repeat{repeat:03d}.json"


def _read_record(path: Path, digest: str, repeat: int) -> dict[str, Any]:
    """A finished record; CorruptResultError (with what to do) if the file is not one of this run's."""
    from ..experiments.store import CorruptResultError

    try:
        rec = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise CorruptResultError(
            f"results file {path} is unreadable (truncated or corrupted?): {e}; delete it to recompute that release"
        ) from e
    if not isinstance(rec, dict) or rec.get("format") != RESULT_FORMAT:
        raise CorruptResultError(f"results file {path} is not an Adult calibration record; delete it")
    if rec.get("version") != RESULT_VERSION:
        raise CorruptResultError(
            f"results file {path} has version {rec.get('version')!r}; this dpposterior "
            f"reads version {RESULT_VERSION}: delete it to recompute"
        )
    if rec.get("digest") != digest or rec.get("repeat") != repeat or "methods" not in rec:
        raise CorruptResultError(f"results file {path} does not hold the release its name promises; delete it")
    return rec


def run_adult(
    settings: AdultSettings, work: str | Path, log=None, *, compute: bool = True, missing: list[str] | None = None
) -> list[dict[str, Any]]:
    """Runs (or resumes) every (epsilon, repeat) and returns their records.

    Finished records on disk are reused (no release is computed twice); a file that is truncated,
    tampered with or of another version raises ``CorruptResultError`` saying which file to delete.
    With ``compute=False`` nothing is computed: the records on disk are returned and the labels of the
    absent ones appended to ``missing``.
    """
    from ..experiments.store import write_text_atomic

    work = Path(work)
    data = _reference_design() if compute else None
    records = []
    for eps in settings.epsilons:
        rs = settings.run_settings(eps)
        digest = _digest(rs)
        for r in range(settings.repeats):
            path = _path(work, eps, r, digest)
            if path.exists():
                records.append(_read_record(path, digest, r))
                continue
            if not compute:
                if missing is not None:
                    missing.append(f"adult eps={eps:g} repeat {r}")
                continue
            t0 = time.perf_counter()
            body = run_one(settings, eps, r, data, log)
            rec = {
                "format": RESULT_FORMAT,
                "version": RESULT_VERSION,
                "digest": digest,
                "settings": rs,
                "epsilon": float(eps),
                "repeat": r,
                **body,
                "wall_seconds": time.perf_counter() - t0,
            }
            write_text_atomic(path, json.dumps(rec, indent=1, sort_keys=True))
            records.append(rec)
    return records


def summarise(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (epsilon, method): mean and sd over repeats of calibration RMSE, Brier, accuracy, sharpness,
    and the two parts of the calibration error over the repeats.

    Each release's calibration error per bin is e_rb = observed_frequency - mean_predicted (bins are
    the deciles of that release's predictions). Besides the per-release RMSE (its mean and sd over the
    releases), a row holds:

    - ``averaged_curve_rmse``: the RMSE of the calibration curve averaged over the releases bin by bin,
      sqrt(mean_b (mean_r e_rb)^2): the error that stays when the releases are pooled, as the coverage
      tables' headline RMSE is taken on the curve averaged over reference draws and as the paper's
      reference code averages the repeats' curves;
    - ``release_spread``: sqrt(mean_b var_r e_rb), how far single releases scatter around that mean curve.

    The two add up: mean_r mean_b e_rb^2 = averaged_curve_rmse^2 + release_spread^2 (variance with
    divisor R), so a method can have a small averaged error and still a large per-release error.
    """
    rows = []
    for eps in sorted({r["epsilon"] for r in records}):
        rs = [r for r in records if r["epsilon"] == eps]
        labels = [m for m in ADULT_METHODS if any(m in r["methods"] for r in rs)]
        labels += sorted({m for r in rs for m in r["methods"]} - set(labels))
        for m in labels:
            vals = [r["methods"][m] for r in rs if m in r["methods"]]
            if not vals:
                continue

            def stat(key, vals=vals):
                a = np.asarray([v[key] for v in vals], float)
                return float(a.mean()), (float(a.std(ddof=1)) if a.size > 1 else 0.0)

            row = {"epsilon": eps, "method": m, "repeats": len(vals)}
            for key in ("calibration_rmse", "brier", "test_accuracy", "sharpness"):
                row[key], row[key + "_sd"] = stat(key)
            err = np.asarray(
                [np.asarray(v["observed_frequency"], float) - np.asarray(v["mean_predicted"], float) for v in vals]
            )  # (releases, bins)
            row["averaged_curve_rmse"] = float(np.sqrt(np.mean(np.mean(err, axis=0) ** 2)))
            row["release_spread"] = float(np.sqrt(np.mean(np.var(err, axis=0))))
            rows.append(row)
    return rows
