"""The calibration suite: NA-DPVI with the defaults only, on models written as a user writes them in
NumPyro, none of them from the papers. Per replicate: simulate (theta, data) from the model, then

    trace = dpposterior.dpvi(model, *data, epsilon=..., delta=...)   # nothing else given
    post = dpposterior.noise_aware_posterior(trace)                  # nothing else given

and the naive last iterate beside it. Per latent coordinate (the unconstrained space, where the
posterior is computed): the marginal TARP RMSE (the curve averaged over R = 20 reference re-draws,
Uniform(-4, 4) posterior sds around the posterior mean, as docs/results), the 90% central coverage
(the share of replicates whose truth lies in the equal-tailed 90% interval of that coordinate's
draws), and the sharpness (the mean posterior sd); and the share of releases that warned, by warning.

    python docs/results/scripts/calibration_suite.py --out /tmp/suite              # every cell
    python docs/results/scripts/calibration_suite.py --quick --out /tmp/suite-q    # K = 8, N = 500
    python docs/results/scripts/calibration_suite.py --models poisson --epsilons 0.3 --out /tmp/s

Cells are written as JSON under --out (one per model and epsilon; an existing cell is kept, so a run
resumes), and ``--report`` prints the Markdown table of docs/results/calibration-suite.md from them.
``--setting NAME=VALUE`` (repeatable) is an experiment outside the suite: the same cells with
``dpvi(..., NAME=VALUE)`` (for example ``init_scale=0.004`` or ``beta_rho=30``; the cell records its
settings and its file name carries them), to measure a DP-SGD setting other than the default. ``--public-covariates`` is another: each release of a
model with covariates gets ``dpvi(..., public_covariates=...)``, a public sample of N covariate records
drawn from the cell's covariate distribution with a key of its own (not the private records).
A non-private experiment on simulated data: the truth is known, nothing here is released.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import pathlib
import time
import warnings
from collections import Counter
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

import dpposterior as dpp
from dpposterior import validation
from dpposterior.models.registry import get_model
from dpposterior.releases.posterior import point_posterior
from dpposterior.vi import record_norms

#: the bar of issue 35 for every latent of every cell.
RMSE_BAR = 0.035
COVERAGE_BAR = (0.85, 0.95)
DELTA = 1e-5
NUM_DRAWS = 4000
REFERENCE_REPEATS = 20
#: the fewest silent releases for which the metrics of the silent releases alone are reported.
MIN_SILENT = 30


# --- the models, as a user writes them ------------------------------------------------------------


def poisson(y):
    lam = numpyro.sample("lam", dist.Gamma(4.0, 2.0))
    with numpyro.plate("records", y.shape[0]):
        numpyro.sample("y", dist.Poisson(lam), obs=y)


def negative_binomial(y):
    mean = numpyro.sample("mean", dist.LogNormal(1.0, 0.5))
    with numpyro.plate("records", y.shape[0]):
        numpyro.sample("y", dist.NegativeBinomial2(mean, 5.0), obs=y)


def log_normal(y):
    m = numpyro.sample("m", dist.Normal(0.0, 1.0))
    s = numpyro.sample("s", dist.HalfNormal(1.0))
    with numpyro.plate("records", y.shape[0]):
        numpyro.sample("y", dist.LogNormal(m, s), obs=y)


def student_t_location(y):
    loc = numpyro.sample("loc", dist.Normal(0.0, 3.0))
    with numpyro.plate("records", y.shape[0]):
        numpyro.sample("y", dist.StudentT(4.0, loc, 1.0), obs=y)


def weibull(y):
    scale = numpyro.sample("scale", dist.Gamma(2.0, 1.0))
    with numpyro.plate("records", y.shape[0]):
        numpyro.sample("y", dist.Weibull(scale, 1.5), obs=y)


def normal_mean_scale(y):
    mu = numpyro.sample("mu", dist.Normal(0.0, 2.0))
    sigma = numpyro.sample("sigma", dist.HalfNormal(2.0))
    with numpyro.plate("records", y.shape[0]):
        numpyro.sample("y", dist.Normal(mu, sigma), obs=y)


def probit_regression(x, y):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([x.shape[1]]).to_event(1))
    with numpyro.plate("records", x.shape[0]):
        p = dist.Normal(0.0, 1.0).cdf(x @ w)
        numpyro.sample("y", dist.Bernoulli(probs=jnp.clip(p, 1e-6, 1.0 - 1e-6)), obs=y)


def poisson_regression(x, y):
    a = numpyro.sample("a", dist.Normal(0.0, 1.0))
    b = numpyro.sample("b", dist.Normal(0.0, 0.5).expand([x.shape[1]]).to_event(1))
    with numpyro.plate("records", x.shape[0]):
        numpyro.sample("y", dist.Poisson(jnp.exp(a + x @ b)), obs=y)


def multinomial_logit(x, y):
    # 3 classes, class 0 the reference: 2 x (intercept + 1 slope) coefficients
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([2, 2]).to_event(2))
    with numpyro.plate("records", x.shape[0]):
        design = jnp.stack([jnp.ones_like(x), x], axis=-1)
        logits = jnp.concatenate([jnp.zeros((x.shape[0], 1)), design @ w.T], axis=-1)
        numpyro.sample("y", dist.Categorical(logits=logits), obs=y)


NUM_GROUPS = 8


def hierarchical_normal(g, y):
    mu = numpyro.sample("mu", dist.Normal(0.0, 2.0))
    tau = numpyro.sample("tau", dist.HalfNormal(1.0))
    with numpyro.plate("groups", NUM_GROUPS):
        theta = numpyro.sample("theta", dist.Normal(mu, tau))
    with numpyro.plate("records", g.shape[0]):
        numpyro.sample("y", dist.Normal(theta[g], 1.0), obs=y)


def beta_and_gamma(z, y):
    p = numpyro.sample("p", dist.Beta(2.0, 2.0))
    rate = numpyro.sample("rate", dist.Gamma(3.0, 2.0))
    with numpyro.plate("records", y.shape[0]):
        numpyro.sample("z", dist.Bernoulli(probs=p), obs=z)
        numpyro.sample("y", dist.Exponential(rate), obs=y)


def logistic_regression(x, y):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([x.shape[1]]).to_event(1))
    with numpyro.plate("records", x.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=x @ w), obs=y)


# models that no issue names: spot checks of the defaults (K = 100, N = 2,000, --seed 11), not suite cells


def half_normal_scale(y):
    s = numpyro.sample("s", dist.HalfNormal(2.0))
    with numpyro.plate("records", y.shape[0]):
        numpyro.sample("y", dist.Normal(0.0, s), obs=y)


def binomial_10(y):
    p = numpyro.sample("p", dist.Beta(2.0, 2.0))
    with numpyro.plate("records", y.shape[0]):
        numpyro.sample("y", dist.Binomial(10, p), obs=y)


def bernoulli_logit(y):
    a = numpyro.sample("a", dist.Normal(0.0, 1.5))
    with numpyro.plate("records", y.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=a), obs=y)


def gamma_shape_rate(y):
    shape = numpyro.sample("shape", dist.LogNormal(0.5, 0.5))
    rate = numpyro.sample("rate", dist.LogNormal(0.0, 0.5))
    with numpyro.plate("records", y.shape[0]):
        numpyro.sample("y", dist.Gamma(shape, rate), obs=y)


def zero_inflated_poisson(y):
    lam = numpyro.sample("lam", dist.Gamma(4.0, 2.0))
    pi = numpyro.sample("pi", dist.Beta(2.0, 5.0))
    with numpyro.plate("records", y.shape[0]):
        numpyro.sample("y", dist.ZeroInflatedPoisson(pi, lam), obs=y)


def _covariates(key, n, k, intercept=False):
    x = jax.random.normal(key, (n, k))
    return jnp.concatenate([jnp.ones((n, 1)), x], axis=1) if intercept else x


def _prior_predictive(model: Callable, covariates: Callable | None = None, observed: tuple[str, ...] = ("y",)):
    """A simulator (key, n) -> (theta, data): the covariates (a public design) first, then the model's
    prior predictive; data = (*covariates, *observed sites)."""
    from numpyro import handlers

    def simulate(key, n):
        kx, km = jax.random.split(key)
        args = () if covariates is None else covariates(kx, n)
        placeholders = [jnp.zeros(n) for _ in observed]  # sizes the records plate; uncondition draws anew
        tr = handlers.trace(handlers.seed(handlers.uncondition(model), km)).get_trace(*args, *placeholders)
        theta = {k: v["value"] for k, v in tr.items() if v["type"] == "sample" and k not in observed}
        obs = [tr[o]["value"] for o in observed]
        return theta, (*args, *obs)

    return simulate


def _hier_covariates(key, n):
    return (jax.random.randint(key, (n,), 0, NUM_GROUPS),)


def _probit_model_args(key, n):
    return (_covariates(key, n, 2, intercept=True),)


#: name -> (model, simulator); the suite of issue 35 and the logistic check of issue 34.
MODELS: dict[str, tuple[Callable, Callable]] = {
    "poisson": (poisson, _prior_predictive(poisson)),
    "negative-binomial": (negative_binomial, _prior_predictive(negative_binomial)),
    "log-normal": (log_normal, _prior_predictive(log_normal)),
    "student-t-location": (student_t_location, _prior_predictive(student_t_location)),
    "weibull": (weibull, _prior_predictive(weibull)),
    "normal-mean-scale": (normal_mean_scale, _prior_predictive(normal_mean_scale)),
    "probit-regression": (probit_regression, _prior_predictive(probit_regression, _probit_model_args)),
    "poisson-regression": (poisson_regression,
                           _prior_predictive(poisson_regression, lambda k, n: (_covariates(k, n, 3),))),
    "multinomial-logit": (multinomial_logit,
                          _prior_predictive(multinomial_logit, lambda k, n: (jax.random.normal(k, (n,)),))),
    "hierarchical-normal": (hierarchical_normal, _prior_predictive(hierarchical_normal, _hier_covariates)),
    "beta-and-gamma": (beta_and_gamma, _prior_predictive(beta_and_gamma, observed=("z", "y"))),
    "logistic-regression-3": (logistic_regression,
                              _prior_predictive(logistic_regression, lambda k, n: (_covariates(k, n, 2, True),))),
}
#: the spot checks (models no issue names), outside the suite's cells.
SPOT_CHECKS = {
    "half-normal-scale": half_normal_scale,
    "binomial-10": binomial_10,
    "bernoulli-logit": bernoulli_logit,
    "gamma-shape-rate": gamma_shape_rate,
    "zero-inflated-poisson": zero_inflated_poisson,
}

SUITE = [m for m in MODELS if m != "logistic-regression-3"]
MODELS.update({name: (m, _prior_predictive(m)) for name, m in SPOT_CHECKS.items()})

#: the four models of the coverage experiments of Räisä, Jälkö & Honkela, "Noise-aware differentially
#: private variational inference" (2024), from the package's registry (model and simulator only: the
#: registry's hand-set DP-SGD settings are NOT used), run here with the defaults at N = 5,000, K = 500.
PAPER = ("beta-bernoulli", "gamma-exponential", "dirichlet-categorical", "linear-regression")
for _name in PAPER:
    _spec = get_model(_name)
    MODELS[f"paper-{_name}"] = (_spec.model, _spec.simulate)
#: the paper's bars on the joint TARP RMSE, applied to the joint figure and to every marginal (issue 34).
PAPER_BARS = {"linear-regression": 0.045}
PAPER_BAR = 0.03
#: the post-processings of the stored cells at the registry's hand-set settings whose sharpness is the
#: reference of the sharpness check (docs/results/na-dpvi.md; grid, Laplace, NUTS, grid with burn-in priors).
FIXED_METHODS = ("grid", "laplace", "nuts")
FIXED_CELLS = pathlib.Path(__file__).resolve().parents[1] / "na-dpvi-work" / "coverage" / "cells"
SHARPNESS_BAR = 1.5


# --- one cell --------------------------------------------------------------------------------------


#: the fold of a replicate's key that draws the public covariate sample of ``--public-covariates``.
PUBLIC_SAMPLE_INDEX = 7


def public_sample(name: str, data: tuple[Any, ...], key: jax.Array, num_records: int) -> tuple[Any, ...]:
    """A public sample of the covariates of ``data`` (None for the arguments the model observes): N new
    records of the cell's simulator under another key, of which only the covariates are kept."""
    from dpposterior.vi.model_curvature import argument_sites

    model, simulate = MODELS[name]
    sites = argument_sites(model, data, {})
    if sites is None or all(s is not None for s in sites):
        raise ValueError(f"{name} has no covariates to give a public sample of")
    _, other = simulate(jax.random.fold_in(key, PUBLIC_SAMPLE_INDEX), num_records)
    return tuple(o if s is None else None for s, o in zip(sites, other))


