"""The main job: noise-aware Bayesian logistic regression on the vendored UCI Adult data.

Only the DP-SGD mechanism (inside :func:`dpposterior.dpvi`) reads the private training set. Every
number printed below is either derived from the DP release (covered by its PrivacySpent) or computed
on the Adult TEST split, which this demo treats as public held-out data.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def predictive_probabilities(posterior, X: np.ndarray, key: jax.Array, num_samples: int = 2000) -> np.ndarray:
    """p(y = 1 | x, release) by Monte Carlo over posterior draws of the logistic weights."""
    w = posterior.sample(key, num_samples)["w"]  # (S, p)
    return np.asarray(jnp.mean(jax.nn.sigmoid(jnp.asarray(X) @ w.T), axis=1))


def non_private_map(X: np.ndarray, y: np.ndarray, prior_scale: float = 1.0, iterations: int = 30) -> np.ndarray:
    """The posterior mode of ``models.logistic_regression`` on the training data, by Newton's method.

    NOT PRIVATE: it reads the records directly. The demo prints it as the known answer that the DP
    posteriors are compared with, labelled as such; nothing private is released through it."""
    X = np.asarray(X, np.float64)
    y = np.asarray(y, np.float64)
    w = np.zeros(X.shape[1])
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(X @ w)))
        grad = X.T @ (y - p) - w / prior_scale**2
        hess = (X * (p * (1 - p))[:, None]).T @ X + np.eye(X.shape[1]) / prior_scale**2
        step = np.linalg.solve(hess, grad)
        w += step
        if np.max(np.abs(step)) < 1e-10:
            break
    return w


def run_demo(
    epsilon: float = 1.0,
    delta: float = 1e-5,
    num_steps: int = 10_000,
    sampling_rate: float = 0.1,
    clip: float = 11.0,
    beta_rho: float = 550.0,
    method: str = "grid",
    out: str | Path = "demo-output",
    seed: int | None = None,
    progress: bool = True,
    log=print,
) -> dict[str, Any]:
    """Runs the Adult demo and writes figures to ``out``; returns the figures it printed.

    Settings follow the reference implementation of Räisä et al. (2024) for Adult: T = 10,000, q = 0.1,
    clip 11, beta_rho 550, lambda_c = sqrt(n). ``seed=None`` seeds the privacy noise from the OS; an int
    seed in [0, 2**32) is for reproduction only.

    Raises:
      ValueError, TypeError: a setting outside its range, a seed outside [0, 2**32), or an ``out`` that is
        a file or cannot be written (checked before the data are read or anything is written).
    """
    from . import datasets, models, plots, validation
    from ._checks import (
        check_delta,
        check_epsilon,
        check_output_dir,
        check_positive,
        check_positive_int,
        check_sampling_rate,
        check_seed,
    )
    from .noise_aware import METHODS, noise_aware_posterior
    from .vi import RunOptions, dpvi

    # checked before anything is printed, written or released (dpvi checks them again)
    check_epsilon(epsilon)
    check_delta(delta)
    check_positive_int(num_steps, "num_steps")
    check_sampling_rate(sampling_rate)
    check_positive(clip, "clip")
    check_positive(beta_rho, "beta_rho")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    seed = check_seed(seed)
    out = check_output_dir(out, "out")
    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    X, y, names = datasets.adult_design("train")
    Xt, yt, _ = datasets.adult_design("test")
    n = X.shape[1]
    log(
        f"UCI Adult (vendored): {n} features incl. intercept; private training set, public test split "
        f"of {Xt.shape[0]} rows. Target: ({epsilon}, {delta})-DP, T={num_steps}, q={sampling_rate}, C={clip}."
    )
    refs = ", ".join(f"{column}={level}" for column, level in datasets.ADULT_REFERENCE_LEVELS.items())
    log(
        f"Reference levels (the first level of each categorical column in adult.names; a coefficient "
        f"'column=level' is the change in log-odds against its column's reference level): {refs}."
    )
    rng_key = None if seed is None else jax.random.PRNGKey(seed)
    trace = dpvi(
        models.logistic_regression,
        X,
        y,
        epsilon=epsilon,
        delta=delta,
        num_steps=num_steps,
        sampling_rate=sampling_rate,
        clip=clip,
        beta_rho=beta_rho,
        lr_scale=math.sqrt(n),
        rng_key=rng_key,
        run_options=RunOptions(progress=progress),
        model_name="adult-logistic-regression",
    )
    t_dpsgd = time.perf_counter() - t0
    log(f"Privacy spent: {trace.privacy.summary()}")
    log(f"DP-SGD: {t_dpsgd:.1f} s")

    t1 = time.perf_counter()
    naive = trace.last_iterate_posterior()
    aware = noise_aware_posterior(trace, method=method)
    t_post = time.perf_counter() - t1
    log(f"Noise-aware post-processing ({method}): {t_post:.1f} s (uses only the release)")

    key = jax.random.PRNGKey(0)  # post-processing randomness: no privacy role
    results: dict[str, Any] = {"privacy": trace.privacy, "seconds_dpsgd": t_dpsgd, "seconds_post": t_post}
    curves = {}
    intervals = []
    for label, post in (("naive (last iterate)", naive), (f"noise-aware ({method})", aware)):
        p = predictive_probabilities(post, Xt, key)
        curve = validation.calibration_curve(p, yt, bins=10)
        curves[label] = curve
        acc = float(np.mean((p > 0.5) == (yt == 1)))
        draws = np.asarray(post.sample(key, 4000)["w"])
        lo, mid, hi = np.quantile(draws, 0.05, axis=0), draws.mean(axis=0), np.quantile(draws, 0.95, axis=0)
        intervals.append({names[j]: (lo[j], mid[j], hi[j]) for j in range(n)})
        results[label] = {
            "test_accuracy": acc,
            "calibration_rmse": float(curve.rmse),
            "brier": float(curve.brier),
            "mean_interval_width": float(np.mean(hi - lo)),
        }
    log("")
    known = non_private_map(X, y)  # NOT PRIVATE: the known answer, printed as such
    width = max(len("coefficient"), *(len(name) for name in names)) + 2  # whole names: none cut short
    log(
        "The non-private estimate (the posterior mode on the raw training data, NOT PRIVATE: shown only as the "
        "known answer) beside the two DP posteriors:"
    )
    log(
        f"{'coefficient':<{width}}{'non-private':>12}{'naive 90% interval':>24}{'noise-aware 90% interval':>28}"
        f"{'width ratio':>13}"
    )
    for j, name in enumerate(names):
        a, b = intervals[0][name], intervals[1][name]
        ratio = (b[2] - b[0]) / (a[2] - a[0]) if a[2] > a[0] else float("inf")
        log(
            f"{name:<{width}}{known[j]:>+12.3f}{f'[{a[0]:+.3f}, {a[2]:+.3f}]':>24}"
            f"{f'[{b[0]:+.3f}, {b[2]:+.3f}]':>28}{ratio:>13.2f}"
        )
    inside = [float(np.mean([r[n][0] <= known[j] <= r[n][2] for j, n in enumerate(names)])) for r in intervals]
    log("")
    log(
        f"Share of the non-private estimates inside the 90% intervals: naive {inside[0]:.2f}, "
        f"noise-aware {inside[1]:.2f}"
    )
    results["known_answer_inside"] = {"naive": inside[0], "noise-aware": inside[1]}
    for w in aware.warnings:
        log(f"warning: {w}")
    log("")
    log(f"{'method':<28}{'test accuracy':>14}{'calibration RMSE':>18}{'Brier':>8}{'mean 90% width':>16}")
    for label in curves:
        r = results[label]
        log(
            f"{label:<28}{r['test_accuracy']:>14.4f}{r['calibration_rmse']:>18.4f}{r['brier']:>8.4f}"
            f"{r['mean_interval_width']:>16.4f}"
        )
    plots.calibration_plot(
        curves, out / "calibration.png", title=f"Adult test set, epsilon={trace.privacy.epsilon:.3g}"
    )
    plots.trace_plot(trace, out / "trace.png", names=names)
    plots.interval_plot(intervals, list(curves), out / "intervals.png", title="90% posterior intervals")
    trace.save(out / "trace.npz")
    results["seconds_total"] = time.perf_counter() - t0
    log("")
    log(f"Wrote {out / 'calibration.png'}, {out / 'trace.png'}, {out / 'intervals.png'}, {out / 'trace.npz'}")
    log(f"Total: {results['seconds_total']:.1f} s")
    return results