def release(name: str, epsilon: float, num_records: int, seed: int, k: int, settings: dict[str, float] | None = None,
            public_covariates: bool = False):
    """Replicate k of a cell: (theta, trace, posterior, the warnings caught, the keys of the draws).

    ``settings``: None for dpvi's defaults (the suite's cells); keyword settings of dpvi only for the
    experiments that name them (``--setting``), whose cells record them. ``public_covariates``: give dpvi
    a public sample of the covariates (:func:`public_sample`; the ``--public-covariates`` experiment),
    and post-process with the terms it gives (``priors="model"``: the default does not use them).
    """
    model, simulate = MODELS[name]
    key = jax.random.fold_in(jax.random.PRNGKey(seed), k)
    k_data, k_dp, k_post, k_naive = jax.random.split(key, 4)
    theta, data = simulate(k_data, num_records)
    settings = dict(settings or {})
    if public_covariates:
        settings["public_covariates"] = public_sample(name, data, key, num_records)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        options = dpp.vi.RunOptions(progress=False)
        trace = dpp.dpvi(
            model, *data, epsilon=epsilon, delta=DELTA, rng_key=k_dp, run_options=options, **settings
        )
        priors = "model" if public_covariates and trace.model_curvature is not None else "auto"
        post = dpp.noise_aware_posterior(trace, rng_key=k_post, priors=priors)
    return theta, trace, post, list(caught), (k_post, k_naive)


def backfill_messages(folder: pathlib.Path, max_replicates: int = 60) -> None:
    """Adds "messages" (the first text of each warning class) to the cells that predate it, by running
    their replicates again from the start (the keys are the cell's) until each class has shown."""
    for f in sorted(folder.glob("*.json")):
        c = json.loads(f.read_text())
        wanted = set(c.get("warnings", {})) - set(c.get("messages", {}))
        if not wanted:
            continue
        messages = dict(c.get("messages", {}))
        for k in range(max_replicates):
            try:
                *_, caught, _ = release(c["model"], c["epsilon"], c["num_records"], c["seed"], k, c.get("settings"),
                                        c.get("public_covariates", False))
            except Exception:
                continue
            for w in caught:  # only the classes the cell counted (the code may warn of more today)
                if type(w.message).__name__ in wanted:
                    messages.setdefault(type(w.message).__name__, str(w.message))
            if wanted <= set(messages):
                break
        c["messages"] = messages
        f.write_text(json.dumps(c, indent=1))
        print(f"{f.name}: messages of {sorted(messages)}", flush=True)


def run_cell(
    name: str, epsilon: float, num_records: int, replicates: int, seed: int = 0,
    settings: dict[str, float] | None = None, public_covariates: bool = False,
) -> dict[str, Any]:
    truths, na_draws, naive_draws, warned, clips, failures, h_priors = [], [], [], [], [], [], []
    messages: dict[str, str] = {}
    names = None
    t0 = time.perf_counter()
    for k in range(replicates):
        try:
            theta, trace, post, caught, (k_post, k_naive) = release(name, epsilon, num_records, seed, k, settings,
                                                                  public_covariates)
        except Exception as e:  # a refusal is a result of the suite: recorded, not hidden
            failures.append(f"{type(e).__name__}: {e}")
            continue
        warned.append(sorted({type(w.message).__name__ for w in caught}))
        for w in caught:  # the first text of each warning, as the report lists it
            messages.setdefault(type(w.message).__name__, str(w.message))
        clips.append(float(trace.clip))
        h_priors.append(post.diagnostics["h_prior"])
        layout = trace.layout
        names = layout.coordinate_names()
        truths.append(np.asarray(layout.unconstrain({s: jnp.asarray(theta[s]) for s in layout.names}), np.float64))
        na_draws.append(np.asarray(post.sample_unconstrained(k_post, NUM_DRAWS), np.float64))
        naive = point_posterior(layout, jnp.asarray(trace.phi[-1]), trace.privacy)
        naive_draws.append(np.asarray(naive.sample_unconstrained(k_naive, NUM_DRAWS), np.float64))
    out: dict[str, Any] = {
        "model": name, "epsilon": epsilon, "num_records": num_records, "replicates": replicates, "seed": seed,
        "delta": DELTA, "coordinates": names, "refused": failures, "wall_seconds": time.perf_counter() - t0,
        # how many public Monte Carlo draws the clip search and check counted the norms over
        "clip_search_draws": record_norms.NUM_DRAWS,
    }
    if settings:
        out["settings"] = dict(settings)
    if public_covariates:
        out["public_covariates"] = True
    if not truths:
        return out
    truth = np.stack(truths)
    out["clip_median"] = float(np.median(clips))
    # where the h prior of the mean coordinates came from: the model's curvature or the trace's slope
    out["h_prior"] = dict(Counter(h_priors))
    out["warnings"] = dict(Counter(w for ws in warned for w in ws))
    out["messages"] = messages
    silent = np.array([not ws for ws in warned])
    out["silent_replicates"] = int(silent.sum())
    out["replicate_warnings"] = warned
    out["replicate_clips"] = clips
    na = np.stack(na_draws)
    for label, draws in (("noise_aware", na), ("naive", np.stack(naive_draws))):
        out[label] = metrics(draws, truth, names, seed)
    if MIN_SILENT <= silent.sum() < len(silent):
        # what a user sees who trusts the releases that did not warn: the same metrics on those alone
        out["noise_aware_silent"] = metrics(na[silent], truth[silent], names, seed)
    return out


def metrics(draws: np.ndarray, truth: np.ndarray, names: list[str], seed: int) -> dict[str, Any]:
    """Joint and per-coordinate TARP RMSE, 90% central coverage and sharpness of (K, M, n) draws."""
    mean, sd = draws.mean(1), draws.std(1)
    refs = validation.repeated_reference_points(jax.random.PRNGKey(seed + 1), mean, np.maximum(sd, 1e-12),
                                                REFERENCE_REPEATS)
    lo, hi = np.quantile(draws, [0.05, 0.95], axis=1)
    inside = (truth >= lo) & (truth <= hi)
    per = {}
    for j, c in enumerate(names):
        r = validation.tarp_coverage_repeats(draws[:, :, j:j + 1], truth[:, j:j + 1], refs[:, :, j:j + 1])
        per[c] = {"tarp_rmse": float(r.rmse), "coverage90": float(inside[:, j].mean()),
                  "sharpness": float(sd[:, j].mean())}
    joint = validation.tarp_coverage_repeats(draws, truth, refs)
    return {"joint_tarp_rmse": float(joint.rmse), "per_latent": per}


def meets_bar(cell: dict[str, Any], key: str = "noise_aware") -> bool:
    per = cell.get(key, {}).get("per_latent", {})
    return bool(per) and all(v["tarp_rmse"] <= RMSE_BAR and COVERAGE_BAR[0] <= v["coverage90"] <= COVERAGE_BAR[1]
                             for v in per.values())


def verdict(cell: dict[str, Any]) -> str:
    """The cell's bar: "meets" on every release; "warns" where every release warned, or where the
    releases that warned are the misses (the silent releases alone meet the bar); else "misses"."""
    if meets_bar(cell):
        return "meets"
    if cell.get("silent_replicates") == 0 or meets_bar(cell, "noise_aware_silent"):
        return "warns"
    return "misses"


def fixed_sharpness(model: str, epsilon: float, bar: float) -> tuple[float, str] | None:
    """The reference of the sharpness check: the smallest mean posterior sd among the stored cells of
    ``model`` at ``epsilon`` with the registry's hand-set DP-SGD settings (the post-processings of
    :data:`FIXED_METHODS`) whose joint TARP RMSE meets ``bar``, or of all of them where none does; with the
    cell's label. None where no such cell is stored."""
    tag = f"eps{epsilon:.1f}".replace(".", "p")
    cells = []
    for f in sorted((FIXED_CELLS / model).glob(f"{tag}_*.json")):
        c = json.loads(f.read_text())
        method = c["label"].split(" ", 2)[2]
        if method.split(" ")[0] in FIXED_METHODS:
            cells.append((c["rmse"] <= bar, c["sharpness"], method))
    if not cells:
        return None
    pool = [c for c in cells if c[0]] or cells
    best = min(pool, key=lambda c: c[1])
    return best[1], best[2] + ("" if best[0] else ", none meets the bar")


def _label(c: dict[str, Any], model: str) -> str:
    """The model's name, with the dpvi settings of an experiment cell (``--setting``) after it."""
    return (model + "".join(f" ({k} {v:g})" for k, v in sorted(c.get("settings", {}).items()))
            + (" (public covariates)" if c.get("public_covariates") else ""))


def paper_row(c: dict[str, Any]) -> str:
    """One row of the paper's cells with the defaults: joint and worst marginal TARP against the paper's
    bar, the 90% coverage range, and the sharpness against the hand-set settings on record."""
    model = c["model"].removeprefix("paper-")
    bar = PAPER_BARS.get(model, PAPER_BAR)
    na = c["noise_aware"]
    per = na["per_latent"]
    worst = max(per, key=lambda k: per[k]["tarp_rmse"])
    covs = [v["coverage90"] for v in per.values()]
    sd = float(np.mean([v["sharpness"] for v in per.values()]))
    fixed = fixed_sharpness(model, c["epsilon"], bar)
    ratio = sd / fixed[0] if fixed else math.nan
    misses = []
    if na["joint_tarp_rmse"] > bar or per[worst]["tarp_rmse"] > bar:
        misses.append("TARP")
    if not ratio <= SHARPNESS_BAR:
        misses.append("sharpness")
    ref = f"{fixed[0]:.4f} ({fixed[1]})" if fixed else "-"
    quiet = c.get("noise_aware_silent", {}).get("per_latent")
    silent = (f"{max(v['tarp_rmse'] for v in quiet.values()):.4f}, {min(v['coverage90'] for v in quiet.values()):.3f} - "
              f"{max(v['coverage90'] for v in quiet.values()):.3f} ({c['silent_replicates']})") if quiet else "-"
    label = _label(c, model)
    return (f"| {label} | {c['epsilon']:g} | {c['replicates']} | {na['joint_tarp_rmse']:.4f} | "
            f"{per[worst]['tarp_rmse']:.4f} ({worst}) | {min(covs):.3f} - {max(covs):.3f} | {silent} | {sd:.4f} | {ref} | "
            f"{ratio:.2f} | {bar:g} | {'misses: ' + ', '.join(misses) if misses else 'meets'} |")


def _search_note(c: dict[str, Any]) -> str:
    """Which clip search made the cell: cells that predate ``clip_search_draws`` counted one draw."""
    draws = c.get("clip_search_draws", 1)
    return "clip search over 1 Monte Carlo draw (the earlier search)" if draws == 1 else (
        f"clip search over {draws} Monte Carlo draws")


@functools.lru_cache(maxsize=None)
def _simulable(name: str) -> bool:
    """Whether the model can simulate its records (its releases carry the model's curvature)."""
    from dpposterior.vi.model_curvature import simulated_sites

    model, simulate = MODELS[name]
    return simulated_sites(model, simulate(jax.random.PRNGKey(0), 4)[1], {}) is not None


def _h_prior_note(c: dict[str, Any]) -> str:
    """Where the mean coordinates' h prior came from; cells that predate ``h_prior`` used the trace slope."""
    if "h_prior" in c:
        return "h prior: " + ", ".join(f"{k} in {v}" for k, v in sorted(c["h_prior"].items()))
    if c["model"] in MODELS and _simulable(c["model"]):
        return "h prior: trace slope (computed before releases carried the model's curvature, which the default now uses)"
    return "h prior: trace slope (the model cannot simulate its records)"


def cell_notes(c: dict[str, Any]) -> list[str]:
    w = ", ".join(f"{k} {v}" for k, v in sorted(c["warnings"].items())) or "none"
    notes = [f"- {_label(c, c['model'])} at epsilon {c['epsilon']:g}: median clip {c['clip_median']:.3g}; warnings: {w} "
             f"(silent in {c['silent_replicates']} of {c['replicates'] - len(c['refused'])}); refused "
             f"{len(c['refused'])}; {c['wall_seconds']:.0f} s; {_search_note(c)}; {_h_prior_note(c)}"]
    for k, text in sorted(c.get("messages", {}).items()):
        notes.append(f"  - {k}, the first release's text: \"{text}\"")
    return notes


def report(folder: pathlib.Path) -> str:
    """The Markdown tables of the cells in ``folder``: the suite's (per latent, against the suite's bar)
    and, where the folder holds them, the paper's models with the defaults (against the paper's bars)."""
    cells = [json.loads(f.read_text()) for f in sorted(folder.glob("*.json"))]
    paper = [c for c in cells if c["model"].startswith("paper-")]
    out = [suite_report([c for c in cells if not c["model"].startswith("paper-")])] if len(paper) < len(cells) else []
    if paper:
        rows = ["| model | epsilon | K | joint TARP | worst marginal TARP | 90% cov | silent: worst TARP, 90% cov "
                "(releases) | mean sd | hand-set sd on record | sd ratio | bar | verdict |",
                "|---|---:|---:|---:|---|---|---|---:|---|---:|---:|---|"]
        notes = []
        for c in paper:
            if "noise_aware" not in c:
                notes.append(f"- {c['model']} at epsilon {c['epsilon']:g}: refused in every replicate: {c['refused'][:1]}")
                continue
            rows.append(paper_row(c))
            notes += cell_notes(c)
        out.append("\n".join(rows + [""] + notes))
    return "\n\n".join(out)


def suite_report(cells: list[dict[str, Any]]) -> str:
    rows = ["| model | epsilon | K | latent | TARP RMSE | 90% cov | sd | silent: TARP | silent: 90% cov | naive TARP "
            "| naive 90% cov | naive sd | bar |", "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    notes = []
    for c in cells:
        if "noise_aware" not in c:
            notes.append(f"- {c['model']} at epsilon {c['epsilon']:g}: refused in every replicate: {c['refused'][:1]}")
            continue
        ok = verdict(c)
        for j, name in enumerate(c["coordinates"]):
            a, b = c["noise_aware"]["per_latent"][name], c["naive"]["per_latent"][name]
            s = c.get("noise_aware_silent", {}).get("per_latent", {}).get(name)
            quiet = f"{s['tarp_rmse']:.4f} | {s['coverage90']:.3f}" if s else "- | -"
            rows.append(f"| {_label(c, c['model']) if j == 0 else ''} | {c['epsilon']:g} | {c['replicates']} | {name} | "
                        f"{a['tarp_rmse']:.4f} | {a['coverage90']:.3f} | {a['sharpness']:.3g} | {quiet} | {b['tarp_rmse']:.4f} "
                        f"| {b['coverage90']:.3f} | {b['sharpness']:.3g} | {ok if j == 0 else ''} |")
        notes += cell_notes(c)
    return "\n".join(rows + [""] + notes)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default=",".join(SUITE))
    ap.add_argument("--epsilons", default="0.3,1")
    ap.add_argument("--replicates", type=int, default=300)
    ap.add_argument("--num-records", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="K = 8, N = 500: a smoke run of every cell")
    ap.add_argument("--report", action="store_true", help="print the table from the cells in --out")
    ap.add_argument("--messages", action="store_true", help="add the warnings' texts to cells that lack them")
    ap.add_argument("--public-covariates", action="store_true",
                    help="give dpvi a public sample of the covariates (models with covariates only)")
    ap.add_argument("--setting", action="append", default=[], metavar="NAME=VALUE",
                    help="an experiment: a dpvi setting instead of its default (repeatable; the cell records it)")
    a = ap.parse_args()
    settings = {}
    for item in a.setting:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--setting takes NAME=VALUE, got {item!r}")
        settings[key] = float(value)
    folder = pathlib.Path(a.out)
    folder.mkdir(parents=True, exist_ok=True)
    if a.report:
        print(report(folder))
        return
    if a.messages:
        backfill_messages(folder)
        return
    k, n = (8, 500) if a.quick else (a.replicates, a.num_records)
    for name in a.models.split(","):
        if name not in MODELS:
            raise SystemExit(f"unknown model {name!r}; known: {', '.join(MODELS)}")
        for eps in (float(e) for e in a.epsilons.split(",")):
            tag = "".join(f"_{key}{value:g}" for key, value in sorted(settings.items()))
            tag += "_publiccovariates" if a.public_covariates else ""
            path = folder / f"{name}_eps{eps:g}_N{n}_K{k}{tag}.json"
            if path.exists():
                continue
            cell = run_cell(name, eps, n, k, a.seed, settings, a.public_covariates)
            path.write_text(json.dumps(cell, indent=1))
            na = cell.get("noise_aware", {}).get("per_latent", {})
            worst = max((v["tarp_rmse"] for v in na.values()), default=math.nan)
            covs = [v["coverage90"] for v in na.values()]
            print(f"{name} eps {eps:g}: worst marginal TARP {worst:.4f}, 90% cov "
                  f"{min(covs, default=math.nan):.3f}-{max(covs, default=math.nan):.3f}, "
                  f"{cell['wall_seconds']:.0f} s, refused {len(cell['refused'])}", flush=True)


if __name__ == "__main__":
    main()
